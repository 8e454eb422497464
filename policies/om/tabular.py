"""Deployment index shared by tabular policies: integer ids for deployments, assigned lazily.

A deployment ``k`` (replicas per node type) gets an id the first time a policy meets it; ids are dense
(``0, 1, 2, ...`` in order of first use) so that per-deployment data can live in Python lists or numpy rows
indexed by id. With 10 node types and K_max 20 the full deployment space has ~30 million points, but a run only
ever meets a tiny fraction of them: nothing is allocated for deployments never seen.

Per deployment the index caches what the hot path of a decision needs:
- its total replicas and price ($/h, computed exactly as :meth:`OperatorSpec.price`);
- its feasible actions (:func:`policies.base.feasible_actions`, action order 0..2N);
- the id of the deployment each action leads to (``successors``; assigns ids to the neighbours on first call).

The index is part of a policy's durable state: :meth:`keys_array` / :meth:`from_keys` round-trip the id
assignment exactly, so that a restored policy assigns the same ids to the deployments it meets afterwards.
"""

from __future__ import annotations

import numpy as np

from policies.base import feasible_actions


class DeploymentIndex:
    """Lazily assigned dense ids for deployments of ``n_res`` node types with ``k_min <= sum(k) <= k_max``.

    ``prices``: price of one replica of each node type ($/h).
    """

    def __init__(self, n_res: int, k_max: int, prices: np.ndarray, k_min: int = 1) -> None:
        if n_res < 1:
            raise ValueError(f"n_res must be >= 1, got {n_res}")
        if not 1 <= k_min <= k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={k_min}, k_max={k_max}")
        prices = np.asarray(prices, dtype=float)
        if prices.shape != (n_res,):
            raise ValueError(f"prices must have {n_res} entries, got shape {prices.shape}")
        self.n_res = n_res
        self.k_max = k_max
        self.k_min = k_min
        self.n_actions = 2 * n_res + 1
        self._prices = prices
        self._ids: dict[tuple[int, ...], int] = {}
        self.keys: list[tuple[int, ...]] = []  # deployment of each id
        self.totals: list[int] = []  # replicas of each id
        self.price: list[float] = []  # $/h of each id
        self._feasible: list[list[int] | None] = []
        self._successors: list[list[int] | None] = []
        self._listeners: list = []

    def __len__(self) -> int:
        return len(self.keys)

    def add_listener(self, callback) -> None:  # noqa: ANN001 - any callable taking the new id
        """Call ``callback(new_id)`` whenever a deployment gets an id (to grow per-id tables in step)."""
        self._listeners.append(callback)

    # ---- ids ------------------------------------------------------------------------------------------------
    def lookup(self, key: tuple[int, ...]) -> int | None:
        """The id of deployment ``key`` if it has one, without assigning (no state change)."""
        return self._ids.get(key)

    def id_of(self, key: tuple[int, ...]) -> int:
        """The id of deployment ``key`` (a tuple of ``n_res`` ints), assigned on first use."""
        d = self._ids.get(key)
        if d is None:
            d = self._add(key)
        return d

    def id_of_array(self, k: np.ndarray) -> int:
        return self.id_of(tuple(k.tolist()))

    def _add(self, key: tuple[int, ...]) -> int:
        if len(key) != self.n_res:
            raise ValueError(f"deployment must have {self.n_res} entries, got {list(key)}")
        total = sum(key)
        if min(key) < 0 or not self.k_min <= total <= self.k_max:
            raise ValueError(
                f"deployment {list(key)}: entries must be >= 0 and sum to {self.k_min}..{self.k_max}"
            )
        d = len(self.keys)
        self._ids[key] = d
        self.keys.append(key)
        self.totals.append(total)
        # the same expression as OperatorSpec.price, so costs computed from the index are bit-identical
        self.price.append(float(np.dot(np.array(key, dtype=np.int64), self._prices)))
        self._feasible.append(None)
        self._successors.append(None)
        for callback in self._listeners:
            callback(d)
        return d

    def deployment(self, d: int) -> np.ndarray:
        """Deployment of id ``d`` as an int64 array."""
        return np.array(self.keys[d], dtype=np.int64)

    # ---- cached per-deployment data ------------------------------------------------------------------------
    def feasible(self, d: int) -> list[int]:
        """Feasible actions of deployment ``d`` in action order (do not mutate the returned list)."""
        acts = self._feasible[d]
        if acts is None:
            acts = self._feasible[d] = feasible_actions(np.array(self.keys[d]), self.k_max, self.k_min)
        return acts

    def successor_key(self, d: int, action: int) -> tuple[int, ...]:
        key = list(self.keys[d])
        n = self.n_res
        if 1 <= action <= n:
            key[action - 1] -= 1
        elif action > n:
            key[action - 1 - n] += 1
        return tuple(key)

    def successors(self, d: int) -> list[int]:
        """Id of the deployment each action leads to (length ``2N+1``, -1 for infeasible actions); assigns ids
        to the neighbours on the first call for ``d``."""
        succ = self._successors[d]
        if succ is None:
            succ = [-1] * self.n_actions
            for a in self.feasible(d):
                succ[a] = d if a == 0 else self.id_of(self.successor_key(d, a))
            self._successors[d] = succ
        return succ

    # ---- durable state --------------------------------------------------------------------------------------
    def keys_array(self) -> np.ndarray:
        """``(n_ids, n_res)`` int16 deployments in id order (the whole index state)."""
        return np.array(self.keys, dtype=np.int16).reshape(len(self.keys), self.n_res)

    def load_keys(self, keys: np.ndarray) -> None:
        """Replace the index with the deployments ``keys`` (``(n_ids, n_res)``), ids in row order."""
        keys = np.asarray(keys)
        if keys.ndim != 2 or keys.shape[1] != self.n_res:
            raise ValueError(f"deployment index must have shape (n, {self.n_res}), got {keys.shape}")
        self._ids.clear()
        for lst in (self.keys, self.totals, self.price, self._feasible, self._successors):
            lst.clear()
        for row in keys.tolist():
            self._add(tuple(int(x) for x in row))
