"""Per-period arbitration of the Operator Managers' proposals by the Application Manager.

Every control period each OM proposes an action (``policies.base`` encoding). The arbiter grants or denies each
proposal so that:

* the application keeps within its reconfiguration budget ``eta_R`` (fraction of periods with a
  reconfiguration): a token bucket is refilled with ``eta_R`` tokens per period up to ``capacity`` tokens and a
  reconfiguration costs one token (paper 004 Sec. 7.3, token-bucket global policy of its reference [8]);
* with batching (the default) all the changes granted in one period form ONE reconfiguration (one restart of
  the job, one penalty) and cost one token together; without batching each granted change costs a token;
* no deployment goes above ``K_max`` or below ``k_min`` replicas, and no node type is used beyond its capacity
  (number of nodes of that type the application may use, e.g. what the Infrastructure Manager provisioned);
* optionally (``hold_scale_ins``) no operator scales in while another one violates its bound: the capacity a
  scale-in frees may be needed within a few periods, and a violated period is what the budget eta_V counts;
* a multi-replica step (``JUMP``: several replicas, or a change of node type) is one change like any other;
  it counts as a scale-in only when it removes replicas and adds none;
* optionally (``defer_for_nodes``, batching only) a period's batch in which no operator violated its bound is
  deferred while a scale-out of the same period waits for nodes, or lost the last free one to a batch-mate: the
  operators reconfigure together once the nodes are there (one token) instead of one after the other (one token
  each), and every scale-out of the deferred batch waits for its nodes (the RM provisions for all of them). A
  violation ends the wait;
* conflicts (two operators asking for the last node of a type) are resolved by priority: scale-ins are applied
  first (they free nodes), then scale-outs of operators that violated their bound, then by utilisation
  (busiest first), then by operator order.

Every decision carries a human-readable reason (shown on the dashboard).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.base import deployment_change

_EPS = 1e-9  # tolerance on token counts (eta_R is accumulated in floating point)


def check_budget(name: str, value: float) -> float:
    """Validate a budget (fraction of periods) in [0, 1); raise ValueError naming the field otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: must be a number in [0, 1), got {value!r}")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name}: must be in [0, 1), got {value}")
    return float(value)


class TokenBucket:
    """Tokens refilled at ``rate`` per period (the budget eta_R) up to ``capacity``; starts full.

    Over any ``T`` consecutive periods at most ``capacity + rate * T`` tokens can be spent.
    """

    def __init__(self, rate: float, capacity: float = 1.0, tokens: float | None = None) -> None:
        self.rate = check_budget("eta_r", rate)
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not capacity >= 1.0:
            raise ValueError(
                f"bucket_capacity: must be a number >= 1 (one reconfiguration), got {capacity!r}"
            )
        self.capacity = float(capacity)
        self.tokens = self.capacity if tokens is None else float(tokens)
        if not 0.0 <= self.tokens <= self.capacity:
            raise ValueError(f"tokens: must be in [0, capacity={self.capacity}], got {tokens}")

    def refill(self) -> None:
        """Add one period's worth of tokens."""
        self.tokens = min(self.capacity, self.tokens + self.rate)

    def can_spend(self, amount: float = 1.0) -> bool:
        return self.tokens + _EPS >= amount

    def wait_after_one(self) -> float:
        """Periods until a token is there again if one is spent in the coming period (after its refill): 0 when
        one would be left, ``inf`` with no refill. What a change made now must carry an operator through
        (``policies.base.Observation.budget_wait_periods``)."""
        left = min(self.tokens + self.rate, self.capacity) - 1.0
        if left + _EPS >= 1.0:
            return 0.0
        return float("inf") if self.rate <= 0 else (1.0 - left) / self.rate

    def spend(self, amount: float = 1.0) -> None:
        if not self.can_spend(amount):
            raise ValueError(f"token bucket: cannot spend {amount}, only {self.tokens:.3f} tokens")
        self.tokens = max(0.0, self.tokens - amount)


@dataclass
class Request:
    """One OM's proposal: operator index, its current deployment ``k`` (replicas per node type), the proposed
    action, whether the operator violated its bound in the period that ended and the utilisation of its busiest
    replica (used for priority)."""

    operator: int
    k: np.ndarray
    action: int
    violated: bool = False
    utilisation: float = 0.0
    #: the target deployment of a multi-replica step (``action == JUMP``); None for the one-replica actions
    target: np.ndarray | None = None
    #: a step that removes replicas only to make room for a scale-out the node limit blocks (a staged node-type
    #: swap): arbitrated as a scale-out (no scale-in reserve, no hold, no scale-in priority)
    for_scale_out: bool = False

    def change(self) -> np.ndarray:
        """Replicas added (> 0) or removed (< 0) per node type if granted."""
        return deployment_change(self.k, self.action, self.target)


@dataclass
class Decision:
    """The AM's answer to a request: the action applied (the proposal, or 0 when denied) and why."""

    operator: int
    proposed: int
    applied: int
    reason: str
    #: the node type (index) whose capacity denied the request: no free node of it (it waits for the RM/IM)
    short_type: int | None = None

    @property
    def waits_for_capacity(self) -> bool:
        return self.short_type is not None and not self.granted

    @property
    def granted(self) -> bool:
        return self.applied == self.proposed

    @property
    def changed(self) -> bool:
        return self.applied != 0


class Arbiter:
    """Grant or deny the OMs' proposals of one period (see module doc).

    ``eta_r``: reconfiguration budget in [0, 1) (token refill per period). ``bucket_capacity``: tokens (>= 1).
    ``k_max``/``k_min``: replica bounds per operator (an int for all operators, or one per operator).
    ``node_capacity``: nodes of each type the application may use in total (None = unlimited).
    ``node_type_names``: for the reasons. ``batching``: one token per period with grants, instead of one per grant.
    ``scale_in_reserve``: tokens kept for scale-outs: a scale-in (or a batch of scale-ins only) is granted only
    when at least ``1 + scale_in_reserve`` tokens are available (scale-ins are never urgent). ``hold_scale_ins``:
    deny the scale-ins of operators that did not violate while any operator violated its bound.
    ``defer_for_nodes``: defer a batch without violations while a scale-out waits for nodes (module doc).
    """

    def __init__(
        self,
        eta_r: float,
        bucket_capacity: float = 1.0,
        k_max: int | list[int] = 10,
        k_min: int | list[int] = 1,
        node_capacity: list[int] | np.ndarray | None = None,
        node_type_names: list[str] | tuple[str, ...] | None = None,
        batching: bool = True,
        scale_in_reserve: float = 0.0,
        hold_scale_ins: bool = False,
        defer_for_nodes: bool = False,
    ) -> None:
        self.bucket = TokenBucket(eta_r, bucket_capacity)
        if not 0.0 <= scale_in_reserve <= self.bucket.capacity - 1.0:
            raise ValueError(
                f"scale_in_reserve: must be in [0, bucket_capacity - 1 = {self.bucket.capacity - 1.0}], "
                f"got {scale_in_reserve}"
            )
        self.scale_in_reserve = float(scale_in_reserve)
        self.hold_scale_ins = hold_scale_ins
        self.defer_for_nodes = defer_for_nodes
        self.k_max = k_max
        self.k_min = k_min
        if node_capacity is not None:
            cap = np.asarray(node_capacity, dtype=np.int64)
            if (cap < 0).any():
                raise ValueError(f"node_capacity: must be >= 0 per node type, got {cap.tolist()}")
            node_capacity = cap
        self.node_capacity = node_capacity
        self.node_type_names = list(node_type_names) if node_type_names is not None else None
        self.batching = batching
        self.periods = 0
        self.reconfigurations = 0  # periods with at least one granted change
        self.granted_changes = 0
        self.denied_changes = 0

    def _bound(self, value: int | list[int], u: int) -> int:
        return int(value) if isinstance(value, (int, np.integer)) else int(value[u])

    def _type_name(self, t: int) -> str:
        return self.node_type_names[t] if self.node_type_names else f"type {t}"

    def arbitrate(self, requests: list[Request]) -> list[Decision]:
        """Decide one period. Returns one Decision per request, in the order of ``requests``."""
        self.periods += 1
        self.bucket.refill()
        decisions: dict[int, Decision] = {}
        changes = [r for r in requests if r.action != 0]
        for r in requests:
            if r.action == 0:
                decisions[id(r)] = Decision(r.operator, 0, 0, "no change proposed")
        if not changes:
            return [decisions[id(r)] for r in requests]

        n_res = len(changes[0].k)
        in_use = np.zeros(n_res, dtype=np.int64)
        for r in requests:
            in_use += np.asarray(r.k, dtype=np.int64)
        delta = {id(r): r.change() for r in changes}
        scale_in = {id(r): bool((delta[id(r)] <= 0).all()) and not r.for_scale_out for r in changes}

        # priority: scale-ins (free nodes) first, then violated operators, then the busiest, then operator order
        def priority(r: Request) -> tuple[int, int, float, int]:
            return (0 if scale_in[id(r)] else 1, 0 if r.violated else 1, -float(r.utilisation), r.operator)

        violating = [r.operator for r in requests if r.violated]
        in_use_before = in_use.copy()
        lost_conflict: list[tuple[Request, int]] = []  # denied a node only because a batch-mate took it
        feasible: list[Request] = []
        taken_by: dict[int, list[int]] = {}
        # operators denied because no node of a type they add is free (not lost to a batch-mate)
        no_node: list[int] = []
        for r in sorted(changes, key=priority):
            dv, is_in = delta[id(r)], scale_in[id(r)]
            after = np.asarray(r.k, dtype=np.int64) + dv
            total = int(np.sum(after))
            k_max, k_min = self._bound(self.k_max, r.operator), self._bound(self.k_min, r.operator)
            short = [
                t
                for t in np.flatnonzero(dv > 0).tolist()
                if self.node_capacity is not None and in_use[t] + dv[t] > self.node_capacity[t]
            ]
            short_type: int | None = None  # the node type whose capacity denies the request
            if is_in and self.hold_scale_ins and violating and not r.violated:
                reason = f"denied: scale-in held while operator(s) {violating} violate their bounds"
            elif (after < 0).any():
                reason = f"denied: no replica on {self._type_name(int(np.argmin(after)))} to remove"
            elif total < k_min and total < int(np.sum(r.k)):
                reason = f"denied: would go below k_min={k_min} replicas"
            elif total > k_max and total > int(np.sum(r.k)):
                reason = f"denied: would exceed K_max={k_max} replicas"
            elif short:
                t = short_type = short[0]
                rivals = taken_by.get(t, [])
                held = "?" if self.node_capacity is None else self.node_capacity[t]
                reason = f"denied: no free node of {self._type_name(t)} ({in_use[t]} of {held} in use)"
                if rivals:
                    reason += (
                        f"; conflict: the last one was granted to operator {rivals[-1]} (higher priority)"
                    )
                    lost_conflict.append((r, t))
                else:
                    no_node.append(r.operator)
            else:
                reason = ""
            if reason:
                decisions[id(r)] = Decision(r.operator, r.action, 0, reason, short_type)
                continue
            if not self.batching:
                if not self.bucket.can_spend(1.0 + (self.scale_in_reserve if is_in else 0.0)):
                    decisions[id(r)] = Decision(r.operator, r.action, 0, self._budget_reason(is_in))
                    continue
                self.bucket.spend(1.0)
                decisions[id(r)] = Decision(r.operator, r.action, r.action, "granted (one token)")
            in_use += dv
            for t in np.flatnonzero(dv > 0).tolist():
                taken_by.setdefault(t, []).append(r.operator)
            feasible.append(r)

        if (
            self.batching
            and self.defer_for_nodes
            and feasible
            and (no_node or lost_conflict)
            and not any(r.violated for r in feasible)
        ):
            # nothing urgent: wait for the nodes and reconfigure together. Every scale-out of the batch waits for
            # the nodes it adds (so the RM provisions for the whole batch, not only for the requests that found
            # none): a node a batch-mate would have taken is free, but not enough for all of them
            short_ops = sorted({r.operator for r, _ in lost_conflict} | set(no_node))
            why = f"deferred: to reconfigure together with operator(s) {short_ops}, waiting for nodes"
            for r in feasible:
                added = np.flatnonzero(delta[id(r)] > 0)
                decisions[id(r)] = Decision(
                    r.operator, r.action, 0, why, int(added[0]) if added.size else None
                )
            cap = self.node_capacity
            for r, t in lost_conflict:
                free = 0 if cap is None else max(int(cap[t] - in_use_before[t]), 0)
                decisions[id(r)] = Decision(
                    r.operator,
                    r.action,
                    0,
                    f"denied: no free node of {self._type_name(t)} for the whole batch ({free} free): waiting "
                    "for nodes to reconfigure together",
                    t,
                )
            feasible = []
        elif self.batching:
            only_ins = all(scale_in[id(r)] for r in feasible)
            need = 1.0 + (self.scale_in_reserve if only_ins else 0.0)
            if feasible and self.bucket.can_spend(need):
                self.bucket.spend(1.0)
                for r in feasible:
                    decisions[id(r)] = Decision(
                        r.operator,
                        r.action,
                        r.action,
                        f"granted (batch of {len(feasible)}, one reconfiguration)",
                    )
            else:
                # nothing is applied this period: the capacity reasons above assumed the batch went through
                for r in feasible:
                    decisions[id(r)] = Decision(r.operator, r.action, 0, self._budget_reason(only_ins))
                # nothing is applied: a node lost to a batch-mate is free after all, the budget denies those too
                cap = self.node_capacity
                for r, t in lost_conflict:
                    if cap is not None and in_use_before[t] + delta[id(r)][t] <= cap[t]:
                        decisions[id(r)] = Decision(r.operator, r.action, 0, self._budget_reason(False))
                feasible = []
        self.reconfigurations += int(bool(feasible))
        out = [decisions[id(r)] for r in requests]
        for d in out:
            if d.proposed != 0:
                if d.granted:
                    self.granted_changes += 1
                else:
                    self.denied_changes += 1
        return out

    def _budget_reason(self, scale_in: bool = False) -> str:
        if scale_in and self.scale_in_reserve > 0 and self.bucket.can_spend(1.0):
            return (
                f"denied: scale-in deferred: {self.bucket.tokens:.2f} tokens < 1 + {self.scale_in_reserve:g} "
                "kept for scale-outs"
            )
        return f"denied: reconfiguration budget exhausted: {self.bucket.tokens:.2f} tokens < 1"
