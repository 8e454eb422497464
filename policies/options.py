"""The typed options registry: every parameter a manifest may set for the AM, RM and IM policies, in one place.

Each :class:`Option` has a name (as written in the manifest, snake_case like every policy parameter), a level,
the policies that take it, a type, a default, a unit, bounds, a doc and the benchmark its default comes from
(``source``, a key of :data:`BENCHMARKS`). Levels and where a manifest sets them:

- ``loop``: what the control loop runs every OM period for the application -- the AM's token-bucket arbitration
  of the OMs' proposals and the violation-budget guard; ``spec.policies.am.params.<name>``, every AM policy;
- ``am``: the Application Manager's tuning (Bayesian optimisation and its validation);
  ``spec.policies.am.params.<name>``, policy ``bo``;
- ``rm``: the Region Manager; ``spec.policies.rm.params.<name>``;
- ``im``: the Infrastructure Manager; ``spec.policies.im.params.<name>``.

The product's defaults are the values the documented benchmarks ran with (docs/benchmarks.md), so an application
that sets nothing runs what was measured. :func:`validate` checks a manifest's ``params`` (unknown names, types,
bounds, cross-field rules) and raises ``ValueError("params.<name>: reason")``, which the one validation layer
(``autoscaler.schemas`` through ``policies.registry.validate_params``) turns into a 400 naming
``spec.policies.<level>.params.<name>``; :func:`resolve` gives the control loop the typed values in force.

``python -m policies.options --markdown`` writes the table to docs/options.md (``--check``: exit 1 when that
file is out of date). Pure Python: no numpy, no Django.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: manifest level -> the policies of ``policies.registry`` at that level (kept in step by tests)
AM_NAMES = ("naive", "bo", "centralized")
RM_NAMES = ("simple", "model-based")
IM_NAMES = ("cheapest-first", "region-preference")

LEVELS = ("loop", "am", "rm", "im")
#: option level -> the manifest level whose ``params`` hold it
MANIFEST_LEVEL = {"loop": "am", "am": "am", "rm": "rm", "im": "im"}

#: the benchmarks the defaults come from (the ``source`` of each option names one of these keys)
BENCHMARKS: dict[str, str] = {
    "bench am": (
        "`python -m benchmarks am --obs-steps 3000 --steps 8000 --reopt-every 0 --replications 3 --validation 6 "
        "--validation-k 1 --validation-load 1.1 --validation-steps 8000 --fallback 5 --margin 0.5 --margin-r 1.0 "
        "--timeout 900 --guard` (docs/benchmarks.md, sections `am` and, with `--om model-based "
        "--validation-phases`, `am-model-based`): BO met both budgets in 12/12 settings with either OM, at 0.93x "
        "naive's cost with model-based OMs; one BO run took at most 41 s (ql-pds-plus) and 232 s (model-based)"
    ),
    "bench_loop": (
        '`python manage.py bench_loop --no-baseline` (docs/benchmarks.md, section "Planning ahead on a rising '
        'rate"): the control loop a user runs, manifest -> tick -> OM/AM -> simulated engine, scenario by scenario'
    ),
    "bench multilevel": (
        "`python -m benchmarks multilevel --steps 50000` (docs/benchmarks.md, section `multilevel`, paper 004 "
        "Tables 1-2): RL ICS with w_d = 0.7 met the paper's targets (0.07% violations, 8.69 active nodes)"
    ),
}


@dataclass(frozen=True)
class Option:
    """One option. ``kind``: "bool", "int", "float" or "list[str]"; ``nullable``: null is allowed (its meaning is
    in ``doc``); bounds: ``minimum``/``maximum`` with ``*_open`` for strict inequalities; ``unit`` for numbers
    (s, periods, tokens, $/h, ...); ``source``: where the default comes from (a key of :data:`BENCHMARKS` and
    the value it ran with, or why no benchmark measured it)."""

    name: str
    level: str
    policies: tuple[str, ...]
    kind: str
    default: Any
    unit: str
    doc: str
    source: str
    minimum: float | None = None
    maximum: float | None = None
    minimum_open: bool = False
    maximum_open: bool = False
    nullable: bool = False

    @property
    def manifest_level(self) -> str:
        return MANIFEST_LEVEL[self.level]

    @property
    def field(self) -> str:
        """The manifest field, e.g. ``spec.policies.am.params.bucket_capacity``."""
        return f"spec.policies.{self.manifest_level}.params.{self.name}"

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float")

    def bounds(self) -> str:
        """The bounds as text, e.g. ``>= 1``, ``(0, 1]``, empty when none."""
        lo, hi = self.minimum, self.maximum
        if lo is not None and hi is not None:
            return f"{'(' if self.minimum_open else '['}{lo:g}, {hi:g}{')' if self.maximum_open else ']'}"
        if lo is not None:
            return f"{'>' if self.minimum_open else '>='} {lo:g}"
        if hi is not None:
            return f"{'<' if self.maximum_open else '<='} {hi:g}"
        return ""

    def check(self, value: Any) -> Any:
        """``value`` converted to the option's type (an int for a float option becomes a float); ValueError
        ``"params.<name>: reason"`` when its type or range is wrong."""
        where = f"params.{self.name}"
        if value is None:
            if self.nullable:
                return None
            raise ValueError(f"{where}: must not be null")
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where}: must be true or false, got {value!r}")
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                raise ValueError(f"{where}: must be a string, got {value!r}")
            return value
        if self.kind == "list[str]":
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: must be a list of names, got {value!r}")
            return list(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: must be a number{' or null' if self.nullable else ''}, got {value!r}")
        if self.kind == "int" and not isinstance(value, int):
            raise ValueError(f"{where}: must be an integer, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{where}: must be a finite number, got {value!r}")
        lo, hi = self.minimum, self.maximum
        bad = (lo is not None and (value <= lo if self.minimum_open else value < lo)) or (
            hi is not None and (value >= hi if self.maximum_open else value > hi)
        )
        if bad:
            unit = f" {self.unit}" if self.unit and self.unit not in ("fraction",) else ""
            span = self.bounds()
            text = f"in {span}" if span.startswith(("[", "(")) else span
            raise ValueError(f"{where}: must be {text}{unit}, got {value!r}")
        return int(value) if self.kind == "int" else float(value)


# fmt: off
def _o(name: str, level: str, policies: tuple[str, ...], kind: str, default: Any, unit: str, doc: str,
       source: str, **bounds: Any) -> Option:
    return Option(name, level, policies, kind, default, unit, doc, source, **bounds)


L, A, R, I = "loop", "am", "rm", "im"  # noqa: E741
BO = ("bo",)

OPTIONS: tuple[Option, ...] = (
    # ---- loop: the per-period arbitration and the guard the tick runs (spec.policies.am.params) --------------
    _o("bucket_capacity", L, AM_NAMES, "float", 3.0, "tokens",
       "Capacity of the token bucket that bounds the application's reconfigurations: refilled with eta_R tokens "
       "per OM period; a period with granted changes costs one token.",
       "bench am: capacity 3", minimum=1.0),
    _o("scale_in_reserve", L, AM_NAMES, "float", 1.0, "tokens",
       "Tokens kept for scale-outs: a period of scale-ins only is granted when at least 1 + this many tokens "
       "are left. At most bucket_capacity - 1.",
       "bench am: 1 token kept for scale-outs", minimum=0.0),
    _o("batching", L, AM_NAMES, "bool", True, "",
       "All changes granted in one period form one reconfiguration (one restart, one token).",
       "bench am: changes of one period batched"),
    _o("defer_for_nodes", L, AM_NAMES, "bool", True, "",
       "Defer a period's changes when no operator violated its bound while another operator's scale-out waits for "
       "nodes (none free, or the last one taken by a batch-mate): every scale-out of the batch waits for its "
       "nodes and they reconfigure together once the nodes are ready (one token instead of one each).",
       "bench_loop: the ramp's operators spent a token each, one or two periods apart"),
    _o("hold_scale_ins", L, AM_NAMES, "bool", True, "",
       "Deny the scale-ins of operators that did not violate while another operator violates its bound.",
       "bench am: `--guard` holds scale-ins"),
    _o("guard", L, AM_NAMES, "bool", True, "",
       "Run the violation-budget guard every period (policies/am/guard.py): while the recent violations spend "
       "eta_V too fast it shifts the OMs' cost weights towards performance, and back when they are quiet.",
       "bench am: `--guard`"),
    _o("guard_window", L, AM_NAMES, "int", 200, "periods",
       "OM periods the guard judges (its sliding window).",
       "bench am: the guard's defaults", minimum=1),
    _o("guard_cooldown", L, AM_NAMES, "int", 50, "periods",
       "OM periods the guard waits after a change before it judges again.",
       "bench am: the guard's defaults", minimum=0),
    _o("guard_trigger", L, AM_NAMES, "float", 0.5, "x eta_V",
       "The guard tightens when the window's violation fraction exceeds this multiple of eta_V ...",
       "bench am: the guard's defaults", minimum=0.0, minimum_open=True),
    _o("guard_spent", L, AM_NAMES, "float", 0.25, "x eta_V",
       "... and the violation fraction since the guard started exceeds this multiple of eta_V.",
       "bench am: the guard's defaults", minimum=0.0),
    _o("guard_relax_below", L, AM_NAMES, "float", 0.25, "x eta_V",
       "The guard relaxes when the window's violation fraction is below this multiple of eta_V (at most "
       "guard_trigger).",
       "bench am: the guard's defaults", minimum=0.0),
    _o("guard_tighten", L, AM_NAMES, "float", 0.85, "factor",
       "One tightening multiplies the resource and reconfiguration weights by this factor (relaxing divides).",
       "bench am: the guard's defaults", minimum=0.0, maximum=1.0, minimum_open=True, maximum_open=True),
    _o("guard_min_scale", L, AM_NAMES, "float", 0.2, "factor",
       "The guard never scales the resource and reconfiguration weights below this factor.",
       "bench am: the guard's defaults", minimum=0.0, maximum=1.0, minimum_open=True),
    # ---- am: the BO tuning every AM period (spec.policies.am.params, policy bo) ------------------------------
    _o("n_bo", A, BO, "int", 25, "evaluations",
       "BO evaluations per phase (bounds, then weights); later rounds use half.",
       "bench am: N_BO = 25", minimum=1),
    _o("max_rounds", A, BO, "int", 2, "rounds",
       "Rounds of the two phases (fewer when a round brings no improvement).",
       "bench am: up to 2 rounds", minimum=1),
    _o("timeout_s", A, BO, "float", 300.0, "s",
       "Wall-clock budget of one tuning; past it the best configuration so far that meets the budgets is "
       "applied, else the last good one is kept.",
       "bench am: its target (< 300 s); it ran with a 900 s limit that never bound (at most 232 s)",
       minimum=0.0, minimum_open=True),
    _o("epsilon", A, BO, "float", 0.05, "x R_max",
       "Path-sum slack of the bounds BO searches: every path's bounds sum to R_max x (1 +/- epsilon).",
       "bench am: BayesianAM's default 0.05", minimum=0.0, maximum=1.0, maximum_open=True),
    _o("margin", A, BO, "float", 0.5, "x eta_V",
       "BO aims at margin x eta_V in its simulations (the simulated trace is a sample, the models fitted).",
       "bench am: `--margin 0.5`", minimum=0.0, maximum=1.0, minimum_open=True),
    _o("margin_r", A, BO, "float", 1.0, "x eta_R",
       "BO aims at margin_r x eta_R in its simulations (the token bucket already bounds reconfigurations).",
       "bench am: `--margin-r 1.0`", minimum=0.0, maximum=1.0, minimum_open=True),
    _o("replications", A, BO, "int", 3, "simulations",
       "Simulations per BO candidate, averaged; the same OM seeds for every candidate.",
       "bench am: `--replications 3`", minimum=1),
    _o("validation_replications", A, BO, "int", 6, "simulations",
       "Held-out OM seeds on which the warm start, the chosen and the cheapest candidates are re-run before one "
       "is applied (0: no validation).",
       "bench am: `--validation 6`", minimum=0),
    _o("validate_top", A, BO, "int", 5, "configurations",
       "Configurations validated besides the warm start.",
       "bench am: BayesianAM's default 5", minimum=1),
    _o("validation_k", A, BO, "float", 1.0, "standard errors",
       "A validated configuration must meet eta_V and eta_R by this many standard errors of its held-out runs.",
       "bench am: `--validation-k 1`", minimum=0.0, maximum=10.0, maximum_open=True),
    _o("validation_load", A, BO, "float", 1.1, "x observed rates",
       "Validation runs the observed rates times this factor (headroom for a busier future); the warm start "
       "also passes when it stayed within the budgets / this factor in reality.",
       "bench am: `--validation-load 1.1`", minimum=0.5, maximum=2.0),
    _o("validation_steps", A, BO, "int", 8000, "periods",
       "Validation replays the observed window cyclically over this many OM periods (null: once).",
       "bench am: `--validation-steps 8000`", minimum=1, nullable=True),
    _o("validation_phases", A, BO, "bool", True, "",
       "Held-out run r of n starts the replay at period r x window / n (the only spread a deterministic OM "
       "such as model-based or threshold has).",
       "bench am: `--validation-phases` in section `am-model-based` (model-based OMs); the ql-pds-plus section "
       "ran without it"),
    _o("fallback_top", A, BO, "int", 5, "configurations",
       "When no validated configuration passes, up to this many more (fewest training violations) are "
       "validated.",
       "bench am: `--fallback 5`", minimum=0),
    # ---- rm (spec.policies.rm.params) -----------------------------------------------------------------------
    _o("n_idle", R, ("simple",), "int", 1, "nodes",
       "Idle nodes the simple RM keeps ready in its region.",
       "bench multilevel: N_idle = 1 (paper 004 does not publish it)", minimum=0),
    _o("cover_waiting", R, ("simple",), "bool", True, "",
       "Also acquire the nodes that waiting scale-out requests need, not one node at a time.",
       "bench multilevel"),
    _o("w_d", R, ("model-based",), "float", 0.7, "weight",
       "Weight of the unsatisfied-demand penalty (w_d + w_r = 1).",
       "bench multilevel: w_d = 0.7 (paper 004 Table 1)", minimum=0.0, maximum=1.0),
    _o("w_r", R, ("model-based",), "float", 0.3, "weight",
       "Weight of the resource cost (w_c in paper 004's tables; w_d + w_r = 1).",
       "bench multilevel: w_c = 0.3", minimum=0.0, maximum=1.0),
    _o("gamma", R, ("model-based",), "float", 0.99, "discount",
       "Discount factor of the RM's MDP.",
       "bench multilevel", minimum=0.0, maximum=1.0, maximum_open=True),
    _o("alpha", R, ("model-based",), "float", 0.1, "learning rate",
       "Learning rate of the unknown-cost estimate (paper 004 eq. 5).",
       "bench multilevel", minimum=0.0, maximum=1.0, minimum_open=True),
    _o("u_quantum", R, ("model-based",), "float", 0.1, "utilisation",
       "Utilisation quantum of the RM's state.",
       "bench multilevel", minimum=0.0, maximum=1.0, minimum_open=True),
    _o("sweeps", R, ("model-based",), "int", 1, "sweeps",
       "Full value-iteration backups per RM period.",
       "bench multilevel: 1 (the paper's)", minimum=1),
    _o("monotone", R, ("model-based",), "bool", True, "",
       "Enforce the monotonicity constraints on the unknown cost.",
       "bench multilevel"),
    # ---- im (spec.policies.im.params) -----------------------------------------------------------------------
    _o("acquisition_budget_per_period", I, IM_NAMES, "float", None, "$/h",
       "Price of the capacity the IM may newly acquire per RM period (null: unlimited).",
       "bench multilevel: unlimited", minimum=0.0, nullable=True),
    _o("provisioning_delay_periods", I, IM_NAMES, "int", 1, "periods",
       "RM periods before an acquired node can host replicas, in the IM's own bookkeeping (the control plane "
       "follows the region's provisioningDelayS and the provider).",
       "bench multilevel: 1", minimum=0),
    _o("consolidate", I, IM_NAMES, "bool", True, "",
       "Propose consolidations after reconfigurations that left nodes partly used.",
       "bench multilevel: consolidation on (11.2 nodes vs the paper's 16.6 for the simple ICS)"),
    _o("region_order", I, ("region-preference",), "list[str]", [], "",
       "Regions whose acquisitions are served first, in this order (unlisted regions after them).",
       "no benchmark: region-preference is not measured; the default states no preference"),
)
# fmt: on

_BY_KEY: dict[tuple[str, str], list[Option]] = {}
for _opt in OPTIONS:
    for _policy in _opt.policies:
        _BY_KEY.setdefault((_opt.manifest_level, _policy), []).append(_opt)


def option(name: str, manifest_level: str = "am") -> Option:
    """The option ``name`` of ``manifest_level`` ("am", "rm", "im"); KeyError if unknown."""
    for opt in OPTIONS:
        if opt.name == name and opt.manifest_level == manifest_level:
            return opt
    raise KeyError(f"no option {name!r} at level {manifest_level!r}")


def options_for(manifest_level: str, policy: str) -> list[Option]:
    """The options ``spec.policies.<manifest_level>.params`` accepts for ``policy`` (empty when none)."""
    return list(_BY_KEY.get((manifest_level, policy), ()))


def has_options(manifest_level: str, policy: str) -> bool:
    """True when the registry owns the parameters of ``policy`` at ``manifest_level``."""
    return (manifest_level, policy) in _BY_KEY


def defaults(manifest_level: str, policy: str) -> dict[str, Any]:
    """The default of every option of ``policy`` (a fresh dict; lists copied)."""
    return {o.name: list(o.default) if isinstance(o.default, list) else o.default
            for o in options_for(manifest_level, policy)}  # fmt: skip


def validate(manifest_level: str, policy: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of a manifest checked and merged over :func:`defaults`; ValueError
    ``"params.<name>: reason"`` for an unknown name, a wrong type or range, or a broken cross-field rule."""
    if not isinstance(params, dict):
        raise ValueError(f"params: must be a mapping of option names to values, got {params!r}")
    known = {o.name: o for o in options_for(manifest_level, policy)}
    out = defaults(manifest_level, policy)
    for key, value in params.items():
        if key not in known:
            names = ", ".join(sorted(known)) or "none"
            raise ValueError(f"params.{key}: unknown parameter for policy {policy!r} (known: {names})")
        out[key] = known[key].check(value)
    _cross_check(out)
    return out


def _cross_check(values: dict[str, Any]) -> None:
    """Rules between options; the message names the option the user most likely has to change."""
    if "scale_in_reserve" in values and "bucket_capacity" in values:
        cap, reserve = values["bucket_capacity"], values["scale_in_reserve"]
        if reserve > cap - 1.0:
            raise ValueError(
                f"params.scale_in_reserve: must be <= bucket_capacity - 1 = {cap - 1.0:g} tokens, got {reserve:g}"
            )
    if "guard_relax_below" in values and "guard_trigger" in values:
        if values["guard_relax_below"] > values["guard_trigger"]:
            raise ValueError(
                f"params.guard_relax_below: must be <= guard_trigger = {values['guard_trigger']:g}, got "
                f"{values['guard_relax_below']:g}"
            )
    if "w_d" in values and "w_r" in values and abs(values["w_d"] + values["w_r"] - 1.0) > 1e-9:
        raise ValueError(f"params.w_d: w_d + w_r must be 1, got {values['w_d'] + values['w_r']:g}")


def resolve(manifest_level: str, policy: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The options in force for stored ``params`` (validated when they were applied): :func:`validate`, or --
    should a stored value no longer pass (an option removed or its bounds changed since) -- the defaults with
    every value that still passes on its own. Never raises for a known policy: the control loop must run."""
    params = dict(params or {})
    if not has_options(manifest_level, policy):
        return params  # a policy whose parameters the registry does not own checks its own
    try:
        return validate(manifest_level, policy, params)
    except ValueError:
        out = defaults(manifest_level, policy)
        known = {o.name: o for o in options_for(manifest_level, policy)}
        for key, value in params.items():
            if key in known:
                try:
                    out[key] = known[key].check(value)
                except ValueError:
                    pass
        try:
            _cross_check(out)
        except ValueError:
            return defaults(manifest_level, policy)
        return out


# ---- docs ---------------------------------------------------------------------------------------------------
LEVEL_TITLES = {
    "loop": "Control loop: arbitration and guard, every OM period (`spec.policies.am.params`, every AM policy)",
    "am": "Application Manager tuning (`spec.policies.am.params`, policy `bo`)",
    "rm": "Region Manager (`spec.policies.rm.params`)",
    "im": "Infrastructure Manager (`spec.policies.im.params`)",
}


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


def markdown() -> str:
    """docs/options.md: one table per level."""
    lines = [
        "# Options",
        "",
        "<!-- generated by `python -m policies.options --markdown` from policies/options.py; do not edit -->",
        "",
        "Every parameter a manifest may set for the AM, RM and IM policies: its default, unit and bounds, and "
        "where the default comes from. An application that sets nothing runs what the benchmarks measured. "
        "Set them as `params` of the policy, e.g.",
        "",
        "```yaml",
        "policies:",
        "  om: model-based",
        "  am: {name: bo, params: {bucket_capacity: 3, validation_replications: 6}}",
        "  rm: {name: simple, params: {n_idle: 2}}",
        "```",
        "",
        "An unknown option or a bad value is rejected at its field, e.g. "
        "`spec.policies.am.params.bucket_capacity: must be >= 1 tokens, got 0.5`, and nothing is stored "
        "(API, `manage.py apply`, web form). The RM and IM of a region are those the first application placed "
        "in it declares. The defaults come from:",
        "",
        *(f"- *{key}*: {text}." for key, text in BENCHMARKS.items()),
    ]
    for level in LEVELS:
        lines += ["", f"## {LEVEL_TITLES[level]}", ""]
        lines += [
            "| option | policies | type | default | unit | bounds | what it does | default from |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for o in (o for o in OPTIONS if o.level == level):
            kind = o.kind + (" or null" if o.nullable else "")
            lines.append(
                f"| `{o.name}` | {', '.join(o.policies)} | {kind} | `{_value(o.default)}` | {o.unit} | "
                f"{o.bounds()} | {o.doc.replace('|', '/')} | {o.source.replace('|', '/')} |"
            )
    return "\n".join(lines) + "\n"


DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "options.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policies.options", description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help=f"write the options table to {DOC_PATH.name}")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/options.md is out of date")
    ap.add_argument("-o", "--output", default=str(DOC_PATH), help="file to write or check ('-' = stdout)")
    args = ap.parse_args(argv)
    text = markdown()
    if args.check:
        current = Path(args.output).read_text() if Path(args.output).exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python -m policies.options --markdown", file=sys.stderr)
            return 1
        return 0
    if args.markdown:
        if args.output == "-":
            sys.stdout.write(text)
        else:
            Path(args.output).write_text(text)
            print(f"wrote {args.output}")
        return 0
    ap.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
