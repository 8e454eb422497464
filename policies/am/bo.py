"""The Bayesian-optimisation Application Manager (paper 001 Sec. 5.2, Alg. 4).

Starting from the current configuration (naive at first), alternately tune

* the per-operator response-time bounds ``R_u = x_u * R_max`` with ``x_u in (0, 1)`` and every path sum within
  ``1 +/- epsilon`` (:class:`~policies.am.bayesopt.PathSumDomain`), the weights fixed; then
* the OMs' cost weights on the simplex (:class:`~policies.am.bayesopt.SimplexDomain`), the bounds fixed;

each phase a constrained BO with ``n_bo`` evaluations warm-started from the current point, minimising the
application's mean resource cost ($/h) subject to violations <= eta_V and reconfigurations <= eta_R (constrained
expected improvement). Rounds repeat until ``max_rounds`` or a round brings no improvement; later rounds use half
the evaluations ("reduce N_BO if needed").

A candidate is evaluated with :func:`~policies.sim.application.simulate_application` instantiated from what was
observed: the recorded source-rate trace and, per operator, an M/G/1 model fitted from the observed mean and
variance of the service time (:func:`fit_queue_model`), fresh OMs configured with the candidate and the AM's own
token-bucket arbitration. Every evaluation with ``replications`` > 1 uses the same OM seeds (common random
numbers), so candidates differ by their configuration, not by the luck of a learning OM. BO aims at
``margin * eta_V`` and ``margin_r * eta_R`` (default ``margin``; the simulated trace is a sample and the models
are fitted; the token bucket already bounds the reconfigurations, so ``margin_r`` = 1 is reasonable). With
``validation_replications`` > 0, the warm start (always), the chosen configuration and the cheapest candidates
(at most ``validate_top``) are re-run with held-out OM seeds, optionally on the observed rates scaled by
``validation_load`` (headroom for a busier future) and replayed cyclically over ``validation_steps`` periods
(the horizon the configuration will hold: a learning OM's early mistakes weigh as much as they will) -- with
``validation_phases`` each held-out run also starts the replay at a different point of the window (a deterministic
OM, e.g. ``model-based``, has no seed spread; the phase at which it starts learning is what its outcome then varies
with) -- and the cheapest one whose violations and reconfigurations plus ``validation_k`` standard errors of those
runs meet the full budgets is applied: this guards against a candidate whose training runs were merely lucky (the
margin is calibrated per setting by the spread of the held-out runs), and an incumbent that already meets the
budgets is never replaced by a costlier configuration. When the observations say what really happened while the warm
start ran over the observed window (:class:`Observations` ``observed_violation_fraction`` and
``observed_reconfiguration_fraction``) and both are within eta_V / ``validation_load`` and eta_R /
``validation_load`` (the same headroom for a busier future the validation runs get; a load below 1 does not loosen
the budgets), the warm start counts as passing validation even if the simulator says otherwise (its fitted models
are pessimistic), and without validation it is kept unless BO found a configuration cheaper in training that meets
the margined budgets there: BO never applies a configuration costlier than an incumbent that reality showed to be
within the budgets. If the optimisation raises or runs out of time, the AM keeps the last good configuration and
records why in ``history``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from policies.am.arbiter import Arbiter, check_budget
from policies.am.bayesopt import BOResult, PathSumDomain, SimplexDomain, minimize_constrained
from policies.am.guard import GuardParams, ViolationBudgetGuard
from policies.am.naive import EQUAL_WEIGHTS, AMConfiguration, naive_bounds
from policies.app_graphs import Application
from policies.base import Policy
from policies.operator_model import CostWeights, NodeType, OperatorSpec, QueueModel
from policies.options import defaults as option_defaults
from policies.options import validate as validate_options
from policies.registry import load
from policies.sim.application import simulate_application

OMFactory = Callable[[OperatorSpec, int], Policy]


def fit_queue_model(
    service_times_s: np.ndarray | None = None, mean_s: float | None = None, var_s2: float | None = None
) -> QueueModel:
    """An M/G/1 per-replica model from observed service times on a speedup-1 node (s), or directly from their
    observed mean (s) and variance (s^2)."""
    if service_times_s is not None:
        st = np.asarray(service_times_s, dtype=float)
        if st.size < 2 or not np.isfinite(st).all() or (st <= 0).any():
            raise ValueError("service_times_s: need at least two finite positive service times")
        mean_s, var_s2 = float(st.mean()), float(st.var(ddof=1))
    if mean_s is None or var_s2 is None:
        raise ValueError("service_times_s or (mean_s, var_s2): give the observations")
    return QueueModel(service_mean_s=mean_s, service_var_s2=var_s2, kind="mg1")


@dataclass
class Observations:
    """What the AM observed to build its simulator: the source rate per period (tuples/s) and one fitted queue
    model per operator; and, when known, what was measured in reality while the current (warm-start)
    configuration ran over the same window: the fraction of periods with a violation and the fraction that began
    with a reconfiguration (each in [0, 1]; None = unknown)."""

    rates: np.ndarray
    models: list[QueueModel]
    observed_violation_fraction: float | None = None
    observed_reconfiguration_fraction: float | None = None
    #: the running OMs' saved states (``Policy.state_bytes``), one per operator: the simulated OMs then start
    #: from what the running ones learned instead of from scratch (re-tuning at run time)
    om_states: list[bytes] | None = None

    def __post_init__(self) -> None:
        if self.om_states is not None and len(self.om_states) != len(self.models):
            raise ValueError(
                f"om_states: one state per operator expected ({len(self.models)}), got {len(self.om_states)}"
            )
        for name in ("observed_violation_fraction", "observed_reconfiguration_fraction"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(f"{name}: must be a fraction in [0, 1] or None, got {value!r}")
            if not 0.0 <= float(value) <= 1.0:  # also rejects NaN
                raise ValueError(f"{name}: must be a fraction in [0, 1] or None, got {value!r}")
            setattr(self, name, float(value))

    def warm_start_within(self, eta_v: float, eta_r: float) -> bool:
        """True when both observed fractions are known and within the budgets eta_V and eta_R."""
        v, r = self.observed_violation_fraction, self.observed_reconfiguration_fraction
        return v is not None and r is not None and v <= eta_v + 1e-12 and r <= eta_r + 1e-12

    def observed_note(self) -> str:
        """E.g. ``"V=1.20%, R=3.40%"`` (the observed fractions in percent), "unknown" for a missing one."""
        fmt = lambda f: "unknown" if f is None else f"{100.0 * f:.2f}%"  # noqa: E731
        return f"V={fmt(self.observed_violation_fraction)}, R={fmt(self.observed_reconfiguration_fraction)}"


def _int_at_least(name: str, value: Any, low: int, what: str = "", unit: str = "") -> int:
    """``value`` if it is an integer (not a bool) >= ``low``; else ValueError
    ``"<name>: <what>must be an integer >= <low><unit>, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: {what}must be an integer >= {low}{unit}, got {value!r}")
    return value


def om_factory_from_registry(name: str, params: dict[str, Any] | None = None) -> OMFactory:
    """A factory building OM ``name`` (``policies.registry``) for a spec and a seed."""
    cls = load("om", name)

    def build(spec: OperatorSpec, seed: int) -> Policy:
        return cls(spec, dict(params or {}), seed)

    return build


class BayesianAM:
    """BO-tuned AM (see module doc). ``n_bo``: evaluations per BO phase (>= 1); ``epsilon``: path-sum margin;
    ``timeout_s``: wall-clock budget of one optimisation run; ``sim_steps``: periods of the observed trace used
    per evaluation (None = all); ``margin``: the constraints used in the simulation are ``margin * eta`` (the
    simulated trace is a sample and the models are fitted, so the AM aims inside the budgets); ``replications``:
    simulations per candidate, with different OM seeds, averaged."""

    name = "bo"
    #: manifest parameters (``spec.policies.am.params``) and their defaults as used by the control loop: the
    #: tuning (BO budget, validation; level ``am`` of :mod:`policies.options`) and, as for naive, the per-period
    #: arbitration and the guard (level ``loop``). The constructor's own defaults are the library's (tests,
    #: harnesses); the control loop passes the resolved options.
    DEFAULTS: dict[str, Any] = option_defaults("am", "bo")

    @classmethod
    def validate_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Merge manifest ``params`` over :data:`DEFAULTS`; raise ValueError("params.<name>: reason")."""
        return validate_options("am", cls.name, params)

    def __init__(
        self,
        app: Application,
        node_types: tuple[NodeType, ...],
        om_factory: OMFactory,
        eta_v: float = 0.05,
        eta_r: float = 0.10,
        n_bo: int = 25,
        max_rounds: int = 2,
        epsilon: float = 0.05,
        timeout_s: float = 240.0,
        bucket_capacity: float = 1.0,
        batching: bool = True,
        sim_steps: int | None = None,
        seed: int = 0,
        margin: float = 0.5,
        scale_in_reserve: float = 0.0,
        node_capacity: list[int] | None = None,
        replications: int = 1,
        validation_replications: int = 0,
        validate_top: int = 5,
        margin_r: float | None = None,
        validation_k: float = 1.0,
        validation_load: float = 1.0,
        validation_steps: int | None = None,
        fallback_top: int = 0,
        validation_phases: bool = False,
        guard: GuardParams | None = None,
        hold_scale_ins: bool = False,
        self_calibrating: bool = False,
    ) -> None:
        #: the simulated OMs calibrate themselves as the control loop's do (no rate range, model learned from
        #: the simulated operator's measurements; policies.calibration); False: the papers' given range and
        #: model (the AM benchmarks)
        self.self_calibrating = bool(self_calibrating)
        self.app = app
        self.node_types = tuple(node_types)
        app.check_feasible(self.node_types)
        self.om_factory = om_factory
        self.eta_v = check_budget("eta_v", eta_v)
        self.eta_r = check_budget("eta_r", eta_r)
        _int_at_least("n_bo", n_bo, 1, what="BO iteration count ")
        _int_at_least("max_rounds", max_rounds, 1)
        if not 0.0 <= epsilon < 1.0:
            raise ValueError(f"epsilon: must be in [0, 1), got {epsilon}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: must be > 0, got {timeout_s}")
        self.n_bo, self.max_rounds, self.epsilon, self.timeout_s = n_bo, max_rounds, epsilon, timeout_s
        self.bucket_capacity, self.batching = bucket_capacity, batching
        self.sim_steps, self.seed = sim_steps, seed
        if not 0.0 < margin <= 1.0:
            raise ValueError(f"margin: must be in (0, 1], got {margin}")
        self.margin = margin
        if margin_r is not None and not 0.0 < margin_r <= 1.0:
            raise ValueError(f"margin_r: must be in (0, 1], got {margin_r}")
        self.margin_r = margin if margin_r is None else margin_r
        self.scale_in_reserve = scale_in_reserve
        self.node_capacity = node_capacity  # nodes per type the application may use (e.g. from the IM)
        self.replications = _int_at_least("replications", replications, 1)
        self.validation_replications = _int_at_least("validation_replications", validation_replications, 0)
        self.validate_top = _int_at_least("validate_top", validate_top, 1)
        if not 0.0 <= validation_k < 10.0:
            raise ValueError(f"validation_k: must be in [0, 10) standard errors, got {validation_k}")
        if not 0.5 <= validation_load <= 2.0:
            raise ValueError(
                f"validation_load: must be in [0.5, 2] (factor on the rates), got {validation_load}"
            )
        self.validation_k, self.validation_load = validation_k, validation_load
        if validation_steps is not None:
            _int_at_least("validation_steps", validation_steps, 1, unit=" periods")
        self.validation_steps = validation_steps
        self.fallback_top = _int_at_least("fallback_top", fallback_top, 0)
        if not isinstance(validation_phases, bool):
            raise ValueError(f"validation_phases: must be true or false, got {validation_phases!r}")
        self.validation_phases = validation_phases
        if guard is not None and not isinstance(guard, GuardParams):
            raise ValueError(f"guard: must be GuardParams or None, got {guard!r}")
        self.guard = guard  # the run-time violation-budget guard, simulated with every candidate
        self.hold_scale_ins = bool(hold_scale_ins)
        #: (training cost $/h, margined-feasible, feasible at the full budgets, configuration, training
        #: violations %) of every evaluation
        self._candidates: list[tuple[float, bool, bool, AMConfiguration, float]] = []
        self.new_arbiter()  # validates the arbitration parameters
        self.configuration = AMConfiguration(naive_bounds(app), EQUAL_WEIGHTS)
        self.history: list[dict[str, Any]] = [{"event": "initial", "how": "naive Alg. 5, equal weights"}]
        self.evaluations = 0

    def new_arbiter(self) -> Arbiter:
        return Arbiter(
            self.eta_r,
            self.bucket_capacity,
            k_max=self.app.k_max,
            node_capacity=self.node_capacity,
            node_type_names=[t.name for t in self.node_types],
            batching=self.batching,
            scale_in_reserve=self.scale_in_reserve,
            hold_scale_ins=self.hold_scale_ins,
        )

    # ---- one candidate ------------------------------------------------------------------------------------
    def evaluate(
        self,
        config: AMConfiguration,
        obs: Observations,
        seed_offset: int = 0,
        replications: int | None = None,
        steps: int | None = None,
        phases: bool = False,
        horizon: int | None = None,
    ) -> dict[str, Any]:
        """Simulate ``config`` on the observed trace with the fitted models; the run's summary, averaged over
        ``replications`` runs with different OM seeds (a learning OM's outcome varies a lot from seed to seed).
        ``seed_offset`` > 0 selects held-out seeds (validation). OMs whose class says ``deterministic`` (their
        decisions do not depend on the seed, e.g. ``model-based``) run once: the simulator is deterministic too,
        so further runs would repeat the first (standard errors 0) -- unless ``phases``: run ``r`` of ``n`` then
        replays the observed rates from period ``r * len / n`` on (wrapping round), so the runs differ by the
        time of day at which the OMs start learning and the spread of their outcomes measures how much the
        configuration's violations depend on the phase of the load. ``horizon``: replay the (shifted) rates
        cyclically over this many periods."""
        runs = []
        n_runs = self.replications if replications is None else replications
        for rep in range(n_runs):
            rates = obs.rates
            if phases and rep:
                rates = np.roll(rates, -(rep * len(rates)) // n_runs)
            if horizon is not None:
                rates = np.resize(rates, horizon)
            oms = []
            for u in range(self.app.n):
                spec = self.app.operator_spec(u, self.node_types, float(config.bounds_s[u]), config.weights)
                spec.model = obs.models[u]
                if self.self_calibrating:
                    spec.rate_levels, spec.model_mode = None, "learn"
                om = self.om_factory(spec, self.seed + seed_offset + 1000 * rep + u)
                # continue from the running OM, under the candidate's bound and weights
                if obs.om_states is not None:
                    om.load_state(obs.om_states[u])
                    om.reconfigure(config.weights, float(config.bounds_s[u]))
                    om.forget_last_decision()
                oms.append(om)
            res = simulate_application(
                self.app,
                rates,
                self.node_types,
                oms=oms,
                arbiter=self.new_arbiter(),
                models=obs.models,
                steps=self.sim_steps if steps is None else steps,
                guard=None if self.guard is None else ViolationBudgetGuard(self.eta_v, self.guard),
            )
            runs.append(res.summary(self.eta_v, self.eta_r))
            if not phases and all(om.deterministic for om in oms):
                break
        self.evaluations += 1
        out = dict(runs[0])
        for key in (
            "avg_resource_cost",
            "violations_pct",
            "reconfigurations_pct",
            "avg_replicas",
            "wall_seconds",
        ):
            vals = np.array([r[key] for r in runs], dtype=float)
            out[key] = float(vals.mean())
            out[f"{key}_se"] = float(vals.std(ddof=1) / np.sqrt(len(vals))) if len(vals) > 1 else 0.0
        return out

    def _objective(
        self, summary: dict[str, Any], margin: float | None = None
    ) -> tuple[float, list[float], dict[str, Any]]:
        """(cost $/h, constraints <= 0 when violations <= margin * eta_V and reconfigurations <= margin * eta_R,
        info); ``margin`` defaults to the AM's."""
        m = self.margin if margin is None else margin
        m_r = self.margin_r if margin is None else margin
        cons = [
            summary["violations_pct"] / 100.0 - m * self.eta_v,
            summary["reconfigurations_pct"] / 100.0 - m_r * self.eta_r,
        ]
        info = {k: summary[k] for k in ("avg_resource_cost", "violations_pct", "reconfigurations_pct")}
        return summary["avg_resource_cost"], cons, info

    # ---- Alg. 4 ---------------------------------------------------------------------------------------------
    def optimise(self, obs: Observations) -> AMConfiguration:
        """Run Alg. 4 from the current configuration; apply and return the best configuration found (or keep the
        last good one and record why)."""
        start = time.perf_counter()
        cpu_start = time.process_time()
        deadline = start + self.timeout_s
        last_good = AMConfiguration(self.configuration.bounds_s.copy(), self.configuration.weights)
        record: dict[str, Any] = {
            "event": "optimise",
            "before": last_good.as_dict(self.app.names),
            "phases": [],
        }
        self._candidates = []
        try:
            current = AMConfiguration(last_good.bounds_s.copy(), last_good.weights)
            summary = self.evaluate(current, obs)
            cur_val, cur_cons, cur_info = self._objective(summary)
            self._remember(current, cur_val, cur_cons, summary)
            record["start"] = cur_info | {"feasible": _viol(cur_cons) <= 0}
            warm_val, warm_cons = cur_val, cur_cons
            if (
                obs.observed_violation_fraction is not None
                or obs.observed_reconfiguration_fraction is not None
            ):
                limit_v, limit_r = self._evidence_limits()
                record["warm_start_observed"] = {
                    "violation_fraction": obs.observed_violation_fraction,
                    "reconfiguration_fraction": obs.observed_reconfiguration_fraction,
                    "violation_limit": limit_v,
                    "reconfiguration_limit": limit_r,
                    "within_budgets": self._evidence_holds(obs),
                }
            n = self.n_bo
            for rnd in range(self.max_rounds):
                improved = False
                for phase in ("bounds", "weights"):
                    left = deadline - time.perf_counter()
                    if left <= 0:
                        raise TimeoutError(f"timeout of {self.timeout_s:.0f} s reached before phase {phase}")
                    res = self._phase(phase, current, obs, n, left, rnd)
                    record["phases"].append(
                        {
                            "round": rnd,
                            "phase": phase,
                            "evaluations": res.evaluations,
                            "stopped": res.stopped,
                            "best_value": res.value,
                            "best_feasible": res.feasible,
                        }
                    )
                    if _better(res.value, res.constraints, cur_val, cur_cons):
                        cur_val, cur_cons = res.value, res.constraints
                        current = self._apply(phase, current, res.x)
                        improved = True
                    if res.stopped.startswith("timeout"):
                        raise TimeoutError(res.stopped)
                n = max(3, n // 2)
                if not improved:
                    break
            if self.validation_replications > 0:
                current, record["validation"] = self._validate(current, last_good, obs, deadline)
            elif current.as_dict() != last_good.as_dict():
                reason = self._incumbent_wins(obs, cur_val, cur_cons, warm_val)
                if reason:
                    current, record["kept_warm_start"] = last_good, reason
                    cur_val, cur_cons = warm_val, warm_cons
            self.configuration = current
            record.update(outcome="applied", feasible=_viol(cur_cons) <= 0, value=cur_val)
        except Exception as exc:  # noqa: BLE001 -- any failure must leave the AM with a working configuration
            reason = (
                self._incumbent_wins(obs, cur_val, cur_cons, warm_val) if "warm_val" in locals() else None
            )
            if (
                isinstance(exc, TimeoutError)
                and "current" in locals()
                and _viol(cur_cons) <= 0
                and not reason
            ):
                # the best configuration so far was evaluated and meets both budgets: it is a good one
                self.configuration = current
                record.update(outcome=f"applied best so far ({exc})", feasible=True, value=cur_val)
            else:
                self.configuration = last_good
                record.update(outcome=f"kept last good configuration: {type(exc).__name__}: {exc}")
                if reason:
                    record["kept_warm_start"] = reason
        record["after"] = self.configuration.as_dict(self.app.names)
        record["seconds"] = time.perf_counter() - start
        record["cpu_seconds"] = time.process_time() - cpu_start
        self.history.append(record)
        return self.configuration

    def _incumbent_wins(
        self, obs: Observations, value: float, cons: list[float], warm_value: float
    ) -> str | None:
        """Without validation: why the warm start is kept instead of a configuration with training cost
        ``value`` ($/h) and constraints ``cons`` -- the warm start stayed within :meth:`_evidence_limits` over the
        observed window and the other one is not cheaper in training while meeting the margined budgets there;
        None otherwise."""
        if not self._evidence_holds(obs):
            return None
        if _viol(cons) <= 0 and value < warm_value - 1e-12:
            return None
        return self._evidence_reason(obs)

    def _evidence_limits(self) -> tuple[float, float]:
        """The violation and reconfiguration fractions (each in [0, 1]) the warm start must have stayed within
        over the observed window to count as validated: eta_V and eta_R divided by ``validation_load`` -- the
        headroom the simulator's validation demands for a busier future (a load below 1 counts as 1)."""
        load = max(1.0, self.validation_load)
        return self.eta_v / load, self.eta_r / load

    def _evidence_holds(self, obs: Observations) -> bool:
        """True when ``obs`` says the warm start stayed within :meth:`_evidence_limits` over the observed window."""
        return obs.warm_start_within(*self._evidence_limits())

    def _evidence_reason(self, obs: Observations) -> str:
        """Why the warm start counts as validated, with the thresholds used (percent)."""
        load = max(1.0, self.validation_load)
        limit_v, limit_r = self._evidence_limits()
        return (
            f"warm start met the budgets in the observed window: {obs.observed_note()} (within eta_V / {load:g} = "
            f"{100.0 * limit_v:.2f}%, eta_R / {load:g} = {100.0 * limit_r:.2f}%)"
        )

    def _phase(
        self, phase: str, current: AMConfiguration, obs: Observations, n: int, timeout: float, rnd: int
    ) -> BOResult:
        r_max = self.app.r_max_s
        if phase == "bounds":
            domain: PathSumDomain | SimplexDomain = PathSumDomain(self.app.path_matrix(), self.epsilon)
            x0 = current.bounds_s / r_max
        else:
            domain = SimplexDomain(3)
            w = current.weights
            x0 = np.array([w.perf, w.res, w.rcf])

        def objective(x: np.ndarray) -> tuple[float, list[float], dict[str, Any]]:
            config = self._apply(phase, current, x)
            summary = self.evaluate(config, obs)
            value, cons, info = self._objective(summary)
            self._remember(config, value, cons, summary)
            return value, cons, info

        return minimize_constrained(
            objective,
            domain,
            n,
            x0=[x0],
            n_init=3,
            seed=self.seed + 17 * rnd + (phase == "weights"),
            timeout_s=timeout,
        )

    def _remember(
        self, config: AMConfiguration, value: float, cons: list[float], summary: dict[str, Any]
    ) -> None:
        _, full, _ = self._objective(summary, margin=1.0)
        self._candidates.append(
            (value, _viol(cons) <= 0, _viol(full) <= 0, config, summary["violations_pct"])
        )

    def _validate(
        self, chosen: AMConfiguration, last_good: AMConfiguration, obs: Observations, deadline: float
    ) -> tuple[AMConfiguration, list[dict[str, Any]]]:
        """Re-run, with ``validation_replications`` held-out OM seeds on the observed rates times
        ``validation_load`` (replayed cyclically over ``validation_steps`` periods when given; with
        ``validation_phases`` run ``r`` starts at period ``r * len / validation_replications``), the warm start
        (always), the chosen configuration and the cheapest candidates (in training) that met the margined
        budgets, then those that met the full budgets (``validate_top`` in all besides the warm start). A
        configuration passes when its mean violations and reconfigurations plus ``validation_k`` standard errors
        (over the held-out runs) are within the full budgets; the cheapest one that passes (mean validation
        cost, $/h) is applied -- so an incumbent that already passes is never replaced by a costlier
        configuration. The warm start also passes when ``obs`` says that it stayed within both budgets divided by
        ``validation_load`` in reality over the observed window (``reason``, with the thresholds, and
        ``simulator_meets_budgets`` in its record). When none passes, up to
        ``fallback_top`` more candidates, those with the fewest violations in training, are validated the same
        way; when still none passes, the one closest to passing. Returns it and what was checked."""
        keys = lambda c: c.as_dict()  # noqa: E731 -- configurations compare by their rounded values
        ordered: list[AMConfiguration] = [last_good]
        ranked = sorted(self._candidates, key=lambda c: (not c[1], not c[2], c[0]))
        for config in [chosen] + [c[3] for c in ranked if c[1] or c[2]]:
            if len(ordered) > self.validate_top:
                break
            if keys(config) not in [keys(o) for o in ordered]:
                ordered.append(config)
        held_out = Observations(obs.rates * self.validation_load, obs.models, om_states=obs.om_states)
        # replay the observed window cyclically over the horizon
        horizon = self.validation_steps if self.validation_steps is not None else len(obs.rates)
        checked: list[dict[str, Any]] = []
        passing: list[tuple[float, int, AMConfiguration]] = []
        closest: list[tuple[float, float, AMConfiguration]] = []

        def check(config: AMConfiguration) -> None:
            summary = self.evaluate(
                config,
                held_out,
                seed_offset=7919,
                replications=self.validation_replications,
                steps=horizon,
                phases=self.validation_phases,
                horizon=horizon,
            )
            k = self.validation_k
            upper = {
                "violations_pct": summary["violations_pct"] + k * summary.get("violations_pct_se", 0.0),
                "reconfigurations_pct": summary["reconfigurations_pct"]
                + k * summary.get("reconfigurations_pct_se", 0.0),
                "avg_resource_cost": summary["avg_resource_cost"],
            }
            value, cons, _ = self._objective(upper, margin=1.0)
            ok = _viol(cons) <= 0
            entry = {
                k: summary[k] for k in ("avg_resource_cost", "violations_pct", "reconfigurations_pct")
            } | {
                "violations_upper_pct": upper["violations_pct"],
                "reconfigurations_upper_pct": upper["reconfigurations_pct"],
                "meets_budgets": ok,
                "periods": summary["steps"],
                "warm_start": config is last_good,
                "fallback": len(checked) >= len(ordered),
                "config": config.as_dict(self.app.names),
            }
            if config is last_good and not ok and self._evidence_holds(obs):
                # reality beats the fitted simulator: the incumbent ran within both budgets (with the validation
                # headroom) over the observed window
                ok = entry["meets_budgets"] = True
                entry["simulator_meets_budgets"] = False
                entry["reason"] = self._evidence_reason(obs)
            checked.append(entry)
            if ok:
                passing.append((value, len(checked), config))
            else:
                closest.append((_viol(cons), value, config))

        for config in ordered:
            if checked and time.perf_counter() > deadline:
                break
            check(config)
        if not passing and self.fallback_top > 0:
            seen = [keys(o) for o in ordered]
            for c in sorted(self._candidates, key=lambda c: (c[4], c[0])):
                if len(checked) >= len(ordered) + self.fallback_top or time.perf_counter() > deadline:
                    break
                if keys(c[3]) not in seen:
                    seen.append(keys(c[3]))
                    check(c[3])
        if passing:
            return min(passing, key=lambda p: p[:2])[2], checked
        return (min(closest, key=lambda c: c[:2])[2] if closest else chosen), checked

    def _apply(self, phase: str, current: AMConfiguration, x: np.ndarray) -> AMConfiguration:
        if phase == "bounds":
            return AMConfiguration(np.asarray(x, dtype=float) * self.app.r_max_s, current.weights)
        w = np.asarray(x, dtype=float)
        w = w / w.sum()
        return AMConfiguration(
            current.bounds_s.copy(), CostWeights(float(w[0]), float(w[1]), 1.0 - float(w[0]) - float(w[1]))
        )


def _viol(cons: list[float]) -> float:
    return float(sum(max(0.0, c) for c in cons))


def _better(value: float, cons: list[float], ref_value: float, ref_cons: list[float]) -> bool:
    """Feasible beats infeasible; among feasible the lower cost; among infeasible the smaller violation."""
    v, rv = _viol(cons), _viol(ref_cons)
    if v <= 0 and rv <= 0:
        return value < ref_value - 1e-12
    if v <= 0 or rv <= 0:
        return v <= 0
    return v < rv - 1e-12
