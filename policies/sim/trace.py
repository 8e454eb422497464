"""Arrival-rate traces: one mean rate per control period (tuples/s).

Accepted files: one number per line (the papers' traces), or CSV (comma-separated columns, one row per period).
Blank lines and lines starting with ``#`` are skipped; the first remaining line may be a header (it is, when its
selected field is not a number). A file with several columns needs ``column``: a header name or a 0-based index.
Every bad line is an error naming the file, the line number and the reason.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np


def _split(text: str) -> list[str]:
    return [f.strip() for f in next(csv.reader([text]))] if "," in text or '"' in text else [text]


def _number(field: str) -> float | None:
    try:
        return float(field)
    except ValueError:
        return None


def load_trace(path: str | Path, steps: int | None = None, column: str | int | None = None) -> np.ndarray:
    """Read a trace file (see module doc); raise ValueError naming the file and line of the first bad entry.

    ``steps``: only the first N rates. ``column``: the CSV column holding the rate (tuples/s), a header name or a
    0-based index (a string of digits counts as an index only when the header has no column of that name).
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"trace {str(p)!r}: no such file")
    where = f"trace {str(p)!r}"
    values: list[float] = []
    index: int | None = None if column is None else (column if isinstance(column, int) else None)
    first = True
    with p.open(newline="") as fh:
        for lineno, line in enumerate(fh, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            fields = _split(text)
            if first:
                first = False
                if isinstance(column, str):
                    if column in fields:
                        index = fields.index(column)
                        continue  # the header row
                    if not column.isdigit():
                        raise ValueError(
                            f"{where} line {lineno}: no column named {column!r} in the header "
                            f"({', '.join(fields)[:80]})"
                        )
                    index = int(column)
                if index is None and len(fields) > 1:
                    raise ValueError(
                        f"{where} line {lineno}: {len(fields)} columns: choose the rate column by header name or "
                        "0-based index (--column)"
                    )
                i = index or 0
                if i < len(fields) and _number(fields[i]) is None:
                    continue  # a header
            i = index or 0
            if i >= len(fields):
                raise ValueError(f"{where} line {lineno}: no column {i} (the line has {len(fields)})")
            value = _number(fields[i])
            if value is None:
                raise ValueError(f"{where} line {lineno}: not a number: {fields[i][:40]!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"{where} line {lineno}: rate must be a finite number >= 0, got {fields[i]!r}"
                )
            values.append(value)
            if steps is not None and len(values) >= steps:
                break
    if not values:
        raise ValueError(f"{where}: no rates in file")
    return np.asarray(values, dtype=float)
