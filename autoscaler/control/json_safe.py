"""JSON-safe copies of what the control loop stores (PostgreSQL's jsonb rejects Infinity and NaN)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def finite(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None (PostgreSQL jsonb rejects Infinity/NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return finite(value.item())
    return value
