"""Command line: one paper-mode single-operator run, on the paper's settings or on one's own workload.

    python -m policies.simulate --trace PATH [--column NAME|INDEX] (--infra {A,B,B2} --node-types N
        | --catalogue FILE[:NAME] [--node-types N]) --k-max K --policy NAME
        [--steps N] [--seed S] [--weights perf,res,rcf] [--params JSON] [--start policy|type0] [--json]
        [--calibrate] [--mu TUPLES_S] [--r-max SECONDS|MSms] [--gamma G] [--rate-levels N] [--rate-max X|auto]
        [--rate-scale X]

The operator: service rate ``--mu`` (tuples/s on a speedup-1 node, default 180; variance (1/mu)^2 / 2), bound
``--r-max`` (default 0.05 s; ``50ms`` also reads), discount ``--gamma`` of the MDP policies (default 0.99). Node types:
the paper's infrastructure A, B or B2 (``--infra``), or a ``NodeTypeCatalog`` manifest file (``--catalogue``, its
first ``--node-types`` types, default all; C_max = K_max * the catalogue's largest price, as the paper's whole list).

Rate levels: ``--rate-levels`` levels (default 30) up to ``--rate-max`` tuples/s (default 650, the paper's range); a
rate at or above the top is read as the top level, and a warning on stderr says how many steps of the trace do so.
``--rate-max auto``: the control loop's range, learned from the rates and grown when one leaves it
(``policies.calibration``). ``--calibrate``: the policy gets no rate range and no model (it learns both from the
simulated operator, as the control loop's policies do).

Trace: one rate per line, or CSV with ``--column`` (header name or 0-based index); ``#`` comments, blank lines and a
header line are skipped (``policies.sim.trace``).

Prints one result (average cost, violations %, reconfigurations %, average resource cost in $/h, wall seconds);
``--json`` prints a single JSON object instead. Bad arguments give a one-line error on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

from policies.operator_model import INFRA_SPEEDUPS, CostWeights, OperatorSpec
from policies.registry import OM_POLICIES, canonical, load
from policies.sim.scenario import PAPER_MU, PAPER_R_MAX_S

JSON_KEYS = (
    "policy",
    "infra",
    "node_types",
    "k_max",
    "steps",
    "seed",
    "avg_cost",
    "violations_pct",
    "reconfigurations_pct",
    "avg_resource_cost",
    "wall_seconds",
    "avg_replicas",
    "calibrate",
    "rate_range_tuples_s",
    "rerangings",
    "mu",
    "r_max_s",
    "gamma",
    "rate_levels",
    "steps_above_range",
)

#: simulator settings people try to pass as policy parameters: key -> the option that sets it
SIMULATOR_OPTIONS = {
    "mu": "--mu",
    "r_max": "--r-max",
    "r_max_s": "--r-max",
    "gamma": "--gamma",
    "rate_max": "--rate-max",
    "max_rate": "--rate-max",
    "rate_levels": "--rate-levels",
    "k_max": "--k-max",
    "node_types": "--node-types",
}


class UsageError(Exception):
    """A bad command-line argument: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_weights(text: str) -> CostWeights:
    """``perf,res,rcf`` -> CostWeights; raise UsageError naming the field when not on the simplex."""
    parts = text.split(",")
    if len(parts) != 3:
        raise UsageError(f"--weights: expected three numbers perf,res,rcf, got {text!r}")
    try:
        perf, res, rcf = (float(p) for p in parts)
    except ValueError:
        raise UsageError(f"--weights: not numbers: {text!r}") from None
    try:
        return CostWeights(perf=perf, res=res, rcf=rcf)
    except ValueError as exc:
        raise UsageError(f"--weights: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m policies.simulate", description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", required=True, help="trace file: one input rate (tuples/s) per line, or CSV")
    p.add_argument("--column", default=None, help="CSV column of the rate: header name or 0-based index")
    p.add_argument("--infra", default=None, help="infrastructure: A, B or B2 (or give --catalogue)")
    p.add_argument("--catalogue", default=None, help="NodeTypeCatalog manifest file, FILE or FILE:NAME")
    p.add_argument("--node-types", type=int, default=None, help="number of node types N_res (first N)")
    p.add_argument("--k-max", type=int, required=True, help="maximum replicas K_max (>= 1)")
    p.add_argument("--policy", required=True, help="OM policy name, e.g. " + ", ".join(sorted(OM_POLICIES)))
    p.add_argument("--steps", type=int, default=None, help="only the first N steps of the trace")
    p.add_argument("--seed", type=int, default=0, help="seed of the policy's random choices")
    p.add_argument("--weights", default="0.6,0.2,0.2", help="cost weights perf,res,rcf (sum 1)")
    p.add_argument("--params", default="{}", help="policy parameters as a JSON object")
    p.add_argument(
        "--start",
        default="policy",
        choices=("policy", "type0"),
        help="initial replica: of the policy's own type (default) or of type 0 (the authors' older simulator)",
    )
    p.add_argument("--json", action="store_true", help="print a single JSON object")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="self-calibrating policy: no rate range, model learned (default: the paper's range and model)",
    )
    p.add_argument("--mu", type=float, default=PAPER_MU, help="service rate on a speedup-1 node (tuples/s)")
    p.add_argument("--r-max", default=None, help="response-time bound: seconds, or milliseconds as 50ms")
    p.add_argument("--gamma", type=float, default=0.99, help="discount factor of the MDP policies, in (0, 1)")
    p.add_argument("--rate-levels", type=int, default=None, help="number of rate levels (default 30)")
    p.add_argument("--rate-max", default=None, help="top of the rate levels (tuples/s, default 650) or auto")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply every rate of the trace by this")
    return p


def parse_seconds(text: str, option: str) -> float:
    """``"0.05"`` or ``"50ms"`` or ``"0.05s"`` -> seconds (> 0); UsageError naming ``option`` otherwise."""
    raw = text.strip().lower()
    scale = 1e-3 if raw.endswith("ms") else 1.0
    number = raw[:-2] if raw.endswith("ms") else raw[:-1] if raw.endswith("s") else raw
    try:
        value = float(number) * scale
    except ValueError:
        raise UsageError(f"{option}: expected seconds (0.05) or milliseconds (50ms), got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{option}: must be > 0 s, got {text!r}")
    return value


def check_args(args: argparse.Namespace) -> tuple[CostWeights, dict[str, Any]]:
    """Validate what argparse cannot; raise UsageError with a one-line message naming the option."""
    if args.catalogue is None:
        if args.infra is None:
            raise UsageError("--infra: required (A, B or B2) unless --catalogue gives the node types")
        if args.infra not in ("A", "B", "B2"):
            raise UsageError(f"--infra: unknown infrastructure {args.infra!r}: choose A, B or B2")
        if args.node_types is None:
            raise UsageError("--node-types: required with --infra")
        n_max = len(INFRA_SPEEDUPS["B" if args.infra == "B2" else args.infra])
        if not 1 <= args.node_types <= n_max:
            raise UsageError(f"--node-types: must be in 1..{n_max}, got {args.node_types}")
    elif args.infra is not None:
        raise UsageError("--infra: give either --infra or --catalogue, not both")
    elif args.node_types is not None and args.node_types < 1:
        raise UsageError(f"--node-types: must be >= 1, got {args.node_types}")
    if args.k_max < 1:
        raise UsageError(f"--k-max: must be >= 1, got {args.k_max}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps: must be >= 1, got {args.steps}")
    if not (args.mu > 0 and math.isfinite(args.mu)):
        raise UsageError(f"--mu: must be > 0 tuples/s, got {args.mu}")
    if not (args.rate_scale > 0 and math.isfinite(args.rate_scale)):
        raise UsageError(f"--rate-scale: must be > 0, got {args.rate_scale}")
    if not 0.0 < args.gamma < 1.0:
        raise UsageError(f"--gamma: must be in (0, 1), got {args.gamma}")
    if args.rate_levels is not None and args.rate_levels < 1:
        raise UsageError(f"--rate-levels: must be >= 1, got {args.rate_levels}")
    if args.rate_max is not None and args.rate_max != "auto":
        try:
            top = float(args.rate_max)
        except ValueError:
            raise UsageError(f"--rate-max: expected tuples/s or auto, got {args.rate_max!r}") from None
        if not (top > 0 and math.isfinite(top)):
            raise UsageError(f"--rate-max: must be > 0 tuples/s or auto, got {args.rate_max!r}")
    if args.calibrate and (args.rate_max is not None or args.rate_levels is not None):
        raise UsageError("--rate-max/--rate-levels: not with --calibrate (the policy learns its range)")
    if canonical("om", args.policy) not in OM_POLICIES:
        raise UsageError(
            f"--policy: unknown policy {args.policy!r}: choose one of {', '.join(sorted(OM_POLICIES))}"
        )
    weights = parse_weights(args.weights)
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--params: not valid JSON ({exc.msg})") from None
    if not isinstance(params, dict):
        raise UsageError("--params: must be a JSON object")
    try:
        known = getattr(load("om", args.policy), "DEFAULTS", {})
    except Exception:  # noqa: BLE001 - an unimportable policy is reported when it runs
        known = {}
    for key in params:
        if key in SIMULATOR_OPTIONS and key not in known:
            raise UsageError(
                f"--params: {key!r} is a setting of the simulated operator, not a parameter of policy "
                f"{args.policy!r}: use {SIMULATOR_OPTIONS[key]}"
            )
    return weights, params


def catalogue_ref(text: str) -> tuple[str, str | None]:
    """``FILE`` or ``FILE:NAME`` -> (file, catalogue name or None); an existing file's own name wins."""
    if Path(text).is_file() or ":" not in text:
        return text, None
    path, _, name = text.rpartition(":")
    return path, name or None


def operator_spec(args: argparse.Namespace, weights: CostWeights) -> OperatorSpec:
    """The simulated operator described by ``args`` (validated by :func:`check_args`)."""
    from dataclasses import replace

    from policies.calibration import INITIAL_RANGE
    from policies.catalogue import load_catalogue
    from policies.operator_model import RateLevels
    from policies.sim.scenario import paper_spec

    r_max = PAPER_R_MAX_S if args.r_max is None else parse_seconds(args.r_max, "--r-max")
    if args.catalogue is None:
        spec = paper_spec(args.infra, args.node_types, args.k_max, weights, r_max_s=r_max, mu=args.mu)
    else:
        path, name = catalogue_ref(args.catalogue)
        try:
            catalogue = load_catalogue(path, name)
        except ValueError as exc:
            raise UsageError(f"--catalogue: {exc}") from None
        n = len(catalogue) if args.node_types is None else args.node_types
        if n > len(catalogue):
            raise UsageError(f"--node-types: the catalogue has {len(catalogue)} types, got {n}")
        base = paper_spec("A", 1, args.k_max, weights, r_max_s=r_max, mu=args.mu)
        spec = replace(
            base,
            node_types=catalogue[:n],
            c_max=args.k_max * max(t.price for t in catalogue) or 1.0,
        )
    levels = args.rate_levels or RateLevels().n
    if args.rate_max == "auto":
        rate_levels = RateLevels(levels, INITIAL_RANGE, grow=True)
    else:
        rate_levels = RateLevels(
            levels, RateLevels().max_rate if args.rate_max is None else float(args.rate_max)
        )
    return replace(spec, rate_levels=rate_levels, gamma=args.gamma)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, run the simulation and return the result record (raises UsageError on bad input)."""
    return run_args(build_parser().parse_args(argv))


def run_args(args: argparse.Namespace) -> dict[str, Any]:
    """Run the simulation described by parsed ``args`` and return the result record."""
    weights, params = check_args(args)
    from policies.sim.scenario import run_paper
    from policies.sim.trace import load_trace

    try:
        trace = load_trace(args.trace, steps=args.steps, column=args.column) * args.rate_scale
    except ValueError as exc:
        raise UsageError(f"--trace: {exc}") from None
    try:
        spec = operator_spec(args, weights)
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    levels = spec.rate_levels
    fixed = not args.calibrate and levels is not None and not levels.grow
    above = int((trace >= levels.max_rate).sum()) if fixed and levels is not None else 0
    label = args.infra if args.catalogue is None else Path(catalogue_ref(args.catalogue)[0]).stem
    try:
        result = run_paper(
            trace,
            args.policy,
            label,
            spec.n_res,
            args.k_max,
            args.seed,
            params,
            weights,
            start=args.start,
            calibrate=args.calibrate,
            spec=spec,
        )
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--policy: {args.policy!r} is not available yet ({exc})") from None
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    summary = result.summary()
    return {
        "policy": args.policy,
        "infra": label,
        "node_types": spec.n_res,
        "k_max": args.k_max,
        "steps": summary["steps"],
        "seed": args.seed,
        "avg_cost": summary["avg_cost"],
        "violations_pct": summary["violations_pct"],
        "reconfigurations_pct": summary["reconfigurations_pct"],
        "avg_resource_cost": summary["avg_resource_cost"],
        "wall_seconds": summary["wall_seconds"],
        "avg_replicas": summary["avg_replicas"],
        "calibrate": args.calibrate,
        "rate_range_tuples_s": result.meta["rate_range_tuples_s"],
        "rerangings": result.meta["rerangings"],
        "mu": args.mu,
        "r_max_s": spec.r_max_s,
        "gamma": spec.gamma,
        "rate_levels": levels.n if levels is not None and not args.calibrate else None,
        "steps_above_range": above,
    }


def range_warning(rec: dict[str, Any]) -> str | None:
    """The warning printed when trace rates leave the fixed range of the rate levels (None when none does)."""
    above = rec["steps_above_range"]
    if not above:
        return None
    top = rec["rate_range_tuples_s"]
    return (
        f"warning: {above} of {rec['steps']} steps ({100.0 * above / rec['steps']:.1f} %) have rates >= {top:g} "
        f"tuples/s, the top of the rate levels: policies that discretise the rate read them as the top level; give "
        f"--rate-max with the trace's peak or --rate-max auto (the control loop's growing range)"
    )


def format_record(rec: dict[str, Any]) -> str:
    return (
        f"{rec['policy']} on infrastructure {rec['infra']}, {rec['node_types']} node types, "
        f"K_max {rec['k_max']}, {rec['steps']} steps, seed {rec['seed']}: "
        f"avg cost {rec['avg_cost']:.4f}, violations {rec['violations_pct']:.2f}%, "
        f"reconfigurations {rec['reconfigurations_pct']:.2f}%, avg resource cost {rec['avg_resource_cost']:.2f} $/h, "
        f"{rec['wall_seconds']:.2f} s"
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        rec = run_args(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    warning = range_warning(rec)
    if warning:
        print(warning, file=sys.stderr)
    print(json.dumps(rec) if args.json else format_record(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
