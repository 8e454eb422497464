"""``manage.py bench_dashboard``: server time of the application dashboard with a month of minute-level data.

Generates ``--days`` (30) days of one-minute control periods for an application of ``--operators`` (10) scaled
operators directly in the database (Tick + Decision rows as the control loop writes them, ``bulk_create``; input
rates from the Taxi trace, deployments that scale with the load, ~2 % of decisions applied), builds the
dashboard's rollup once (timed), then measures with the Django test client (server time: URL routing, views,
database, JSON; no network, no browser) the median and p95 over ``--repeat`` requests of the dashboard page and of
its data endpoint for every time range. Baselines measured in the same run: the raw query the rollup replaces
(every Tick's metrics and every Decision's deployment and cost of the range, JSON-encoded without downsampling)
and the rollup read without downsampling. Target: under 300 ms per request.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.test import Client

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, Tick
from dashboard import monitor_data, monitor_rollup

OWNER = "bench-dashboard"
NAME = "bench-dashboard"


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Command(BaseCommand):
    help = "Benchmark the application dashboard's server time on 30 days of one-minute data (docs/benchmarks.md)."

    def add_arguments(self, parser):
        parser.add_argument("--days", type=float, default=30.0)
        parser.add_argument("--operators", type=int, default=10)
        parser.add_argument("--repeat", type=int, default=10)
        parser.add_argument("--raw-repeat", type=int, default=2, help="requests of the slow raw baseline")
        parser.add_argument("--keep", action="store_true", help="keep the generated application afterwards")
        parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")

    def handle(self, *args, **opts):
        if opts["days"] <= 0 or opts["operators"] < 1 or opts["repeat"] < 1:
            raise CommandError("--days must be > 0, --operators >= 1, --repeat >= 1")
        from autoscaler.models import Application

        Application.objects.filter(owner__username=OWNER, name=NAME).delete()
        started = time.perf_counter()
        app = self.generate(opts["days"], opts["operators"])
        gen_s = time.perf_counter() - started
        n_ticks = Tick.objects.filter(application=app).count()
        n_dec = Decision.objects.filter(application=app).count()
        self.stdout.write(f"generated {n_ticks} ticks, {n_dec} decisions in {gen_s:.1f} s")
        t0 = time.perf_counter()
        rows = monitor_rollup.catch_up(app)
        rollup_s = time.perf_counter() - t0
        self.stdout.write(
            f"rollup of {rows} periods built in {rollup_s:.1f} s (once; later ticks are incremental)"
        )

        client = Client(HTTP_HOST="localhost")
        client.force_login(app.owner)

        def timed(url: str, n: int) -> tuple[list[float], int]:
            times, size = [], 0
            for _ in range(n):
                t = time.perf_counter()
                r = client.get(url)
                times.append((time.perf_counter() - t) * 1000.0)
                if r.status_code != 200:
                    raise CommandError(f"{url}: HTTP {r.status_code}")
                size = len(r.content)
            return times, size

        results = []
        client.get(f"/applications/{NAME}/data.json?range=all")  # warm caches (imports, templates)
        page, size = timed(f"/applications/{NAME}/", opts["repeat"])
        results.append(("dashboard page (HTML)", page, size, None))
        for rng in ("hour", "day", "week", "all"):
            ts, size = timed(f"/applications/{NAME}/data.json?range={rng}", opts["repeat"])
            d = client.get(f"/applications/{NAME}/data.json?range={rng}").json()
            longest = max(len(d[k]["x"]) for k in ("rate", "capacity", "rt"))
            results.append((f"data.json range={rng}", ts, size, (d["rows"], longest)))
        # baseline 1: rollup read, no downsampling (every period shipped)
        no_ds = []
        for _ in range(opts["repeat"]):
            t = time.perf_counter()
            body = json.dumps(monitor_data.dashboard_data(app, "all", max_points=10**9))
            no_ds.append((time.perf_counter() - t) * 1000.0)
        # baseline 2: the raw query the rollup replaces (range=all), JSON-encoded without downsampling
        raw = []
        raw_size = 0
        for _ in range(opts["raw_repeat"]):
            t = time.perf_counter()
            ticks = list(Tick.objects.filter(application=app).order_by("slot").values_list("slot", "metrics"))
            decs = list(
                Decision.objects.filter(application=app)
                .order_by("slot")
                .values_list("slot", "operator_id", "deployment", "resource_cost", "violated", "outcome")
            )
            raw_body = json.dumps({"ticks": ticks, "decisions": decs})
            raw.append((time.perf_counter() - t) * 1000.0)
            raw_size = len(raw_body)
        all_med = statistics.median(results[-1][1])
        lines = [
            f"{n_ticks} one-minute periods ({opts['days']:g} days) x {opts['operators']} operators = {n_dec} "
            f"decisions; generated in {gen_s:.0f} s; rollup built once in {rollup_s:.1f} s.",
            "",
            "| request (server time, Django test client) | median ms | p95 ms | body KiB | periods / "
            "points per line | vs raw |",
            "|---|---:|---:|---:|---|---:|",
        ]
        raw_med = statistics.median(raw)
        for name, ts, size, pts in results:
            med = statistics.median(ts)
            lines.append(
                f"| {name} | {med:.0f} | {percentile(ts, 0.95):.0f} | {size / 1024:.0f} | "
                f"{'' if pts is None else f'{pts[0]} / {pts[1]}'} | {raw_med / med:.0f}x faster |"
            )
        lines.append(
            f"| baseline: rollup, no downsampling (range=all) | {statistics.median(no_ds):.0f} | "
            f"{percentile(no_ds, 0.95):.0f} | {len(body) / 1024:.0f} | {n_ticks} / {n_ticks} | "
            f"{raw_med / statistics.median(no_ds):.1f}x faster |"
        )
        lines.append(
            f"| baseline: raw Tick + Decision query, no downsampling (range=all) | {raw_med:.0f} | "
            f"{max(raw):.0f} | {raw_size / 1024:.0f} | {n_ticks} / {n_ticks} | 1x |"
        )
        worst = max(statistics.median(ts) for _, ts, _, _ in results)
        verdict = "met" if worst < 300 else "NOT met"
        lines += [
            "",
            f"Target (< 300 ms per request): {verdict}; slowest median {worst:.0f} ms (range=all: {all_med:.0f} ms, "
            f"{raw_med / all_med:.0f}x faster than the raw query). Each line series ships at most "
            f"{monitor_data.MAX_POINTS} points (LTTB); stacked areas are reduced per bucket on a shared axis.",
            f"Medians of {opts['repeat']} requests ({opts['raw_repeat']} for the raw baseline); other helpers' jobs "
            "were running on the 2 cores (load average at the end: "
            f"{', '.join(f'{v:.1f}' for v in _loadavg())}).",
        ]
        body_md = "\n".join(lines)
        self.stdout.write(body_md)
        if not opts["no_doc"]:
            from policies.benchdoc import write_section

            cmd = "python manage.py bench_dashboard"
            if opts["days"] != 30 or opts["operators"] != 10:
                cmd += f" --days {opts['days']:g} --operators {opts['operators']}"
            write_section("dashboard", "## Application dashboard server time\n\n" + body_md, cmd)
        if not opts["keep"]:
            app.delete()

    def generate(self, days: float, n_ops: int):
        """A simulated application with ``days`` of one-minute ticks and decisions, written with bulk_create."""
        from policies.paths import taxi_trace
        from policies.sim.trace import load_trace

        app = simulated_pipeline(
            NAME, n_operators=n_ops, om_policy="ql-pds-plus", owner=OWNER, state="paused"
        )
        get_user_model().objects.filter(username=OWNER).update(is_active=True)
        ops = list(app.operators.filter(kind="operator").order_by("position"))
        from autoscaler.models import NodeType

        price_a1 = float(NodeType.objects.get(catalog__name="infra-a", name="A1").price_per_hour)
        n = int(days * 1440)
        end_slot = int(time.time() // 60)
        slots = np.arange(end_slot - n, end_slot)
        trace = load_trace(taxi_trace())
        rates = trace[np.arange(n) % len(trace)] * 1.0
        rng = np.random.default_rng(7)
        # replicas per operator follow the load (steps), on A1 with a share on A3 at high load
        need = np.clip(np.ceil(rates / 120.0), 1, 10).astype(int)
        now = dt.datetime.now(dt.UTC)
        batch = 4000
        for lo in range(0, n, batch):
            hi = min(lo + batch, n)
            ticks = []
            for i in range(lo, hi):
                ops_metrics = {}
                path_rt = 0.0
                for op in ops:
                    k = int(need[i])
                    rate = float(rates[i])
                    util = min(rate / (k * 180.0), 0.99)
                    rt = 0.0055 / max(1.0 - util, 0.01)
                    path_rt += rt
                    ops_metrics[op.name] = {
                        "operator": op.name,
                        "deployment": {"A1": k},
                        "input_rate": rate,
                        "processing_rate": rate,
                        "utilisation": util,
                        "response_time_s": rt,
                        "response_time_p95_s": rt * 3,
                        "service_time_mean_s": 0.005,
                        "service_time_var_s2": 1.25e-5,
                        "backlog": 0.0,
                        "complete": True,
                        "reason": "",
                    }
                ticks.append(
                    Tick(
                        application=app,
                        slot=int(slots[i]),
                        period_s=60.0,
                        status=Tick.Status.DONE,
                        attempts=1,
                        metrics={
                            "slot": int(slots[i]) - 1,
                            "operators": ops_metrics,
                            "path_response_time_s": {"src->...->sink": path_rt},
                            "complete": True,
                            "reason": "",
                        },
                        created_at=now,
                        decided_at=now,
                        finished_at=now,
                        latency_s=0.05,
                    )
                )
            ticks = Tick.objects.bulk_create(ticks)
            decisions = []
            for i, tick in zip(range(lo, hi), ticks, strict=True):
                k = int(need[i])
                changed = i > 0 and need[i] != need[i - 1]
                for j, op in enumerate(ops):
                    applied = changed and j == int(rng.integers(n_ops))
                    action = "add one replica on A1" if applied else "do nothing"
                    decisions.append(
                        Decision(
                            tick=tick,
                            application=app,
                            operator=op,
                            slot=tick.slot,
                            outcome=Decision.Outcome.APPLIED if applied else Decision.Outcome.NO_CHANGE,
                            observed=tick.metrics["operators"][op.name],
                            deployment={"A1": k},
                            proposal={
                                "action": 2 * 3 if applied else 0,
                                "target": {"A1": k},
                                "explanation": {
                                    "policy": "ql-pds-plus",
                                    "action": action,
                                    "last_period_cost_terms": {
                                        "perf": float(path_rt_violated(tick)),
                                        "res": k / 10.0,
                                        "rcf": float(changed),
                                    },
                                    "weights": {"perf": 0.33, "res": 0.33, "rcf": 0.34},
                                    "alternatives": {"do nothing": 1.0, "add one replica on A1": 1.1},
                                },
                            },
                            granted=applied,
                            reason="granted" if applied else "",
                            applied={"A1": k},
                            finished_at=now,
                            resource_cost=k * price_a1 * 60.0 / 3600.0,
                            violated=bool(path_rt_violated(tick)),
                            reconfigured=bool(changed),
                        )
                    )
            Decision.objects.bulk_create(decisions, batch_size=5000)
        return app


def path_rt_violated(tick: Tick) -> bool:
    return any(v * 1000.0 > 100.0 for v in tick.metrics["path_response_time_s"].values())


def _loadavg() -> tuple[float, float, float]:
    import os

    return os.getloadavg()
