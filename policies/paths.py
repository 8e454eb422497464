"""Where benchmarks find their inputs.

- The papers' published result tables ship with the package (``policies/reference/*.csv``, copied verbatim from the
  project's shared material) so that tests and benchmarks work from any clone.
- The full Taxi trace (525,533 steps, 2 MB) is read from the shared material: ``$STREAMSCALER_SHARED`` if set,
  else the ``shared/`` folder beside the repository, else ``/work/shared``. A shorter trace of the same kind
  ships in ``connectors/traces/``.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
REFERENCE_DIR = PACKAGE_DIR / "reference"
SHIPPED_TRACES_DIR = REPO_DIR / "connectors" / "traces"


def shared_dir() -> Path:
    """The shared material folder (see module doc); the first candidate that exists, else the first one."""
    env = os.environ.get("STREAMSCALER_SHARED")
    candidates = [Path(env)] if env else []
    candidates += [REPO_DIR.parent / "shared", Path("/work/shared")]
    for c in candidates:
        if c.is_dir():
            return c
    return candidates[0]


def taxi_trace() -> Path:
    """The full Taxi trace of paper 001 (tuples/s per one-minute step)."""
    return shared_dir() / "traces" / "taxi.txt"


def reference_csv(name: str) -> Path:
    """A published result table, e.g. ``paper_om_tables.csv``."""
    return REFERENCE_DIR / name
