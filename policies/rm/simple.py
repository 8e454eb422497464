"""Simple provisioning (paper 004 Sec. 6.1): keep ``n_idle`` nodes up and idle, ready for scale-outs.

When fewer than ``n_idle`` nodes are idle the RM acquires the shortfall (plus what waiting scale-out requests
need); when more are idle it releases the surplus. New nodes are of the catalog type with the lowest price per
slot; surplus idle nodes are released most expensive first. When the state says which node type the waiting
requests wait for (``RegionState.waiting``), the RM acquires nodes of that type for them (beyond the type's free
slots and booting nodes) and keeps ``n_idle`` spare nodes besides the idle ones those requests will take.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from policies.options import defaults as option_defaults
from policies.rm.base import RegionManager, RegionState, RMProposal


class SimpleProvisioning(RegionManager):
    name: ClassVar[str] = "simple"
    #: ``n_idle`` (idle nodes kept ready, 1), ``cover_waiting``: see :mod:`policies.options`
    DEFAULTS: ClassVar[dict[str, Any]] = option_defaults("rm", "simple")

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if params["n_idle"] < 0:
            raise ValueError(f"params.n_idle: must be >= 0, got {params['n_idle']}")

    def propose(self, state: RegionState) -> list[RMProposal]:
        self.t += 1
        if state.waiting is not None:
            return self._propose_typed(state)
        n_idle = int(self.params["n_idle"])
        idle_now = state.n_idle + int(np.sum(state.pending))  # pending nodes will be idle when ready
        t_new = self.cheapest_per_slot()
        slots = max(self.catalog[t_new].cores, 1)
        need_for_waiting = 0
        if self.params["cover_waiting"] and state.waiting_slots > 0:
            # Waiting requests consume idle nodes first; acquire what they need beyond those.
            need_for_waiting = math.ceil(state.waiting_slots / slots)
        deficit = n_idle + need_for_waiting - idle_now
        room = self.k_max - state.n_nodes
        if deficit > 0:
            n = min(deficit, room)
            if n <= 0:
                return []
            reason = (
                f"{state.n_idle} idle node(s) (+{int(np.sum(state.pending))} booting) < n_idle={n_idle}"
                + (f" and {state.unsatisfied} waiting request(s)" if need_for_waiting else "")
                + f": acquire {n}"
            )
            return [RMProposal(self.region, self.catalog[t_new].name, n, reason, {"n_idle_target": n_idle})]
        return self._release_surplus(state, state.n_idle - n_idle - need_for_waiting, state.idle)

    def _propose_typed(self, state: RegionState) -> list[RMProposal]:
        """The requests say which node type they wait for: acquire nodes of THAT type (a waiting A1 request is
        not served by an idle A2 node), plus ``n_idle`` spare nodes of the cheapest type per slot."""
        n_idle = int(self.params["n_idle"])
        cores = [max(t.cores, 1) for t in self.catalog]
        waiting = np.asarray(state.waiting, dtype=np.int64)
        cover = bool(self.params["cover_waiting"])
        short = state.shortfall(cores) if cover else np.zeros(len(cores), dtype=np.int64)
        # idle and booting nodes of a waiting type will be taken by the requests waiting for it: not spare
        taken = np.minimum(
            np.asarray(state.idle) + np.asarray(state.pending),
            -(-waiting // np.asarray(cores)) if cover else 0,
        )
        spare = state.n_idle + int(np.sum(state.pending)) - int(np.sum(taken))
        t_new = self.cheapest_per_slot()
        want = short.copy()
        want[t_new] += max(n_idle - spare, 0)
        room = self.k_max - state.n_nodes
        idle_spare = np.maximum(np.asarray(state.idle) - taken, 0)
        out: list[RMProposal] = self._make_room(state, int(np.sum(short)) - room, idle_spare, waiting)
        room -= sum(p.delta for p in out)  # the released nodes' room serves the waiting requests at this step
        for i in [i for i in np.argsort(-short, kind="stable") if want[i] > 0]:
            n = min(int(want[i]), room)
            if n <= 0:
                break
            room -= n
            parts = []
            if short[i] > 0:
                parts.append(f"{int(waiting[i])} slot(s) of {self.catalog[i].name} waited for")
            if i == t_new and n_idle - spare > 0:
                parts.append(f"{spare} spare idle node(s) (+booting) < n_idle={n_idle}")
            reason = " and ".join(parts) + f": acquire {n} {self.catalog[i].name}"
            out.append(
                RMProposal(
                    self.region,
                    self.catalog[i].name,
                    n,
                    reason,
                    {"n_idle_target": n_idle, "waiting_slots": int(waiting[i]), "shortfall": int(short[i])},
                )
            )
        if out:
            return out
        return self._release_surplus(state, int(np.sum(idle_spare)) - n_idle, idle_spare)

    def _make_room(
        self, state: RegionState, missing: int, idle_spare: np.ndarray, waiting: np.ndarray
    ) -> list[RMProposal]:
        """At the region's node limit, release up to ``missing`` idle nodes that no waiting request will take
        (most expensive first), so that the nodes the requests wait for can be acquired in their place (at this
        step, within the region's new nodes per period). Without
        it a full region whose idle nodes are of other types (a scale-out that changes node type) never serves
        the request: nothing is released while something waits, and nothing is acquired beyond the limit."""
        n = min(missing, int(np.sum(idle_spare)))
        if n <= 0:
            return []
        names = ", ".join(self.catalog[i].name for i in np.flatnonzero(waiting > 0))
        out: list[RMProposal] = []
        for ti in np.argsort([-t.price for t in self.catalog], kind="stable"):
            k = min(int(idle_spare[ti]), n)
            if k > 0:
                reason = (
                    f"region at its limit of {self.k_max} nodes while requests wait for {names}: release {k} idle "
                    f"{self.catalog[ti].name} to make room"
                )
                out.append(RMProposal(self.region, self.catalog[ti].name, -k, reason))
                n -= k
            if n == 0:
                break
        return out

    def _release_surplus(self, state: RegionState, surplus: int, idle: np.ndarray) -> list[RMProposal]:
        """Release ``surplus`` of the ``idle`` nodes (per type), most expensive first."""
        if surplus <= 0:
            return []
        n_idle = int(self.params["n_idle"])
        out: list[RMProposal] = []
        order = np.argsort([-t.price for t in self.catalog], kind="stable")
        left = surplus
        for ti in order:
            n = min(int(idle[ti]), left)
            if n > 0:
                out.append(
                    RMProposal(
                        self.region,
                        self.catalog[ti].name,
                        -n,
                        f"{state.n_idle} idle node(s) > n_idle={n_idle}: release {n} idle {self.catalog[ti].name}",
                    )
                )
                left -= n
            if left == 0:
                break
        return out


class StaticProvisioning(RegionManager):
    """The paper's baseline: a fixed number of nodes per region, never scaled (acquired at start only)."""

    name: ClassVar[str] = "static"
    DEFAULTS: ClassVar[dict[str, Any]] = {"nodes": 12}

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if params["nodes"] < 0:
            raise ValueError(f"params.nodes: must be >= 0, got {params['nodes']}")

    def propose(self, state: RegionState) -> list[RMProposal]:
        self.t += 1
        target = min(int(self.params["nodes"]), self.k_max)
        missing = target - state.n_nodes
        if missing > 0:
            t_new = self.cheapest_per_slot()
            return [
                RMProposal(
                    self.region, self.catalog[t_new].name, missing, f"static size {target}: acquire {missing}"
                )
            ]
        return []
