"""Example stream-processing applications as plain data: operator graphs with selectivities and service times.

An application is a DAG of operators. The external source feeds every operator without predecessors with the
whole source rate; an operator ``u`` emits ``selectivity_u`` output tuples per input tuple and every successor
receives that whole output stream (stream subscription, as in Storm/Flink), so an operator with several
predecessors receives the sum of their outputs. Operators without successors feed sinks. Input rates are
therefore linear in the source rate: ``rate_u = gain_u * source_rate`` (:meth:`Application.rate_gains`).

Paper 001 (Fig. 19) draws its three applications A (pipeline), B (diamond) and C (multi-sink, paths of different
length) only as a picture; the paper text gives their shapes, R_max = 40 ms and the per-replica M/G/1 model with
service-time variance mean^2 / 2, but not the per-operator service rates or selectivities. The service rates below
are those of the authors' public simulator's multi-operator application (mu = 350, 270, 180, 300, 250 tuples/s);
the selectivities are ours, chosen so that the operators carry different loads (which is what latency
apportioning exploits). WordCount is paper 004 Sec. 8.1 exactly (M/D/1, mu = 330 tuples/s, splitter x5, filter
drops 60 %, up to 20 replicas, R_max = 60 ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from policies.graph import source_to_sink_paths, topological_order
from policies.operator_model import CostWeights, NodeType, OperatorSpec, QueueModel


@dataclass(frozen=True)
class OperatorDef:
    """One operator: per-replica service time on a speedup-1 node (mean in s, variance in s^2), its queue kind
    ("mg1" or "md1") and its selectivity (output tuples per input tuple, >= 0)."""

    name: str
    service_mean_s: float
    service_var_s2: float
    selectivity: float = 1.0
    kind: str = "mg1"

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("operators[].name must not be empty")
        if self.selectivity < 0:
            raise ValueError(f"operators[{self.name}].selectivity must be >= 0, got {self.selectivity}")
        self.queue_model()  # validates service_mean_s, service_var_s2 and kind

    def queue_model(self) -> QueueModel:
        return QueueModel(self.service_mean_s, self.service_var_s2, kind=self.kind)


@dataclass(frozen=True)
class Application:
    """A DAG of operators with an end-to-end response-time bound ``r_max_s`` (s) for every source-to-sink path and
    at most ``k_max`` replicas per operator."""

    name: str
    operators: tuple[OperatorDef, ...]
    edges: tuple[tuple[str, str], ...]
    r_max_s: float
    k_max: int = 10
    description: str = ""
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.operators:
            raise ValueError(f"application {self.name!r}: operators must not be empty")
        names = [op.name for op in self.operators]
        if len(set(names)) != len(names):
            raise ValueError(f"application {self.name!r}: operators: duplicate operator names in {names}")
        self._index.update({n: i for i, n in enumerate(names)})
        for a, b in self.edges:
            for end in (a, b):
                if end not in self._index:
                    raise ValueError(f"application {self.name!r}: edges: unknown operator {end!r}")
            if a == b:
                raise ValueError(f"application {self.name!r}: edges: self-loop on {a!r}")
        if not self.r_max_s > 0:
            raise ValueError(f"application {self.name!r}: r_max_s must be > 0, got {self.r_max_s}")
        if self.k_max < 1:
            raise ValueError(f"application {self.name!r}: k_max must be >= 1, got {self.k_max}")
        self.topological_order()  # raises on cycles

    # ---- graph ------------------------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.operators)

    @property
    def names(self) -> list[str]:
        return [op.name for op in self.operators]

    def index(self, name: str) -> int:
        return self._index[name]

    def successors(self, u: int) -> list[int]:
        name = self.operators[u].name
        return [self._index[b] for a, b in self.edges if a == name]

    def predecessors(self, u: int) -> list[int]:
        name = self.operators[u].name
        return [self._index[a] for a, b in self.edges if b == name]

    def topological_order(self) -> list[int]:
        try:
            return topological_order(range(self.n), self._index_edges())
        except ValueError as exc:
            raise ValueError(f"application {self.name!r}: edges: {exc}") from None

    def paths(self) -> list[tuple[int, ...]]:
        """Every source-to-sink path as a tuple of operator indices (sources: no predecessors; sinks: no
        successors), in a deterministic order."""
        return [tuple(p) for p in source_to_sink_paths(range(self.n), self._index_edges())]

    def _index_edges(self) -> list[tuple[int, int]]:
        return [(self._index[a], self._index[b]) for a, b in self.edges]

    def path_matrix(self) -> np.ndarray:
        """Boolean matrix (paths x operators): entry [p, u] is whether operator u lies on path p."""
        paths = self.paths()
        m = np.zeros((len(paths), self.n), dtype=bool)
        for p, path in enumerate(paths):
            m[p, list(path)] = True
        return m

    def rate_gains(self) -> np.ndarray:
        """Input rate of each operator per unit of source rate (dimensionless)."""
        gain = np.zeros(self.n)
        for u in self.topological_order():
            preds = self.predecessors(u)
            if not preds:
                gain[u] = 1.0
            else:
                gain[u] = sum(gain[p] * self.operators[p].selectivity for p in preds)
        return gain

    # ---- models -----------------------------------------------------------------------------------------------
    def operator_spec(
        self,
        u: int,
        node_types: tuple[NodeType, ...],
        r_max_s: float | None = None,
        weights: CostWeights | None = None,
        c_max: float | None = None,
    ) -> OperatorSpec:
        """The OperatorSpec of operator ``u`` (its true queue model) with bound ``r_max_s`` (s)."""
        return OperatorSpec(
            node_types=tuple(node_types),
            k_max=self.k_max,
            r_max_s=self.r_max_s if r_max_s is None else r_max_s,
            weights=weights or CostWeights(),
            model=self.operators[u].queue_model(),
            c_max=c_max,
        )

    def check_feasible(
        self, node_types: tuple[NodeType, ...] | None = None, r_max_s: float | None = None
    ) -> None:
        """Raise ValueError when ``r_max_s`` (default the application's) is below the sum of the operators'
        minimum service times (mean on the fastest node type) along some path: it can never be met."""
        r_max = self.r_max_s if r_max_s is None else r_max_s
        fastest = max((t.speedup for t in node_types), default=1.0) if node_types else 1.0
        for path in self.paths():
            floor = sum(self.operators[u].service_mean_s / fastest for u in path)
            if r_max < floor:
                names = " -> ".join(self.operators[u].name for u in path)
                raise ValueError(
                    f"r_max_s: {r_max * 1000:.3f} ms is below the sum of the minimum service times along path "
                    f"{names} ({floor * 1000:.3f} ms): it can never be met"
                )


def _mg1(name: str, mu: float, selectivity: float = 1.0) -> OperatorDef:
    """An M/G/1 operator with service rate ``mu`` (tuples/s) and variance mean^2/2 as in paper 001 Sec. 6."""
    return OperatorDef(name, 1.0 / mu, (1.0 / mu) ** 2 / 2.0, selectivity)


def app_a_pipeline(r_max_s: float = 0.040, k_max: int = 10) -> Application:
    """Paper 001 Fig. 19 A: a pipeline source -> filter -> map -> reduce -> sink."""
    return Application(
        "A",
        (_mg1("filter", 350.0, 0.8), _mg1("map", 270.0, 1.0), _mg1("reduce", 180.0, 1.0)),
        (("filter", "map"), ("map", "reduce")),
        r_max_s,
        k_max,
        "pipeline of three operators",
    )


def app_b_diamond(r_max_s: float = 0.040, k_max: int = 10) -> Application:
    """Paper 001 Fig. 19 B: a diamond split -> {left, right} -> join (two paths of three operators)."""
    return Application(
        "B",
        (_mg1("split", 350.0, 1.0), _mg1("left", 270.0, 0.5), _mg1("right", 180.0, 0.5), _mg1("join", 300.0)),
        (("split", "left"), ("split", "right"), ("left", "join"), ("right", "join")),
        r_max_s,
        k_max,
        "diamond: fork into two branches and join",
    )


def app_c_multisink(r_max_s: float = 0.040, k_max: int = 10) -> Application:
    """Paper 001 Fig. 19 C: two sinks reached by paths of different length:
    filter -> map -> reduce -> sink 1 and filter -> rank -> sink 2."""
    return Application(
        "C",
        (_mg1("filter", 350.0, 0.8), _mg1("map", 270.0), _mg1("reduce", 180.0), _mg1("rank", 250.0)),
        (("filter", "map"), ("map", "reduce"), ("filter", "rank")),
        r_max_s,
        k_max,
        "multi-sink: a three-operator path and a two-operator path sharing the first operator",
    )


def app_wordcount(r_max_s: float = 0.060, k_max: int = 20) -> Application:
    """Paper 004 Sec. 8.1 WordCount: splitter (5 words per sentence) -> filter (drops 60 %) -> counter ->
    consumer, every operator M/D/1 with mu = 330 tuples/s, up to 20 replicas, R_max = 60 ms."""
    s = 1.0 / 330.0
    return Application(
        "wordcount",
        (
            OperatorDef("splitter", s, 0.0, 5.0, "md1"),
            OperatorDef("filter", s, 0.0, 0.4, "md1"),
            OperatorDef("counter", s, 0.0, 1.0, "md1"),
            OperatorDef("consumer", s, 0.0, 1.0, "md1"),
        ),
        (("splitter", "filter"), ("filter", "counter"), ("counter", "consumer")),
        r_max_s,
        k_max,
        "paper 004 WordCount",
    )


APPLICATIONS = {
    "A": app_a_pipeline,
    "B": app_b_diamond,
    "C": app_c_multisink,
    "wordcount": app_wordcount,
}


def application(name: str, **kwargs: float | int) -> Application:
    """An example application by name: "A", "B", "C" (paper 001 Fig. 19) or "wordcount" (paper 004)."""
    if name not in APPLICATIONS:
        raise ValueError(f"application: unknown example {name!r}: choose one of {', '.join(APPLICATIONS)}")
    return APPLICATIONS[name](**kwargs)  # type: ignore[arg-type]
