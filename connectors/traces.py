"""Which trace files a simulated application may read, and reading them without echoing their content.

A simulated application's ``spec.connector.trace`` names a trace shipped with the project (``taxi_last_month``:
``connectors/traces/<name>.txt``) or gives the absolute path of a file under a directory that the installation's
operator allows (``AUTOSCALER_TRACE_DIRS``). Any other path is refused: a user must not make the server read an
arbitrary file, and an error never quotes a line of the file it read. No Django here: the caller passes the
allowed directories in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

SHIPPED_DIR = Path(__file__).resolve().parent / "traces"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: largest trace file read (bytes): a month of per-minute rates is ~0.3 MB
MAX_TRACE_BYTES = 64 * 1024 * 1024


class TraceNotAllowed(ValueError):
    """The trace is neither a shipped name nor a file under an allowed directory, or it cannot be read."""


def shipped_names() -> list[str]:
    """Names of the traces shipped in ``connectors/traces/``."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.txt"))


def resolve_trace(name_or_path: str, allowed_dirs: Sequence[str | Path] = ()) -> Path:
    """The file of a shipped trace name, or of an absolute path whose real location lies under one of
    ``allowed_dirs``; raises ``TraceNotAllowed`` with the reason otherwise (the path itself is not echoed
    beyond what the user wrote)."""
    if _NAME.match(name_or_path):
        shipped = SHIPPED_DIR / f"{name_or_path}.txt"
        if shipped.is_file():
            return shipped
    names = ", ".join(shipped_names()) or "none"
    refused = f"not a shipped trace ({names}) and not a file under a directory of AUTOSCALER_TRACE_DIRS"
    path = Path(name_or_path)
    if not path.is_absolute() or not allowed_dirs:
        raise TraceNotAllowed(refused)
    real = path.resolve()
    for directory in allowed_dirs:
        if real.is_relative_to(Path(directory).resolve()) and real.is_file():
            return real
    raise TraceNotAllowed(refused)


def read_rates(path: Path) -> tuple[float, ...]:
    """Rates (tuples/s, one number per line) of a trace file; ``TraceNotAllowed`` names the file and the
    reason, never the content of a line."""
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceNotAllowed(f"{path.name}: larger than {MAX_TRACE_BYTES} bytes")
        rates = np.loadtxt(path, dtype=float, ndmin=1)
    except TraceNotAllowed:
        raise
    except (OSError, ValueError, UnicodeDecodeError):
        raise TraceNotAllowed(f"{path.name}: not readable as one rate (tuples/s) per line") from None
    if rates.size == 0:
        raise TraceNotAllowed(f"{path.name}: has no rates")
    if not np.all(np.isfinite(rates)) or np.any(rates < 0):
        raise TraceNotAllowed(f"{path.name}: rates must be finite and >= 0")
    return tuple(float(r) for r in rates)
