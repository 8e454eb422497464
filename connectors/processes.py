"""Which process a pid names now: a pid kept on disk (a pid file, a provider's state) outlives its process, and
on a busy host is soon another process's (pid_max is 32,768 here and every thread takes a pid). Before a
connector signals a pid it kept, it checks that the process still runs the command line it started."""

from __future__ import annotations

from pathlib import Path


def cmdline(pid: int) -> bytes | None:
    """The command line of process ``pid`` (NUL-separated arguments), ``None`` when no such process is readable."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def runs_with(pid: int, *arguments: str) -> bool:
    """Whether process ``pid`` runs and its command line holds ``arguments`` one after the other, each a whole
    argument (``runs_with(pid, "--webui-port", "8081")``)."""
    line = cmdline(pid)
    if not line:
        return False
    return ("\0" + "\0".join(arguments) + "\0").encode() in b"\0" + line
