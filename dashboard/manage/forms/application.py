"""The application form: name, engine and connector, SLO, operators, streams (edges), per-path SLOs, policies
per control level, control periods, regions. ``build_document`` turns it into an Application manifest."""

from __future__ import annotations

from typing import Any

from django import forms

from autoscaler import models as m
from autoscaler.schemas.application import POLICY_LEVELS
from policies import registry

from .common import (
    ErrorRouter,
    LooseMultipleChoiceField,
    RowList,
    YamlMappingField,
    filled_rows,
    number,
    put,
    select,
    text,
)

ENGINES = [("simulated", "simulated (built-in)"), ("spark", "Spark Structured Streaming"), ("flink", "Flink")]
KINDS = [("source", "source"), ("operator", "operator"), ("sink", "sink")]
LEVEL_NAMES = {
    "om": "Operator Manager (per operator)",
    "am": "Application Manager",
    "rm": "Region Manager",
    "im": "Infrastructure Manager",
}


def policy_choices(level: str) -> list[tuple[str, str]]:
    """Policy names of ``policies.registry`` for one level, after a "controller default" choice."""
    return [("", "controller default")] + [(name, name) for name in registry.POLICIES_BY_LEVEL[level]]


class ApplicationForm(forms.Form):
    """Scalar fields of an Application manifest (the repeated parts are the formsets below)."""

    name = text(
        "Name", "letters, digits, '.', '_' or '-'; unique among your applications", autocomplete="off"
    )
    engine = select("Engine", ENGINES)
    connector = YamlMappingField(
        label="Connector settings (YAML)",
        rows=5,
        help_text="per engine, e.g. simulated: 'trace: taxi_last_month', spark: 'master: local[2]'; "
        "empty = defaults",
    )
    r_max_ms = number("R_max (ms)", "response-time bound of every source-to-sink path, milliseconds")
    eta_v = number("η_V: tolerated violation fraction", "in [0, 1), e.g. 0.05", placeholder="0.05")
    eta_r = number("η_R: tolerated reconfiguration fraction", "in [0, 1), e.g. 0.10", placeholder="0.10")
    om_period_s = number("Operator Manager period (s)", "T_OM, seconds", placeholder="60")
    am_period_s = number(
        "Application Manager period (s)", "seconds, at least the OM period", placeholder="600"
    )
    regions = LooseMultipleChoiceField(
        label="Regions",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="node pools the application may run in (none = any)",
    )
    dry_run = forms.BooleanField(
        label="Dry run: decide and record scaling actions, never apply them", required=False
    )

    def __init__(self, *args: Any, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["regions"].choices = [(r, r) for r in m.Region.objects.values_list("name", flat=True)]
        for level in POLICY_LEVELS:
            self.fields[f"policy_{level}"] = select(f"{LEVEL_NAMES[level]} policy", policy_choices(level))
            self.fields[f"policy_{level}_params"] = YamlMappingField(
                label=f"{LEVEL_NAMES[level]} parameters (YAML)", rows=2, help_text="empty = policy defaults"
            )
        if editing:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = "the name identifies the application and cannot change"


class OperatorRow(forms.Form):
    name = text("Operator name", autocomplete="off")
    kind = select("Kind", KINDS)
    max_parallelism = number("K_max", "maximum replicas", step="1")
    selectivity = number("Selectivity", "output tuples per input tuple")
    engine_object = text("Engine object", "stage / vertex / query name")
    service_time_ms = number("Service time (ms)", "optional hint, per tuple on a speedup-1 node")
    expected_peak_rate = number("Expected peak rate (tuples/s)", "optional hint for the initial rate range")


class StreamRow(forms.Form):
    source = text("From operator", list="operator-names", autocomplete="off")
    target = text("To operator", list="operator-names", autocomplete="off")


class PathRow(forms.Form):
    path = text("Path (operators, comma-separated)", placeholder="source, op, sink")
    r_max_ms = number("R_max of this path (ms)")


OperatorFormSet = forms.formset_factory(OperatorRow, extra=0)
StreamFormSet = forms.formset_factory(StreamRow, extra=0)
PathFormSet = forms.formset_factory(PathRow, extra=0)

MAIN_FIELDS = {
    "metadata.name": "name",
    "metadata": "name",
    "spec.engine": "engine",
    "spec.connector": "connector",
    "spec.slo.rMaxMs": "r_max_ms",
    "spec.slo.etaV": "eta_v",
    "spec.slo.etaR": "eta_r",
    "spec.periods.omS": "om_period_s",
    "spec.periods.amS": "am_period_s",
    "spec.periods": "am_period_s",
    "spec.regions": "regions",
    "spec.dryRun": "dry_run",
    **{f"spec.policies.{lv}": f"policy_{lv}" for lv in POLICY_LEVELS},
    **{f"spec.policies.{lv}.name": f"policy_{lv}" for lv in POLICY_LEVELS},
    **{f"spec.policies.{lv}.params": f"policy_{lv}_params" for lv in POLICY_LEVELS},
}
OPERATOR_FIELDS = {
    "name": "name",
    "kind": "kind",
    "maxParallelism": "max_parallelism",
    "selectivity": "selectivity",
    "engineObject": "engine_object",
    "serviceTimeMs": "service_time_ms",
    "expectedPeakRate": "expected_peak_rate",
}


class ApplicationEditor:
    """The form and formsets of one application page, bound to POST data or filled from a stored manifest."""

    def __init__(self, data: Any = None, *, manifest: dict[str, Any] | None = None) -> None:
        self.editing = manifest is not None
        initial, ops, streams, paths = _initial(manifest) if manifest else ({}, [], [], [])
        if not manifest:
            initial = {"engine": "simulated", "eta_v": "0.05", "eta_r": "0.10"}
            ops = [{"kind": "source"}, {"kind": "operator"}, {"kind": "sink"}]
            streams = [{}, {}]
        self.form = ApplicationForm(data, initial=initial, editing=self.editing)
        if (
            data is not None
        ):  # bound rows must not compare with initial rows (unchanged ones would be skipped)
            ops, streams, paths = [], [], []
        self.operators = OperatorFormSet(data, initial=ops, prefix="operators")
        self.streams = StreamFormSet(data, initial=streams, prefix="streams")
        self.paths = PathFormSet(data, initial=paths, prefix="paths")
        self.state = (manifest or {}).get("spec", {}).get("state", "registered")

    def is_valid(self) -> bool:
        """Django-side parsing only (management forms, YAML syntax); the manifest is validated on apply."""
        return all(x.is_valid() for x in (self.form, self.operators, self.streams, self.paths))

    def build_document(self, name: str | None = None) -> dict[str, Any]:
        """The Application manifest of the submitted form (blank optional fields left out)."""
        d = self.form.cleaned_data
        ops, self.operator_rows = filled_rows(self.operators)
        streams, self.stream_rows = filled_rows(self.streams)
        paths, self.path_rows = filled_rows(self.paths)
        slo: dict[str, Any] = {}
        put(slo, "rMaxMs", d["r_max_ms"])
        put(slo, "etaV", d["eta_v"])
        put(slo, "etaR", d["eta_r"])
        if paths:
            slo["paths"] = [_path_doc(p) for p in paths]
        periods: dict[str, Any] = {}
        put(periods, "omS", d["om_period_s"])
        put(periods, "amS", d["am_period_s"])
        policies: dict[str, Any] = {}
        for level in POLICY_LEVELS:
            choice, params = d.get(f"policy_{level}") or "", d.get(f"policy_{level}_params")
            if choice:
                policies[level] = {"name": choice, "params": params} if params else choice
            elif params:
                policies[level] = {"name": "", "params": params}
        spec: dict[str, Any] = {"slo": slo, "operators": [_operator_doc(o) for o in ops]}
        put(spec, "engine", d["engine"])
        spec.update(
            connector=d["connector"],
            streams=[[s.get("source", "").strip(), s.get("target", "").strip()] for s in streams],
            policies=policies,
            regions=list(d.get("regions") or []),
            dryRun=bool(d.get("dry_run")),
            state=self.state,
        )
        if periods:
            spec["periods"] = periods
        return {
            "apiVersion": "autoscaler/v1",
            "kind": "Application",
            "metadata": {"name": name if name is not None else (d.get("name") or "").strip()},
            "spec": spec,
        }

    def router(self) -> ErrorRouter:
        return ErrorRouter(
            self.form,
            MAIN_FIELDS,
            {
                "spec.operators": RowList(self.operators, OPERATOR_FIELDS, self.operator_rows),
                "spec.streams": RowList(self.streams, {}, self.stream_rows, positions=("source", "target")),
                "spec.slo.paths": RowList(self.paths, {"path": "path", "rMaxMs": "r_max_ms"}, self.path_rows),
            },
        )

    def slo_text(self) -> list[str]:
        """The SLO in plain language, from the form's current values (the page's script keeps it up to date)."""
        values = self.form.data if self.form.is_bound else self.form.initial
        return slo_sentences(
            values.get("r_max_ms"), values.get("eta_v"), values.get("eta_r"), values.get("om_period_s")
        )


def _operator_doc(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in OPERATOR_FIELDS.items():
        put(out, key, row.get(name))
    return out


def _path_doc(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": [p.strip() for p in (row.get("path") or "").split(",") if p.strip()]}
    put(out, "rMaxMs", row.get("r_max_ms"))
    return out


def _initial(doc: dict[str, Any]) -> tuple[dict, list, list, list]:
    spec = doc["spec"]
    slo, periods, policies = spec["slo"], spec.get("periods", {}), spec.get("policies", {})
    initial: dict[str, Any] = {
        "name": doc["metadata"]["name"],
        "engine": spec["engine"],
        "connector": spec.get("connector") or {},
        "r_max_ms": _fmt(slo.get("rMaxMs")),
        "eta_v": _fmt(slo.get("etaV")),
        "eta_r": _fmt(slo.get("etaR")),
        "om_period_s": _fmt(periods.get("omS")),
        "am_period_s": _fmt(periods.get("amS")),
        "regions": spec.get("regions", []),
        "dry_run": spec.get("dryRun", False),
    }
    for level in POLICY_LEVELS:
        choice = policies.get(level)
        if isinstance(choice, str):
            initial[f"policy_{level}"] = choice
        elif isinstance(choice, dict):
            initial[f"policy_{level}"] = choice.get("name", "")
            initial[f"policy_{level}_params"] = choice.get("params") or {}
    ops = [
        {
            "name": o["name"],
            "kind": o.get("kind", "operator"),
            "max_parallelism": _fmt(o.get("maxParallelism")),
            "selectivity": _fmt(o.get("selectivity")),
            "engine_object": o.get("engineObject") or "",
            "service_time_ms": _fmt(o.get("serviceTimeMs")),
            "expected_peak_rate": _fmt(o.get("expectedPeakRate")),
        }
        for o in spec["operators"]
    ]
    streams = [{"source": a, "target": b} for a, b in spec.get("streams", [])]
    paths = [{"path": ", ".join(p["path"]), "r_max_ms": _fmt(p["rMaxMs"])} for p in slo.get("paths", [])]
    return initial, ops, streams, paths


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def slo_sentences(r_max: Any, eta_v: Any, eta_r: Any, om_s: Any = None) -> list[str]:
    """Plain-language reading of an SLO, e.g. "R_max = 60 ms may be exceeded at most 5% of the time"."""
    out = []
    r, v, rr, period = _num(r_max), _num(eta_v), _num(eta_r), _num(om_s) or 60.0
    bound = f"R_max = {r:g} ms" if r is not None else "R_max"
    if v is not None and 0 <= v < 1:
        per_day = v * 86400.0 / period
        out.append(
            f"{bound} may be exceeded at most {v * 100:g}% of the time "
            f"(at most {per_day:.0f} of the {86400.0 / period:.0f} control periods of {period:g} s in a day)."
        )
    else:
        out.append(f"{bound}: give η_V in [0, 1) to see how often it may be exceeded.")
    if rr is not None and 0 <= rr < 1:
        out.append(f"The deployment may be changed in at most {rr * 100:g}% of the control periods.")
    return out


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
