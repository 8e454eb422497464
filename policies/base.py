"""The Operator Manager policy interface the control loop and the simulator call once per period.

Actions (paper 001, eq. 1) are integers in ``0 .. 2*N_res``, in the order the authors' simulator tries them:
``0`` = do nothing, ``1 + t`` = remove one replica of type ``t``, ``1 + N_res + t`` = add one replica of type
``t``. Greedy selection takes the first strictly smallest value in that order. Beyond the papers, a policy may
propose :data:`JUMP` (``-1``): reconfigure to the proposal's target deployment in one step (several replicas,
or a change of node type; one reconfiguration like any other action); :meth:`Policy.target_of` gives that target
and :func:`deployment_change` the per-type change of any action.

Timing convention (one call per control period ``i``): the observation carries the deployment ``k_i`` that ran
during the period just ended, the input rate measured in it and whether the operator violated its bound in it.
The policy first learns from the transition that ended (previous state, previous action, incurred cost, new
state), then proposes the action for the next period. The incurred cost of a period is
``w_rcf * 1[previous action changed k] + w_res * price(k_i) / C_max + w_perf * 1[violated]``.
"""

from __future__ import annotations

import io
import json
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from policies import calibration
from policies.operator_model import CostWeights, OperatorSpec, QueueModel, RateLevels

STATE_FORMAT_VERSION = 2  # 1 = npz (still readable), 2 = raw buffers + zlib level 1


#: the action "reconfigure to the proposed target deployment in one step" (multi-replica or node-type change)
JUMP = -1


def n_actions(n_res: int) -> int:
    return 2 * n_res + 1


def action_delta(action: int, n_res: int) -> tuple[int, int]:
    """``(type index, +1/-1)`` of an action, ``(-1, 0)`` for do nothing."""
    if action == 0:
        return -1, 0
    if 1 <= action <= n_res:
        return action - 1, -1
    if n_res < action <= 2 * n_res:
        return action - 1 - n_res, +1
    raise ValueError(f"action {action} out of range for {n_res} node types")


def apply_action(k: np.ndarray, action: int) -> np.ndarray:
    """The deployment after ``action`` (a new array)."""
    t, d = action_delta(action, len(k))
    out = np.array(k, dtype=np.int64, copy=True)
    if d:
        out[t] += d
    return out


def feasible_actions(k: np.ndarray, k_max: int, k_min: int = 1) -> list[int]:
    """Actions allowed in deployment ``k``: never below ``k_min`` replicas in total nor above ``k_max``."""
    n = len(k)
    total = int(np.sum(k))
    acts = [0]
    if total > k_min:
        acts.extend(1 + t for t in range(n) if k[t] > 0)
    if total < k_max:
        acts.extend(1 + n + t for t in range(n))
    return acts


def deployment_change(k: np.ndarray, action: int, target: np.ndarray | None = None) -> np.ndarray:
    """Replicas added (> 0) or removed (< 0) per node type by ``action`` in deployment ``k``; a :data:`JUMP`
    needs its ``target`` deployment."""
    k = np.asarray(k, dtype=np.int64)
    if action == JUMP:
        if target is None:
            raise ValueError("a multi-replica step (JUMP) needs its target deployment")
        return np.asarray(target, dtype=np.int64) - k
    return apply_action(k, action) - k


def describe_change(delta: np.ndarray, node_type_names: list[str] | tuple[str, ...]) -> str:
    """A per-type change in words, e.g. ``"remove 3 replicas on A2, add 2 replicas on A3"``."""
    parts = [
        f"{'add' if n > 0 else 'remove'} {abs(int(n))} replica{'s' if abs(int(n)) > 1 else ''} on {name}"
        for n, name in sorted(zip(delta.tolist(), node_type_names, strict=True), key=lambda p: p[0])
        if n
    ]
    return ", ".join(parts) or "do nothing"


def describe_action(
    action: int, node_type_names: list[str] | tuple[str, ...], delta: np.ndarray | None = None
) -> str:
    if action == JUMP:
        if delta is None:
            return "multi-replica step"
        return f"in one step: {describe_change(delta, node_type_names)}"
    t, d = action_delta(action, len(node_type_names))
    if d == 0:
        return "do nothing"
    return f"{'add' if d > 0 else 'remove'} one replica on {node_type_names[t]}"


@dataclass
class Observation:
    """What the control loop measured for one operator over the period that just ended.

    ``deployment``: replicas per node type in place during the period (k_i).
    ``input_rate``: mean input rate over the period (tuples/s).
    ``response_time_s``: mean operator response time (s), if measured.
    ``violated``: whether the operator's bound was exceeded; derived from ``response_time_s`` when None.
    ``utilisation``: busy fraction of the busiest replica in [0, 1+], if measured.
    ``complete``: False when metrics were missing: the policy must neither learn nor scale.
    ``processing_rate``: tuples/s the replicas processed over the period, if measured (below the input rate when
    the operator is saturated: then it measures the deployment's capacity, which the input rate does not).
    ``budget_wait_periods``: periods until the application could reconfigure again after a reconfiguration now
    (the AM's token bucket; 0 when a token would be left, ``inf`` with no budget): how much further ahead a
    change made now must carry the operator.
    ``node_limited``: the operator's last scale-out waited for nodes in a region that cannot hold what runs there
    plus what waits (its node limit), or this period's proposals of its application add more than the region
    can hold (:meth:`Policy.revise_for_node_limit`): the replicas asked for may never come, so a policy that can
    (model-based with ``multi_step``) asks instead for the deployment expected to meet the bound with the fewest
    new replicas, of any node type.
    ``period_s``: the control period's length (s), when the loop knows it.
    ``restart_s``: the downtime (s) the connector measured for the application's latest reconfiguration (0: a
    live change; None: no reconfiguration yet, or none measured): what the period after a change lost, and what a
    change now is expected to stop the job for (model-based ``restart_aware``).
    ``resize_restart_s`` / ``swap_restart_s``: the same, for the latest reconfiguration of each kind (None: none of
    that kind measured yet): a *resize* changed only replica counts (every operator kept its node types), a *swap*
    changed a node type. An engine may change the one live and the other by a restart (Spark: executors are added
    and removed live, another executor size restarts the query from its checkpoint), so a change is expected to
    cost what the latest change of its own kind cost.
    ``periods_since_change``: control periods since the application's latest applied reconfiguration of any
    operator (1: applied at the previous step, so the period just observed began with it; None: none yet). On an
    engine that restarts the whole job for a change (Flink) every operator's queue catches up after it, not
    only the changed one's.

    Micro-batch engines (Spark) also report, for :mod:`policies.engine_model` (None elsewhere):
    ``batch_duration_s``: mean duration of the period's micro-batches (s); ``batch_records``: mean records per
    micro-batch; ``partitions``: partitions a batch's tasks are split into (None: unknown);
    ``batch_interval_s``: the trigger interval (s); ``backlog``: tuples waiting for a batch at the end of the
    period.
    """

    deployment: np.ndarray
    input_rate: float
    response_time_s: float | None = None
    violated: bool | None = None
    utilisation: float | None = None
    complete: bool = True
    processing_rate: float | None = None
    budget_wait_periods: float = 0.0
    node_limited: bool = False
    batch_duration_s: float | None = None
    batch_records: float | None = None
    partitions: int | None = None
    batch_interval_s: float | None = None
    backlog: float | None = None
    period_s: float | None = None
    restart_s: float | None = None
    resize_restart_s: float | None = None
    swap_restart_s: float | None = None
    periods_since_change: int | None = None

    def expected_restart_s(self, swap: bool) -> float | None:
        """The downtime (s) a change of this kind (``swap``: it changes a node type) is expected to stop the job
        for: the latest measured of its kind, else the latest of any kind (``restart_s``)."""
        own = self.swap_restart_s if swap else self.resize_restart_s
        return self.restart_s if own is None else own


@dataclass
class Proposal:
    """An OM's proposal for the next period.

    ``action``: action index (see module doc); ``deployment``: the deployment it leads to.
    ``explanation``: human-readable reasons: the incurred cost terms of the last period and the estimated value of
    each feasible alternative (lower is better), keyed by action description.
    """

    action: int
    deployment: np.ndarray
    explanation: dict[str, Any] = field(default_factory=dict)

    @property
    def is_noop(self) -> bool:
        return self.action == 0


def encode_state(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """Compact binary agent state, exact round trip. Format 2: a length-prefixed JSON header (format, meta, and
    per array its name, dtype and shape) followed by the arrays' raw bytes, zlib level 1 (about 10x cheaper to
    encode and decode than format 1's ``np.savez_compressed``, which :func:`decode_state` still reads)."""
    names = sorted(arrays)
    arrs = [np.asarray(arrays[k]) for k in names]  # tobytes() writes C order
    header = json.dumps(
        {
            "format": STATE_FORMAT_VERSION,
            "meta": meta,
            "arrays": [[k, a.dtype.str, list(a.shape)] for k, a in zip(names, arrs, strict=True)],
        },
        sort_keys=True,
    ).encode()
    body = zlib.compress(b"".join(a.tobytes() for a in arrs), 1)
    return len(header).to_bytes(4, "big") + header + body


def decode_state(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a state written by :func:`encode_state` (format 2) or by the format-1 encoder (npz)."""
    n = int.from_bytes(data[:4], "big")
    header = json.loads(data[4 : 4 + n])
    fmt = header.get("format")
    if fmt == 1:
        with np.load(io.BytesIO(data[4 + n :]), allow_pickle=False) as npz:
            return header["meta"], {k: npz[k] for k in npz.files}
    if fmt != STATE_FORMAT_VERSION:
        raise ValueError(f"unsupported agent state format {fmt!r}")
    body = zlib.decompress(data[4 + n :])
    arrays, pos = {}, 0
    for name, dtype, shape in header["arrays"]:
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(body, dtype=dt, count=count, offset=pos).reshape(tuple(shape)).copy()
        pos += count * dt.itemsize
    return header["meta"], arrays


class Policy(ABC):
    """Base class of every Operator Manager policy.

    Subclasses set ``name`` (the CLI/manifest name), define ``DEFAULTS`` (hyperparameters with the paper's
    defaults) and implement ``_decide``, ``_learn``, ``_get_state``/``_set_state``.
    """

    name: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    #: the decisions do not depend on the seed (no exploration, no random tie-breaking): one run of a
    #: configuration says all that more runs would (benchmarks and the BO AM simulate it once)
    deterministic: ClassVar[bool] = False
    #: parameters the control loop sets from the application's declared SLO when the user did not set them
    #: (``autoscaler.control.agents.slo_params``): ``violation_budget``, the fraction of periods the operator may
    #: exceed its latency bound
    SLO_PARAMS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        self.spec = spec
        self.params = self.validate_params(params or {})
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.t = 0  # number of completed learning steps
        self._prev: tuple[np.ndarray, float, int] | None = None  # (k, rate, action) of the last decision
        #: the target deployment of the last decision when it was a multi-replica step (:data:`JUMP`); transient:
        #: the caller reads it (:meth:`target_of`) in the same period
        self._jump: np.ndarray | None = None
        #: the rate levels of the policy's discretised state (tuples/s); they grow with the observed rates when
        #: the spec gives no range or a growing one (:mod:`policies.calibration`)
        self.levels: RateLevels = calibration.initial_levels(spec.rate_levels)
        self.rerangings = 0  # how many times the range grew
        self._calibration: dict[str, Any] | None = None  # the calibration entry of the step in progress
        #: per-replica service time learned from the operator's own observations (used per ``spec.model_mode``)
        balancing = spec.model.balancing if spec.model is not None else "round_robin"
        self.service = calibration.ServiceTimeEstimator(balancing)

    # ---- parameters -------------------------------------------------------------------------------------
    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Merge ``params`` over ``DEFAULTS``; unknown names or wrong types raise ValueError naming the field."""
        out = dict(cls.DEFAULTS)
        for key, value in params.items():
            if key not in cls.DEFAULTS:
                known = ", ".join(sorted(cls.DEFAULTS)) or "none"
                raise ValueError(f"params.{key}: unknown parameter for policy {cls.name!r} (known: {known})")
            default = cls.DEFAULTS[key]
            if isinstance(default, bool) and not isinstance(value, bool):
                raise ValueError(f"params.{key}: must be true or false, got {value!r}")
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"params.{key}: must be a number, got {value!r}")
                if isinstance(default, int) and not isinstance(value, int):
                    raise ValueError(f"params.{key}: must be an integer, got {value!r}")
            if isinstance(default, str) and not isinstance(value, str):
                raise ValueError(f"params.{key}: must be a string, got {value!r}")
            out[key] = value
        cls.check_params(out)
        return out

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        """Range checks; override and raise ValueError("params.<name>: reason")."""

    # ---- run-time reconfiguration (the AM) ---------------------------------------------------------------
    def reconfigure(self, weights: CostWeights | None = None, r_max_s: float | None = None) -> None:
        """Apply new cost weights and/or a new response-time bound (seconds) without losing what was learned."""
        if weights is not None:
            self.spec.weights = weights
        if r_max_s is not None:
            if not r_max_s > 0:
                raise ValueError(f"r_max_s must be > 0, got {r_max_s}")
            self.spec.r_max_s = r_max_s
        self._on_reconfigure()

    def _on_reconfigure(self) -> None:
        """Hook: drop caches that depend on weights or R_max."""

    # ---- the call the control loop makes ------------------------------------------------------------------
    def violated(self, obs: Observation) -> bool:
        if obs.violated is not None:
            return bool(obs.violated)
        if obs.response_time_s is None:
            raise ValueError("observation has neither 'violated' nor 'response_time_s'")
        return obs.response_time_s > self.spec.r_max_s

    def _period_cost(self, k: np.ndarray, violated: bool, a_prev: int) -> float:
        """The weighted cost of the period that ended (the papers' violation + resource + reconfiguration terms) in
        deployment ``k`` after action ``a_prev``; its terms are kept for the explanation (``_last_terms``)."""
        w = self.spec.weights
        res = self.spec.price(k) / self.spec.cost_scale
        self._last_terms = (float(violated), res, float(a_prev != 0))
        return w.perf * violated + w.res * res + w.rcf * (a_prev != 0)

    def act(self, k: np.ndarray, rate: float, violated: bool, obs: Observation | None = None) -> int:
        """The fast path (used by the simulator): learn from the period that ended, return the next action.

        ``k`` is the deployment in place during that period, ``rate`` its input rate (tuples/s) and ``violated``
        whether the operator exceeded its bound.
        """
        self._calibrate(k, rate, obs)
        prev = self._prev
        if prev is not None:
            k_prev, rate_prev, a_prev = prev
            cost = self._period_cost(k, violated, a_prev)
            self._learn(k_prev, rate_prev, a_prev, cost, k, rate, violated, obs)
            self.t += 1
        action, _ = self._decide(k, rate, obs, False)
        self._prev = (k, float(rate), action)
        return action

    # ---- self-calibration (policies.calibration) ----------------------------------------------------------
    def _calibrate(self, k: np.ndarray, rate: float, obs: Observation | None) -> None:
        """Called first by every ``act``: grow the rate range when ``rate`` (tuples/s) leaves it, and feed the
        service-time estimator with what the observation measured."""
        if obs is not None and self.spec.model_mode != "given":
            self.service.observe(k, self.spec.speedups, rate, obs.utilisation, obs.response_time_s)
        if calibration.needs_growth(self.levels, rate):
            old = self.levels
            new, factor = calibration.grow(old, rate)
            self.levels = new
            self.rerangings += 1
            self._remap_levels(old, factor)
            entry = calibration.calibration_entry(old, new, rate)
            if self._calibration is None:
                self._calibration = entry
            else:  # grown twice within one step: report the whole change
                self._calibration["new_range_tuples_s"] = entry["new_range_tuples_s"]
                self._calibration["factor"] *= entry["factor"]
                self._calibration["reason"] = entry["reason"]

    def _remap_levels(self, old: RateLevels, factor: int) -> None:
        """Hook: ``self.levels`` has just grown from ``old`` by the integer ``factor`` (new level ``j`` = old
        levels ``j*factor .. j*factor+factor-1``): carry what was learned per level over to the new levels
        (:func:`policies.calibration.merge_counts` / ``merge_values``) and drop caches built on the old ones.
        The default (policies without per-level state) does nothing."""

    def planning_model(self) -> QueueModel | None:
        """The queueing model to plan on (``spec.model_mode``: given / hint / learn); None: nothing known yet."""
        return calibration.planning_model(self.spec.model, self.spec.model_mode, self.service)

    def fitted_engine_model(self) -> QueueModel | None:
        """The engine performance model fitted from the operator's own metrics (a micro-batch engine's:
        :class:`policies.engine_model.MicroBatchQueueModel`), for simulations of the operator (the AM's BO, the
        what-if replay); None when the policy fits none or its fit is not ready (the simulator then uses the
        service time the control plane learned)."""
        return None

    def target_of(self, k: np.ndarray, action: int) -> np.ndarray:
        """The deployment ``action`` leads to from ``k`` (a new array); for :data:`JUMP`, the target of this
        period's decision."""
        if action == JUMP:
            if self._jump is None:
                raise ValueError(f"{self.name}: JUMP without a target deployment")
            return self._jump.copy()
        return apply_action(k, action)

    def override_last_action(self, applied_action: int) -> None:
        """Record that the action actually applied after the last ``act()`` was ``applied_action``.

        The Application Manager may deny a proposal; the realised transition is then a no-op (``0``). Calling this
        before the next ``act()`` makes the policy learn from what was applied (the reconfiguration term and the
        next deployment), not from what it proposed. No effect before the first decision.
        """
        if self._prev is not None:
            k_prev, rate_prev, _ = self._prev
            self._prev = (k_prev, rate_prev, int(applied_action))

    def step(self, obs: Observation) -> Proposal:
        """The control loop's call: learn from the period that ended (when the observation is complete) and
        propose the next action with its explanation."""
        k = np.array(obs.deployment, dtype=np.int64)
        if not obs.complete:
            return Proposal(0, k.copy(), {"reason": "incomplete metrics: no learning, no scaling"})
        self._last_terms = None
        self._calibration = None
        action = self.act(k, obs.input_rate, self.violated(obs), obs)
        return self._proposal(k, action, obs)

    def revise_for_node_limit(self, obs: Observation) -> Proposal | None:
        """This period's proposal decided again as if ``obs.node_limited`` (the control loop found, before the
        AM arbitrates, that its region cannot hold what the application's proposals add), without learning
        again; the revised action becomes the one the policy learns from. None when the policy does not plan
        for a node limit, or already did: the first proposal stands."""
        return None

    def _proposal(self, k: np.ndarray, action: int, obs: Observation) -> Proposal:
        """The proposal of ``action`` in deployment ``k`` with its explanation (alternatives' values included
        when the policy explains)."""
        _, values = self._decide(k, obs.input_rate, obs, True) if self._explains else (action, {})
        names = [t.name for t in self.spec.node_types]
        terms = self._last_terms
        explanation: dict[str, Any] = {
            "policy": self.name,
            "action": describe_action(
                action, names, self.target_of(k, action) - k if action == JUMP else None
            ),
            "last_period_cost_terms": None
            if terms is None
            else {"perf": terms[0], "res": terms[1], "rcf": terms[2]},
            "weights": {
                "perf": self.spec.weights.perf,
                "res": self.spec.weights.res,
                "rcf": self.spec.weights.rcf,
            },
            "r_max_s": self.spec.r_max_s,
        }
        if self._calibration is not None:
            explanation["calibration"] = self._calibration
            self._calibration = None
        explanation.update(self.explanation_extras())
        if values:
            explanation["alternatives"] = {
                describe_action(a, names, self.target_of(k, a) - k if a == JUMP else None): float(v)
                for a, v in values.items()
            }
        return Proposal(action, self.target_of(k, action), explanation)

    def explanation_extras(self) -> dict[str, Any]:
        """Policy-specific entries of this step's explanation (e.g. a forecast); none by default."""
        return {}

    #: whether ``_decide(..., explain=True)`` returns the values of the alternatives (it must then be free of
    #: side effects such as exploration draws, so calling it twice does not change what the policy does).
    _explains: ClassVar[bool] = False
    _last_terms: tuple[float, float, float] | None = None

    @abstractmethod
    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        """Choose an action for deployment ``k`` at ``rate`` (tuples/s). With ``explain`` return, without
        drawing random numbers or changing state, the greedy action and the estimated value of every feasible
        alternative (lower is better); otherwise return the action to take (exploration included) and ``{}``."""

    def _learn(
        self,
        k_prev: np.ndarray,
        rate_prev: float,
        action: int,
        cost: float,
        k_now: np.ndarray,
        rate_now: float,
        violated: bool,
        obs: Observation | None,
    ) -> None:
        """Learn from one transition; the default learns nothing (rule-based policies)."""

    # ---- durable state ------------------------------------------------------------------------------------
    def state_bytes(self) -> bytes:
        """Everything needed to continue exactly: learned values, counters, RNG state, last decision."""
        meta, arrays = self._get_state()
        meta = dict(meta)
        meta.update(
            policy=self.name,
            params=self.params,
            t=self.t,
            seed=self.seed,
            rng=self.rng.bit_generator.state,
            prev=None if self._prev is None else [self._prev[0].tolist(), self._prev[1], self._prev[2]],
            weights=[self.spec.weights.perf, self.spec.weights.res, self.spec.weights.rcf],
            r_max_s=self.spec.r_max_s,
            levels=[self.levels.n, self.levels.max_rate, self.levels.grow],
            rerangings=self.rerangings,
        )
        arrays = dict(arrays)
        arrays["_service_stats"] = self.service.state()
        return encode_state(meta, arrays)

    def load_state(self, data: bytes) -> None:
        meta, arrays = decode_state(data)
        if meta.get("policy") != self.name:
            raise ValueError(f"state belongs to policy {meta.get('policy')!r}, not {self.name!r}")
        # states saved before a parameter existed take its default
        self.params = {**self.DEFAULTS, **meta["params"]}
        self.t = int(meta["t"])
        self.seed = int(meta["seed"])
        self.rng.bit_generator.state = meta["rng"]
        prev = meta["prev"]
        self._prev = (
            None if prev is None else (np.array(prev[0], dtype=np.int64), float(prev[1]), int(prev[2]))
        )
        self.spec.weights = CostWeights(*meta["weights"])
        self.spec.r_max_s = float(meta["r_max_s"])
        # states written before self-calibration carry no range: the spec's (then always fixed) one
        lv = meta.get("levels")
        self.levels = (
            calibration.initial_levels(self.spec.rate_levels)
            if lv is None
            else RateLevels(int(lv[0]), float(lv[1]), bool(lv[2]))
        )
        self.rerangings = int(meta.get("rerangings", 0))
        self._calibration = None
        if "_service_stats" in arrays:
            self.service.load(arrays.pop("_service_stats"))
        else:
            self.service.load(np.zeros(6))
        self._set_state(meta, arrays)
        self._on_reconfigure()

    def forget_last_decision(self) -> None:
        """Start a new run: the next :meth:`act` learns nothing from the period before it (there was none)."""
        self._prev = None

    @classmethod
    def from_state(cls, spec: OperatorSpec, data: bytes) -> Policy:
        policy = cls(spec)
        policy.load_state(data)
        return policy

    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return {}, {}

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        pass
