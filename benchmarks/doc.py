"""Write one named section of ``docs/benchmarks.md`` without touching the others.

Each benchmark owns a section delimited by ``<!-- BEGIN name -->`` / ``<!-- END name -->``; re-running a benchmark
replaces its section in place (or appends it the first time).
"""

from __future__ import annotations

import datetime as _dt
import platform
from pathlib import Path

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\nEvery section below was produced by the command it names, on the machine it names.\n"
)


def machine_line() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_section(name: str, body: str, command: str, path: Path | str = DEFAULT_PATH) -> Path:
    """Replace (or append) section ``name`` with ``body``, stamped with ``command``, the date and the machine."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = p.read_text() if p.exists() else HEADER
    stamp = f"Command: `{command}`  \nDate: {_dt.date.today().isoformat()}; machine: {machine_line()}\n\n"
    block = f"<!-- BEGIN {name} -->\n{stamp}{body.rstrip()}\n<!-- END {name} -->"
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    p.write_text(text)
    return p
