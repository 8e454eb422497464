"""Experience replay: a fixed-capacity FIFO ring buffer of transitions stored in preallocated numpy arrays.

Each field (e.g. ``k`` replicas per type, ``level``, ``action``, ``violated``) is one array of shape
``(capacity, *shape)``. Adding writes at ``pos`` and advances it modulo the capacity (the oldest entry is
overwritten once full). Sampling draws indices uniformly with replacement from the filled part with the caller's
seeded generator, so a run is reproducible and a restored buffer continues identically.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ReplayBuffer:
    """Ring buffer of ``capacity`` transitions; ``fields`` maps a name to ``(shape, dtype)`` of one entry."""

    def __init__(self, capacity: int, fields: dict[str, tuple[tuple[int, ...], Any]]) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: must be >= 1, got {capacity}")
        if not fields:
            raise ValueError("fields: need at least one field")
        self.capacity = int(capacity)
        self.data: dict[str, np.ndarray] = {
            name: np.zeros((self.capacity, *shape), dtype=dtype) for name, (shape, dtype) in fields.items()
        }
        self.pos = 0  # next slot to write
        self.size = 0  # filled slots (<= capacity)

    def __len__(self) -> int:
        return self.size

    def add(self, **values: Any) -> None:
        """Store one transition (every field must be given)."""
        if values.keys() != self.data.keys():
            missing = sorted(set(self.data) - set(values))
            extra = sorted(set(values) - set(self.data))
            raise ValueError(f"replay entry: missing fields {missing}, unknown fields {extra}")
        i = self.pos
        for name, value in values.items():
            self.data[name][i] = value
        self.pos = (i + 1) % self.capacity
        if self.size < self.capacity:
            self.size += 1

    def sample_indices(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        """``batch`` slot indices drawn uniformly with replacement from the filled slots."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return rng.integers(0, self.size, size=batch)

    def sample(self, rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
        """A batch of transitions (copies), field by field."""
        idx = self.sample_indices(rng, batch)
        return {name: arr[idx] for name, arr in self.data.items()}

    # ---- durable state --------------------------------------------------------------------------------
    def state(self, prefix: str = "replay") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Metadata and the filled part of every field (exact round trip, positions included)."""
        meta = {"capacity": self.capacity, "pos": self.pos, "size": self.size}
        arrays = {f"{prefix}_{name}": arr[: self.size] for name, arr in self.data.items()}
        return meta, arrays

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = "replay") -> None:
        if int(meta["capacity"]) != self.capacity:
            raise ValueError(
                f"replay capacity differs: state has {meta['capacity']}, buffer has {self.capacity}"
            )
        size = int(meta["size"])
        self.pos = int(meta["pos"])
        self.size = size
        for name, arr in self.data.items():
            arr[...] = 0
            arr[:size] = arrays[f"{prefix}_{name}"]
