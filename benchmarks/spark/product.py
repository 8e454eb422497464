"""Run a product OM policy on ``bench_spark``'s pipeline through the product's own control path.

What a user does, in one process:

1. The pipeline is registered by manifest (``autoscaler.manifests.apply_documents``, what ``manage.py apply``
   does; owner ``bench-spark``): a catalog of one executor profile (``exec.small``: 1 core, 512 MiB, the
   harness strategies' profile), a region declaring the cluster's and the drivers' addresses whose nodes are
   the cluster's workers (``spark-standalone``, ``managed: false``: the cluster is the user's, as in the Spark
   demo; nothing is provisioned, so no grant waits for a node), the application
   ``bench-spark-taxi`` (``engine: spark``, source -> ``taxi`` -> sink, SLO R_max / eta_V / eta_R, the OM
   policy, T_OM = the bench's control period) and one Deployment (``exec.small`` x 1), state ``running``.
2. The stage's agent reports to the control plane's ingest endpoints (``autoscaler.ingest``, served by
   :class:`ControlPlane` in a thread of this process, or an existing server) with the application's ingest
   token (``autoscaler.ingest.tokens``).
3. At every slot boundary (``slot x T_OM`` s since the epoch, plus ``tick_delay_s`` for the agent's last
   shipment) the Celery task functions of ``autoscaler.control.tasks`` run eagerly (``Task.apply``), as in
   ``manage.py bench_loop``: ``control.tick`` of the slot (the Spark connector's monitor reads the stored
   progress, the OM decides, the AM arbitrates, the realizer writes the desired state and waits for the agent's
   acknowledgement), ``control.am_tune`` when the AM slot advanced once the application has a configuration,
   and ``control.region_step`` of the region.
4. The run is measured like a harness strategy's (``runner.finish``), from what the control plane stored: per
   slot the window ``[(slot - 1) T, slot T)`` of progress (batches by trigger time, as the monitor reads them)
   and sink latency samples, the executors the agent reported (sampled every second for executor-seconds), the
   agent's acknowledgements. The ledger's status of every tick is kept beside it (``tick`` in the series).

``<policy>-pretrained`` first replays the earlier runs' recorded periods through a fresh instance of the
product's policy (built as the tick builds it) and stores its state as the operator's agent state.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from benchmarks.loop.scenarios import deployment_documents

from .runner import (
    PRICE_PER_CORE_HOUR,
    PROFILE,
    BenchConfig,
    RunResult,
    Stage,
    _stage_cmd,
    batch_detail,
    finish,
    fresh_workdir,
    period_stats,
)
from .strategies import PRETRAINED, PeriodStats, Strategy, observation

OWNER = "bench-spark"
APPLICATION = "bench-spark-taxi"
OPERATOR = "taxi"
REGION = "bench-spark"
CATALOG = "bench-spark-exec"
#: the ``product:`` prefix names a strategy run through the product (``bench_spark --policies``)
PREFIX = "product:"


class ProductPolicy(Strategy):
    """A product OM policy (``policies.registry``) run through the control plane (see module docstring);
    ``policy`` may end in ``-pretrained``."""

    def __init__(self, policy: str) -> None:
        self.policy = policy.removesuffix(PRETRAINED)
        self.wants_history = policy.endswith(PRETRAINED)
        self.name = PREFIX + policy


class ControlPlane:
    """The web application (its ingest endpoints) on 127.0.0.1 in a daemon thread of this process (Django's
    threaded WSGI server: a database connection per request thread)."""

    def __init__(self) -> None:
        from django.core.handlers.wsgi import WSGIHandler
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet, allow_reuse_address=False)
        self.server.set_app(WSGIHandler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> ControlPlane:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def catalog_document(name: str, description: str) -> dict[str, Any]:
    """A catalog ``name`` of the harness strategies' executor profile (``runner.PROFILE``, priced per core-hour)."""
    node_type = {
        "name": PROFILE["name"],
        "cores": PROFILE["cores"],
        "memoryMiB": PROFILE["memoryMiB"],
        "speedup": 1.0,
        "pricePerHour": PRICE_PER_CORE_HOUR,
    }
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "NodeTypeCatalog",
        "metadata": {"name": name},
        "spec": {"description": description, "nodeTypes": [node_type]},
    }


def documents(
    cfg: BenchConfig, policy: str, master_url: str, eta_v: float, eta_r: float, am_period_s: float
) -> list[dict[str, Any]]:
    """The manifests of the bench pipeline under ``policy`` (see module docstring)."""
    from policies.registry import om_choice

    spec_om = om_choice(policy)  # a preset (model-based-trend) as its base policy and parameters
    docs: list[dict[str, Any]] = [
        catalog_document(CATALOG, "bench_spark: the harness's executor profile"),
        {
            "apiVersion": "autoscaler/v1",
            "kind": "Region",
            "metadata": {"name": REGION},
            "spec": {
                "catalog": CATALOG,
                "maxNodes": cfg.k_max,
                "maxNewNodesPerPeriod": cfg.k_max,
                # the run's cluster is there already, as a user's own (the Spark demo's region): its workers
                # are the nodes, none to provision, so a granted scale-out never waits for one
                "provider": {
                    "kind": "spark-standalone",
                    "settings": {"masterUrl": master_url, "masterWebUi": cfg.master_web_ui, "managed": False},
                },
                # the bench cluster's master and the drivers' UIs take free ports on 127.0.0.1
                "endpoints": [
                    "spark://127.0.0.1:1024-65535",
                    "http://127.0.0.1:1024-65535",
                    "http://localhost:1024-65535",
                ],
            },
        },
        {
            "apiVersion": "autoscaler/v1",
            "kind": "Application",
            "metadata": {"name": APPLICATION},
            "spec": {
                "engine": "spark",
                "connector": {
                    "master": master_url,
                    "batchIntervalS": cfg.interval_s,
                    "applyTimeoutS": max(60.0, 4 * cfg.period_s),
                },
                "slo": {"rMaxMs": cfg.r_max_s * 1000.0, "etaV": eta_v, "etaR": eta_r},
                "operators": [
                    {"name": "src", "kind": "source"},
                    {"name": OPERATOR, "kind": "operator", "maxParallelism": cfg.k_max},
                    {"name": "sink", "kind": "sink"},
                ],
                "streams": [["src", OPERATOR], [OPERATOR, "sink"]],
                "policies": {"om": spec_om},
                "periods": {"omS": cfg.period_s, "amS": am_period_s},
                "regions": [REGION],
                "state": "running",
            },
        },
    ]
    return docs + deployment_documents(docs[-1], REGION, PROFILE["name"])


def register(cfg: BenchConfig, policy: str, eta_v: float, eta_r: float, am_period_s: float):  # noqa: ANN201
    """Apply the manifests (after deleting an earlier run's) and return (Application, ingest token secret)."""
    from autoscaler.ingest import tokens
    from benchmarks.loop import live

    docs = documents(cfg, policy, cfg.master, eta_v, eta_r, am_period_s)
    app = live.register(docs, OWNER, APPLICATION, REGION, CATALOG)
    return app, tokens.issue(app, rotate=True)


def pretrain(app, series: list[dict[str, Any]], cfg: BenchConfig) -> int:  # noqa: ANN001
    """Replay recorded periods (rows of ``RunResult.series``) through the operator's policy as the tick builds
    it, and store its state as the operator's agent state; returns the periods replayed."""
    from autoscaler.control.agents import load_policy
    from autoscaler.control.models import AGENT_STATE_FORMAT, AgentState
    from autoscaler.control.rails import effective_rails_data, parse_rails
    from autoscaler.control.tick import control_of
    from autoscaler.control.topology import topology

    topo = topology(app)
    control = control_of(app)
    op = next(o for o in topo.operators if o.name == OPERATOR)
    policy = load_policy(None, op, topo, control, parse_rails(effective_rails_data(app, control)))
    engine = (cfg.partitions, cfg.interval_s, cfg.period_s)
    fields = PeriodStats.__dataclass_fields__
    for row in series:
        obs = observation(PeriodStats(**{k: row[k] for k in fields if k in row}), cfg.r_max_s, engine)
        if obs is not None:
            policy.step(obs)
    AgentState.objects.update_or_create(
        operator=op,
        defaults={
            "policy": policy.name,
            "format_version": AGENT_STATE_FORMAT,
            "blob": policy.state_bytes(),
            "steps": policy.t,
            "last_slot": -1,
            "am_config_version": control.am_config_version,
        },
    )
    return len(series)


class ExecutorSampler:
    """Every second, the executors the operator's agent last reported (``DriverStatus``), integrated over time
    (executor-seconds) and kept as (epoch s, executors) samples."""

    def __init__(self, operator_id: int, initial: int, since: float) -> None:
        self.operator_id = operator_id
        self.samples: list[tuple[float, int]] = [(since, initial)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> int | None:
        from autoscaler.ingest.models import DriverStatus

        row = DriverStatus.objects.filter(operator_id=self.operator_id).values_list("executors", flat=True)
        return next(iter(row), None)

    def _loop(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(1.0):
                self.tick(self._read())
        finally:
            connection.close()

    def tick(self, executors: int | None, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.samples.append((now, self.samples[-1][1] if executors is None else int(executors)))

    @property
    def core_s(self) -> float:
        """Executor-seconds up to the last sample."""
        return self.core_s_until(self.samples[-1][0])

    def core_s_until(self, t: float) -> float:
        """Executor-seconds from the first sample to ``t`` (epoch s), each sample's count held until the next."""
        total = 0.0
        for (a, k), (b, _) in zip(self.samples, [*self.samples[1:], (t, 0)], strict=True):
            total += k * max(0.0, min(b, t) - a)
        return total

    def at(self, t: float) -> int:
        """Executors of the last sample taken no later than ``t``."""
        k = self.samples[0][1]
        for when, n in self.samples:
            if when > t:
                break
            k = n
        return k

    def start(self) -> ExecutorSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self.tick(None)


def window(operator_id: int, start: float, end: float) -> tuple[list[dict], list[dict]]:
    """The stored progress (as the agent shipped it: ``numInputRows``, ``batchDuration`` ms, ``batchId``) of the
    batches triggered in ``[start, end)`` (epoch s) and the sink's latency reports in it (``mean_s``, ``p95_s``,
    ``n``, with the progress's own end-to-end metrics)."""
    import datetime as dt

    from autoscaler.ingest.models import LatencySample, ProgressSample

    lo, hi = (dt.datetime.fromtimestamp(x, tz=dt.UTC) for x in (start, end))
    prog, lat = [], []
    for s in ProgressSample.objects.filter(
        operator_id=operator_id, timestamp__gte=lo, timestamp__lt=hi
    ).order_by("timestamp"):
        prog.append(
            {
                "numInputRows": s.num_input_rows,
                "batchDuration": s.batch_duration_ms or 0,
                "batchId": s.batch_id,
            }
        )
        if s.e2e_n and s.e2e_mean_s is not None:
            lat.append({"mean_s": s.e2e_mean_s, "p95_s": s.e2e_p95_s or s.e2e_mean_s, "n": s.e2e_n})
    for x in LatencySample.objects.filter(operator_id=operator_id, timestamp__gte=lo, timestamp__lt=hi):
        lat.append({"mean_s": x.mean_s, "p95_s": x.p95_s, "n": x.n})
    return prog, lat


def run_product(
    cfg: BenchConfig,
    strategy: ProductPolicy,
    url: str,
    log=print,  # noqa: ANN001
    history: list[dict[str, Any]] | None = None,
    eta_v: float = 0.05,
    eta_r: float = 0.2,
    am_period_s: float | None = None,
    tick_delay_s: float | None = None,
) -> RunResult:
    """Run ``strategy`` once through the product (module docstring); ``url``: the control plane the agent
    reports to (a :class:`ControlPlane` or a server of the same database); ``history``: earlier runs' periods
    for ``-pretrained``; ``am_period_s``: T_AM (default 10 control periods); ``tick_delay_s``: how long after
    a slot boundary its tick runs (default one trigger interval: the last batch of the period reported)."""
    from autoscaler.control.tick import slot_of
    from autoscaler.ingest.models import AppliedAck
    from autoscaler.models import Region
    from benchmarks.loop import live

    period = cfg.period_s
    am_period_s = 10 * period if am_period_s is None else am_period_s
    delay = cfg.interval_s if tick_delay_s is None else tick_delay_s
    res = RunResult(strategy.name)
    app, token = register(cfg, strategy.policy, eta_v, eta_r, am_period_s)
    op = app.operators.get(name=OPERATOR)
    region = Region.objects.get(name=REGION)
    if strategy.wants_history:
        n = pretrain(app, history or [], cfg)
        log(f"  pre-trained on {n} recorded periods of earlier runs")
    workdir = fresh_workdir(cfg, strategy.name.replace(":", "-"))
    stage = Stage(_stage_cmd(cfg, strategy, url, workdir, APPLICATION, OPERATOR), workdir, token)
    sched = cfg.schedule()
    sampler: ExecutorSampler | None = None
    ticked: list[tuple[int, str]] = []  # (slot, the tick's status)
    try:
        t0 = stage.wait_t0()
        sampler = ExecutorSampler(op.pk, strategy.initial(), t0).start()
        end_run = t0 + sched.duration_s
        slot = slot_of(t0, period) + 1  # the first tick observes [(slot - 1) T, slot T), which holds t0
        am_last = -1
        while (slot - 1) * period < end_run:
            live.sleep_until(slot * period + delay)
            status, am_last = live.control_slot(app, region, slot, period, am_period_s, am_last)
            ticked.append((slot, status))
            log(_tick_line(strategy.name, app, slot, status))
            slot += 1
        stage.drain(sched.total, cfg.drain_s)
        # what the run did, from everything stored by now (batches that ended after their period's tick too)
        res.series = [_series_row(op.pk, s, cfg, sched, t0, sampler, st) for s, st in ticked]
    except Exception as exc:  # noqa: BLE001 - reported in the result
        res.error = str(exc)
    finally:
        if sampler is not None:
            sampler.stop()
            # the measured periods only (as for the harness strategies), not the drain after the trace
            res.core_seconds = sampler.core_s_until(ticked[-1][0] * period) if ticked else sampler.core_s
        stage.stop()
    acks = [
        {"durationS": a.duration_s, "downtimeS": a.downtime_s}
        for a in AppliedAck.objects.filter(operator=op, generation__gt=0)
    ]
    finish(res, cfg, workdir, acks)
    if not strategy.wants_history and res.series:  # a pre-trained run's history is not replayed
        predict_closed_loop(res, cfg, strategy.policy, eta_v, eta_r, am_period_s)
    return res


def predict_closed_loop(
    res: RunResult, cfg: BenchConfig, policy: str, eta_v: float, eta_r: float, am_period_s: float
) -> None:
    """Fill ``res.closed_loop_*``: ``policy`` cold through the product on the engine fitted from the run's
    series (``closed_loop.closed_loop_prediction``), under the run's SLO and periods; left None when the run
    cannot be fitted."""
    from policies.registry import om_choice

    from .closed_loop import SparkReplaySettings, closed_loop_prediction

    run = SparkReplaySettings(
        om_choice(policy), cfg.r_max_s, eta_v, eta_r, cfg.period_s, am_period_s, cfg.k_max, cfg.interval_s,
        cfg.partitions,
    )  # fmt: skip
    loop = closed_loop_prediction(res.series, run)
    if loop is not None:
        res.closed_loop_violations_pct, res.closed_loop_core_s = loop.violations_pct, loop.replica_s


def _tick_line(name: str, app, slot: int, status: str) -> str:  # noqa: ANN001
    """One tick as the product saw it: the observation of its Decision and the executors after it."""
    from autoscaler.control.models import Decision

    d = Decision.objects.filter(application=app, slot=slot, operator__name=OPERATOR).first()
    if d is None:
        return f"  {name}: slot {slot}: tick {status}, no decision"
    o = d.observed or {}
    after = d.applied or d.deployment or {}

    def num(key: str, digits: int = 1) -> str:
        v = o.get(key)
        return "-" if v is None else f"{v:.{digits}f}"

    return (
        f"  {name}: slot {slot}: in {num('input_rate')}/s, read {num('processing_rate')}/s, R "
        f"{num('response_time_s')} s, executors {sum((d.deployment or {}).values())} -> "
        f"{sum(after.values())} [tick {status}, {d.outcome}]{_why(d)}"
    )


def _why(decision) -> str:  # noqa: ANN001
    """What the decision log says of a tick beyond its numbers (the bench deletes the log after the run): the
    executors proposed when they differ from those in place, a scale-in withheld for its settling, a backlog
    step, the engine model's penalty and scaling exponent, and the AM's reason for a denial."""
    proposal = decision.proposal or {}
    ex = proposal.get("explanation") or {}
    parts = []
    target = sum((proposal.get("target") or {}).values())
    if proposal.get("action") and target != sum((decision.deployment or {}).values()):
        parts.append(f"proposed {target}")
    settling = ex.get("settling")
    if settling:
        parts.append(f"scale-in to {sum(settling.get('withheld') or [])} withheld (settling)")
    engine = ex.get("engine_model") or {}
    if engine.get("backlog_step"):
        parts.append("backlog step")
    if engine.get("planning"):
        penalty, alpha = engine.get("penalty") or 1.0, engine.get("scaling_exponent") or 1.0
        parts.append(f"penalty {penalty:.2f}, alpha {alpha:g}")
    if proposal.get("action") and not decision.granted and decision.reason:
        parts.append(decision.reason[:80])
    return f" ({'; '.join(parts)})" if parts else ""


def _series_row(
    operator_id: int,
    slot: int,
    cfg: BenchConfig,
    sched: Any,
    t0: float,
    sampler: ExecutorSampler,
    status: str,
) -> dict[str, Any]:
    """One period of the run in ``RunResult.series`` form, for the window of ``slot``'s tick."""
    start, end = (slot - 1) * cfg.period_s, slot * cfg.period_s
    prog, lat = window(operator_id, start, end)
    executors = sampler.at(end)
    arrived = sched.count_at(end - t0) - sched.count_at(max(start, t0) - t0)
    stats = period_stats(prog, lat, executors, end - start, cfg.interval_s, end - t0, arrived)
    return {
        "start": start,
        "end": end,
        **dataclasses.asdict(stats),
        **batch_detail(prog),
        "slot": slot,
        "tick": status,
    }
