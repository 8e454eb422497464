"""Command line: one paper-mode single-operator run.

    python -m policies.simulate --trace PATH --infra {A,B,B2} --node-types N --k-max K --policy NAME
        [--steps N] [--seed S] [--weights perf,res,rcf] [--params JSON] [--start policy|type0] [--json]
        [--calibrate] [--mu TUPLES_S] [--rate-scale X]

``--calibrate``: the policy gets no rate range and no model (it learns both from the simulated operator, as the
control loop's policies do; ``policies.calibration``); without it, the paper's given range (30 levels up to
650 tuples/s) and true model.

Prints one result (average cost, violations %, reconfigurations %, average resource cost in $/h, wall seconds);
``--json`` prints a single JSON object instead. Bad arguments give a one-line error on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, NoReturn

from policies.model import INFRA_SPEEDUPS, CostWeights
from policies.registry import OM_POLICIES

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
)


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
    p.add_argument("--trace", required=True, help="trace file: one input rate (tuples/s) per line")
    p.add_argument("--infra", required=True, help="infrastructure: A, B or B2")
    p.add_argument("--node-types", type=int, required=True, help="number of node types N_res (1..10)")
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
    p.add_argument("--mu", type=float, default=180.0, help="service rate on a speedup-1 node (tuples/s)")
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiply every rate of the trace by this")
    return p


def check_args(args: argparse.Namespace) -> tuple[CostWeights, dict[str, Any]]:
    """Validate what argparse cannot; raise UsageError with a one-line message naming the option."""
    if args.infra not in ("A", "B", "B2"):
        raise UsageError(f"--infra: unknown infrastructure {args.infra!r}: choose A, B or B2")
    n_max = len(INFRA_SPEEDUPS["B" if args.infra == "B2" else args.infra])
    if not 1 <= args.node_types <= n_max:
        raise UsageError(f"--node-types: must be in 1..{n_max}, got {args.node_types}")
    if args.k_max < 1:
        raise UsageError(f"--k-max: must be >= 1, got {args.k_max}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps: must be >= 1, got {args.steps}")
    if not (args.mu > 0 and math.isfinite(args.mu)):
        raise UsageError(f"--mu: must be > 0 tuples/s, got {args.mu}")
    if not (args.rate_scale > 0 and math.isfinite(args.rate_scale)):
        raise UsageError(f"--rate-scale: must be > 0, got {args.rate_scale}")
    if args.policy not in OM_POLICIES:
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
    return weights, params


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, run the simulation and return the result record (raises UsageError on bad input)."""
    return run_args(build_parser().parse_args(argv))


def run_args(args: argparse.Namespace) -> dict[str, Any]:
    """Run the simulation described by parsed ``args`` and return the result record."""
    weights, params = check_args(args)
    from policies.sim.scenario import run_paper
    from policies.sim.trace import load_trace

    try:
        trace = load_trace(args.trace, steps=args.steps) * args.rate_scale
    except ValueError as exc:
        raise UsageError(f"--trace: {exc}") from None
    try:
        result = run_paper(
            trace,
            args.policy,
            args.infra,
            args.node_types,
            args.k_max,
            args.seed,
            params,
            weights,
            start=args.start,
            mu=args.mu,
            calibrate=args.calibrate,
        )
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--policy: {args.policy!r} is not available yet ({exc})") from None
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    summary = result.summary()
    return {
        "policy": args.policy,
        "infra": args.infra,
        "node_types": args.node_types,
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
    }


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
    print(json.dumps(rec) if args.json else format_record(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
