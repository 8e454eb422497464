"""Deep Q-learning Operator Managers (paper 001, Alg. 2 and Sec. 4.3.1): ``dql``, ``dql-pds``, ``dql-pds-plus``.

All three use a small fully connected numpy network (:mod:`policies.om.mlp`) trained online from an experience
replay buffer (:mod:`policies.om.replay`): every ``train_every`` steps a batch of ``batch_size`` transitions is
drawn and one SGD step is taken towards the Q-learning targets (paper Appendix B: 3 hidden ReLU layers each 3/4
of its input width, buffer 10,000, a batch of 32 every 5 steps, SGD).

- ``dql`` (Alg. 2): the network maps the encoded state ``(k, l)`` to one Q value per action; infeasible actions
  are masked. Target ``y = c + gamma * min_{a' feasible} Q(s', a')`` on the output of the action taken.
- ``dql-pds`` (Sec. 4.3.1): the network maps an encoded post-decision state ``(k + a, l)`` to one value
  ``V~``. The known cost ``c_k(k, a) = w_res * price(k + a) / C_max + w_rcf * 1[a != 0]`` is computed exactly;
  only the unknown cost ``c_u = w_perf * 1[violated]`` is learned: ``Q(s, a) = c_k(k, a) + V~(k + a, l)`` and
  ``V~(k', l) <- c_u + gamma * min_{a'} Q(s', a')``.
- ``dql-pds-plus``: as ``dql-pds`` with an estimate ``c^_u(k', rate) = w_perf * 1[R^(k', rate) > R_max]`` of the
  unknown cost from an approximate queueing model (service rate off by a random 5-10 % with random sign, variance
  = mean^2, node speedups off by up to 20 %, drawn once per agent from its seeded RNG; the rate is assumed
  unchanged over the next period). Then ``Q(s, a) = c_k + c^_u + V~`` and the network learns only the
  estimation error ``delta = c_u - c^_u``.

State encoding ("reduced2", the one the paper selects in Appendix B.3, as in the authors' simulator): for every
node type a one-hot vector of its replica count ``1..K_max`` (all zeros when the type is absent), a one-hot vector
of the set of types present (``2^N - 1`` entries), and a one-hot vector of the rate level (30 entries). With 3
types and K_max 10: 30 + 7 + 30 = 67 inputs, hidden layers 50, 38, 28.

The replay buffer stores raw facts (deployments, rate levels and rates, action, violation flag), not costs, so the
costs of old transitions follow the current weights and R_max after :meth:`reconfigure`.

The decision-latency and whole-trace benchmark: ``python -m benchmarks deep-rl`` (``benchmarks/deep_rl.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.calibration import MODEL_REFRESH_TOLERANCE
from policies.om.approx_model import APPROX_DEFAULTS, check_approx_params, draw_model_errors
from policies.om.mlp import MLP, OPTIMIZERS, hidden_widths
from policies.om.replay import ReplayBuffer
from policies.operator_model import OperatorSpec, QueueModel

# ---- hyperparameters (paper 001, Sec. 6.2 and Appendix B; see DEFAULTS) -----------------------------------
GAMMA = 0.99  # discount factor
REPLAY_SIZE = 10_000  # experience buffer capacity (transitions)
BATCH_SIZE = 32  # transitions per training step
TRAIN_EVERY = 5  # one training step every this many periods
HIDDEN_LAYERS = 3  # hidden ReLU layers
HIDDEN_RATIO = 0.75  # each hidden layer is 3/4 of its input width
OPTIMIZER = "sgd"  # the paper trains with SGD (Deeplearning4j)
LEARNING_RATE = 0.1  # SGD step; not in the paper: the default of the authors' public simulator (Sgd(0.1))
EPSILON_DECAY = 0.95  # epsilon(t) = max(EPSILON_MIN, EPSILON_DECAY^(t-1)), as the tabular policies
EPSILON_MIN = 0.01
ENCODING = "reduced2"  # per-type one-hot counts + one-hot type set + one-hot rate level

ENCODINGS = ("reduced2", "reduced1", "minimal")


def action_deltas(n_res: int) -> np.ndarray:
    """``(2N+1, N)`` int64: the change of ``k`` each action makes (row 0 do nothing, 1+t remove, 1+N+t add)."""
    d = np.zeros((2 * n_res + 1, n_res), dtype=np.int64)
    for t in range(n_res):
        d[1 + t, t] = -1
        d[1 + n_res + t, t] = 1
    return d


def feasible_mask(ks: np.ndarray, k_max: int, k_min: int = 1) -> np.ndarray:
    """``(B, 2N+1)`` bool: which actions each deployment row of ``ks`` (``B x N``) allows, as
    :func:`policies.base.feasible_actions`."""
    b, n = ks.shape
    total = ks.sum(axis=1)
    mask = np.empty((b, 2 * n + 1), dtype=bool)
    mask[:, 0] = True
    mask[:, 1 : 1 + n] = (ks > 0) & (total > k_min)[:, None]
    mask[:, 1 + n :] = (total < k_max)[:, None]
    return mask


class StateEncoder:
    """Turns states ``(k, rate level)`` into network inputs (paper 001, Appendix B.3), vectorised over rows.

    ``reduced2``: per type one-hot of the count 1..K_max, one-hot of the set of types present, one-hot level.
    ``reduced1``: as reduced2 with the level as one number ``l / (L - 1)``.
    ``minimal``: ``k_t / K_max`` per type and ``l / (L - 1)``.
    """

    def __init__(self, n_res: int, k_max: int, n_levels: int, kind: str = ENCODING) -> None:
        if kind not in ENCODINGS:
            raise ValueError(f"params.encoding: must be one of {', '.join(ENCODINGS)}, got {kind!r}")
        self.n_res, self.k_max, self.n_levels, self.kind = n_res, k_max, n_levels, kind
        self._set_base = n_res * k_max
        self._level_base = self._set_base + (2**n_res - 1)
        self._type_offsets = np.arange(n_res, dtype=np.int64) * k_max
        self._bits = (1 << np.arange(n_res, dtype=np.int64)).astype(np.int64)
        if kind == "reduced2":
            self.width = self._level_base + n_levels
        elif kind == "reduced1":
            self.width = self._level_base + 1
        else:
            self.width = n_res + 1

    def level_column(self, level: int) -> tuple[int, float]:
        """``(column, value)`` the rate level sets in an input row (every other level column is 0)."""
        if self.kind == "reduced2":
            return self._level_base + level, 1.0
        scaled = level / max(1, self.n_levels - 1)
        return (self._level_base if self.kind == "reduced1" else self.n_res), scaled

    def encode(self, ks: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """``(B, width)`` float64 inputs for deployments ``ks`` (``B x N`` int) and levels ``levels`` (``B``)."""
        b = ks.shape[0]
        x = np.zeros((b, self.width))
        lv_scale = 1.0 / max(1, self.n_levels - 1)
        if self.kind == "minimal":
            x[:, : self.n_res] = ks / self.k_max
            x[:, self.n_res] = levels * lv_scale
            return x
        rows, cols = np.nonzero(ks > 0)
        x[rows, self._type_offsets[cols] + ks[rows, cols] - 1] = 1.0
        present = (ks > 0).astype(np.int64) @ self._bits
        rb = np.arange(b)
        x[rb, self._set_base + present - 1] = 1.0
        if self.kind == "reduced2":
            x[rb, self._level_base + levels] = 1.0
        else:
            x[:, self._level_base] = levels * lv_scale
        return x


CANDIDATE_CACHE_SIZE = 100_000  # deployments whose candidate inputs are kept (cleared when full)


@dataclass
class _Candidates:
    """What :meth:`_DeepQBase.action_values` needs for one deployment (see :meth:`_DeepQBase.candidates`)."""

    acts: np.ndarray  # feasible actions
    ks: np.ndarray  # next deployment of each
    x: np.ndarray  # encoded network inputs with the level columns at 0 (mutated and restored per call)
    prices: np.ndarray  # price of each next deployment ($/h)
    reconf: np.ndarray  # 1.0 where the action reconfigures
    thresholds: np.ndarray | None  # dql-pds-plus: rate above which the estimate predicts a violation


class _DeepQBase(Policy):
    """Common machinery: encoding, network, replay buffer, epsilon-greedy selection, durable state."""

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "gamma": GAMMA,
        "replay_size": REPLAY_SIZE,
        "batch_size": BATCH_SIZE,
        "train_every": TRAIN_EVERY,
        "hidden_layers": HIDDEN_LAYERS,
        "hidden_ratio": HIDDEN_RATIO,
        "optimizer": OPTIMIZER,
        "lr": LEARNING_RATE,
        "epsilon_decay": EPSILON_DECAY,
        "epsilon_min": EPSILON_MIN,
        "encoding": ENCODING,
    }
    _explains: ClassVar[bool] = True
    _pds: ClassVar[bool] = False  # the network learns V~(post-decision state) instead of Q(s, .)

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        if not 0 <= params["gamma"] < 1:
            raise ValueError(f"params.gamma: must be in [0, 1), got {params['gamma']}")
        for name in ("replay_size", "batch_size", "train_every"):
            if params[name] < 1:
                raise ValueError(f"params.{name}: must be >= 1, got {params[name]}")
        if params["hidden_layers"] < 0:
            raise ValueError(f"params.hidden_layers: must be >= 0, got {params['hidden_layers']}")
        if not params["hidden_ratio"] > 0:
            raise ValueError(f"params.hidden_ratio: must be > 0, got {params['hidden_ratio']}")
        if params["optimizer"] not in OPTIMIZERS:
            raise ValueError(
                f"params.optimizer: must be one of {', '.join(OPTIMIZERS)}, got {params['optimizer']!r}"
            )
        if not params["lr"] > 0:
            raise ValueError(f"params.lr: must be > 0, got {params['lr']}")
        if not 0 < params["epsilon_decay"] <= 1:
            raise ValueError(f"params.epsilon_decay: must be in (0, 1], got {params['epsilon_decay']}")
        if not 0 <= params["epsilon_min"] <= 1:
            raise ValueError(f"params.epsilon_min: must be in [0, 1], got {params['epsilon_min']}")
        if params["encoding"] not in ENCODINGS:
            raise ValueError(
                f"params.encoding: must be one of {', '.join(ENCODINGS)}, got {params['encoding']!r}"
            )

    def __init__(self, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> None:
        super().__init__(spec, params, seed)
        n = spec.n_res
        self.n_act = 2 * n + 1
        self.deltas = action_deltas(n)
        self.is_reconf = np.arange(self.n_act) != 0
        self._draw_model_errors()
        self._build()
        self._on_reconfigure()

    # ---- construction -----------------------------------------------------------------------------------
    def _draw_model_errors(self) -> None:
        """Hook for dql-pds-plus: draw the approximate model's errors from ``self.rng`` (before the weights)."""

    def _build(self, rng: np.random.Generator | None = None) -> None:
        """Network and replay buffer from ``self.params`` (initial weights drawn from ``rng``, default
        ``self.rng``)."""
        p, spec = self.params, self.spec
        self.encoder = StateEncoder(spec.n_res, spec.k_max, self.levels.n, p["encoding"])
        hidden = hidden_widths(self.encoder.width, p["hidden_layers"], p["hidden_ratio"])
        n_out = 1 if self._pds else self.n_act
        self.net = MLP([self.encoder.width, *hidden, n_out], rng or self.rng, p["optimizer"], p["lr"])
        n = spec.n_res
        self.replay = ReplayBuffer(
            p["replay_size"],
            {
                "k": ((n,), np.int16),  # deployment in place during the period decided on (k_i)
                "level": ((), np.int16),  # its rate level
                "rate": ((), np.float64),  # its rate (tuples/s)
                "action": ((), np.int16),
                "k_next": ((n,), np.int16),  # deployment after the action (k_{i+1})
                "level_next": ((), np.int16),
                "rate_next": ((), np.float64),
                "violated": ((), np.bool_),  # violation observed in the next period (k_{i+1}, rate_{i+1})
            },
        )
        self.gamma = float(p["gamma"])
        self.batch_size = int(p["batch_size"])
        self.train_every = int(p["train_every"])
        self.losses_seen = 0
        self.last_loss = math.nan
        self._candidates: dict[bytes, _Candidates] = {}

    def _on_reconfigure(self) -> None:
        spec = self.spec
        w = spec.weights
        self.w_perf, self.w_res, self.w_rcf = float(w.perf), float(w.res), float(w.rcf)
        self.c_max = spec.cost_scale
        self.price_scale = spec.prices * (self.w_res / spec.cost_scale)  # w_res * price / C_max per replica
        self.level_width = self.levels.width
        self.n_levels = self.levels.n
        self._candidates = {}  # thresholds of the estimate depend on R_max

    # ---- helpers ------------------------------------------------------------------------------------------
    def level(self, rate: float) -> int:
        """Rate level of ``rate`` (tuples/s), as :meth:`RateLevels.level`."""
        if rate <= 0:
            return 0
        return min(int(rate // self.level_width), self.n_levels - 1)

    def epsilon(self) -> float:
        """Exploration probability before learning step ``t + 1``: ``max(eps_min, decay^t)``."""
        return max(self.params["epsilon_min"], self.params["epsilon_decay"] ** max(0, self.t - 1))

    def known_cost(self, ks_next: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``w_res * price(k + a) / C_max + w_rcf * 1[a != 0]`` for post-decision deployments ``ks_next``."""
        return ks_next @ self.price_scale + self.w_rcf * (actions != 0)

    def estimated_thresholds(self, ks: np.ndarray) -> np.ndarray | None:
        """Rate (tuples/s) above which the estimate predicts a violation for each deployment row of ``ks``;
        None: no estimate (``c^_u = 0``)."""
        return None

    def estimated_unknown_cost(self, ks: np.ndarray, rates: np.ndarray) -> np.ndarray | None:
        """``c^_u = w_perf * 1[rate > threshold(k')]`` of post-decision deployments ``ks`` at ``rates``."""
        thr = self.estimated_thresholds(ks)
        return None if thr is None else self.w_perf * (rates > thr)

    def candidates(self, k: np.ndarray) -> _Candidates:
        """Feasible actions of ``k`` with what their values need, precomputed once per deployment: the encoded
        inputs without the rate level (the next deployments for dql-pds, ``k`` itself for dql), the prices of
        the next deployments ($/h) and the estimate's rate thresholds."""
        key = k.tobytes()
        c = self._candidates.get(key)
        if c is not None:
            return c
        k = np.asarray(k, dtype=np.int64)
        acts = np.flatnonzero(feasible_mask(k[None, :], self.spec.k_max, self.spec.k_min)[0])
        ks = k[None, :] + self.deltas[acts]
        x = self.encoder.encode(ks if self._pds else k[None, :], np.zeros(len(acts) if self._pds else 1, int))
        col0, _ = self.encoder.level_column(0)
        x[:, col0] = 0.0
        thr = self.estimated_thresholds(ks)
        c = _Candidates(acts, ks, x, ks @ self.spec.prices, (acts != 0).astype(float), thr)
        if len(self._candidates) >= CANDIDATE_CACHE_SIZE:
            self._candidates.clear()
        self._candidates[key] = c
        return c

    # ---- values ---------------------------------------------------------------------------------------------
    def action_values(self, k: np.ndarray, rate: float) -> tuple[np.ndarray, np.ndarray]:
        """Feasible actions of ``k`` and their estimated values (lower is better) at ``rate``."""
        c = self.candidates(k)
        col, val = self.encoder.level_column(self.level(rate))
        c.x[:, col] = val
        out = self.net.predict(c.x)
        c.x[:, col] = 0.0
        if not self._pds:
            return c.acts, out[0, c.acts]
        values = out[:, 0]
        values += c.prices * (self.w_res / self.c_max)
        values += self.w_rcf * c.reconf
        if c.thresholds is not None:
            values += self.w_perf * (rate > c.thresholds)
        return c.acts, values

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        if not explain and self.rng.random() < self.epsilon():
            acts = self.candidates(k).acts
            return int(acts[self.rng.integers(len(acts))]), {}
        acts, values = self.action_values(k, rate)
        best = int(acts[int(np.argmin(values))])  # first strictly smallest in action order
        if not explain:
            return best, {}
        return best, {int(a): float(v) for a, v in zip(acts, values, strict=True)}

    # ---- learning -------------------------------------------------------------------------------------------
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
        self.replay.add(
            k=k_prev,
            level=self.level(rate_prev),
            rate=rate_prev,
            action=action,
            k_next=k_now,
            level_next=self.level(rate_now),
            rate_next=rate_now,
            violated=violated,
        )
        if (self.t + 1) % self.train_every == 0 and len(self.replay) >= self.batch_size:
            self.train_batch(self.replay.sample(self.rng, self.batch_size))

    def next_state_values(self, ks: np.ndarray, levels: np.ndarray, rates: np.ndarray) -> np.ndarray:
        """``min_{a' feasible} Q(s', a')`` for each next state ``(ks[b], levels[b])`` of a batch."""
        mask = feasible_mask(ks, self.spec.k_max, self.spec.k_min)
        if not self._pds:
            q = self.net.predict(self.encoder.encode(ks, levels))
            return np.where(mask, q, np.inf).min(axis=1)
        rows, acts = np.nonzero(mask)
        kn = ks[rows] + self.deltas[acts]
        values = self.net.predict(self.encoder.encode(kn, levels[rows]))[:, 0] + self.known_cost(kn, acts)
        est = self.estimated_unknown_cost(kn, rates[rows])
        if est is not None:
            values += est
        q = np.full(mask.shape, np.inf)
        q[rows, acts] = values
        return q.min(axis=1)

    def train_batch(self, batch: dict[str, np.ndarray]) -> float:
        """One optimiser step on a batch of stored transitions; returns the loss before the step."""
        k = batch["k"].astype(np.int64)
        k_next = batch["k_next"].astype(np.int64)
        level = batch["level"].astype(np.int64)
        level_next = batch["level_next"].astype(np.int64)
        action = batch["action"].astype(np.int64)
        viol = batch["violated"].astype(np.float64)
        future = self.gamma * self.next_state_values(k_next, level_next, batch["rate_next"])
        if not self._pds:
            cost = self.w_perf * viol + self.known_cost(k_next, action)
            y = np.zeros((len(action), self.n_act))
            mask = np.zeros_like(y)
            rb = np.arange(len(action))
            y[rb, action] = cost + future
            mask[rb, action] = 1.0
            loss = self.net.train_step(self.encoder.encode(k, level), y, mask)
        else:
            unknown = self.w_perf * viol
            est = self.estimated_unknown_cost(k_next, batch["rate"])
            if est is not None:
                unknown = unknown - est
            y = (unknown + future)[:, None]
            loss = self.net.train_step(self.encoder.encode(k_next, level), y)  # the PDS is (k + a, level)
        self.losses_seen += 1
        self.last_loss = loss
        return loss

    # ---- self-calibration: the range grew (policies.calibration) -----------------------------------------------
    def _remap_levels(self, old: Any, factor: int) -> None:
        """The replay buffer's levels are recomputed from its rates; the network's inputs for the levels are
        merged so that a state of the new level ``j`` reads (about) what the old levels ``j*m..`` read: one-hot
        levels (reduced2) average the first-layer weight rows of the old level columns, a scalar level (reduced1)
        scales its weight row by the factor."""
        self._on_reconfigure()  # level width and caches
        size = self.replay.size
        if size:
            data = self.replay.data
            for lv_name, rate_name in (("level", "rate"), ("level_next", "rate_next")):
                rates = data[rate_name][:size]
                data[lv_name][:size] = [self.level(float(r)) for r in rates]
        w0 = self.net.weights[0]
        base, n = self.encoder._level_base, self.n_levels
        if self.encoder.kind == "reduced2":
            from policies.calibration import merge_values

            w0[base : base + n] = merge_values(w0[base : base + n], factor, axis=0, fill=0.0)
        else:
            col, _ = self.encoder.level_column(1)
            w0[col] *= factor

    # ---- durable state ----------------------------------------------------------------------------------
    def _get_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        net_meta, net_arrays = self.net.state()
        rep_meta, rep_arrays = self.replay.state()
        meta = {"net": net_meta, "replay": rep_meta, "losses_seen": self.losses_seen, **self._model_meta()}
        return meta, {**net_arrays, **rep_arrays}

    def _set_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self._load_model_meta(meta)
        self._build(np.random.default_rng(0))  # the weights are overwritten below: keep self.rng untouched
        self.net.load(meta["net"], arrays)
        self.replay.load(meta["replay"], arrays)
        self.losses_seen = int(meta["losses_seen"])

    def _model_meta(self) -> dict[str, Any]:
        return {}

    def _load_model_meta(self, meta: dict[str, Any]) -> None:
        pass


class DeepQLearning(_DeepQBase):
    """``dql``: deep Q-learning with one network output per action (paper 001, Alg. 2)."""

    name: ClassVar[str] = "dql"


class DeepQLearningPDS(_DeepQBase):
    """``dql-pds``: the network learns the post-decision-state value of the unknown cost only (Sec. 4.3.1)."""

    name: ClassVar[str] = "dql-pds"
    _pds: ClassVar[bool] = True


class DeepQLearningPDSPlus(DeepQLearningPDS):
    """``dql-pds-plus``: as ``dql-pds``, bootstrapped with unknown-cost estimates of an approximate model; the
    network learns the estimation error."""

    name: ClassVar[str] = "dql-pds-plus"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        **_DeepQBase.DEFAULTS,
        **APPROX_DEFAULTS,
    }

    @classmethod
    def check_params(cls, params: dict[str, Any]) -> None:
        super().check_params(params)
        check_approx_params(params)

    def _draw_model_errors(self) -> None:
        self.service_rate_factor, self.speedup_factors = draw_model_errors(
            self.rng, self.params, self.spec.n_res
        )

    def _model_meta(self) -> dict[str, Any]:
        return {
            "service_rate_factor": self.service_rate_factor,
            "speedup_factors": self.speedup_factors.tolist(),
        }

    def _load_model_meta(self, meta: dict[str, Any]) -> None:
        self.service_rate_factor = float(meta["service_rate_factor"])
        self.speedup_factors = np.array(meta["speedup_factors"], dtype=float)

    def _on_reconfigure(self) -> None:
        super()._on_reconfigure()
        given = self.spec.model_mode == "given"
        m = self.planning_model()
        self._planned_service_s = None if m is None else m.service_mean_s
        if m is None:  # model_mode "learn" before the first observation: no estimate yet
            m = self.spec.model or QueueModel()
            self._no_model = True
        else:
            self._no_model = False
        # s per tuple on speedup 1: the paper's perturbed model when given, the learned one as it is otherwise
        self.approx_service_s = m.service_mean_s / (self.service_rate_factor if given else 1.0)
        self.approx_speedups = self.spec.speedups * (self.speedup_factors if given else 1.0)
        self._rr_worst = m.balancing == "round_robin" and m.aggregation == "worst"

    def _calibrate(self, k: np.ndarray, rate: float, obs: Observation | None) -> None:
        super()._calibrate(k, rate, obs)
        if self.spec.model_mode != "given":
            m = self.planning_model()
            old = self._planned_service_s
            if m is not None and (old is None or abs(m.service_mean_s - old) > MODEL_REFRESH_TOLERANCE * old):
                self._on_reconfigure()

    def estimated_response_time(self, ks: np.ndarray, rates: np.ndarray) -> np.ndarray:
        """Response time (s) of deployments ``ks`` at ``rates`` (tuples/s) under the approximate model:
        M/G/1 with exponential service (variance = mean^2), perturbed service rate and speedups."""
        approx = self.approx_model()
        return np.array(
            [
                approx.response_time(kk, self.approx_speedups, float(r))
                for kk, r in zip(ks, rates, strict=True)
            ]
        )

    def approx_model(self) -> QueueModel:
        m = self.spec.model or QueueModel()
        return QueueModel(self.approx_service_s, self.approx_service_s**2, "mg1", m.balancing, m.aggregation)

    def estimated_thresholds(self, ks: np.ndarray) -> np.ndarray | None:
        """Largest rate (tuples/s) each deployment sustains within R_max under the approximate model.

        Round robin + worst replica, exponential service ``S`` on the slowest type: per-replica rate ``x``
        violates iff ``S + x S^2 / (1 - x S) > R_max`` iff ``x > (R_max - S) / (S R_max)``; times ``n``
        replicas. Other models: bisection on the response time, per deployment.
        """
        r_max = self.spec.r_max_s
        if self._no_model:
            return None
        if self._rr_worst:
            n = ks.sum(axis=1)
            slowest = np.where(ks > 0, self.approx_speedups, np.inf).min(axis=1)
            s = self.approx_service_s / slowest
            return np.where(s < r_max, n * (r_max - s) / (s * r_max), 0.0)
        approx = self.approx_model()
        out = np.empty(len(ks))
        for i, kk in enumerate(ks):
            lo, hi = 0.0, approx.capacity(kk, self.approx_speedups)
            if approx.response_time(kk, self.approx_speedups, 0.0) > r_max:
                out[i] = 0.0
                continue
            for _ in range(50):
                mid = 0.5 * (lo + hi)
                if approx.response_time(kk, self.approx_speedups, mid) > r_max:
                    hi = mid
                else:
                    lo = mid
            out[i] = lo
        return out
