"""Application manifests: operator graph, SLO, policies per control level, connector settings, periods."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from policies import registry

from .common import DB_INT_MAX, Name, SpecModel
from .connectors import validate_connector
from .errors import FieldError, from_policy_error

Engine = Literal["spark", "flink", "simulated"]
OperatorKind = Literal["source", "operator", "sink"]
LifecycleState = Literal["registered", "running", "paused", "deleted"]
POLICY_LEVELS = ("om", "am", "rm", "im")


class OperatorSpec(SpecModel):
    """One operator. ``maxParallelism``: K_max (>= 1); ``selectivity``: output tuples per input tuple (>= 0);
    ``engineObject``: what the operator maps to in the engine (stage, vertex or query name);
    ``serviceTimeMs``: optional mean service time per tuple on a speedup-1 node (ms), a hint the operator's
    manager starts from before it has learned the service time from the metrics; ``expectedPeakRate``: optional
    input rate (tuples/s) the operator is expected to peak at, a hint for the initial range of the managers' rate
    levels (without it the range is learned from the first rates; either way it grows when rates leave it).
    """

    name: Name
    kind: OperatorKind = "operator"
    max_parallelism: int = Field(default=1, ge=1, le=DB_INT_MAX)
    selectivity: float = Field(default=1.0, ge=0)
    engine_object: str | None = None
    service_time_ms: float | None = Field(default=None, gt=0)
    expected_peak_rate: float | None = Field(default=None, gt=0, le=1e9)


class PathSLO(SpecModel):
    """A response-time bound (ms) that overrides ``rMaxMs`` for one source-to-sink path (operator names)."""

    path: list[Name] = Field(min_length=2)
    r_max_ms: float = Field(gt=0)


class SLOSpec(SpecModel):
    """``rMaxMs``: bound on the response time of every source-to-sink path (ms, > 0); ``etaV``, ``etaR``:
    tolerated fractions of periods violating the bound and of periods with a reconfiguration, in [0, 1)."""

    r_max_ms: float = Field(gt=0)
    eta_v: float = Field(default=0.05, ge=0, lt=1)
    eta_r: float = Field(default=0.10, ge=0, lt=1)
    paths: list[PathSLO] = Field(default_factory=list)


class PolicyChoice(SpecModel):
    """A policy name of ``policies.registry`` and its parameters. In manifests a bare name is accepted too."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


def _bare_name_allowed(schema: dict[str, Any]) -> None:
    """JSON schema of a policy level: a PolicyChoice, a bare policy name (string), or null."""
    schema["anyOf"] = [*schema.get("anyOf", []), {"type": "string"}]


class PoliciesSpec(SpecModel):
    """Policy of each control level: Operator, Application, Region and Infrastructure Manager.

    A level left out uses the controller's default. A level is written (and exported) as a bare policy name
    when it has no parameters, else as ``{name, params}``; either form is read as a PolicyChoice."""

    om: PolicyChoice | None = Field(default=None, json_schema_extra=_bare_name_allowed)
    am: PolicyChoice | None = Field(default=None, json_schema_extra=_bare_name_allowed)
    rm: PolicyChoice | None = Field(default=None, json_schema_extra=_bare_name_allowed)
    im: PolicyChoice | None = Field(default=None, json_schema_extra=_bare_name_allowed)

    @field_validator("om", "am", "rm", "im", mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    def to_manifest_dict(self) -> dict:
        out: dict[str, Any] = {}
        for level in POLICY_LEVELS:
            choice = getattr(self, level)
            if choice is not None:
                out[level] = (
                    choice.name if not choice.params else {"name": choice.name, "params": choice.params}
                )
        return out


class PeriodsSpec(SpecModel):
    """Control periods in seconds: ``omS`` = T_OM (Operator Manager), ``amS`` (Application Manager, >= omS)."""

    om_s: float = Field(default=60.0, gt=0, alias="omS")
    am_s: float = Field(default=600.0, gt=0, alias="amS")

    @model_validator(mode="after")
    def _am_not_shorter(self) -> PeriodsSpec:
        if self.am_s < self.om_s:
            raise ValueError(f"amS ({self.am_s:g} s) must be >= omS ({self.om_s:g} s)")
        return self


_HHMM = r"^([01]\d|2[0-3]):[0-5]\d$"


class FreezeWindowSpec(SpecModel):
    """A daily window ``start``-``end`` (UTC ``"HH:MM"``, may wrap midnight) during which no change is applied."""

    start: str = Field(pattern=_HHMM)
    end: str = Field(pattern=_HHMM)

    def contains(self, when: Any) -> bool:
        """Whether the UTC datetime ``when`` falls in the window."""
        minute = when.hour * 60 + when.minute
        a = int(self.start[:2]) * 60 + int(self.start[3:])
        b = int(self.end[:2]) * 60 + int(self.end[3:])
        return a <= minute < b if a <= b else minute >= a or minute < b


class RailsSpec(SpecModel):
    """Safety rails applied by the control plane after AM arbitration (``spec.rails``).

    ``minReplicas`` / ``maxReplicas``: operator name (or ``"*"`` = every operator) -> bound on its total replicas;
    ``scaleDownDelayS``: no scale-down of an operator within this many seconds after its last scale-up;
    ``freezeWindows``: daily UTC windows without changes; ``ineffectiveScaleUpRatio`` (0 = off): after a scale-up
    the measured capacity (tuples/s) must rise by at least this fraction of the expected rise, else further
    scale-ups of that operator are blocked for ``ineffectiveBlockS`` seconds; ``rollbackOnFailure``: restore the
    previous deployment when the period after a reconfiguration shows the job failing.
    """

    min_replicas: dict[str, Annotated[int, Field(le=DB_INT_MAX)]] = Field(default_factory=dict)
    max_replicas: dict[str, Annotated[int, Field(le=DB_INT_MAX)]] = Field(default_factory=dict)
    scale_down_delay_s: float = Field(default=0.0, ge=0, alias="scaleDownDelayS")
    freeze_windows: list[FreezeWindowSpec] = Field(default_factory=list)
    ineffective_scale_up_ratio: float = Field(default=0.0, ge=0, le=1)
    ineffective_block_s: float = Field(default=600.0, ge=0, alias="ineffectiveBlockS")
    rollback_on_failure: bool = True

    @field_validator("min_replicas", "max_replicas")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, n in value.items():
            if n < 1:
                raise ValueError(f"{name}: must be >= 1 replica, got {n}")
        return value

    def to_manifest_dict(self) -> dict:
        """Only the rails that differ from the defaults (an application without rails exports none)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)

    def bounds(self, operator: str, k_max: int) -> tuple[int, int]:
        """(min, max) total replicas of ``operator`` given its K_max."""
        lo = self.min_replicas.get(operator, self.min_replicas.get("*", 1))
        hi = self.max_replicas.get(operator, self.max_replicas.get("*", k_max))
        return lo, min(hi, k_max)

    def frozen(self, when: Any) -> FreezeWindowSpec | None:
        for window in self.freeze_windows:
            if window.contains(when):
                return window
        return None

    def operator_errors(
        self, max_parallelism: dict[str, int], prefix: str = "spec.rails"
    ) -> list[FieldError]:
        """Unknown operators, min above max, min above an operator's maxParallelism."""
        errors = []
        for key, alias in (("min_replicas", "minReplicas"), ("max_replicas", "maxReplicas")):
            for name in getattr(self, key):
                if name != "*" and name not in max_parallelism:
                    errors.append(FieldError(f"{prefix}.{alias}.{name}", "unknown operator"))
        for name in set(self.min_replicas) | set(self.max_replicas):
            if name != "*" and name not in max_parallelism:
                continue
            names = list(max_parallelism) if name == "*" else [name]
            for op in names:
                lo = self.min_replicas.get(op, self.min_replicas.get("*", 1))
                hi = self.max_replicas.get(op, self.max_replicas.get("*", 10**9))
                if lo > hi:
                    errors.append(
                        FieldError(f"{prefix}.minReplicas.{name}", f"{lo} is above maxReplicas {hi}")
                    )
                    break
                if lo > max_parallelism[op]:
                    errors.append(
                        FieldError(
                            f"{prefix}.minReplicas.{name}",
                            f"{lo} is above maxParallelism {max_parallelism[op]} of operator {op!r}",
                        )
                    )
                    break
        return errors


class ApplicationSpec(SpecModel):
    """``spec`` of an Application."""

    engine: Engine
    connector: dict[str, Any] = Field(default_factory=dict)
    slo: SLOSpec
    operators: list[OperatorSpec] = Field(min_length=1)
    streams: list[tuple[Name, Name]] = Field(default_factory=list)
    policies: PoliciesSpec = Field(default_factory=PoliciesSpec)
    periods: PeriodsSpec = Field(default_factory=PeriodsSpec)
    regions: list[Name] = Field(default_factory=list)
    dry_run: bool = False
    state: LifecycleState = "registered"
    rails: RailsSpec = Field(default_factory=RailsSpec)

    def to_manifest_dict(self) -> dict:
        out = super().to_manifest_dict()
        out["policies"] = self.policies.to_manifest_dict()
        rails = self.rails.to_manifest_dict()
        if rails:
            out["rails"] = rails
        else:
            out.pop("rails", None)
        out["streams"] = [list(edge) for edge in self.streams]
        return out

    # ---- checks that need the whole spec ----------------------------------------------------------------
    def semantic_errors(self) -> list[FieldError]:
        """Graph, SLO-path, policy and connector errors (everything pydantic's field checks cannot see)."""
        errors = self._operator_errors()
        errors += self._graph_errors()
        errors += self._path_errors()
        errors += self._policy_errors()
        errors += self.rails.operator_errors({op.name: op.max_parallelism for op in self.operators})
        settings, connector_errors = validate_connector(self.engine, self.connector)
        errors += connector_errors
        if not connector_errors:
            self.connector = settings
        for i, region in enumerate(self.regions):
            if region in self.regions[:i]:
                errors.append(FieldError(f"spec.regions[{i}]", f"duplicate region {region!r}"))
        return errors

    def operator_index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for i, op in enumerate(self.operators):
            index.setdefault(op.name, i)
        return index

    def _operator_errors(self) -> list[FieldError]:
        errors = []
        index = self.operator_index()
        for i, op in enumerate(self.operators):
            if index[op.name] != i:
                errors.append(
                    FieldError(
                        f"spec.operators[{i}].name",
                        f"duplicate operator name {op.name!r} (also operators[{index[op.name]}])",
                    )
                )
        kinds = {op.kind for op in self.operators}
        for needed in ("source", "sink"):
            if needed not in kinds:
                errors.append(
                    FieldError("spec.operators", f"the graph needs at least one operator of kind {needed}")
                )
        return errors

    def _graph_errors(self) -> list[FieldError]:
        errors = []
        index = self.operator_index()
        edges: list[tuple[str, str]] = []
        seen: dict[tuple[str, str], int] = {}
        for i, (src, dst) in enumerate(self.streams):
            loc = f"spec.streams[{i}]"
            unknown = [end for end in (src, dst) if end not in index]
            if unknown:
                errors += [
                    FieldError(loc, f"edge to unknown operator {end!r}") for end in dict.fromkeys(unknown)
                ]
                continue
            if (src, dst) in seen:
                errors.append(
                    FieldError(loc, f"duplicate stream {src} -> {dst} (also streams[{seen[src, dst]}])")
                )
                continue
            seen[src, dst] = i
            if self.operators[index[dst]].kind == "source":
                errors.append(FieldError(loc, f"stream into source {dst!r}: sources have no inputs"))
            if self.operators[index[src]].kind == "sink":
                errors.append(FieldError(loc, f"stream out of sink {src!r}: sinks have no outputs"))
            edges.append((src, dst))
        cycle = find_cycle(list(index), edges)
        if cycle:
            errors.append(FieldError("spec.streams", "cycle " + " -> ".join(cycle)))
            return errors
        successors = _successors(list(index), edges)
        from_sources = _reachable([op.name for op in self.operators if op.kind == "source"], successors)
        predecessors = _successors(list(index), [(d, s) for s, d in edges])
        to_sinks = _reachable([op.name for op in self.operators if op.kind == "sink"], predecessors)
        for name, i in index.items():
            if name not in from_sources:
                errors.append(
                    FieldError(f"spec.operators[{i}]", f"operator {name!r} is unreachable from any source")
                )
            elif name not in to_sinks:
                errors.append(FieldError(f"spec.operators[{i}]", f"operator {name!r} leads to no sink"))
        return errors

    def _path_errors(self) -> list[FieldError]:
        errors = []
        index = self.operator_index()
        edges = {tuple(edge) for edge in self.streams}
        for i, path_slo in enumerate(self.slo.paths):
            loc = f"spec.slo.paths[{i}].path"
            path = path_slo.path
            unknown = [name for name in path if name not in index]
            if unknown:
                errors.append(FieldError(loc, f"unknown operator {unknown[0]!r}"))
                continue
            if (
                self.operators[index[path[0]]].kind != "source"
                or self.operators[index[path[-1]]].kind != "sink"
            ):
                errors.append(FieldError(loc, "a path must start at a source and end at a sink"))
                continue
            missing = [f"{a} -> {b}" for a, b in zip(path, path[1:], strict=False) if (a, b) not in edges]
            if missing:
                errors.append(FieldError(loc, f"no stream {missing[0]}"))
            if path in [p.path for p in self.slo.paths[:i]]:
                errors.append(FieldError(loc, "duplicate path override"))
        return errors

    def unmeetable_path_errors(self, max_speedup: float = 1.0, max_paths: int = 10_000) -> list[FieldError]:
        """Paths whose R_max (ms) is below the sum of their operators' ``serviceTimeMs`` divided by
        ``max_speedup`` (the fastest node type the application may use): such a bound can never be met.

        Operators without ``serviceTimeMs`` count as 0 ms. Paths are simple (a cycle elsewhere in the graph, itself
        an error of :meth:`semantic_errors`, does not hide them); at most ``max_paths`` source-to-sink paths are
        checked.
        """
        if not max_speedup > 0:
            raise ValueError(f"max_speedup: must be > 0, got {max_speedup}")
        index = self.operator_index()
        edges = [(a, b) for a, b in self.streams if a in index and b in index]
        successors = _successors(list(index), edges)
        overrides = {tuple(p.path): (i, p.r_max_ms) for i, p in enumerate(self.slo.paths)}
        errors: list[FieldError] = []
        stack = [[op.name] for op in self.operators if op.kind == "source"]
        seen = 0
        while stack and seen < max_paths:
            path = stack.pop()
            if self.operators[index[path[-1]]].kind != "sink":
                stack.extend(path + [n] for n in successors.get(path[-1], []) if n not in path)
                continue
            seen += 1
            floor = sum(self.operators[index[n]].service_time_ms or 0.0 for n in path) / max_speedup
            i, r_max = overrides.get(tuple(path), (None, self.slo.r_max_ms))
            if r_max < floor:
                loc = "spec.slo.rMaxMs" if i is None else f"spec.slo.paths[{i}].rMaxMs"
                errors.append(
                    FieldError(
                        loc,
                        f"{r_max:g} ms is below the sum of the operators' minimum service times along path "
                        f"{' -> '.join(path)} ({floor:g} ms at speedup {max_speedup:g}): it can never be met",
                    )
                )
        return errors

    def _policy_errors(self) -> list[FieldError]:
        errors = []
        for level in POLICY_LEVELS:
            choice = getattr(self.policies, level)
            if choice is None:
                continue
            try:
                registry.validate_params(level, choice.name, dict(choice.params))
            except ValueError as exc:
                message = str(exc)
                if message.startswith("params"):
                    errors.append(from_policy_error(message, "spec", "policies", level))
                else:
                    errors.append(FieldError(f"spec.policies.{level}.name", message))
        return errors


def _successors(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        out[src].append(dst)
    return out


def _reachable(starts: list[str], successors: dict[str, list[str]]) -> set[str]:
    seen = set(starts)
    stack = list(starts)
    while stack:
        for nxt in successors[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def find_cycle(nodes: list[str], edges: list[tuple[str, str]]) -> list[str] | None:
    """A cycle of the directed graph as a closed list of node names (``[a, b, a]``), or None if it is a DAG."""
    successors = _successors(nodes, edges)
    state = dict.fromkeys(nodes, 0)  # 0 = new, 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in successors[node]:
            if state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            if state[nxt] == 0:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in nodes:
        if state[node] == 0:
            found = visit(node)
            if found:
                return found
    return None
