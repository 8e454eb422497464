"""``manage.py bench_loop``: the control loop a user runs (manifest -> tick -> OM -> AM -> connector, with the
AM tuning and the region's RM/IM steps), measured scenario by scenario on the simulated engine.

See ``benchmarks.loop`` (scenarios, runner, report). ``--json`` prints one JSON object per application and
line with the keys ``app, scenario, periods, warmup, violations_pct, eta_v_pct, reconfigurations_pct,
eta_r_pct, cost, floor_cost, cost_vs_floor, recovery_periods`` (with ``--repeat``: the medians); otherwise a table
and the loop's speed (ticks/s), compared with bench_control's in-process figure (``run_tick`` serially, same
policy family) measured in the same run. What it creates (owner ``bench-loop``, regions ``bench-loop-*``) is
deleted at the end (``--keep`` keeps the last run's applications, paused, to look at). Run it against a database
that no running dispatcher (Celery beat) serves: the bench's applications are ``running`` while it drives them.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from autoscaler.schemas import ManifestError
from benchmarks.loop.report import app_result, combine, table
from benchmarks.loop.runner import LoopError, cleanup, pause_all, run_scenario
from benchmarks.loop.scenarios import DEMO_OM_POLICY, SCENARIOS


class Command(BaseCommand):
    help = "Drive the real control loop over the simulated engine, scenario by scenario; SLO, cost vs floor."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--scenario",
            action="append",
            choices=sorted(SCENARIOS),
            help="scenario to run (repeatable; default: all)",
        )
        parser.add_argument("--periods", type=int, default=240, help="control periods per scenario")
        parser.add_argument("--warmup", type=int, default=60, help="first periods reported apart")
        parser.add_argument("--repeat", type=int, default=1, help="runs per scenario (median and worst)")
        parser.add_argument(
            "--policy", help="OM policy of every application (set in the manifests' spec.policies.om)"
        )
        parser.add_argument(
            "--policy-params",
            help="JSON object of OM policy params (spec.policies.om.params; needs --policy), "
            "e.g. '{\"capacity_bound\": false}'",
        )
        parser.add_argument("--json", action="store_true", help="one JSON object per application and line")
        parser.add_argument(
            "--no-baseline", action="store_true", help="skip bench_control's in-process figure (saves ~10 s)"
        )
        parser.add_argument("--keep", action="store_true", help="keep the last run's applications")

    def handle(self, *args, **opts) -> None:
        names = opts["scenario"] or list(SCENARIOS)
        periods, warmup, repeat = opts["periods"], opts["warmup"], opts["repeat"]
        if periods < 1:
            raise CommandError(f"--periods: must be >= 1, got {periods}")
        if not 0 <= warmup < periods:
            raise CommandError(f"--warmup: must be in 0..{periods - 1}, got {warmup}")
        if repeat < 1:
            raise CommandError(f"--repeat: must be >= 1, got {repeat}")
        om_policy = opts["policy"]
        if opts["policy_params"] is not None:
            if not om_policy:
                raise CommandError("--policy-params: needs --policy")
            try:
                params = json.loads(opts["policy_params"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--policy-params: not JSON ({exc})") from None
            if not isinstance(params, dict):
                raise CommandError("--policy-params: must be a JSON object")
            om_policy = {"name": om_policy, "params": params}
        # every eager task would log "Task ... succeeded" at INFO: the bench prints its own summary
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
        rows = []
        speed = {"ticks": 0, "tick_s": 0.0, "steps": 0, "wall_s": 0.0, "am": 0, "am_s": 0.0, "regions": 0}
        try:
            with tempfile.TemporaryDirectory(prefix="bench-loop-traces-") as tmp:
                for name in names:
                    scenario = SCENARIOS[name]
                    per_app: dict[str, list] = {}
                    for k in range(repeat):
                        try:
                            run = run_scenario(scenario, periods, Path(tmp), om_policy)
                        except ManifestError as exc:
                            for error in exc.errors:
                                self.stderr.write(f"error: scenario {name}: {error}")
                            raise CommandError(f"scenario {name}: its manifests were refused") from None
                        except LoopError as exc:
                            raise CommandError(f"scenario {name}: {exc}") from None
                        speed["ticks"] += run.ticks
                        speed["tick_s"] += run.tick_s
                        speed["steps"] += run.operator_steps
                        speed["wall_s"] += run.wall_s
                        speed["am"] += run.am_tunings
                        speed["am_s"] += run.am_s
                        speed["regions"] += run.region_steps
                        change = scenario.change_at(periods)
                        for rec in run.apps:
                            per_app.setdefault(rec.name, []).append(app_result(name, rec, warmup, change))
                        self.stderr.write(
                            f"bench_loop: {name} run {k + 1}/{repeat}: {run.ticks} ticks in {run.wall_s:.1f} s "
                            f"(ticks {run.tick_s:.1f} s, AM {run.am_s:.1f} s, region {run.region_s:.1f} s)"
                        )
                        if not (opts["keep"] and k == repeat - 1 and name == names[-1]):
                            cleanup([name])
                    for results in per_app.values():
                        if repeat == 1:
                            rows.append((results[0], None))
                        else:
                            rows.append(combine(results))
                        if opts["json"]:
                            self.stdout.write(rows[-1][0].as_json())
        finally:
            if opts["keep"]:
                pause_all()  # kept to look at, never ticked by a dispatcher (their trace files are gone)
            else:
                cleanup()
        if opts["json"]:
            return
        self.stdout.write(table(rows))
        self.stdout.write("")
        self.stdout.write(self._speed(speed, opts))

    def _speed(self, speed: dict, opts) -> str:
        ticks_per_s = speed["ticks"] / speed["tick_s"] if speed["tick_s"] else float("nan")
        steps_per_s = speed["steps"] / speed["tick_s"] if speed["tick_s"] else float("nan")
        lines = [
            f"Loop speed: {speed['ticks']} ticks in {speed['tick_s']:.1f} s of tick tasks = {ticks_per_s:.1f} "
            f"ticks/s ({steps_per_s:.0f} operator-steps/s); with {speed['am']} AM tunings ({speed['am_s']:.1f} s) "
            f"and {speed['regions']} region steps, {speed['ticks'] / speed['wall_s']:.1f} ticks/s of wall time."
        ]
        if not opts["no_baseline"]:
            chosen = opts["policy"] or DEMO_OM_POLICY
            # the same policy family: bench_control builds its applications with a bare policy name
            policy = chosen["name"] if isinstance(chosen, dict) else chosen
            base = bench_control_baseline(policy)
            ratio = steps_per_s / base["steps_per_s"] if base["steps_per_s"] else float("nan")
            lines.append(
                f"bench_control's in-process figure, same run, policy {policy}: {base['steps_per_s']:.0f} "
                f"operator-steps/s ({base['tick_ms']:.1f} ms per 10-operator tick, "
                f"{1000.0 / base['tick_ms']:.1f} ticks/s); bench_loop's tick tasks: {ratio:.2f}x its "
                f"operator-steps/s and {ticks_per_s * base['tick_ms'] / 1000.0:.2f}x its ticks/s (target >= 0.8x)."
            )
        return "\n".join(lines)


def bench_control_baseline(policy: str) -> dict:
    """``manage.py bench_control``'s in-process baseline (``run_tick`` serially, 10 simulated applications of 10
    operators, 2 measured slots after one warm-up) for ``policy``, measured now; its applications are deleted."""
    from benchmarks.control.command import Command as BenchControl

    bench = BenchControl()
    started = time.perf_counter()
    try:
        out = bench._baseline(policy, 10)
    finally:
        bench._cleanup()
    out["wall_s"] = time.perf_counter() - started
    return out
