"""Arrival-rate traces: one mean rate per control period (tuples/s), one number per line."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def load_trace(path: str | Path, steps: int | None = None) -> np.ndarray:
    """Read a trace file; raise ValueError naming the file and line of the first bad entry."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"trace {str(p)!r}: no such file")
    values: list[float] = []
    with p.open() as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"trace {str(p)!r} line {lineno}: not a number: {text[:40]!r}") from None
            if not np.isfinite(value) or value < 0:
                raise ValueError(
                    f"trace {str(p)!r} line {lineno}: rate must be a finite number >= 0, got {text!r}"
                )
            values.append(value)
            if steps is not None and len(values) >= steps:
                break
    if not values:
        raise ValueError(f"trace {str(p)!r}: no rates in file")
    return np.asarray(values, dtype=float)
