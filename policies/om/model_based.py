"""Model-based reinforcement learning with full backups [``model-based``] (paper 000, Alg. 1; paper 004, Sec. 6.2.2).

What it learns and what it knows
--------------------------------
- The rate-level transition matrix ``P[l, l']`` from counts of observed level transitions (a level never left
  is assumed to stay put). The rate process does not depend on the action, so the deployment part of the next
  state is known: ``k' = k + a``.
- The unknown cost, i.e. the probability ``v[c, l]`` of violating R_max per *performance class* ``c`` and rate
  level ``l`` (the sufficient statistic of the deployment, see below), monotone by construction: more capacity
  (more replicas, or a faster slowest type) never violates more, a higher rate never violates less. Two learners
  (``violation_model``):

  * ``threshold`` (default with round robin + worst replica): every replica receives ``lambda / n``, so the
    operator violates iff the per-replica rate exceeds a bound ``theta_s`` of its slowest speed ``s``. Each
    observation brackets it: a violation at per-replica rate ``x`` gives ``theta_s < x`` (and the same for every
    slower speed), none gives ``theta_s >= x`` (and for every faster speed). The estimate is the middle of the
    bracket, infinite (optimistic: the policy tries it) until a violation bounds it -- or, with
    ``capacity_bound``, until a measured utilisation does (below). ``v[c, l]`` is then the
    probability that a rate of level ``l`` exceeds ``n_c theta_s``, under the distribution of the rates observed
    in that level (histogram, 16 bins per level). One violation teaches every replica count at once: a few
    dozen violations over a whole trace.
  * ``counts``: observed violation frequencies per (class, level), projected on the monotone set (smallest
    monotone majorant; unobserved entries get what monotonicity forces, else 0 -- optimism again). Needs no
    queueing structure and tolerates noisy measurements; it learns more slowly.

  Optimism is the only exploration (no epsilon-greedy, as in paper 004).
- ``capacity_bound`` (off by default: the papers' simulator experiments learn from violations only): a sustained
  per-replica rate above the replica's capacity builds an unbounded queue, so ``theta_s <= capacity``, and the
  measured utilisation ``u`` (busy fraction) at per-replica rate ``x`` (tuples/s) estimates the capacity before
  any violation. Two estimates, the larger wins (see :func:`capacity_estimates`): ``x / u`` (largest seen with
  ``u >= CAPACITY_MIN_UTILISATION``; an underestimate when the engine has a fixed per-batch overhead, as Spark's
  micro-batches do) and, once the observed rates spread enough, the rate at which the least-squares line
  ``u = a + b x`` reaches 1, which separates the overhead ``a`` from the per-tuple cost ``b``. The estimate closes
  the bracket from above: the policy starts near half the estimated capacity and moves up as periods without
  violation raise ``lo``, instead of scaling in until the first violation -- on real engines a violation leaves
  a backlog that takes several periods to drain. An estimate that a period without violation contradicts
  (``lo >= capacity``) is ignored; violations bound ``theta`` as before. A period busy all the time (``u >= 1``)
  does not raise ``lo`` even without a violation: its queue is growing and the violation comes later. Nor does it
  measure the capacity: ``x`` is the arrival rate, which then exceeds what the replica processes, so ``x / u``
  would overstate the capacity (a period 100 % busy at 60 tuples/s arriving read as a capacity of 60 on a
  Spark executor that processed 38).
  Two more real-engine rules come with it. *Settling*: the period in which the deployment changed teaches no
  bound (like the Flink autoscaler's stabilisation interval): a new replica starts cold and, on Spark, the
  stateful partitions move to it, so the period's throughput says nothing about the new deployment's capacity
  (seen on Spark: 2 executors read 21 tuples/s each in the period after the second one was added, against ~40
  once warm, and that single reading made every deployment look hopeless). *No scale-in under overload*: while
  the operator violates its bound or is busy all the time, actions that remove replicas are not proposed -- when
  the learned model expects every deployment to violate, the cost model alone would pick the cheapest one, and
  a backlog only grows under fewer replicas.
- ``multi_step`` (off by default: the papers' actions add or remove one replica per period): the policy may also
  propose a *multi-replica step* (``policies.base.JUMP``), any deployment of the space in one reconfiguration,
  when the one-step look-ahead values it below every one-replica action. This is what a one-replica-per-period
  policy cannot do: follow a step or a steep ramp in one reconfiguration instead of several, and leave a slow
  node type it scaled to ``K_max`` on (a change of type would take two reconfigurations per replica, through
  deployments of less capacity). A step keeps the node types in place and the type the best one-replica action
  would bring (new types need new nodes, and hopping between types of about equal value churns), except under
  overload when no deployment of those types is expected to meet the bound (at ``K_max``, or a slow type in
  place caps every deployment's class). A
  step that removes capacity (sum of speedups) goes only to a deployment whose per-replica rate at the top of
  this rate level and the next one up was seen without violation (``threshold`` model): evidence, not the
  optimism of an unexplored model (which would read "nothing violates" and drop to one replica).
- ``trend_periods`` (off by default): plan for the rate a rising trend reaches when a scale-out proposed now
  would take effect, ``rate + slope x min(lead, run)`` (:mod:`policies.forecast`): the slope is the smallest of the
  last ``trend_periods`` increments when the rate rose in each of them, the lead the periods the operator's own
  recent scale-outs took to become capacity (a node being provisioned, a token). While the rate rises, no
  replica is removed. A multi-replica step that waits (for nodes or a token) stays the plan while it still
  qualifies, with or without a trend: switching between targets of about equal value restarted the wait.
- ``engine_model`` (``auto`` by default; ``off``): when the observations carry a micro-batch engine's batch
  measurements (Spark), a :class:`policies.engine_model.MicroBatchModel` is fitted from them every period, and once
  it is ready (two executor counts, or ``MIN_SAMPLES`` periods) it replaces the threshold learner's linear
  per-replica bound: each class carries the largest rate whose predicted response time meets R_max (waves of
  tasks, per-batch overhead). With ``multi_step``, a backlog that one more replica would not drain within a period
  asks for the smallest deployment that drains it (:mod:`policies.om.engine_plan`). The fit and its error are in
  the agent state and the explanation (``engine_model``). Without those measurements nothing changes.
- ``restart_aware`` (on by default; acts only with ``capacity_bound`` and a measured downtime): on an engine whose
  changes stop the job (Flink rescales by restart; ``Observation.restart_s`` is the downtime the connector
  measured for the application's latest change, ``period_s`` the period), two rules. *Settling through the
  catch-up*: a change with downtime ``D`` on periods of ``P`` s settles ``ceil(D / P)`` more periods, since the
  ``D`` seconds of arrivals are still being worked off in them (a catch-up violation read as a per-replica
  bound sent a 5 -> 4 scale-in back to 5). *Scale-in to what drains the restart*: a scale-in goes only to a
  class whose measured capacity ``n c`` (tuples/s) works the restart's backlog ``rate x D`` off within one
  period after it, ``n c >= rate (1 + D / P)``; the reason of a withheld one is in the explanation
  (``settling``). Both sides are read cautiously: ``rate`` is the largest of the latest ``restart_rate_window``
  rates measured outside a settling (3 by default), and ``c`` the pooled ``sum x / sum u``
  (:func:`typical_capacity`), not the largest single ratio. On the engine fitted from a Flink run with 5 % noise
  on the measured rates, one low reading before a rise had passed the check and the restart's catch-up then
  violated: over twelve seeds 7 reversed scale-ins, violations median 11 % (worst 18 %); with both, none and
  6 % (9 %), at 1 % fewer slot-seconds (``tests/connectors/flink/test_bench_closed_loop.py``). The settling
  follows a change of any operator of the application (``Observation.periods_since_change``): Flink restarts
  the whole job, so an operator that did not change also catches up; and within that catch-up it
  proposes no scale-out when its measured capacity works the backlog off within a period at the rate it measured
  before (the catch-up's input and busy time are not the load to carry; in the closed loop on Flink's fitted
  engine two operators had scaled out on each other's catch-ups, each restart starting another).
  With live changes (downtime 0: Spark's executors, the simulator) nothing changes. On a
  second-by-second restart engine (``tests/policies/test_model_based_restart.py``, 9-13 s restarts on 10-s
  periods) it took the reversals from 4 to 0, the violated periods from 32-34 to 19-24 and the replica-periods
  from ~425 to 304-374.
- The known costs exactly: resource cost ``w_res price(k) / C_max`` and reconfiguration ``w_rcf 1[a != 0]``.
- Value iteration over the learned model: a full sweep (backup of every state, Alg. 1) every ``sweep_every``
  steps and at each of the first ``warmup_steps`` steps; in between, every step, an asynchronous backup of the
  deployments within ``local_radius`` actions of the current one (with the periodic full sweeps this converges
  to the same fixed point). The greedy decision re-evaluates the one-step look-ahead with this step's estimates.

Self-calibration (:mod:`policies.calibration`)
----------------------------------------------
The policy needs no service-time model: the per-replica bounds ``theta`` are learned in tuples/s, not per level,
so a growing rate range leaves them as they are; when the range grows, the level counts, the visit/violation
counts and the rate histogram are summed onto the new (nested) levels, the violation model recomputed and the
values re-solved (``reconfigure_sweeps`` sweeps, from the old values averaged as a warm start). Before this, a
rate above the top of the fixed range fell into the top level's histogram, which ends ``TOP_SPAN_LEVELS`` level
widths above it: the policy planned for that rate and stopped adding replicas (issue 20). The learned service
time (``spec.model_mode`` hint/learn) is not used here: the policy's own threshold learner is the papers'.

Scaling to 10 node types and K_max = 20
---------------------------------------
The full space has ~30 million deployments x 30 levels; the formulation here has 8,750 deployments x 30 levels
(2.1 MB per value table): the whole Taxi trace takes 57 CPU-seconds and 169 MiB peak (3 types, K_max 10:
50 CPU-s, 122 MiB; the authors' implementation: 62 CPU-s), see the ``model-based`` section of
``docs/benchmarks.md``. Three observations make it exact where it matters:

1. *Sufficient statistic of the unknown cost.* With round-robin balancing and the worst-replica response time,
   each replica receives lambda/n and the slowest type is the worst, so the response time of ``k`` depends only
   on ``(n = sum k, slowest type present)``: 20 x 10 = 200 classes. The violation model is learned per
   (class, level) -- 6,000 numbers -- and every deployment shares the statistics of its class. (Other queueing
   models make every deployment its own class and need the full space, which is fine for small N_res.)
2. *Dominance of mixed deployments.* The price is additive and non-decreasing in speed on every paper
   infrastructure, so a deployment mixing types has the performance of ``n`` replicas of its slowest type and
   costs at least as much: it is only worth holding while moving from one type to another. The policy works on
   the deployments that mix at most two types (``max_mixed_types``), which contain every such move between two
   homogeneous deployments. The actions stay the paper's (add/remove one replica of one type per period); those
   that would leave the space are not proposed.
3. *Exactness check.* Restricting the actions can only raise the optimal values; if the full problem's optimal
   policy, started from one replica, never leaves the restricted space, the two problems have the same values on
   every state that policy reaches. ``tests/policies/test_dp_optimality.py`` solves both problems with the true
   model on small instances (3 types with K_max 6 and 10, 4 types with K_max 8; infrastructures A and B) and
   asserts exactly this; on the
   Taxi model the optimal policy visits at most 8 deployments even with 10 types (K_max 6 and 8, checked
   offline), all within two types.

Small instances (``count_deployments <= FULL_SPACE_LIMIT``, e.g. the paper's 3 types, K_max 10: 285 deployments)
use the full space, exactly as the authors' algorithm.

Cost of a full sweep: one (D x L) @ (L x L) product, one gather per in-space action and an elementwise minimum,
O(E L) with E ~ 45,000 (deployment, action) edges for 10 types and K_max 20 (~5 ms). With ``sweep_every = 0`` the
period between full sweeps is chosen so that at most ``SWEEP_BUDGET`` edge-level backups are done per step on
average (every 4 steps for 3 types and K_max 10, every 87 for 10 types and K_max 20); ``sweep_every = 1`` is
the authors' schedule (a full sweep every step).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from policies import forecast
from policies.base import JUMP, Observation, Policy, Proposal, apply_action
from policies.engine_model import MicroBatchModel
from policies.om import engine_plan, mdp
from policies.operator_model import OperatorSpec, QueueModel, mg1_max_rate

# ---- hyperparameters (paper defaults; CleanRL style) ------------------------------------------------------------
SWEEP_EVERY = 0  # steps between value-iteration sweeps; 0 = automatic from the size of the space
SWEEPS_PER_UPDATE = 1  # full backups per update (Alg. 1: one)
WARMUP_STEPS = 1000  # sweep at every step during the first steps, whatever sweep_every says
SWEEP_BUDGET = 15_000  # automatic sweep_every: average (edge x level) backups per step of the full sweeps
LOCAL_RADIUS = 1  # between full sweeps (sweep_every > 1), back up every step the deployments this close to k
MAX_MIXED_TYPES = 0  # deployments mixing more node types are left out; 0 = automatic (full space when small)
FULL_SPACE_LIMIT = 5_000  # automatic: use the full deployment space up to this many deployments
RECONFIGURE_SWEEPS = 300  # sweeps run at once after a new R_max (the violation model was partly forgotten)
REWEIGHT_SWEEPS = 30  # sweeps run at once after new weights only, from the values in place (a warm start)
VIOLATION_MODEL = (
    "auto"  # "threshold" (per-replica rate bound per speed), "counts" (frequencies); auto: threshold
)
#                           when the classes are (replicas, slowest type), i.e. round robin + worst replica
HIST_BINS_PER_LEVEL = 16  # resolution of the learned rate distribution inside each level
TOP_SPAN_LEVELS = 32  # the top level's histogram covers this many level widths above its lower edge
CAPACITY_BOUND = False  # bound theta by the capacity measured from utilisation (see the module doc)
MULTI_STEP = False  # may reconfigure to any deployment in one step (beyond the papers; see the module doc)
TREND_PERIODS = 0  # rises in a row that make a trend to plan ahead on (policies.forecast); 0 = off
ENGINE_MODEL = "auto"  # plan on a micro-batch engine model when batches are measured (module doc); "off"
# with capacity_bound, on an engine whose changes stop the job (a measured downtime): settle through the restart's
# catch-up and scale in only to what drains the restart's backlog within a period (module doc, restart_aware)
RESTART_AWARE = True
# with restart_aware: the restart-drain check of a scale-in plans for the largest rate of this many latest periods
# outside a change's settling (control periods; 1 = the latest only), not for the latest alone (module doc)
RESTART_RATE_WINDOW = 3
# brackets of theta carried across speeds in proportion to the speed (speed_scaled_brackets; predictive's default)
SPEED_SCALING = False
CAPACITY_MIN_UTILISATION = 0.3  # utilisation below which x / u is too uncertain to bound theta
CAPACITY_FIT_MIN_PERIODS = 3  # periods before the line u = a + b x is trusted
CAPACITY_FIT_MIN_SPREAD = 0.2  # ... and their rates x spread by this fraction of the mean (std / mean)
DELAY_FIT_MIN_PERIODS = 5  # periods under load before the delay line y = a + v w gets its own intercept
DELAY_FIT_MIN_SPREAD = 0.2  # ... and their M/G/1 shapes w spread by this fraction of the mean (std / mean)


def choose_max_types(spec: OperatorSpec, max_mixed_types: int) -> int | None:
    """The ``max_types`` of the deployment space: ``None`` (full) when small or asked for, else 2 by default."""
    if max_mixed_types > 0:
        return None if max_mixed_types >= spec.n_res else max_mixed_types
    if mdp.count_deployments(spec.n_res, spec.k_max, spec.k_min) <= FULL_SPACE_LIMIT:
        return None
    return 2


class ModelBased(Policy):
    """Model-based RL with full backups over a learned rate-transition matrix and a learned violation model."""

    name: ClassVar[str] = "model-based"
    _explains: ClassVar[bool] = True
    deterministic: ClassVar[bool] = True  # no exploration, no random tie-breaking: the seed changes nothing
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "sweep_every": SWEEP_EVERY,
        "sweeps_per_update": SWEEPS_PER_UPDATE,
        "warmup_steps": WARMUP_STEPS,
        "max_mixed_types": MAX_MIXED_TYPES,
        "reconfigure_sweeps": RECONFIGURE_SWEEPS,
        "reweight_sweeps": REWEIGHT_SWEEPS,
        "violation_model": VIOLATION_MODEL,
        "local_radius": LOCAL_RADIUS,
        "capacity_bound": CAPACITY_BOUND,
        "multi_step": MULTI_STEP,
        "trend_periods": TREND_PERIODS,
        "engine_model": ENGINE_MODEL,
        "speed_scaling": SPEED_SCALING,
        "restart_aware": RESTART_AWARE,
        "restart_rate_window": RESTART_RATE_WINDOW,
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        for key in (
            "sweep_every",
            "warmup_steps",
            "max_mixed_types",
            "reconfigure_sweeps",
            "reweight_sweeps",
            "local_radius",
            "trend_periods",
        ):
            if params[key] < 0:
                raise ValueError(f"params.{key}: must be >= 0, got {params[key]}")
        if params["violation_model"] not in ("auto", "threshold", "counts"):
            raise ValueError(
                f"params.violation_model: must be auto, threshold or counts, got {params['violation_model']!r}"
            )
        if not isinstance(params["multi_step"], bool):
            raise ValueError(f"params.multi_step: must be true or false, got {params['multi_step']!r}")
        if not isinstance(params["capacity_bound"], bool):
            raise ValueError(
                f"params.capacity_bound: must be true or false, got {params['capacity_bound']!r}"
            )
        if not isinstance(params["restart_aware"], bool):
            raise ValueError(f"params.restart_aware: must be true or false, got {params['restart_aware']!r}")
        if params["restart_rate_window"] < 1:  # its type checked by Policy (an integer)
            raise ValueError(f"params.restart_rate_window: must be >= 1, got {params['restart_rate_window']}")
        if not isinstance(params["speed_scaling"], bool):
            raise ValueError(f"params.speed_scaling: must be true or false, got {params['speed_scaling']!r}")
        if params["engine_model"] not in ("auto", "off"):
            raise ValueError(f"params.engine_model: must be auto or off, got {params['engine_model']!r}")
        if params["sweeps_per_update"] < 1:
            raise ValueError(f"params.sweeps_per_update: must be >= 1, got {params['sweeps_per_update']}")

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        self.space = mdp.build_space(spec, choose_max_types(spec, self.params["max_mixed_types"]))
        n_levels = self.levels.n
        n_edges = len(self.space.edge_src)
        every = self.params["sweep_every"]
        self.sweep_every = every if every > 0 else max(1, math.ceil(n_edges * n_levels / SWEEP_BUDGET))
        self.trans_counts = np.zeros((n_levels, n_levels))
        self.visits = np.zeros((self.space.n_classes, n_levels))
        self.violations = np.zeros((self.space.n_classes, n_levels))
        self.v_hat = np.zeros((self.space.n_classes, n_levels))
        mode = self.params["violation_model"]
        self.threshold_mode = self.space.grid and mode != "counts"
        if mode == "threshold" and not self.space.grid:
            raise ValueError(
                "params.violation_model: 'threshold' needs round-robin balancing and worst replica"
            )
        n_speeds = self.space.grid_shape[1]
        self.thr_lo = np.zeros(n_speeds)  # largest per-replica rate (tuples/s) seen without violation
        self.thr_hi = np.full(n_speeds, np.inf)  # smallest per-replica rate seen with a violation
        # per class: the smallest rate (tuples/s) seen violating on it, until it meets the bound at that rate or
        # above (the evidence that bounds the engine model's plan, ``_threshold_model``)
        self.class_viol = np.full(self.space.n_classes, np.inf)
        # per speed rank: periods, sum x, sum u, sum x^2, sum x u, max x / u (capacity_bound; x in tuples/s)
        self.cap_stats = np.zeros((n_speeds, 6))
        # periods, sum w, sum y, sum w^2, sum w y of the delay fit y = a + v w (capacity_bound; queueing_delay_fit)
        self.delay_stats = np.zeros(5)
        # (sum w y, sum w^2) of a state saved before the fit had an intercept: its variability until the new fit
        # has DELAY_FIT_MIN_PERIODS periods
        self.delay_legacy: np.ndarray | None = None
        self.rate_hist = np.zeros(HIST_BINS_PER_LEVEL * (n_levels - 1 + TOP_SPAN_LEVELS))
        self.future = np.zeros((self.space.size, n_levels))  # min_a [rcf + gamma E V(next)], per (d, l)
        self.sweeps_done = 0
        self.trend = forecast.RateTrend(self.params["trend_periods"])
        self.lead = forecast.LeadTime()
        self._forecast_note: dict[str, Any] | None = None  # the explanation of this step's planned rate
        self._frugal_note: dict[str, Any] | None = None  # the explanation of a step chosen under a node limit
        self._settle_note: dict[str, Any] | None = None  # a scale-in withheld for its settling (engine model)
        self._waiting_jump: np.ndarray | None = None  # the last step proposed (kept while it waits)
        # periods after a restart-based change that still teach no bound (restart_aware)
        self._settle_left = 0
        # the rates (tuples/s) of the latest restart_rate_window periods outside a change's settling, oldest first:
        # the restart-drain check plans for their largest, the catch-up hold for the latest (_steady_rate)
        self._steady_rates: list[float] = []
        self.engine = MicroBatchModel()  # engine_model: fitted from micro-batch measurements
        self._engine_ctx: engine_plan.EngineContext | None = None  # interval, partitions, period last seen
        self._engine_note: dict[str, Any] | None = None  # this step's backlog step, for the explanation
        self._model_key = self._current_key()
        self._refresh_derived()

    # ---- model estimates -----------------------------------------------------------------------------------
    def _current_key(self) -> list[float]:
        w = self.spec.weights
        return [w.perf, w.res, w.rcf, self.spec.r_max_s]

    def _refresh_derived(self) -> None:
        """Everything computed from the counts, the weights and the space (not stored in the state)."""
        self.p_hat = mdp.transition_matrix(self.trans_counts)
        self._res_cost = (self.spec.weights.res / self.spec.cost_scale) * self.space.price
        self._sweeper = mdp.Sweeper(self.space, self.levels.n)
        self._bin_width = self.levels.width / HIST_BINS_PER_LEVEL
        self._cost: np.ndarray | None = None
        n_speeds = self.space.grid_shape[1]
        self._class_rank = np.arange(self.space.n_classes) % n_speeds
        self._columns: tuple[np.ndarray, ...] | None = None  # per-deployment columns of _best_jump
        self._thresholds: np.ndarray | None = None  # n_c theta_s per class (tuples/s), from the brackets
        # per class, the rate (tuples/s) the engine model carries, as _thresholds was last computed from (None when
        # the engine model did not plan then)
        self._engine_carried: np.ndarray | None = None
        # levels whose rate histogram changed since v_hat was last computed: all of them after a restore (the
        # saved v_hat may predate the last rates)
        self._dirty_levels = np.ones(self.levels.n, dtype=bool)

    def _threshold_model(self) -> None:
        """v_hat[c, l] = P(rate > n_c theta_s | level l) with the learned per-replica bound theta of the class's
        slowest speed and the learned distribution of the rates inside each level.

        Only what is stale is recomputed: every level after the bounds changed (``_thresholds`` is None), else
        the levels that received a rate since the last refresh -- their columns come out exactly as a full
        recomputation would give them (:func:`level_exceedance`)."""
        if self._thresholds is None:
            engine = self._engine_thresholds()
            self._engine_carried = engine
            if engine is None:
                lo, hi = self.brackets()
                theta = per_replica_bounds(lo, hi, self._queueing_guess())
                self._thresholds = self.space.class_n * theta[self._class_rank]
            else:
                # the engine model plans, but below the rates at which the operator's deployments violated: a
                # fit made on quick batches keeps promising their speed through periods in which no batch
                # finishes (nothing to refit from; on Spark under load it held 3 executors at 130 tuples/s
                # through 8 violated periods)
                self._thresholds = np.minimum(engine, np.nextafter(self._violated_rates(engine), -np.inf))
            self._dirty_levels[:] = True
        cols = np.flatnonzero(self._dirty_levels)
        if len(cols) == 0:
            return
        new = level_exceedance(self._thresholds, self.rate_hist, self.levels, cols)
        self._dirty_levels[:] = False
        if not np.array_equal(new, self.v_hat[:, cols]):
            self.v_hat[:, cols] = new
            self._cost = None

    def _violated_rates(self, capacity: np.ndarray | None = None) -> np.ndarray:
        """Per class, the smallest rate (tuples/s) seen violating on it or on a class of the same speed with at
        least its capacity (a class with no more capacity violates there too); ``inf`` where none did. Capacity:
        ``capacity`` per class (the engine model's rates: 5 and 6 executors on 8 partitions are worth 4, so a
        violation on 5 bounds 6 as well), else the replicas."""
        out = self.class_viol.copy()
        rank = self._class_rank
        size = self.space.class_n if capacity is None else capacity
        for c in range(len(out)):
            same = (rank == rank[c]) & (size >= size[c] - 1e-9)
            out[c] = self.class_viol[same].min()
        return out

    def brackets(self) -> tuple[np.ndarray, np.ndarray]:
        """Per speed rank, the bracket ``[lo, hi)`` (tuples/s) of the per-replica bound theta learned so far; with
        ``speed_scaling``, carried across speeds in proportion to the speed (:func:`speed_scaled_brackets`)."""
        lo, hi = self.thr_lo, self._upper_bounds()
        if self.params["speed_scaling"]:
            lo, hi = speed_scaled_brackets(lo, hi, np.unique(self.spec.speedups))
        return lo, hi

    def _upper_bounds(self) -> np.ndarray:
        """Upper ends of the theta brackets: violations, and measured capacities that no period without
        violation contradicts."""
        capacity = self._replica_capacity()
        cap = np.where(capacity > self.thr_lo, capacity, np.inf)
        return np.minimum(self.thr_hi, cap)

    @property
    def _steady_rate(self) -> float:
        """The rate (tuples/s) of the latest period outside a change's settling (the catch-up hold's reference);
        0 before any."""
        return self._steady_rates[-1] if self._steady_rates else 0.0

    def _replica_capacity(self, typical: bool = False) -> np.ndarray:
        """Per speed rank, the per-replica capacity (tuples/s) measured from utilisation, carried to the speeds
        not measured (:func:`capacity_estimates`, :func:`scaled_to_unmeasured_speeds`; ``inf`` without any).
        ``typical``: no more than what the replicas processed per busy second over all measured periods
        (:func:`typical_capacity`), for the checks that must not be optimistic."""
        capacity = capacity_estimates(self.cap_stats)
        if typical:
            capacity = np.minimum(capacity, typical_capacity(self.cap_stats))
        return scaled_to_unmeasured_speeds(capacity, np.unique(self.spec.speedups))

    def per_replica_bound(self) -> np.ndarray:
        """Per speed rank, the per-replica rate (tuples/s) an M/G/1 replica of the measured capacity serves within
        R_max (:meth:`_queueing_guess`; ``inf`` without a measured capacity): for inspection."""
        return self._queueing_guess()

    def _queueing_guess(self) -> np.ndarray:
        """Per speed rank, the per-replica rate (tuples/s) at which an M/G/1 queue served at the measured capacity
        ``c``, with the service variability learned from the operator's own response times
        (:func:`queueing_variability`), reaches the bound (:func:`mg1_rate_bound`; ``inf`` without a measured
        capacity, i.e. without ``capacity_bound``). Until response times under load are measured the variability
        is exponential service's (M/M/1: ``c - 1 / R_max``), the conservative choice for the less variable
        services of stream operators. Inside the bracket the guess replaces the midpoint, which with no period
        seen within the bound (``lo = 0``: an operator overloaded from its first period) halves the capacity and
        makes the policy find every deployment too small, and which on a ramp to the bound sat above the true
        bound (bench_loop's ramp: a bracket [115.6, 123.6) tuples/s per replica around a true 116.3, one
        period violated)."""
        capacity = self._replica_capacity()
        variability, offset_s = self.delay_fit()
        return mg1_rate_bound(capacity, variability, max(self.spec.r_max_s - offset_s, 0.0))

    def delay_fit(self) -> tuple[float, float]:
        """The learned service variability ``v`` and latency offset ``a`` (s) of the operator's response times
        (:func:`queueing_delay_fit`; a state saved before the offset existed keeps its variability, offset 0, until
        the new fit has data)."""
        legacy = self.delay_legacy
        if legacy is not None and self.delay_stats[0] < DELAY_FIT_MIN_PERIODS and legacy[1] > 0.0:
            return queueing_variability(legacy), 0.0
        return queueing_delay_fit(self.delay_stats)

    def _project(self) -> None:
        """v_hat = smallest monotone majorant of the observed violation frequencies (0 where nothing forces)."""
        new = monotone_majorant(self.violations, self.visits, self.space)
        if not np.array_equal(new, self.v_hat):
            self.v_hat = new
            self._cost = None

    def _sweep(self, n: int) -> None:
        if self._cost is None:
            self._cost = self._state_cost()
        for _ in range(n):
            self.future = self._sweeper.sweep(
                self._cost, self.p_hat, self.future, self.spec.weights.rcf, self.spec.gamma
            )
        self.sweeps_done += n

    def _state_cost(self) -> np.ndarray:
        """cs[d, l] = w_perf v_hat[class(d), l] + w_res price(d) / C_max (D x L)."""
        cost = np.take(self.v_hat, self.space.cls, axis=0)
        cost *= self.spec.weights.perf
        cost += self._res_cost[:, None]
        return cost

    # ---- learning ------------------------------------------------------------------------------------------
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
        levels = self.levels
        rebound = False  # the per-replica bounds changed in this step (capacity_bound: re-solve more)
        if self.params["trend_periods"]:
            self.trend.observe(rate_prev, rate_now)
            self.lead.observed(self.t, self._capacity(k_now))
        l_prev, l_now = levels.level(rate_prev), levels.level(rate_now)
        self.trans_counts[l_prev, l_now] += 1.0
        row = self.trans_counts[l_prev]
        self.p_hat[l_prev] = row / row.sum()
        d = self.space.lookup(k_now)
        if self.threshold_mode:
            b = min(int(rate_now / self._bin_width), len(self.rate_hist) - 1)
            self.rate_hist[b] += 1.0
            self._dirty_levels[min(b // HIST_BINS_PER_LEVEL, levels.n - 1)] = True
            if d >= 0:
                c = int(self.space.cls[d])
                rank, n = int(self._class_rank[c]), int(self.space.class_n[c])
            else:
                rank, n = int(self.space.rank_of_type[k_now > 0].min()), int(k_now.sum())
            x = rate_now / n
            u = obs.utilisation if obs is not None else None
            # with capacity_bound, a period busy all the time (u >= 1) is not evidence that x is sustainable: its
            # queue is growing, and on a real engine the violation shows periods later (seen on Spark: 49
            # tuples/s on one executor 118 % busy, R 9 s, then 16-25 s)
            overloaded = self.params["capacity_bound"] and u is not None and u >= 1.0
            # with capacity_bound, the period in which the deployment changed is a transient (module doc), and
            # with restart_aware so are the periods after it that a restart's catch-up spans
            settling = self.params["capacity_bound"] and self._settling(k_prev, k_now, obs)
            if not settling:
                self._steady_rates.append(rate_now)  # in place: this runs every period of every operator
                del self._steady_rates[: -int(self.params["restart_rate_window"])]
            changed = False
            # a violation in a period without throughput (x = 0: a stalled or mis-measured period) says nothing
            # about the per-replica bound; taken as a bound it would read "every deployment violates" forever
            if not settling and violated and 0.0 < x < self.thr_hi[rank]:
                self.thr_hi[rank] = x
                changed = True
            elif not settling and not violated and not overloaded and x > self.thr_lo[rank]:
                self.thr_lo[rank] = x
                changed = True
            if d >= 0 and not settling and x > 0.0:
                if violated and rate_now < self.class_viol[c]:
                    self.class_viol[c] = rate_now
                    changed = True
                elif not violated and not overloaded and rate_now >= self.class_viol[c]:
                    self.class_viol[c] = np.inf  # met the bound where it had violated: the slowdown passed
                    changed = True
            processed = obs.processing_rate if obs is not None else None
            if (
                self.params["capacity_bound"]
                and not settling
                and u is not None
                and CAPACITY_MIN_UTILISATION <= u < 1.0
                and x > 0.0
            ):
                st = self.cap_stats[rank]
                st[:5] += (1.0, x, u, x * x, x * u)
                st[5] = max(st[5], x / u)
                rt = obs.response_time_s if obs is not None else None
                if rt is not None and math.isfinite(rt) and rt > 0.0:
                    # the queueing delay beyond one service time, against the M/G/1 shape u / (1 - u) of it
                    service = u / x
                    weight = service * u / (1.0 - u)
                    y = rt - service
                    self.delay_stats += (1.0, weight, y, weight * weight, weight * y)
                changed = True
            elif overloaded and not settling and processed is not None and 0.0 < processed < rate_now:
                # saturated: the arrivals overstate what a replica sustains, but what the replicas processed is
                # their capacity -- the point (capacity, u = 1) of the line u = a + b x. Without it an operator
                # saturated from its first period never measured a capacity and the policy waited for an
                # untried node type it believed infinitely fast.
                xp = processed / n
                st = self.cap_stats[rank]
                st[:5] += (1.0, xp, 1.0, xp * xp, xp)
                st[5] = max(st[5], xp)
                changed = True
            if changed:
                self._thresholds = None
                self._threshold_model()
                rebound = bool(self.params["capacity_bound"])
        elif d >= 0:
            c = self.space.cls[d]
            old_freq = self.violations[c, l_now] / self.visits[c, l_now] if self.visits[c, l_now] else -1.0
            self.visits[c, l_now] += 1.0
            self.violations[c, l_now] += 1.0 if violated else 0.0
            new_freq = self.violations[c, l_now] / self.visits[c, l_now]
            if new_freq != old_freq:
                self._project()
        step = self.t + 1
        if step <= self.params["warmup_steps"] or step % self.sweep_every == 0:
            # with capacity_bound, new per-replica bounds re-solve like new weights (reweight_sweeps): one sweep
            # per period left the values of the old bounds in place for a dozen periods, in which an overloaded
            # operator kept a deployment its own model already knew to violate
            if self.threshold_mode:
                self._threshold_model()  # the in-level rate distributions moved
            n = self.params["reweight_sweeps"] if rebound else self.params["sweeps_per_update"]
            self._sweep(max(n, self.params["sweeps_per_update"]))
        elif d >= 0 and self.params["local_radius"] > 0:
            if self._cost is None:
                self._cost = self._state_cost()
            w = self.spec.weights
            self._sweeper.sweep_local(
                d, self.params["local_radius"], self._cost, self.p_hat, self.future, w.rcf, self.spec.gamma
            )

    # ---- deciding ------------------------------------------------------------------------------------------
    def _q_values(self, d: int, level: int) -> dict[int, float]:
        """``rcf(a) + gamma sum_l' P[l, l'] (cs(d+a, l') + future(d+a, l'))`` with this step's estimates."""
        acts, dst, moves = self.space.moves(d)
        value = np.take(self.v_hat, self.space.cls[dst], axis=0)
        value *= self.spec.weights.perf
        value += self._res_cost[dst, None]
        value += self.future[dst]
        q = value @ self.p_hat[level]
        q *= self.spec.gamma
        q[moves] += self.spec.weights.rcf
        return dict(zip(acts, q.tolist(), strict=True))

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        self._jump = None
        self._forecast_note = None
        self._frugal_note = None
        self._settle_note = None
        d = self.space.lookup(k)
        if d < 0:
            return outside_space_action(self.space, k, self.spec), {}
        wait = obs.budget_wait_periods if obs is not None else 0.0
        planned = self._planned_rate(rate, wait)
        level = self.levels.level(planned)
        q = self._q_values(d, level)
        overloaded = self.params["capacity_bound"] and obs is not None and self._overloaded(obs)
        # while the rate rises (trend_periods), removing replicas spends a reconfiguration that the next scale-out
        # will need
        rising = bool(self.params["trend_periods"]) and self.trend.slope() > 0.0
        if overloaded or rising:
            n_now = self.space.class_n[self.space.cls[d]]
            _, dst, _ = self.space.moves(d)
            keep = {
                a
                for a, t in zip(q, dst.tolist(), strict=True)
                if self.space.class_n[self.space.cls[t]] >= n_now
            }
            planned_scale_in = mdp.greedy(q) not in keep
            q = {a: v for a, v in q.items() if a in keep}
            if overloaded and (planned_scale_in or self._beyond_every_bound(planned)):
                # when the model, too, expects the deployment in place to violate at this rate, only
                # capacity-adding actions remain. Staying put may look cheapest for two reasons the rule
                # overrides: it is valued on a scale-in one period later, which this rule forbids again (an
                # operator sat at 1 x A2 + 2 x A3 violating for 110 periods, waiting to drop the A2 for a
                # 2 x A3 it did not add); or the model expects every deployment up to K_max to violate, so no
                # reconfiguration seems to buy anything (an untrained Spark OM kept 1 executor for a period at
                # 78 tuples/s, its bounds 20/40/59 tuples/s for 1/2/3, while the backlog grew). Otherwise a
                # violating period may be the settling after a change, which the model plans for. An unexplored
                # model (no bound yet) stays: a quiet period is what teaches it one
                q = self._grow_past_bound(d, planned, q)
        if rising and planned > rate:
            q = self._grow_past_bound(d, planned, q)
        settles = self._settling_classes(max(rate, planned), obs, self._capacity(k))
        if settles is not None:
            q = self._drop_unsettled_scale_ins(d, q, settles)
        drains = self._restart_draining_classes(max(rate, planned, *self._steady_rates), obs)
        if drains is not None:
            q = self._drop_unsettled_scale_ins(d, q, drains[0], restart=obs, swap_settles=drains[1])
            both = drains[0] & drains[1]
            settles = both if settles is None else settles & both
        if obs is not None and self._catch_up_holds(d, obs):
            speed = self._space_columns()[1]
            acts, dst, _ = self.space.moves(d)
            held = {
                a: q[a]
                for a, t in zip(acts, dst.tolist(), strict=True)
                if a in q and speed[t] <= speed[d] + 1e-9
            }
            if held:
                self._settle_note = {
                    "held": True,
                    "reason": (
                        f"catching up after a restart ({obs.restart_s or 0.0:.1f} s): the deployment in place works "
                        f"its backlog off within a period at the {self._steady_rate:.1f} tuples/s measured "
                        "before it, so no scale-out on the catch-up's load"
                    ),
                }
                return self._proposing(k, mdp.greedy(held), explain), (held if explain else {})
        if self.params["multi_step"] and obs is not None and obs.node_limited:
            frugal = self._fewest_new_replicas(d, level)
            if frugal is not None:
                return self._frugal_action(k, d, frugal, q, explain)
        if self.params["multi_step"]:
            step = self._backlog_step(k, rate, level, obs)
            if step is not None:
                self._jump = step[0]
                q = {**q, JUMP: step[1]}
                return self._proposing(k, JUMP, explain), (q if explain else {})
            best = mdp.greedy(q)
            acts, dst, _ = self.space.moves(d)
            toward = dict(zip(acts, dst.tolist(), strict=True)).get(best, d)
            jump = self._best_jump(d, level, overloaded, rising, bar=q[best], toward=toward, settles=settles)
            if jump is not None and jump[1] < min(q.values()) - 1e-12:
                self._jump = self.space.deployments[jump[0]].copy()
                q = {**q, JUMP: jump[1]}
                return self._proposing(k, JUMP, explain), (q if explain else {})
        return self._proposing(k, mdp.greedy(q), explain), (q if explain else {})

    def _planned_rate(self, rate: float, wait: float = 0.0) -> float:
        """The rate (tuples/s) to decide on: with ``trend_periods``, the rate a rising trend reaches when a
        scale-out proposed now would take effect, plus the ``wait`` (periods) before the application could
        reconfigure again after it (:mod:`policies.forecast`); else ``rate``."""
        if not self.params["trend_periods"]:
            return rate
        planned, horizon = forecast.planned_rate(rate, self.trend, self.lead, wait)
        self._forecast_note = (
            None
            if horizon == 0
            else {
                "planned_rate_tuples_s": planned,
                "slope_tuples_s_per_period": self.trend.slope(),
                "horizon_periods": horizon,
                "lead_periods": self.lead.periods(),
                "reason": (
                    f"the rate rose in each of the last {self.trend.run} periods, by at least "
                    f"{self.trend.slope():.1f} tuples/s: planning for {planned:.0f} tuples/s, the rate "
                    f"{horizon} period(s) ahead (a scale-out took {self.lead.periods()} period(s) to take effect"
                    + (f"; then {wait:.1f} period(s) until the budget allows another)" if wait else ")")
                ),
            }
        )
        return planned

    def _proposing(self, k: np.ndarray, action: int, explain: bool) -> int:
        """Note the step the decision asks for (kept as the plan while it waits) and the capacity it asks for
        (the lead-time learner's start); return ``action``."""
        if explain:
            return action
        jump = self._jump
        self._waiting_jump = jump.copy() if action == JUMP and jump is not None else None
        if self.params["trend_periods"]:
            target = jump if action == JUMP and jump is not None else apply_action(k, action)
            self.lead.proposed(self.t, self._capacity(k), self._capacity(target))
        return action

    def _capacity(self, k: np.ndarray) -> float:
        """Sum of the speedups of the replicas of ``k``."""
        return float(np.asarray(k, dtype=float) @ np.asarray(self.spec.speedups, dtype=float))

    def revise_for_node_limit(self, obs: Observation) -> Proposal | None:
        """With ``multi_step``: this period's decision again under the node limit (the fewest new replicas,
        :meth:`_fewest_new_replicas`), from the state the step left (nothing learned twice); the revised action
        replaces the proposed one in what the next step learns from. None without ``multi_step``, when ``obs``
        was already node-limited or incomplete, or before the first decision."""
        if not self.params["multi_step"] or obs.node_limited or not obs.complete or self._prev is None:
            return None
        limited = dataclasses.replace(obs, node_limited=True)
        k = np.array(obs.deployment, dtype=np.int64)
        action, _ = self._decide(k, obs.input_rate, limited, False)
        self.override_last_action(action)
        return self._proposal(k, action, limited)

    def explanation_extras(self) -> dict[str, Any]:
        """The planned rate of this step, when a trend moved it (``trend_periods``), the node-limit step and the
        engine model's fit."""
        extras: dict[str, Any] = {} if self._forecast_note is None else {"forecast": self._forecast_note}
        if self._frugal_note is not None:
            extras["node_limit"] = self._frugal_note
        if self._settle_note is not None:
            extras["settling"] = self._settle_note
        extras.update(self._engine_extras())
        return extras

    def _best_jump(
        self,
        d: int,
        level: int,
        overloaded: bool,
        rising: bool = False,
        bar: float = math.inf,
        toward: int | None = None,
        settles: np.ndarray | None = None,
    ) -> tuple[int, float] | None:
        """The best deployment more than one action away from ``d`` and its value ``rcf + gamma sum_l' P[l, l']
        (cs + future)`` (the one-step look-ahead of :meth:`_q_values` over the whole space): a multi-replica
        step on the node types in place (other types only under overload when no deployment of those is
        expected to meet the bound at this rate level, e.g. at ``K_max``); a step to less capacity (sum of
        speedups) only when not overloaded and to a deployment seen to carry the top of this rate level and the
        next without violating, and not while the rate rises (``rising``). The node types in place include those of
        ``toward``, the deployment the best one-replica action leads to: when that action itself brings a new type,
        a step may go on with it (seen on bench_loop's step: 1 x A1 overloaded went to 1 x A1 + 1 x A3 and then
        to 2 x A3, two reconfigurations and the nodes waited for twice, where 2 x A3 was one step away). When the
        last proposal was a step that
        is still waiting (for nodes or a token), still qualifies and still beats ``bar`` (the best one-replica
        action's value), it stays the plan: switching between targets of about equal value while waiting would
        restart the wait for other nodes. With the engine model, a step to less capacity goes only to a class that
        ``settles`` (per class: carries the rate through its settling periods, :meth:`_settling_classes`). None
        when none qualifies."""
        space = self.space
        q = self._step_values(level)
        deps = space.deployments
        totals, speed, class_n, rank = self._space_columns()
        ok = (totals >= self.spec.k_min) & (totals <= self.spec.k_max)
        ok[space.succ[d][space.succ[d] >= 0]] = False  # one action away (and d itself): the ordinary moves
        # a step that removes capacity only to a deployment already seen to carry, per replica of its slowest
        # type, the top rate of this level and the next one up without violating (evidence, not the optimism
        # of an unexplored model)
        if self.threshold_mode and not overloaded and not rising:
            safe = (level + 2) * self.levels.width / class_n <= self.thr_lo[rank]
        else:
            safe = np.zeros(len(deps), dtype=bool)
        if settles is not None:
            safe &= settles[space.cls]
        ok &= (speed > speed[d] + 1e-9) | ((speed < speed[d] - 1e-9) & safe)
        # the node types in place, unless under overload (or, with a trend, at the rate planned for) none of their
        # deployments is expected to meet the bound (K_max, or a slow type capping the class): a change of type
        # needs new nodes (provisioning), and hopping between types of about equal value would churn
        in_place = deps[d] > 0
        if toward is not None:
            in_place = in_place | (deps[toward] > 0)
        same = ok & (deps[:, ~in_place] == 0).all(axis=1)
        if not (overloaded or rising) or (same & (self.v_hat[space.cls, level] == 0.0)).any():
            ok = same
        if not ok.any():
            return None
        waiting = -1 if self._waiting_jump is None else space.lookup(self._waiting_jump)
        if waiting >= 0 and ok[waiting] and q[waiting] < bar - 1e-12:
            return waiting, float(q[waiting])
        best = int(np.flatnonzero(ok)[np.argmin(q[ok])])
        return best, float(q[best])

    def _grow_past_bound(self, d: int, planned: float, q: dict[int, float]) -> dict[int, float]:
        """When the planned rate (tuples/s) passes the rate the deployment ``d`` is learned to carry within the
        bound (its class's threshold), only the actions that add capacity: staying is a foreseen violation.
        Used on a rising trend and under overload. The level's violation estimate cannot see it: it weighs the
        rates seen inside the level so far, which on a ramp are the level's lowest (seen on bench_loop's ramp:
        a request withdrawn one period before the violation it was made for, and the nodes provisioned for it
        released)."""
        if not self.threshold_mode or self._thresholds is None:
            return q
        if planned <= self._thresholds[self.space.cls[d]]:
            return q
        return self._adding_capacity(d, q)

    def _settling_classes(
        self, rate: float, obs: Observation | None, capacity: float = math.inf
    ) -> np.ndarray | None:
        """Per class, whether a scale-in to it carries ``rate`` (tuples/s) and drains the period's backlog through
        its settling periods (:func:`policies.om.engine_plan.carries_while_settling`, at the engine model's
        penalty measured after scale-ins) and below the class's learned bound; None while the engine model does not
        plan. Only the classes below ``capacity`` (the deployment's sum of speedups) are checked, the others are
        True: a deployment with less capacity is in a class of less (replicas x slowest speed <= sum of
        speedups), and only those are consulted."""
        if not self._engine_active() or self._engine_ctx is None or self._thresholds is None:
            return None
        speeds = np.unique(self.spec.speedups)
        class_speed = speeds[self._class_rank]
        ok = engine_plan.carries_while_settling(
            self.engine,
            self._engine_ctx,
            self.spec.r_max_s,
            self.space.class_n,
            class_speed,
            rate,
            None if obs is None else obs.backlog,
            self.space.class_n * class_speed < capacity - 1e-9,
        )
        return ok & (rate <= self._thresholds)

    def _settling(self, k_prev: np.ndarray, k_now: np.ndarray, obs: Observation | None) -> bool:
        """Whether the period just observed is a transient that teaches no bound: the deployment changed in it
        or, with ``restart_aware``, it falls in the catch-up of a change that stopped the job. A change with a
        measured downtime ``D`` (``obs.restart_s``, s) on a period of ``P`` s (``obs.period_s``) settles for
        ``ceil(D / P)`` more periods: the backlog of ``D`` seconds of arrivals is still being worked off in the
        next one (seen on Flink: 5-13 s restarts, 10-s periods, the next period violated during the catch-up, and
        that violation read as a per-replica bound made a 5 -> 4 scale-in go back to 5). Updates the count."""
        if not np.array_equal(k_prev, k_now):
            downtime = None if obs is None else obs.restart_s
            period = None if obs is None else obs.period_s
            self._settle_left = 0
            if self.params["restart_aware"] and downtime and period:
                self._settle_left = math.ceil(float(downtime) / float(period))
            return True
        if self._settle_left > 0:
            self._settle_left -= 1
            return True
        return self._in_catch_up(obs)

    def _in_catch_up(self, obs: Observation | None) -> bool:
        """With ``restart_aware``: whether the period just observed began with, or falls in the catch-up of, the
        application's latest change that stopped the job, whichever operator it changed (Flink restarts the whole
        job): ``obs.periods_since_change <= 1 + ceil(D / P)`` for its downtime ``D`` (``obs.restart_s``, s) on
        periods of ``P`` s. Seen in the closed loop on Flink's fitted engine: the splitter, unchanged, read the
        counter's restart catch-up (100 % busy, over its bound) as overload, scaled out, and its own restart
        started another catch-up."""
        if not self.params["restart_aware"] or obs is None or obs.periods_since_change is None:
            return False
        downtime, period = obs.restart_s or 0.0, obs.period_s or 0.0
        if downtime <= 0.0 or period <= 0.0:
            return False
        return obs.periods_since_change <= 1 + math.ceil(float(downtime) / float(period))

    def _catch_up_holds(self, d: int, obs: Observation) -> bool:
        """With ``restart_aware`` and ``capacity_bound``: in a restart's catch-up (:meth:`_in_catch_up`), whether
        the deployment in place works the restart's backlog off within a period at the rate measured before it
        (``n c >= rate (1 + D / P)``, ``n c`` its class's measured capacity in tuples/s): then it proposes no
        scale-out, since the catch-up's high input and busy time say nothing about the rate to carry."""
        if not (self.params["capacity_bound"] and self._in_catch_up(obs)) or self._steady_rate <= 0.0:
            return False
        c = int(self.space.cls[d])
        capacity = float(self.space.class_n[c] * self._replica_capacity(typical=True)[self._class_rank[c]])
        need = self._steady_rate * (1.0 + float(obs.restart_s or 0.0) / float(obs.period_s or 1.0))
        return math.isfinite(capacity) and capacity >= need

    def _restart_draining_classes(
        self, rate: float, obs: Observation | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """With ``restart_aware`` and ``capacity_bound``, on an engine where a change stops the job for ``D``
        seconds (:meth:`Observation.expected_restart_s`: the latest measured downtime of the change's kind, a
        resize or a swap of node type): per class, whether a scale-in to it would work off the backlog of that
        restart (``rate x D`` tuples) within one period of ``P = obs.period_s`` s after it, at the class's
        measured capacity ``n x c`` (``c`` per replica of its slowest speed, :func:`capacity_estimates`; tuples/s):
        ``(n c - rate) P >= rate D``, i.e. ``n c >= rate (1 + D / P)``. Returns the masks for a resize and for
        a swap. A class without a measured capacity passes (nothing to plan with). None when the rule does not
        apply (no downtime measured: live changes, the simulator; no period; ``capacity_bound`` off). A
        scale-in that only carries the rate once caught up violates through a catch-up of several periods, and
        the violation scales out again."""
        if not (self.params["restart_aware"] and self.params["capacity_bound"]) or obs is None:
            return None
        period = obs.period_s or 0.0
        resize, swap = obs.expected_restart_s(False) or 0.0, obs.expected_restart_s(True) or 0.0
        if max(resize, swap) <= 0.0 or period <= 0.0:
            return None
        class_capacity = self.space.class_n * self._replica_capacity(typical=True)[self._class_rank]
        return tuple(class_capacity >= rate * (1.0 + float(down) / float(period)) for down in (resize, swap))

    def _drop_unsettled_scale_ins(
        self,
        d: int,
        q: dict[int, float],
        settles: np.ndarray,
        restart: Observation | None = None,
        swap_settles: np.ndarray | None = None,
    ) -> dict[int, float]:
        """The actions of ``q`` less those that remove capacity (sum of speedups) to a class that does not
        ``settle`` (:meth:`_settling_classes`, or with ``restart`` the observation whose downtime
        :meth:`_restart_draining_classes` planned for); with ``swap_settles``, a move that changes the node types
        in use is checked against it instead (its own kind's downtime). Noted for the explanation when the best
        action was one of them."""
        speed = self._space_columns()[1]
        acts, dst, _ = self.space.moves(d)
        cls = self.space.cls
        deps = self.space.deployments
        in_use = deps[d] > 0

        def swaps(t: int) -> bool:  # the move to t changes the node types in use (only scale-ins are asked)
            return not np.array_equal(deps[t] > 0, in_use)

        dropped = {
            a: t
            for a, t in zip(acts, dst.tolist(), strict=True)
            if a in q
            and speed[t] < speed[d] - 1e-9
            and not (swap_settles[cls[t]] if swap_settles is not None and swaps(t) else settles[cls[t]])
        }
        kept = {a: v for a, v in q.items() if a not in dropped}
        if not kept:
            return q
        best = mdp.greedy(q)
        if best in dropped and restart is not None:
            swap = swaps(dropped[best])
            down = restart.expected_restart_s(swap) or 0.0
            kind = "a change of node type" if swap else "a change of replica counts"
            self._settle_note = {
                "withheld": self.space.deployments[dropped[best]].tolist(),
                "restart_s": down,
                "reason": (
                    f"scale-in withheld: {kind} stops the job (last restart {down:.1f} s), and the smaller "
                    f"deployment's measured capacity would not work off the {down:.1f} s of arrivals within one "
                    f"{restart.period_s:g}-s period after it"
                ),
            }
        elif best in dropped:
            self._settle_note = {
                "withheld": self.space.deployments[dropped[best]].tolist(),
                "penalty": self.engine.summary().get("scale_in_penalty"),
                "reason": (
                    "scale-in withheld: the engine model expects it to exceed R_max while it settles (batches "
                    "slower by the penalty measured after scale-ins, or the backlog not drained within a period)"
                ),
            }
        return kept

    def _beyond_every_bound(self, planned: float) -> bool:
        """Whether the planned rate (tuples/s) passes the learned bound of every deployment class up to K_max:
        the model then expects a violation whatever the OM does."""
        if not self.threshold_mode or self._thresholds is None:
            return False
        return bool(planned > float(np.max(self._thresholds)))

    def _adding_capacity(self, d: int, q: dict[int, float]) -> dict[int, float]:
        """The actions of ``q`` that add capacity to ``d``: sum of speedups, or, while the engine model plans, the
        rate its class carries (a sixth executor on 8 partitions adds none: it runs the same two waves as four);
        ``q`` when there are none."""
        acts, dst, _ = self.space.moves(d)
        # the array _threshold_model computed this period (one max_rate per class), else computed now
        engine = self._engine_carried if self._thresholds is not None else self._engine_thresholds()
        if engine is not None:
            carried = engine[self.space.cls]
        else:
            carried = self._space_columns()[1]
        grow = {
            a for a, t in zip(acts, dst.tolist(), strict=True) if carried[t] > carried[d] * (1 + 1e-9) + 1e-9
        }
        kept = {a: v for a, v in q.items() if a in grow}
        return kept or q

    def _step_values(self, level: int) -> np.ndarray:
        """Per deployment of the space, the value of a step to it from this rate level: ``rcf + gamma
        sum_l' P[l, l'] (cs + future)`` (:meth:`_q_values` over the whole space)."""
        if self._cost is None:
            self._cost = self._state_cost()
        q = (self._cost + self.future) @ self.p_hat[level]
        q *= self.spec.gamma
        q += self.spec.weights.rcf
        return q

    def _fewest_new_replicas(self, d: int, level: int) -> tuple[int, float] | None:
        """Under a node limit (``Observation.node_limited``): the deployment expected to meet the bound at this
        rate level (no learned violation) that adds the fewest replicas to ``d`` (new nodes), of any node type,
        and its one-step look-ahead value; ties by that value. Summed over operators, the fewest new replicas
        each is the fewest new nodes for all, so the region's limit binds as late as it can. None when ``d``
        itself is expected to meet the bound or no deployment within ``K_max`` is."""
        space = self.space
        meets = self.v_hat[space.cls, level] == 0.0
        if meets[d]:
            return None
        totals = self._space_columns()[0]
        ok = meets & (totals >= self.spec.k_min) & (totals <= self.spec.k_max)
        if not ok.any():
            return None
        q = self._step_values(level)
        added = np.maximum(space.deployments - space.deployments[d], 0).sum(axis=1)
        idx = np.flatnonzero(ok)
        best = idx[np.lexsort((q[idx], added[idx]))[0]]
        return int(best), float(q[best])

    def _frugal_action(
        self, k: np.ndarray, d: int, target: tuple[int, float], q: dict[int, float], explain: bool
    ) -> tuple[int, dict[int, float]]:
        """Propose the step to :meth:`_fewest_new_replicas`' deployment: its one-replica action when it is one
        away, else a multi-replica step (kept as the plan while it waits)."""
        acts, dst, _ = self.space.moves(d)
        hit = np.flatnonzero(dst == target[0])
        self._frugal_note = {
            "reason": "the region's node limit: the deployment expected to meet the bound with the fewest new "
            "replicas",
            "target": self.space.deployments[target[0]].tolist(),
        }
        if hit.size:
            return self._proposing(k, int(acts[hit[0]]), explain), (q if explain else {})
        self._jump = self.space.deployments[target[0]].copy()
        q = {**q, JUMP: target[1]}
        return self._proposing(k, JUMP, explain), (q if explain else {})

    def _space_columns(self) -> tuple[np.ndarray, ...]:
        """Per deployment of the space: total replicas, capacity (sum of speedups), replicas of its class and the
        speed rank of its class (fixed with the space: computed once)."""
        cols = self._columns
        if cols is None:
            deps = self.space.deployments
            cls = self.space.cls
            speed = deps @ np.asarray(self.spec.speedups, dtype=float)
            cols = (deps.sum(axis=1), speed, self.space.class_n[cls], self._class_rank[cls])
            self._columns = cols
        return cols

    def _overloaded(self, obs: Observation) -> bool:
        """The operator violated its bound or was busy all the period (``capacity_bound``'s no-scale-in rule)."""
        u = obs.utilisation
        if u is not None and u >= 1.0:
            return True
        if obs.violated is not None:
            return bool(obs.violated)
        return obs.response_time_s is not None and obs.response_time_s > self.spec.r_max_s

    # ---- engine_model: a micro-batch engine's performance model (policies.engine_model) ------------------------
    def _calibrate(self, k: np.ndarray, rate: float, obs: Observation | None) -> None:
        """The base calibration, then the engine model learns from the period's micro-batches."""
        super()._calibrate(k, rate, obs)
        self._engine_observe(k, obs)

    def _engine_observe(self, k: np.ndarray, obs: Observation | None) -> None:
        """Feed the engine model; once it plans (``_engine_active``), new thresholds re-solve the values like new
        weights (``reweight_sweeps``)."""
        if self.params["engine_model"] == "off" or obs is None or obs.batch_duration_s is None:
            return
        speed = engine_plan.slowest_speed(k, self.spec.speedups)
        executors = int(np.sum(k))
        self.engine.observe(
            obs.batch_records,
            obs.batch_duration_s,
            executors,
            obs.partitions,
            obs.batch_interval_s,
            obs.response_time_s,
            speed,
        )
        self._engine_ctx = engine_plan.EngineContext(obs.batch_interval_s, obs.partitions, obs.period_s)
        if self._engine_active():
            old = self._thresholds
            self._thresholds = None
            self._threshold_model()
            if old is None or self._thresholds is None or not np.allclose(old, self._thresholds):
                self._sweep(self.params["reweight_sweeps"])

    def fitted_engine_model(self) -> QueueModel | None:
        """The micro-batch engine model as a queue model for simulations, once fitted (whether it plans or not)."""
        ctx = self._engine_ctx
        return None if ctx is None else self.engine.queue_model(ctx.interval_s, ctx.partitions)

    def _engine_active(self) -> bool:
        """The engine model plans: not ``off``, the threshold learner's classes, a ready fit."""
        return (
            self.params["engine_model"] != "off"
            and self.threshold_mode
            and self._engine_ctx is not None
            and self.engine.ready
        )

    def _engine_thresholds(self) -> np.ndarray | None:
        """Per class, the largest rate (tuples/s) the engine model expects to meet R_max; None when inactive."""
        if not self._engine_active() or self._engine_ctx is None:
            return None
        speeds = np.unique(self.spec.speedups)
        return engine_plan.class_thresholds(
            self.engine, self._engine_ctx, self.spec.r_max_s, self.space.class_n, speeds[self._class_rank]
        )

    def _backlog_step(
        self, k: np.ndarray, rate: float, level: int, obs: Observation | None
    ) -> tuple[np.ndarray, float] | None:
        """A multi-replica step to the smallest deployment that drains the backlog within a period, or, under
        overload at a rate no deployment carries, to the one that carries the most, with its one-step look-ahead
        value (:func:`policies.om.engine_plan.backlog_target`, :func:`~policies.om.engine_plan.overload_target`);
        None when not needed."""
        self._engine_note = None
        if obs is None or not self._engine_active() or self._engine_ctx is None:
            return None
        planned = rate if self._forecast_note is None else self._forecast_note["planned_rate_tuples_s"]
        found = engine_plan.backlog_target(
            self.engine,
            self._engine_ctx,
            k,
            max(rate, planned),
            obs.backlog,
            self.spec.speedups,
            self.spec.k_max,
            self.spec.r_max_s,
            lambda dep: self.space.lookup(dep) >= 0,
        )
        if found is None and self._overloaded(obs):
            found = engine_plan.overload_target(
                self.engine,
                self._engine_ctx,
                k,
                max(rate, planned),
                self.spec.speedups,
                self.spec.k_max,
                self.spec.r_max_s,
                lambda dep: self.space.lookup(dep) >= 0,
            )
        if found is None:
            return None
        target, reason = found
        dst = self.space.lookup(target)
        if self._cost is None:
            self._cost = self._state_cost()
        value = self.spec.gamma * float((self._cost[dst] + self.future[dst]) @ self.p_hat[level])
        self._engine_note = {
            "target": target.tolist(),
            "backlog_tuples": None if obs.backlog is None else float(obs.backlog),
            "reason": reason,
        }
        return target, value + self.spec.weights.rcf

    def _engine_extras(self) -> dict[str, Any]:
        """``engine_model``: the fit (``policies.engine_model.MicroBatchModel.summary``), whether it plans, the
        rate each replica count carries (tuples/s) and this step's backlog step; nothing without batches."""
        if self.params["engine_model"] == "off" or self._engine_ctx is None:
            return {}
        note: dict[str, Any] = {**self.engine.summary(), "planning": self._engine_active()}
        if self._engine_active():
            ctx = self._engine_ctx
            note["max_rate_tuples_s"] = {
                str(n): self.engine.max_rate(n, ctx.interval_s, self.spec.r_max_s, ctx.partitions)
                for n in range(max(1, self.spec.k_min), self.spec.k_max + 1)
            }
        if self._engine_note is not None:
            note["backlog_step"] = self._engine_note
        return {"engine_model": note}

    # ---- self-calibration: the range grew (policies.calibration) -----------------------------------------------
    def _remap_levels(self, old: Any, factor: int) -> None:
        """Counts (level transitions, visits and violations per class, the rate histogram) are summed onto the
        new levels -- exact, the new levels and bins being unions of old ones; the value table is averaged over
        each new level's old levels (weighted by how often each was left) as a warm start; then the violation
        model is recomputed and the values re-solved (``reconfigure_sweeps`` sweeps)."""
        from policies.calibration import merge_counts, merge_values

        level_weight = self.trans_counts.sum(axis=1)
        self.trans_counts = merge_counts(merge_counts(self.trans_counts, factor, 0), factor, 1)
        self.visits = merge_counts(self.visits, factor, 1)
        self.violations = merge_counts(self.violations, factor, 1)
        # bin b of width w/16 lies in new bin b // factor of width factor * w / 16; the last bin collects
        # everything beyond it
        self.rate_hist = merge_counts(self.rate_hist, factor)
        w = np.broadcast_to(level_weight[None, :] + 1e-12, self.future.shape)
        future = merge_values(self.future, factor, axis=1, weights=w, fill=np.nan)
        # new levels above the old range start from the old top level's values
        top = (self.levels.n - 1) // factor
        future[:, top + 1 :] = future[:, [top]]
        self.future = future
        self._refresh_derived()
        if self.threshold_mode:
            self._threshold_model()
        else:
            self._project()
            self._cost = None
        self._sweep(self.params["reconfigure_sweeps"])

    # ---- reconfiguration -----------------------------------------------------------------------------------
    def _on_reconfigure(self) -> None:
        key = self._current_key()
        if key == self._model_key:
            return
        bound_changed = key[3] != self._model_key[3]
        if bound_changed:
            # violation statistics were about the old bound: the frequencies no longer describe the unknown cost;
            # of the threshold bracket the half that a monotone response time keeps true stays: under a looser
            # bound no rate that met the old one violates (lo stays), under a tighter one every rate that violated
            # the old one still does (hi stays). cap_stats stay: a replica's capacity does not depend on the bound
            self.visits[:] = 0.0
            self.violations[:] = 0.0
            if key[3] > self._model_key[3]:
                self.thr_hi[:] = np.inf
                self.class_viol[:] = np.inf
            else:
                self.thr_lo[:] = 0.0
            self._project()
            if self.threshold_mode:
                self._thresholds = None
                self._threshold_model()
        self._model_key = key
        self._refresh_derived()
        # new weights alone leave the learned model as it was: the values in place are a warm start, and the sweeps
        # of the following steps go on converging (e.g. the AM's violation-budget guard shifting the weights)
        self._sweep(self.params["reconfigure_sweeps" if bound_changed else "reweight_sweeps"])

    # ---- durable state -------------------------------------------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {
            "sweeps_done": self.sweeps_done,
            "model_key": self._model_key,
            "space_size": self.space.size,
            "trend": self.trend.state(),
            "lead": self.lead.state(),
            "waiting_jump": None if self._waiting_jump is None else self._waiting_jump.tolist(),
            "settle_left": self._settle_left,
            "steady_rates": self._steady_rates,
            "engine_model": self.engine.to_state(),
            "engine_ctx": None if self._engine_ctx is None else self._engine_ctx.state(),
        }
        arrays = {
            "trans_counts": self.trans_counts,
            "visits": self.visits,
            "violations": self.violations,
            "v_hat": self.v_hat,
            "thr_lo": self.thr_lo,
            "thr_hi": self.thr_hi,
            "class_viol": self.class_viol,
            "cap_stats": self.cap_stats,
            "delay_stats": self.delay_stats,
            **({} if self.delay_legacy is None else {"delay_legacy": self.delay_legacy}),
            "rate_hist": self.rate_hist,
            "future": self.future,
            "p_hat": self.p_hat,
        }
        return meta, arrays

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        max_types = choose_max_types(self.spec, self.params["max_mixed_types"])
        if max_types != self.space.max_types or self.space.deployments.shape[1] != self.spec.n_res:
            self.space = mdp.build_space(self.spec, max_types)
        if int(meta["space_size"]) != self.space.size:
            raise ValueError(
                f"state: deployment space of {meta['space_size']} deployments does not match this operator's "
                f"({self.space.size}); node types or K_max changed"
            )
        every = self.params["sweep_every"]
        n_edges = len(self.space.edge_src)
        self.sweep_every = every if every > 0 else max(1, math.ceil(n_edges * self.levels.n / SWEEP_BUDGET))
        self.trans_counts = arrays["trans_counts"].copy()
        self.visits = arrays["visits"].copy()
        self.violations = arrays["violations"].copy()
        self.v_hat = arrays["v_hat"].copy()
        self.thr_lo = arrays["thr_lo"].copy()
        self.thr_hi = arrays["thr_hi"].copy()
        # states saved before the per-class evidence start without it
        self.class_viol = (
            arrays["class_viol"].copy() if "class_viol" in arrays else np.full(self.space.n_classes, np.inf)
        )
        # states saved before capacity_bound existed carry no capacity statistics
        self.cap_stats = (
            arrays["cap_stats"].copy() if "cap_stats" in arrays else np.zeros((len(self.thr_hi), 6))
        )
        # states saved before the learned service variability start its fit (M/M/1 until it has data); those
        # saved before the fit had an intercept keep their (sum w y, sum w^2) as the variability until it has data
        stats = arrays.get("delay_stats")
        self.delay_legacy = arrays["delay_legacy"].copy() if "delay_legacy" in arrays else None
        if stats is not None and stats.shape == (2,):
            self.delay_legacy, stats = stats.copy(), None
        self.delay_stats = stats.copy() if stats is not None else np.zeros(5)
        self.rate_hist = arrays["rate_hist"].copy()
        self.future = arrays["future"].copy()
        self.sweeps_done = int(meta["sweeps_done"])
        # states saved before trend_periods existed carry no trend: it starts again
        self.trend = forecast.RateTrend(self.params["trend_periods"])
        self.trend.load(meta.get("trend"))
        self.lead.load(meta.get("lead"))
        wj = meta.get("waiting_jump")
        self._waiting_jump = None if wj is None else np.asarray(wj, dtype=np.int64)
        self._settle_left = int(meta.get("settle_left", 0))  # states saved before restart_aware: none
        # states saved before restart_rate_window kept only the latest rate, before the catch-up hold none
        rates = meta.get("steady_rates")
        if rates is None:
            latest = float(meta.get("steady_rate", 0.0))
            rates = [latest] if latest > 0.0 else []
        self._steady_rates = [float(r) for r in rates]
        # states saved before engine_model existed start a new fit
        em = meta.get("engine_model")
        self.engine = MicroBatchModel() if em is None else MicroBatchModel.from_state(em)
        self._engine_ctx = engine_plan.EngineContext.load(meta.get("engine_ctx"))
        self._model_key = [float(x) for x in meta["model_key"]]
        self._refresh_derived()
        self.p_hat = arrays["p_hat"].copy()
        self.threshold_mode = self.space.grid and self.params["violation_model"] != "counts"


def monotone_majorant(violations: np.ndarray, visits: np.ndarray, space: mdp.DeploymentSpace) -> np.ndarray:
    """Smallest function >= the observed violation frequencies that is monotone: non-increasing in capacity
    (more replicas, faster slowest type: grid classes only) and non-decreasing in the rate level.

    ``violations``/``visits`` are (classes x levels) counts; unobserved entries only receive what monotonicity
    forces from observed ones (0 otherwise).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        freq = np.where(visits > 0, violations / np.where(visits > 0, visits, 1.0), 0.0)
    n_a, n_b = space.grid_shape
    f = freq.reshape(n_a, n_b, -1)
    f = np.maximum.accumulate(f, axis=2)  # higher level: never less
    if space.grid:
        f = np.maximum.accumulate(f[::-1], axis=0)[::-1]  # fewer replicas: never less
        f = np.maximum.accumulate(f[:, ::-1], axis=1)[:, ::-1]  # slower slowest type: never less
    return np.ascontiguousarray(f.reshape(freq.shape))


def per_replica_bounds(lo: np.ndarray, hi: np.ndarray, guess: np.ndarray | None = None) -> np.ndarray:
    """Estimated per-replica rate bound theta (tuples/s) of each speed rank (ascending speeds).

    Monotone in speed: a violation at a per-replica rate x on a faster type implies one on a slower type, and no
    violation at x on a slower type implies none on a faster one. Inside the remaining interval [lo, hi) the
    estimate is ``guess`` where it lies strictly inside (a queueing estimate from a measured capacity), else the
    midpoint; ``inf`` while no violation bounds it (optimism: try it); ``hi`` when noisy observations contradict
    each other (lo >= hi).
    """
    hi_eff = np.minimum.accumulate(hi[::-1])[::-1]
    lo_eff = np.maximum.accumulate(lo)
    with np.errstate(invalid="ignore"):
        mid = 0.5 * (lo_eff + hi_eff)
        if guess is not None:
            guess = np.maximum.accumulate(np.asarray(guess, dtype=float))
            mid = np.where(np.isfinite(guess) & (guess > lo_eff) & (guess < hi_eff), guess, mid)
    return np.where(np.isinf(hi_eff), np.inf, np.where(lo_eff >= hi_eff, hi_eff, mid))


def speed_scaled_brackets(
    lo: np.ndarray, hi: np.ndarray, speeds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The brackets ``[lo, hi)`` of theta (tuples/s) per speed rank (ascending ``speeds``), tightened by the
    definition of a speedup: a replica of speed ``s`` serves like the reference one with every service time divided
    by ``s``, so its response time at per-replica rate ``x`` is ``R_1(x / s) / s`` and ``theta_s = s theta_1(s
    R_max)``. ``theta_s / s`` is then non-decreasing in ``s`` (a faster replica meets the bound at a higher
    utilisation): a slower speed carries at most its share ``s' / s`` of a faster one's upper end, a faster speed
    at least its multiple of a slower one's lower end. Without it the learner only knew ``theta`` monotone in
    speed and tried a type twenty times slower, as optimistically as an unseen one, until it violated."""
    speeds = np.asarray(speeds, dtype=float)
    with np.errstate(invalid="ignore"):
        hi_s = np.minimum.accumulate((hi / speeds)[::-1])[::-1] * speeds
        lo_s = np.maximum.accumulate(lo / speeds) * speeds
    return np.maximum(lo, lo_s), np.minimum(hi, hi_s)


def capacity_estimates(cap_stats: np.ndarray) -> np.ndarray:
    """Per-replica capacity (tuples/s) of each speed rank from utilisation measurements; ``inf`` without any.

    ``cap_stats`` rows: periods, sum x, sum u, sum x^2, sum x u, max x / u (x: per-replica rate in tuples/s, u:
    busy fraction). The estimate is the larger of ``max x / u`` and, when at least ``CAPACITY_FIT_MIN_PERIODS``
    periods spread by ``CAPACITY_FIT_MIN_SPREAD`` and the slope is positive, ``(1 - a) / b`` of the
    least-squares line ``u = a + b x``.
    """
    n, sx, su, sxx, sxu, ratio = (cap_stats[:, i] for i in range(6))
    out = np.where(n > 0, ratio, np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = sx / n
        var_x = sxx / n - mean_x * mean_x
        b = (sxu / n - mean_x * su / n) / var_x
        a = su / n - b * mean_x
        fit = (1.0 - a) / b
        usable = (
            (n >= CAPACITY_FIT_MIN_PERIODS) & (var_x > (CAPACITY_FIT_MIN_SPREAD * mean_x) ** 2) & (b > 0.0)
        )
    return np.where(usable & (fit > out), fit, out)


def typical_capacity(cap_stats: np.ndarray) -> np.ndarray:
    """Per-replica capacity (tuples/s) of each speed rank as the pooled ratio ``sum x / sum u``: what a replica
    processed per busy second over every measured period (``cap_stats`` as :func:`capacity_estimates` reads it;
    ``inf`` without any). Unlike the largest single ``x / u``, measurement noise in the rates does not push it
    up as periods accumulate (Flink, 4 Dec: per-period ratios of 81-90 words/s per slot, median 81, the largest
    taken as the capacity let a scale-in pass a drain check it failed at the median)."""
    n, sx, su = cap_stats[:, 0], cap_stats[:, 1], cap_stats[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n > 0) & (su > 0.0), sx / su, np.inf)


def queueing_variability(delay_stats: np.ndarray) -> float:
    """The service variability ``v = (1 + cs^2) / 2`` of :func:`queueing_delay_fit` (``delay_stats`` of its
    layout), or, for the two sums ``(sum w y, sum w^2)`` of a state saved before the fit had an intercept, the
    least-squares slope through the origin; 1 (M/M/1) without data, never below 1/2 (a deterministic service)."""
    stats = np.asarray(delay_stats, dtype=float)
    if stats.shape == (2,):
        return _through_origin(float(stats[0]), float(stats[1])) if stats[1] > 0.0 else 1.0
    return queueing_delay_fit(stats)[0]


def _through_origin(swy: float, sww: float) -> float:
    """The least-squares slope of ``y = v w`` through the origin from (sum w y, sum w^2), never below 1/2."""
    return max(swy / sww, 0.5)


def queueing_delay_fit(delay_stats: np.ndarray) -> tuple[float, float]:
    """The service variability ``v = (1 + cs^2) / 2`` of an M/G/1 queue (Pollaczek-Khinchine: response time
    ``R = a + s + s v u / (1 - u)`` at utilisation ``u`` and mean service time ``s``) and the latency offset
    ``a`` (s) that no queue explains, fitted by least squares ``y = a + v w`` to the operator's periods under
    load: ``delay_stats`` = (periods, sum w, sum y, sum w^2, sum w y) with ``y = R - s`` and ``w = s u / (1 - u)``,
    ``s = u / x`` from the measured utilisation and per-replica rate ``x``. One pair for the operator: ``cs^2``
    does not depend on the node's speed (the service time's mean and standard deviation scale alike).

    Why the offset: on an engine that measures only the end-to-end time (Flink, ``connectors.latency_share``) an
    operator's response time carries a share of the path's fixed part (source, sink, network buffers: about
    0.6 s of a counter's 1.0-s bound on the bench's WordCount). Fitted through the origin, that part read as a
    variability of 40 or more, and the M/G/1 bound then kept every replica below 60 % busy.

    The intercept is fitted once ``DELAY_FIT_MIN_PERIODS`` periods spread their shapes ``w`` by
    ``DELAY_FIT_MIN_SPREAD`` of their mean; a negative intercept falls back to the line through the origin.
    Before that, a slope through the origin up to 1 is taken as the variability (offset 0), and anything above
    M/M/1's as an offset at ``v = 1``: one utilisation cannot tell the two apart, and a fixed part is what
    real engines add. 1 and 0 without data; ``v`` never below 1/2, a deterministic service's."""
    n, sw, sy, sww, swy = (float(x) for x in np.asarray(delay_stats, dtype=float)[:5])
    if n <= 0.0 or sww <= 0.0:
        return 1.0, 0.0
    mean_w, mean_y = sw / n, sy / n
    var_w = sww / n - mean_w * mean_w
    if n >= DELAY_FIT_MIN_PERIODS and var_w > (DELAY_FIT_MIN_SPREAD * mean_w) ** 2:
        slope = (swy / n - mean_w * mean_y) / var_w
        offset = mean_y - slope * mean_w
        if offset < 0.0:
            return _through_origin(swy, sww), 0.0
        if slope < 0.5:
            return 0.5, max(mean_y - 0.5 * mean_w, 0.0)
        return slope, offset
    if swy / sww <= 1.0:
        return _through_origin(swy, sww), 0.0
    return 1.0, max(mean_y - mean_w, 0.0)


def mg1_rate_bound(capacity: np.ndarray, variability: float, r_max_s: float) -> np.ndarray:
    """Per-replica arrival rate (tuples/s) at which an M/G/1 queue of service rate ``capacity`` (tuples/s) and
    variability ``v`` (:func:`queueing_variability`) reaches the response time ``r_max_s`` (s):
    :func:`policies.operator_model.mg1_max_rate` with mean service ``1 / c`` and variance ``(2 v - 1) / c^2``; ``v = 1``
    gives M/M/1's ``c - 1 / R_max``. 0 where one service time alone exceeds the bound, ``inf`` where the capacity
    is unknown (``inf``)."""
    c = np.asarray(capacity, dtype=float)
    with np.errstate(divide="ignore"):
        s = 1.0 / c
    return np.where(np.isinf(c), np.inf, mg1_max_rate(s, (2.0 * variability - 1.0) * s * s, r_max_s))


def scaled_to_unmeasured_speeds(capacity: np.ndarray, speeds: np.ndarray) -> np.ndarray:
    """Per-replica capacities (tuples/s) per speed rank (ascending ``speeds``), the ranks without a measurement
    (``inf``) filled from the measured ones scaled by the speed ratio -- a replica of speed ``s`` serves ``s``
    times the work of a speed-1 one (the queueing model's speedup). The largest such estimate is kept (optimism,
    as everywhere in this policy, but bounded: an untried node type is no longer assumed infinitely fast, which
    made the policy wait for a swap to it that the no-scale-in-under-overload rule forbids). Unchanged when
    nothing is measured."""
    measured = np.isfinite(capacity)
    if not measured.any() or measured.all():
        return capacity
    per_speed = capacity[measured] / speeds[measured]  # tuples/s per unit of speed
    return np.where(measured, capacity, per_speed.max() * speeds)


def level_exceedance(
    thresholds: np.ndarray, rate_hist: np.ndarray, levels: Any, cols: np.ndarray | None = None
) -> np.ndarray:
    """``out[c, l]`` = probability that a rate of level ``l`` exceeds ``thresholds[c]`` (tuples/s), from a
    histogram of observed rates (bins of ``levels.width / HIST_BINS_PER_LEVEL``; mass spread uniformly inside a
    bin). A level without observations is taken as uniform over its nominal width. ``cols``: only these levels.

    A column depends on its own level's bins only, bit for bit (the counts are whole numbers, so their running
    sums are exact): recomputing the levels that received a rate gives what recomputing every level would."""
    n, width = levels.n, levels.width
    bw = width / HIST_BINS_PER_LEVEL
    cols = np.arange(n) if cols is None else np.asarray(cols)
    top = cols == n - 1
    first = cols * HIST_BINS_PER_LEVEL  # first bin of each level; the top level runs to the last bin
    end = np.where(top, len(rate_hist), first + HIST_BINS_PER_LEVEL)
    cum = np.concatenate(([0.0], np.cumsum(rate_hist)))
    mass = cum[end] - cum[first]
    lo_edge = cols * width
    hi_edge = np.where(top, len(rate_hist) * bw, (cols + 1) * width)
    t = np.clip(thresholds[:, None], lo_edge[None, :], hi_edge[None, :])
    pos = (t - lo_edge) / bw  # bins from the level's lower edge
    i = np.minimum(np.floor(pos), end - first - 1).astype(np.int64)
    b = first + i
    below = (cum[b] - cum[first]) + (pos - i) * rate_hist[b]
    below = np.where(t >= hi_edge, mass, below)  # above the level: all of it, exactly
    uniform = np.clip(((cols + 1) * width - thresholds[:, None]) / width, 0.0, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = 1.0 - below / mass[None, :]
    return np.where(mass[None, :] > 0, np.clip(observed, 0.0, 1.0), uniform)


def outside_space_action(space: mdp.DeploymentSpace, k: np.ndarray, spec: OperatorSpec) -> int:
    """Action for a deployment outside the (reduced) space: remove one replica of the present type with the
    fewest replicas (first in order), which moves towards the space; do nothing when that is not allowed."""
    k = np.asarray(k)
    if int(k.sum()) > spec.k_min:
        present = np.flatnonzero(k > 0)
        t = int(present[np.argmin(k[present])])
        return 1 + t
    return 0
