"""Benchmark ``am``: naive vs BO-tuned Application Manager on paper 001's applications A, B, C (Sec. 6.3).

For every setting (application x N_res x budgets (eta_V, eta_R)):

1. the AM "observes" ``--obs-steps`` periods of the Taxi trace (the recorded source rates) and, per operator,
   2,000 service-time samples drawn from the true distribution (gamma with the operator's mean and variance
   mean^2/2); it fits an M/G/1 model to their mean and variance;
2. the naive AM (Alg. 5 bounds, equal weights) and the BO AM (Alg. 4 from the naive configuration, N_BO
   evaluations per phase, each evaluation a simulation of the observed trace with the fitted models -- the
   shortened trace is the observation window, not the paper's 50,000 steps) are then run on the following
   ``--steps`` periods of the trace with fresh OMs and the true models, both with the token-bucket arbitration;
3. we report the mean resource cost ($/h per period), violations %, reconfigurations %, whether both budgets are
   met, and the wall time of the BO optimisation (target: under 5 minutes).

Every AM arbitrates with the same token bucket (:data:`BUCKET` tokens, :data:`RESERVE` kept for scale-outs), in
BO's simulations and in the evaluated runs alike. ``--guard`` gives the BO AM the violation-budget guard
(:mod:`policies.am.guard`) and the hold on scale-ins while an operator violates, in its simulations and at run
time, and adds a ``naive+guard`` row (naive's configuration with the same guard) to tell the two apart.

A "centralized" row (paper 000: one joint model-based agent, the BO weights) is added for application A with
one node type, to show the cost of decentralisation.

Run: ``python -m benchmarks am``; ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

import numpy as np

from policies.am.arbiter import Arbiter
from policies.am.bo import BayesianAM, Observations, fit_queue_model, om_factory_from_registry
from policies.am.centralized import CentralizedAM
from policies.am.guard import GuardParams, ViolationBudgetGuard
from policies.am.naive import AMConfiguration, NaiveAM
from policies.app_graphs import Application, application
from policies.base import Policy
from policies.operator_model import NodeType, infrastructure
from policies.paths import taxi_trace
from policies.sim.application import simulate_application
from policies.sim.trace import load_trace

TAXI = str(taxi_trace())
BUCKET, RESERVE = 3.0, 1.0  # token-bucket capacity and tokens kept for scale-outs, same for every AM
PUBLISHED = "naive met both constraints in 42% of the runs, BO in 96% (paper 001 Sec. 6.3, Fig. 21)"


def pick_om(name: str | None) -> str:
    """The requested OM, or the first available of ql-pds-plus, dql-pds-plus, threshold."""
    from policies.registry import load

    for cand in [name] if name else ["ql-pds-plus", "dql-pds-plus", "threshold"]:
        try:
            load("om", cand)
            return cand
        except (ImportError, AttributeError, ValueError):
            if name:
                raise
    raise RuntimeError("no OM policy available")


def run_config(
    app: Application,
    nt: tuple[NodeType, ...],
    om: str,
    cfg: AMConfiguration,
    trace: np.ndarray,
    eta_v: float,
    eta_r: float,
    seed: int,
    bo: BayesianAM | None = None,
    reopt_every: int = 0,
    obs_steps: int = 0,
    prior: np.ndarray | None = None,
    skip: int = 0,
    warm_oms: bool = False,
    guard: GuardParams | None = None,
) -> dict[str, Any]:
    """Run ``cfg`` on ``trace`` under the token-bucket arbitration every AM of the bench uses (:data:`BUCKET`,
    :data:`RESERVE`); with ``guard`` also the violation-budget guard and scale-ins held while an operator
    violates; with ``bo`` the AM re-optimises every ``reopt_every`` periods from the last
    ``obs_steps`` observed rates (``prior``: rates observed before the run) and applies the result at run time.
    The summary leaves out the first ``skip`` periods (they are run: the OMs learn there). ``warm_oms``: a
    re-optimisation simulates its candidates with OMs that start from the running OMs' states."""
    factory = om_factory_from_registry(om)
    oms = [
        factory(app.operator_spec(u, nt, float(cfg.bounds_s[u]), cfg.weights), seed + u) for u in range(app.n)
    ]
    am = NaiveAM(  # its arbiter: token bucket on eta_r
        app,
        eta_v,
        eta_r,
        bucket_capacity=BUCKET,
        scale_in_reserve=RESERVE,
        node_type_names=[t.name for t in nt],
        hold_scale_ins=guard is not None,
    )
    hook = None
    if bo is not None and reopt_every > 0:
        history = prior if prior is not None else np.zeros(0)

        def hook(t: int, seen: np.ndarray) -> AMConfiguration:
            recent = np.concatenate([history, seen])[-obs_steps:]
            obs = observe(app, recent, seed + t)
            if warm_oms:
                obs = dataclasses.replace(obs, om_states=[om.state_bytes() for om in oms])
            return bo.optimise(obs)

    res = simulate_application(
        app,
        trace,
        nt,
        oms=oms,
        arbiter=am.arbiter,
        am_hook=hook,
        hook_every=reopt_every,
        guard=None if guard is None else ViolationBudgetGuard(eta_v, guard),
    )
    if skip:
        per_step: tuple[str, ...] = ("rate", "response_time", "violation", "reconfiguration", "price")
        per_step += ("op_response_time", "op_violation", "replicas", "denied")
        res = dataclasses.replace(res, **{name: getattr(res, name)[skip:] for name in per_step})
    return res.summary(eta_v, eta_r)


def observe(
    app: Application, trace: np.ndarray, seed: int, seen: dict[str, Any] | None = None
) -> Observations:
    """What the AM observes over ``trace``: the rates and M/G/1 models fitted to 2,000 sampled service times per
    operator; with ``seen`` (a run summary of the current configuration over the same periods) also the violation
    and reconfiguration fractions measured while it ran."""
    rng = np.random.default_rng(seed)
    models = [
        fit_queue_model(rng.gamma(2.0, op.service_mean_s / 2.0, size=2000))  # mean s, variance s^2/2
        for op in app.operators
    ]
    if seen is None:
        return Observations(trace, models)
    return Observations(
        trace,
        models,
        observed_violation_fraction=seen["violations_pct"] / 100.0,
        observed_reconfiguration_fraction=seen["reconfigurations_pct"] / 100.0,
    )


def main_am(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks am", description=__doc__.split("\n")[0])
    ap.add_argument("--apps", default="A,B,C")
    ap.add_argument("--n-res", default="1,3")
    ap.add_argument("--budgets", default="0.05:0.10,0.02:0.05", help="eta_V:eta_R pairs, comma separated")
    ap.add_argument(
        "--om", default=None, help="OM policy (default: ql-pds-plus if available, else dql-pds-plus)"
    )
    ap.add_argument("--obs-steps", type=int, default=1500, help="observed periods (the BO evaluation trace)")
    ap.add_argument("--steps", type=int, default=10000, help="evaluation periods after the observed ones")
    ap.add_argument("--offset", type=int, default=0, help="first period of the Taxi trace used")
    ap.add_argument("--n-bo", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=280.0, help="wall-clock budget of one BO run (s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--reopt-every", type=int, default=5000, help="BO AM re-optimises every N periods (0: never)"
    )
    ap.add_argument(
        "--warm-oms",
        action="store_true",
        help="re-optimisations (--reopt-every) simulate candidates with OMs starting from the running OMs' states",
    )
    ap.add_argument("--replications", type=int, default=1, help="BO simulations per candidate (OM seeds)")
    ap.add_argument(
        "--validation", type=int, default=0, help="held-out OM seeds to validate the best candidates (0: off)"
    )
    ap.add_argument(
        "--validation-k",
        type=float,
        default=1.0,
        help="a validated configuration must meet the budgets by this many standard errors of its held-out runs",
    )
    ap.add_argument(
        "--validation-load",
        type=float,
        default=1.0,
        help="validation runs the observed rates times this factor (headroom for a busier future)",
    )
    ap.add_argument(
        "--validation-steps",
        type=int,
        default=None,
        help="validation replays the observed window cyclically over this many periods (default: once)",
    )
    ap.add_argument(
        "--validation-phases",
        action="store_true",
        help="held-out run r of n starts the replay at period r * len / n of the observed window (the spread a "
        "deterministic OM such as model-based has)",
    )
    ap.add_argument(
        "--fallback",
        type=int,
        default=0,
        help="when no validated candidate passes, validate up to N more with the fewest training violations",
    )
    ap.add_argument(
        "--evidence-warmup",
        type=int,
        default=None,
        help="periods at the start of the observed window left out of the warm start's observed violation and "
        "reconfiguration fractions given to the BO AM: the bench's OMs start untrained and learn there "
        "(default 1000, 100 with --quick; in the control plane the window since the last tuning is used, the "
        "OMs being trained already)",
    )
    ap.add_argument(
        "--guard",
        action="store_true",
        help="the BO AM runs the violation-budget guard (policies.am.guard) and holds scale-ins while an "
        "operator violates, in its simulations and at run time; adds a naive+guard row (naive's configuration, "
        "the same guard)",
    )
    ap.add_argument("--margin-r", type=float, default=None, help="margin on eta_R (default: --margin)")
    ap.add_argument("--margin", type=float, default=0.5, help="BO aims at margin * budgets in simulation")
    ap.add_argument("--jobs", type=int, default=1, help="settings run in parallel processes")
    ap.add_argument("--quick", action="store_true", help="smoke run: A only, short traces, N_BO = 4")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.apps, args.n_res, args.budgets = "A", "1", "0.05:0.10"
        args.obs_steps, args.steps, args.n_bo, args.rounds, args.reopt_every = 300, 600, 4, 1, 300
    if args.evidence_warmup is None:
        args.evidence_warmup = 100 if args.quick else 1000
    if not 0 <= args.evidence_warmup < args.obs_steps:
        ap.error(
            f"--evidence-warmup: must be an integer >= 0 and < --obs-steps ({args.obs_steps} periods), "
            f"got {args.evidence_warmup}"
        )
    om = pick_om(args.om)
    budgets = [tuple(float(v) for v in pair.split(":")) for pair in args.budgets.split(",")]
    total = args.offset + args.obs_steps + args.steps
    trace = load_trace(TAXI, total)
    observed, evaluated = (
        trace[args.offset : args.offset + args.obs_steps],
        trace[args.offset + args.obs_steps :],
    )
    settings = [
        (app_name, n_res, eta_v, eta_r)
        for app_name in args.apps.split(",")
        for n_res in (int(v) for v in args.n_res.split(","))
        for eta_v, eta_r in budgets
    ]
    n_settings = len(settings)
    rows: list[dict[str, Any]] = []
    bo_times: list[float] = []
    bo_cpu: list[float] = []
    start = time.perf_counter()
    jobs = [(s, om, args, observed, evaluated, budgets[0]) for s in settings]
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=args.jobs)
        results = pool.map(run_setting, jobs)
    else:
        pool, results = None, map(run_setting, jobs)
    for out_rows, times, cpu in results:
        rows += out_rows
        bo_times += times
        bo_cpu += cpu
        if not args.no_write:  # after every setting, so a long run leaves its partial results
            done = sum(1 for r in rows if r["am"] == "bo")
            note = "" if done == n_settings else f"\n\n(partial: {done} of {n_settings} settings so far)"
            publish(render(rows, om, args, bo_times, time.perf_counter() - start, bo_cpu) + note, argv, om)
    if pool is not None:
        pool.shutdown()
    md = render(rows, om, args, bo_times, time.perf_counter() - start, bo_cpu)
    print(md)
    if not args.no_write:
        publish(md, argv, om)
    return 0


def run_setting(job: tuple) -> tuple[list[dict[str, Any]], list[float], list[float]]:
    """Naive and BO AM (and, for the first setting of A with N_res = 1, the centralized agent) on one setting;
    returns the rows, the wall seconds and the CPU seconds of every BO optimisation run."""
    (app_name, n_res, eta_v, eta_r), om, args, observed, evaluated, first_budget = job
    nt = infrastructure("A", n_res)
    rows: list[dict[str, Any]] = []
    bo_times: list[float] = []
    bo_cpu: list[float] = []
    app = application(app_name)
    naive = NaiveAM(app, eta_v, eta_r)
    # what "really" happened while the warm start (naive) ran over the observed periods: true models, same OM
    # seed; the OMs start untrained, so the first --evidence-warmup periods (their learning) are not counted
    warmup = getattr(args, "evidence_warmup", 0)
    guard = GuardParams() if getattr(args, "guard", False) else None
    r_seen = run_config(
        app, nt, om, naive.configuration, observed, eta_v, eta_r, args.seed, skip=warmup, guard=guard
    )
    obs = observe(app, observed, args.seed, r_seen)
    r_naive = run_config(app, nt, om, naive.configuration, evaluated, eta_v, eta_r, args.seed)
    r_naive_guard = (
        None
        if guard is None
        else run_config(app, nt, om, naive.configuration, evaluated, eta_v, eta_r, args.seed, guard=guard)
    )
    bo = BayesianAM(
        app,
        nt,
        om_factory_from_registry(om),
        eta_v,
        eta_r,
        n_bo=args.n_bo,
        max_rounds=args.rounds,
        timeout_s=args.timeout,
        seed=args.seed,
        bucket_capacity=BUCKET,
        scale_in_reserve=RESERVE,
        margin=args.margin,
        replications=args.replications,
        validation_replications=args.validation,
        margin_r=args.margin_r,
        validation_k=args.validation_k,
        validation_load=args.validation_load,
        validation_steps=args.validation_steps,
        fallback_top=args.fallback,
        validation_phases=getattr(args, "validation_phases", False),
        guard=guard,
        hold_scale_ins=guard is not None,
    )
    t0 = time.perf_counter()
    cfg = bo.optimise(obs)
    bo_s = time.perf_counter() - t0
    bo_times.append(bo_s)
    n_before = len(bo.history)
    r_bo = run_config(
        app,
        nt,
        om,
        cfg,
        evaluated,
        eta_v,
        eta_r,
        args.seed,
        bo,
        args.reopt_every,
        args.obs_steps,
        observed,
        warm_oms=getattr(args, "warm_oms", False),
        guard=guard,
    )
    bo_times += [h["seconds"] for h in bo.history[n_before:]]
    bo_cpu += [h["cpu_seconds"] for h in bo.history[1:]]
    setting = {"app": app_name, "n_res": n_res, "eta_v": eta_v, "eta_r": eta_r}
    validation = bo.history[n_before - 1].get("validation", [])  # the optimisation before the run
    kept_on_evidence = bool(
        (validation and validation[0].get("reason") and cfg.as_dict(app.names) == validation[0]["config"])
        or bo.history[n_before - 1].get("kept_warm_start")
    )
    rows.append(setting | {"am": "naive", **r_naive, "bo_seconds": None, "evaluations": None})
    if r_naive_guard is not None:
        rows.append(setting | {"am": "naive+guard", **r_naive_guard, "bo_seconds": None, "evaluations": None})
    rows.append(
        setting
        | {
            "am": "bo",
            **r_bo,
            "bo_seconds": bo_s,
            "evaluations": bo.evaluations,
            "optimisations": len(bo.history) - 1,
            "outcome": bo.history[-1]["outcome"],
            "config": cfg.as_dict(app.names),
            "observed_violations_pct": r_seen["violations_pct"],
            "observed_reconfigurations_pct": r_seen["reconfigurations_pct"],
            # within eta / validation load, the thresholds BO applied
            "observed_within": bool(
                bo.history[n_before - 1].get("warm_start_observed", {}).get("within_budgets")
            ),
            "kept_on_evidence": kept_on_evidence,
        }
    )
    print(
        f"{app_name} N_res={n_res} eta_V={eta_v} eta_R={eta_r}: naive over the observed window after "
        f"{warmup} warm-up periods viol "
        f"{r_seen['violations_pct']:.2f}% rcf {r_seen['reconfigurations_pct']:.2f}%; naive cost {r_naive['avg_resource_cost']:.2f} "
        f"viol {r_naive['violations_pct']:.2f}% rcf {r_naive['reconfigurations_pct']:.2f}% | BO cost "
        f"{r_bo['avg_resource_cost']:.2f} viol {r_bo['violations_pct']:.2f}% rcf "
        f"{r_bo['reconfigurations_pct']:.2f}% ({bo_s:.0f} s, {bo.evaluations} evaluations, "
        f"{bo.history[-1]['outcome']})",
        flush=True,
    )
    if r_naive_guard is not None:
        print(
            f"  naive+guard cost {r_naive_guard['avg_resource_cost']:.2f} "
            f"viol {r_naive_guard['violations_pct']:.2f}% rcf {r_naive_guard['reconfigurations_pct']:.2f}%",
            flush=True,
        )
    for c in validation:
        print(
            f"  validated{' (warm start)' if c['warm_start'] else ''}: cost {c['avg_resource_cost']:.2f} "
            f"viol {c['violations_pct']:.2f}% (+k se {c['violations_upper_pct']:.2f}%) rcf "
            f"{c['reconfigurations_pct']:.2f}% (+k se {c['reconfigurations_upper_pct']:.2f}%) "
            f"{'passes' if c['meets_budgets'] else 'fails'}"
            + (f" ({c['reason']}; the simulator fails it)" if c.get("reason") else ""),
            flush=True,
        )
    if app_name == "A" and n_res == 1 and (eta_v, eta_r) == first_budget:
        agent = CentralizedAM(app, nt, cfg.weights)
        res = simulate_application(
            app,
            evaluated,
            nt,
            centralized=agent,
            arbiter=Arbiter(eta_r, BUCKET, k_max=app.k_max, scale_in_reserve=RESERVE),
        )
        rows.append(setting | {"am": "centralized", **res.summary(eta_v, eta_r), "bo_seconds": None})
        print(f"  centralized: {res.summary(eta_v, eta_r)}", flush=True)
    return rows, bo_times, bo_cpu


def section_name(om: str) -> str:
    """The docs/benchmarks.md section of a run: ``am`` for the paper's OMs (ql-pds-plus), ``am-<om>`` else."""
    return "am" if om == "ql-pds-plus" else f"am-{om}"


def publish(md: str, argv: list[str] | None, om: str = "ql-pds-plus") -> None:
    from benchmarks.doc import write_section

    cmd = "python -m benchmarks am " + " ".join(argv if argv is not None else sys.argv[1:])
    write_section(section_name(om), md, cmd.strip())


def render(
    rows: list[dict[str, Any]],
    om: str,
    args: argparse.Namespace,
    bo_times: list[float],
    wall: float,
    bo_cpu: list[float],
) -> str:
    def met(r: dict[str, Any]) -> bool:
        return bool(r["violations_met"] and r["reconfigurations_met"])

    reopt = (
        f"The BO AM re-optimises every {args.reopt_every} periods from the last {args.obs_steps} observed "
        "periods and applies the result to the running OMs (`Policy.reconfigure`)"
        + (
            "; its candidates are simulated with OMs that start from the running OMs' states. "
            if getattr(args, "warm_oms", False)
            else ". "
        )
        if args.reopt_every > 0
        else "The BO AM optimises once, before the run. "
    )
    lines = [
        f"Application Manager on paper 001's applications A, B, C (our reading of Fig. 19, see `policies/app_graphs.py`), "
        f"OMs `{om}`, infrastructure A, R_max = 40 ms, Taxi trace: the AM observes periods "
        f"{args.offset}..{args.offset + args.obs_steps} (BO evaluations simulate this shortened trace with fitted "
        f"M/G/1 models), then naive and BO configurations run on the next {args.steps} periods with fresh OMs. "
        f"{reopt}"
        f"N_BO = {args.n_bo} per phase, up to {args.rounds} rounds (later rounds N_BO/2), token bucket of "
        f"capacity {BUCKET:g} refilled at eta_R per period with {RESERVE:g} token kept for scale-outs, changes of "
        f"one period batched; BO aims at {args.margin:g} x eta_V and "
        f"{args.margin if getattr(args, 'margin_r', None) is None else args.margin_r:g} x eta_R in simulation, "
        f"{args.replications} simulation(s) per candidate (the same OM seeds for every candidate"
        + ("; a deterministic OM is simulated once" if _om_class(om).deterministic else "")
        + ")"
        + (
            f"; the naive warm start, the chosen and the cheapest candidates are then re-run on {args.validation} "
            f"held-out OM seeds (observed rates x {getattr(args, 'validation_load', 1.0):g}"
            + (
                f", replayed over {args.validation_steps} periods"
                if getattr(args, "validation_steps", None)
                else ""
            )
            + (
                ", run r of n starting at period r x window / n of the observed window"
                if getattr(args, "validation_phases", False)
                else ""
            )
            + f") and the cheapest one "
            f"whose violations and reconfigurations + {getattr(args, 'validation_k', 0.0):g} standard errors meet "
            "the full budgets is applied"
            + (
                f" (when none does, up to {args.fallback} more candidates with the fewest training violations "
                "are validated)."
                if getattr(args, "fallback", 0)
                else "."
            )
            if getattr(args, "validation", 0)
            else "."
        )
        + " The AM is also told what the naive warm start really did over the observed periods (a run of it with "
        "the true models and the same OM seed over the whole window, counted after a warm-up of "
        f"{getattr(args, 'evidence_warmup', 0)} periods, while the bench's untrained OMs learn; in the control "
        "plane the window since the last tuning is counted, its OMs being trained): when its violations and "
        f"reconfigurations there were within eta_V / {max(1.0, getattr(args, 'validation_load', 1.0)):g} and "
        f"eta_R / {max(1.0, getattr(args, 'validation_load', 1.0)):g} (the validation load), the warm start "
        "counts as validated even if the simulator fails it."
        + (
            " The BO AM runs the violation-budget guard (`policies.am.guard`, default parameters: it shifts "
            "the OMs' weights towards performance while the violations of the last 200 periods exceed half of "
            "eta_V) and holds scale-ins while an operator violates, in its simulations, its validation and the "
            "evaluated run; the naive+guard row runs naive's configuration with the same guard."
            if getattr(args, "guard", False)
            else ""
        ),
        "",
        "| app | N_res | eta_V | eta_R | AM | resource cost ($/h) | violations % | reconfigurations % | "
        "both met | BO time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bo_s = "" if r.get("bo_seconds") is None else f"{r['bo_seconds']:.0f}"
        lines.append(
            f"| {r['app']} | {r['n_res']} | {r['eta_v']:.2f} | {r['eta_r']:.2f} | {r['am']} | "
            f"{r['avg_resource_cost']:.2f} | {r['violations_pct']:.2f} | {r['reconfigurations_pct']:.2f} | "
            f"{'yes' if met(r) else 'no'} | {bo_s} |"
        )
    naive = [r for r in rows if r["am"] == "naive"]
    bo = [r for r in rows if r["am"] == "bo"]
    guarded = [r for r in rows if r["am"] == "naive+guard"]
    n = len(naive)
    cost_ratio = [b["avg_resource_cost"] / a["avg_resource_cost"] for a, b in zip(naive, bo, strict=True)]
    both_met_cost = [
        b["avg_resource_cost"] / a["avg_resource_cost"]
        for a, b in zip(naive, bo, strict=True)
        if met(a) and met(b)
    ]
    seen = [b for b in bo if "observed_within" in b]
    evidence = [
        f"{b['app']} N_res={b['n_res']} eta_V={100 * b['eta_v']:g}%" for b in seen if b["kept_on_evidence"]
    ]
    lines += [
        "",
        f"- Naive over the observed window after the warm-up (what the AM is told it measured): within both "
        f"budgets / validation load in "
        f"{sum(b['observed_within'] for b in seen)}/{len(seen)} settings; BO applied the naive warm start on that "
        f"evidence (the simulator's validation failed it) in {len(evidence)}/{len(seen)}"
        + (f" ({', '.join(evidence)})" if evidence else "")
        + ".",
        f"- Both budgets met: naive in {sum(map(met, naive))}/{n} settings ({100 * sum(map(met, naive)) / n:.0f}%), "
        f"BO in {sum(map(met, bo))}/{n} ({100 * sum(map(met, bo)) / n:.0f}%)"
        + (f", naive+guard in {sum(map(met, guarded))}/{len(guarded)}" if guarded else "")
        + f". Published: {PUBLISHED}.",
        f"- Resource cost BO / naive: median {np.median(cost_ratio):.2f} (min {min(cost_ratio):.2f}, max "
        f"{max(cost_ratio):.2f})"
        + (f"; where both meet the budgets: median {np.median(both_met_cost):.2f}" if both_met_cost else "")
        + ".",
        f"- One BO optimisation run: median {np.median(bo_times):.0f} s, max {max(bo_times):.0f} s (target < 300 s; "
        f"published 3-5 minutes); CPU time of one run: median {np.median(bo_cpu):.0f} s, max {max(bo_cpu):.0f} s "
        f"(the 2-core machine was shared with other benchmarks, load average {_load()}). "
        f"Whole benchmark: {wall:.0f} s.",
    ]
    return "\n".join(lines)


def _om_class(om: str) -> type[Policy]:
    from policies.registry import load

    return load("om", om)


def _load() -> str:
    import os

    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # pragma: no cover
        return "unknown"
