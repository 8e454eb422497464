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
    """Whether process ``pid`` runs and its command line has every one of ``arguments`` as a whole argument or,
    for an argument ending in ``=`` or ``/``, as the start of one (``-Dlog.file=`` + a path, a directory)."""
    line = cmdline(pid)
    if not line:
        return False
    args = line.split(b"\0")
    for wanted in arguments:
        w = wanted.encode()
        if not any(a == w or (w.endswith((b"=", b"/")) and a.startswith(w)) for a in args):
            return False
    return True
