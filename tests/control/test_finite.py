"""``json_safe.finite``: the one JSON-safe copy the control loop and the region steps write (the region steps had a
second copy that let numpy float32 infinities through)."""

from __future__ import annotations

import numpy as np

from autoscaler.control.json_safe import finite


def test_non_finite_floats_of_every_kind_become_none():
    value = {"a": np.float32("inf"), "b": [np.float64("nan"), 1.5, np.int64(3)], 2: (float("-inf"),)}
    assert finite(value) == {"a": None, "b": [None, 1.5, 3], "2": [None]}
    assert isinstance(finite(np.float32(0.5)), float)
