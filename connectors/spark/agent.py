"""Job-side agent: the "one line in the job" that puts a Spark streaming query under the autoscaler's control.

Contract (helper libraries and pipelines rely on it):

Monitoring only, on a session the job owns::

    agent = attach(spark, application="wordcount", operator="counter",
                   url="http://127.0.0.1:8000", token="<the application's ingest token>")

``token`` is the application's ingest token (``manage.py ingest_token wordcount --output FILE``): it writes that
application's ingest endpoints and nothing else. (The owner's full API token is still accepted there, for
compatibility; do not hand it to jobs.) The agent never logs it.

Full control (live executor changes AND executor-profile changes by restart), the agent owns the session::

    def build_query(spark: SparkSession) -> StreamingQuery:   # reads a source, writes a sink, checkpointLocation set
        ...
    agent = run(build_query, conf={"spark.sql.shuffle.partitions": "4"}, master="spark://127.0.0.1:7077",
                application="wordcount", operator="counter", url=..., token=..., block=False)
    ...
    agent.stop()            # stops the query at a batch boundary, the session and the agent threads

``application``, ``operator``, ``url`` and ``token`` may also come from the Spark conf
(``spark.streamscaler.application|operator|url|token``) or the environment (``STREAMSCALER_APPLICATION``,
``STREAMSCALER_OPERATOR``, ``STREAMSCALER_URL``, ``STREAMSCALER_TOKEN``); explicit arguments win, then the conf,
then the environment.

What the agent does:

(a) A ``StreamingQueryListener`` whose ``onQueryProgress`` puts the progress JSON (with ``observedMetrics``) into a
    bounded in-memory queue (``queue_size`` items; when full the OLDEST item is dropped and ``dropped`` counts it).
    A daemon thread ships the queue in batches of at most ``batch_size`` items every ``ship_interval_s`` seconds
    to ``POST {url}/api/v1/ingest/<application>/<operator>/progress``::

        {"progress": [<StreamingQueryProgress JSON>, ...],
         "latency": [{"timestamp": <epoch s>, "mean_s": s, "p95_s": s, "n": records}, ...],
         "dropped": <items dropped so far>,
         "driver": {"uiUrl": ..., "appId": ..., "executors": <active executors>,
                    "profile": {"cores": c, "memoryMiB": m, "name": node type}, "generation": <applied>}}

    A failed post is retried (exponential backoff up to 10 s); the query is never blocked. The listener also
    sends a heartbeat (``progress: []``) every ``ship_interval_s`` so the control plane knows the driver.
    A shipment the control plane refuses for good never blocks the queue: on 413 (body over its size limit) the
    shipments are halved until they fit (and stay that size); on 400 the items its errors name (``progress[i]``,
    ``latency[j]``) are dropped and counted in ``stats.rejected``, a single item refused as a whole too, and
    a refused ``driver`` block is left out of later shipments; the rest is shipped again at once.

(b) End-to-end latency: the sink either attaches observed metrics named ``e2e`` (``df.observe("e2e", ...)``
    with columns ``mean_s``, ``p95_s``, ``n``: seconds from record creation to the sink, records), which arrive
    inside the progress JSON, or calls ``agent.report_latency(mean_s, p95_s, n)`` (e.g. from ``foreachBatch``).

(c) A daemon thread polls ``GET {url}/api/v1/ingest/<application>/<operator>/desired`` every ``poll_interval_s``
    (``{"generation": g, "executors": n, "profile": {"name", "cores", "memoryMiB"[, "resource"]}}``; generation
    0 = nothing desired yet; ``resource``: on typed workers, the custom resource each executor requests one unit
    of, ``spark.executor.resource.<resource>.amount=1``, see ``connectors.spark.placement``). For a new
    generation:

    - same profile (cores, memory, resource): ``requestTotalExecutors(n)`` to add, ``killExecutor(id)`` to remove, choosing the executors
      with the fewest active tasks (the driver's ``/api/v1/applications/<id>/executors``); then waits until the
      driver reports ``n`` active executors (at most ``apply_timeout_s``);
    - other profile (other cores, memory or resource): only under ``run``: waits for a batch boundary (no trigger active, at most 30 s), stops
      the query and the SparkContext, starts a new session with ``spark.executor.cores`` / ``.memory`` of the
      profile (memory = ``memoryMiB * memory_scale``, at least 512 MiB, Spark's minimum is 450) and
      rebuilds the query with ``build_query`` (it restarts from its checkpoint: no record lost or duplicated
      with a checkpointed source and an idempotent sink). Downtime (s) = from the stop request until the new
      query runs (past initialisation) with at least one executor. Under ``attach`` a profile change is
      refused with an error in the ack.

    and acknowledges with ``POST .../applied`` ``{"generation", "executors" (seen on the driver), "profile",
    "downtimeS", "durationS", "error"}`` (``error`` empty on success).

    The agent also keeps the executor count at the desired value between generations (e.g. surplus executors
    granted at start-up before the limit reached the master are killed).

Standalone specifics: executors are requested with ``requestTotalExecutors`` (a Scala map is required, built with
``PythonUtils.toScalaMap``); ``spark.cores.max`` is set to ``max_executors * cores`` so the limit, not the
cores cap, decides; dynamic allocation must be off; ``spark.standalone.executorRemoveDelayOnDisconnection``
defaults to 1 s (Spark: 5 s) so that a killed executor leaves the driver's list sooner. Executors already asked
to stop are not counted as running (the REST API lists them as active until they are gone).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors.spark.placement import PREFIX, executor_conf
from connectors.spark.store import STAGE_TASKS_KEY

log = logging.getLogger("streamscaler.agent")

MIN_EXECUTOR_MEMORY_MIB = 512
DEFAULT_MAX_EXECUTORS = 16
#: seconds between reads of this driver's executor list while a change is verified (a local REST call)
VERIFY_POLL_S = 0.2
#: seconds the executor count must hold at the desired value after a restart before it is acknowledged: the master
#: launches executors up to ``spark.cores.max`` when the new application registers, before the desired total
#: reaches it, and such a surplus executor can register seconds after the first (then it is killed)
RESTART_SETTLE_S = 5.0
#: Spark conf the agent sets unless the job sets it: a killed executor leaves the driver's list after 1 s
#: instead of 5 s (the driver waits that long for the master's reason of a disconnection; standalone only)
STANDALONE_DEFAULTS = {"spark.standalone.executorRemoveDelayOnDisconnection": "1s"}
#: answers of the ingest endpoint to a shipment that would be refused again if sent unchanged
REFUSED_FOR_GOOD = (400, 413)
_ITEM_LOC = re.compile(r"^(progress|latency)\[(\d+)\]")


@dataclass
class CountHold:
    """Reads of the driver's executor list while a change to ``n`` executors is verified: the last count (``-1``:
    unreadable) and since when (monotonic s) it has been ``n`` read after read."""

    n: int
    seen: int = -1
    since: float | None = None

    def note(self, now: float) -> None:
        """Record that ``seen`` was read at ``now``."""
        if self.seen == self.n:
            self.since = now if self.since is None else self.since
        else:
            self.since = None

    def held_for(self, now: float) -> float:
        """Seconds the count has matched up to ``now`` (``-1`` when it does not match)."""
        return -1.0 if self.since is None else now - self.since


@dataclass
class Profile:
    """An executor profile: cores per executor, memory per executor (MiB), node-type name and, on typed workers,
    the custom resource each executor requests one unit of (``connectors.spark.placement``; empty: none)."""

    cores: int = 1
    memory_mib: int = 1024
    name: str = ""
    resource: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Profile | None:
        if not data:
            return None
        return cls(
            int(data.get("cores", 1)),
            int(data.get("memoryMiB", 1024)),
            str(data.get("name", "")),
            str(data.get("resource") or ""),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "cores": self.cores, "memoryMiB": self.memory_mib}
        if self.resource:
            out["resource"] = self.resource
        return out

    def same_resources(self, other: Profile | None) -> bool:
        """Same executor size and placement: a change is applied live (otherwise by a restart)."""
        return other is not None and (self.cores, self.memory_mib, self.resource) == (
            other.cores,
            other.memory_mib,
            other.resource,
        )


@dataclass
class AgentStats:
    """Counters of one agent (items, not records)."""

    enqueued: int = 0
    shipped: int = 0
    dropped: int = 0
    post_failures: int = 0
    rejected: int = 0  # items the control plane refused for good (dropped, see the module docstring)
    applied: list[dict[str, Any]] = field(default_factory=list)


def _loc_path(loc: Any) -> str:
    """An error's ``loc`` as a dotted path (``progress[3].batchId``), whether it came as a string or a list."""
    if isinstance(loc, str):
        return loc
    out = ""
    for part in loc if isinstance(loc, list) else []:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _error_paths(exc: urllib.error.HTTPError) -> tuple[list[str], str]:
    """The field paths of an ingest error answer ``{"errors": [{"loc", "msg"}]}`` and a one-line summary."""
    try:
        errors = json.loads(exc.read()).get("errors") or []
    except (ValueError, OSError, AttributeError):
        errors = []
    errors = [e for e in errors if isinstance(e, dict)]
    paths = [_loc_path(e.get("loc")) for e in errors]
    reason = "; ".join(f"{p or 'body'}: {e.get('msg')}" for p, e in zip(paths, errors, strict=True))
    return paths, (reason or f"HTTP {exc.code}")[:500]


def _setting(name: str, value: str | None, conf: Any = None) -> str:
    if value:
        return value
    if conf is not None:
        try:
            got = conf.get(f"spark.streamscaler.{name}", None)
        except Exception:  # noqa: BLE001 - a conf object without the key
            got = None
        if got:
            return str(got)
    env = os.environ.get(f"STREAMSCALER_{name.upper()}", "")
    if not env:
        raise ValueError(
            f"streamscaler agent: {name!r} is not set (argument, spark.streamscaler.{name} or "
            f"STREAMSCALER_{name.upper()})"
        )
    return env


def memory_conf(profile: Profile, memory_scale: float) -> str:
    """``spark.executor.memory`` of a profile: ``memoryMiB * memory_scale`` MiB, at least 512 MiB."""
    return f"{max(int(profile.memory_mib * memory_scale), MIN_EXECUTOR_MEMORY_MIB)}m"


def _forget_executor_resources(conf: dict[str, str]) -> None:
    """Drop node-type resource requests (``spark.executor.resource.nodetype_*``) of a previous session that
    ``conf`` does not set.

    PySpark keeps a stopped session's settings as JVM system properties, which the next SparkConf of the same
    driver loads: a restart from node type A to B would otherwise request both A's and B's resource. Other
    resources (e.g. GPUs given to spark-submit) are left alone."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:
        return
    system = jvm.java.lang.System
    for key in list(system.getProperties().stringPropertyNames()):
        if str(key).startswith(f"spark.executor.resource.{PREFIX}") and str(key) not in conf:
            system.clearProperty(key)


class SparkAgent:
    """Ships progress, applies desired executor counts/profiles (see module docstring for the contract)."""

    def __init__(
        self,
        application: str,
        operator: str,
        url: str,
        token: str,
        *,
        queue_size: int = 1000,
        batch_size: int = 100,
        ship_interval_s: float = 1.0,
        poll_interval_s: float = 0.5,
        apply_timeout_s: float = 60.0,
        memory_scale: float = 1.0,
        max_executors: int = DEFAULT_MAX_EXECUTORS,
        request_timeout_s: float = 5.0,
    ) -> None:
        self.application = application
        self.operator = operator
        self.base = url.rstrip("/") + f"/api/v1/ingest/{application}/{operator}"
        self.token = token
        self.batch_size = batch_size
        # items per shipment: what fits the control plane's size limit (a 413 halves it, for good), and less
        # while looking for an item refused without a path (back to batch_size after a success)
        self._fit_limit = self._probe_limit = batch_size
        self._send_driver = True  # False once the control plane refused the driver block
        self.ship_interval_s = ship_interval_s
        self.poll_interval_s = poll_interval_s
        self.apply_timeout_s = apply_timeout_s
        self.memory_scale = memory_scale
        self.max_executors = max_executors
        self.request_timeout_s = request_timeout_s
        self.stats = AgentStats()
        self._queue: collections.deque[tuple[str, dict[str, Any]]] = collections.deque(maxlen=queue_size)
        self._lock = threading.Lock()
        self._ship_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.spark: Any = None
        self.query: Any = None
        self.profile: Profile | None = None
        self.desired_executors: int | None = None
        self.generation = 0
        self._build_query: Callable[[Any], Any] | None = None
        self._conf: dict[str, str] = {}
        self._master: str | None = None
        self._app_name = f"streamscaler-{application}-{operator}"
        self._restart_to: tuple[int, int, Profile] | None = None
        self._killing: set[str] = set()  # executor ids asked to stop, until the driver no longer lists them
        self._restart_started: float | None = None
        self._progress_seen = threading.Event()
        self._listener: Any = None
        self._jobs_seen: dict[str, int] = {}  # per query run id, the newest job batch_stage_tasks has read
        self.error: BaseException | None = None

    # ---- shipping ---------------------------------------------------------------------------------------
    def _enqueue(self, kind: str, item: dict[str, Any]) -> None:
        with self._lock:
            if len(self._queue) == self._queue.maxlen:
                self.stats.dropped += 1
            self._queue.append((kind, item))
            self.stats.enqueued += 1

    def on_progress(self, progress_json: str) -> None:
        """Listener entry point: enqueue one progress JSON (never blocks, never raises), with the tasks of the
        widest stage the batch ran (``maxStageTasks``, :meth:`batch_stage_tasks`) when the driver knows them."""
        try:
            item = json.loads(progress_json)
        except Exception:  # noqa: BLE001 - the query must never see an agent error
            log.exception("streamscaler agent: bad progress event")
            return
        try:
            tasks = self.batch_stage_tasks(str(item.get("runId") or ""))
        except Exception:  # noqa: BLE001 - the progress goes out without it
            log.debug("streamscaler agent: no stage tasks for the batch", exc_info=True)
            tasks = None
        if tasks:
            item[STAGE_TASKS_KEY] = tasks
        self._enqueue("progress", item)
        self._progress_seen.set()

    def batch_stage_tasks(self, run_id: str) -> int | None:
        """Tasks of the widest stage among the jobs the query run ``run_id`` submitted since the last call (the
        micro-batch that just ended: Structured Streaming runs a batch's jobs in the job group of its run id),
        from the driver's status tracker; None when none is known. A batch's parallel work runs in waves of at
        most this many tasks (``policies.engine_model``'s partitions): a stateless query reports no
        ``stateOperators`` partitions, and without them the engine model took 6 executors on 8 partitions for
        1.5 x the work of 4."""
        sc = self._sc()
        if sc is None or not run_id:
            return None
        tracker = sc.statusTracker()
        seen = self._jobs_seen.get(run_id, -1)
        widest = 0
        for job_id in sorted(j for j in tracker.getJobIdsForGroup(run_id) if j > seen):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else []:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    widest = max(widest, int(stage.numTasks))
            self._jobs_seen[run_id] = job_id
        return widest or None

    def report_latency(self, mean_s: float, p95_s: float, n: int) -> None:
        """Sink-side end-to-end latency of the records written now: mean and p95 (s) over ``n`` records."""
        self._enqueue(
            "latency", {"timestamp": time.time(), "mean_s": float(mean_s), "p95_s": float(p95_s), "n": int(n)}
        )

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Token {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=self.request_timeout_s) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else {}

    def driver_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"generation": self.generation}
        sc = self._sc()
        if sc is not None:
            info.update(uiUrl=sc.uiWebUrl or "", appId=sc.applicationId)
            try:
                info["executors"] = len(self.executors())
            except Exception:  # noqa: BLE001 - the UI is down during a restart
                pass
        if self.profile is not None:
            info["profile"] = self.profile.to_json()
        return info

    def _ship_once(self) -> bool:
        with self._ship_lock:  # the ship loop and flush() never send the same items twice
            return self._ship_locked()

    def _ship_locked(self) -> bool:
        with self._lock:
            items = list(self._queue)[: min(self._fit_limit, self._probe_limit)]
        body = {
            "progress": [i for k, i in items if k == "progress"],
            "latency": [i for k, i in items if k == "latency"],
            "dropped": self.stats.dropped,
        }
        if self._send_driver:
            body["driver"] = self.driver_info()
        try:
            self._request("POST", "/progress", body)
        except urllib.error.HTTPError as exc:
            self.stats.post_failures += 1
            if exc.code in REFUSED_FOR_GOOD:
                return self._refused(items, exc)
            log.warning("streamscaler agent: shipping %d items failed: HTTP %d", len(items), exc.code)
            return False
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.stats.post_failures += 1
            log.warning("streamscaler agent: shipping %d items failed: %s", len(items), exc)
            return False
        self._forget(items)
        self.stats.shipped += len(items)
        self._probe_limit = self.batch_size
        return True

    def _forget(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        with self._lock:
            for item in items:  # remove what was sent or refused (unless dropped meanwhile)
                if self._queue and self._queue[0] is item:
                    self._queue.popleft()
                elif item in self._queue:
                    self._queue.remove(item)

    def _refused(self, items: list[tuple[str, dict[str, Any]]], exc: urllib.error.HTTPError) -> bool:
        """Handle a shipment refused for good (``REFUSED_FOR_GOOD``) so that it cannot block the queue. True when
        something changed (fewer items queued, smaller shipments, no driver block): ship again at once."""
        paths, reason = _error_paths(exc)
        if exc.code == 413 and len(items) > 1:
            self._fit_limit = max(1, len(items) // 2)
            log.warning("streamscaler agent: %d items too large to ship at once (%s); %d per shipment",
                        len(items), reason, self._fit_limit)  # fmt: skip
            return True
        by_kind = {kind: [i for i in items if i[0] == kind] for kind in ("progress", "latency")}
        named: list[tuple[str, dict[str, Any]]] = []
        for path in paths:
            match = _ITEM_LOC.match(path)
            if match and int(match.group(2)) < len(by_kind[match.group(1)]):
                item = by_kind[match.group(1)][int(match.group(2))]
                if not any(item is x for x in named):
                    named.append(item)
        if not named and self._send_driver and any(p.startswith("driver") for p in paths):
            self._send_driver = False
            log.error("streamscaler agent: the control plane refused the driver information (%s); "
                      "shipping without it", reason)  # fmt: skip
            return True
        if not named and len(items) > 1:  # refused as a whole: find the culprit in smaller shipments
            self._probe_limit = max(1, len(items) // 2)
            return True
        named = named or list(items)
        if not named:
            log.error("streamscaler agent: the control plane refused a heartbeat (%s)", reason)
            return False
        self._forget(named)
        self.stats.rejected += len(named)
        log.error("streamscaler agent: the control plane refused %d item(s) for good, dropped: %s",
                  len(named), reason)  # fmt: skip
        return True

    def _ship_loop(self) -> None:
        backoff = self.ship_interval_s
        while not self._stop.is_set():
            ok = self._ship_once()
            backoff = self.ship_interval_s if ok else min(max(backoff * 2, 0.5), 10.0)
            with self._lock:
                more = len(self._queue) >= self.batch_size
            if not (ok and more):
                self._stop.wait(backoff)
        self._ship_once()  # flush what is left

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Ship everything queued now; True when the queue emptied within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._ship_once() and not self._queue:
                return True
            time.sleep(0.2)
        return not self._queue

    # ---- executors --------------------------------------------------------------------------------------
    def _sc(self) -> Any:
        spark = self.spark
        if spark is None:
            return None
        try:
            sc = spark.sparkContext
            return sc if sc._jsc is not None else None
        except Exception:  # noqa: BLE001 - stopped context
            return None

    def executors(self) -> list[dict[str, Any]]:
        """Active executors (not the driver) from this driver's REST API."""
        sc = self._sc()
        if sc is None or not sc.uiWebUrl:
            raise RuntimeError("no running SparkContext with a UI")
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors"
        with urllib.request.urlopen(url, timeout=self.request_timeout_s) as resp:
            rows = json.loads(resp.read())
        return [r for r in rows if r.get("id") != "driver" and r.get("isActive", True)]

    def _request_total(self, n: int) -> bool:
        sc = self._sc()
        jvm = sc._jvm
        empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
        return bool(sc._jsc.sc().requestTotalExecutors(int(n), 0, empty))

    def _kill(self, executor_id: str) -> bool:
        killed = bool(self._sc()._jsc.sc().killExecutor(str(executor_id)))
        if killed:
            self._killing.add(str(executor_id))
        return killed

    def _staying(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` without the executors already asked to stop: the REST API lists an executor as active until
        it is gone, seconds after ``killExecutor``; counting it would kill another one in its place."""
        self._killing &= {str(r.get("id")) for r in rows}  # gone ones are forgotten
        return [r for r in rows if str(r.get("id")) not in self._killing]

    def scale_to(self, n: int) -> None:
        """Kill surplus executors, idlest first (fewest active tasks), then request ``n`` executors in total.

        Executors already being stopped are not counted. Kills come first because ``killExecutor`` also lowers
        the requested total by one per executor: killing after requesting ``n`` would leave the target below
        ``n`` (a lost executor would not be replaced)."""
        running = self._staying(self.executors())
        surplus = len(running) - n
        if surplus > 0:
            victims = sorted(running, key=lambda r: (r.get("activeTasks", 0), r.get("id")))[:surplus]
            for v in victims:
                self._kill(v["id"])
        self._request_total(n)

    def _observe(self, hold: CountHold) -> None:
        """One read of the executor list into ``hold``; surplus executors (beyond ``hold.n``) are killed."""
        try:
            rows = self.executors()
        except Exception:  # noqa: BLE001 - UI briefly unavailable
            rows, hold.seen = [], -1
        else:
            hold.seen = len(rows)
        hold.note(time.monotonic())
        if len(self._staying(rows)) > hold.n:  # surplus (e.g. granted before the limit arrived): remove it
            try:
                self.scale_to(hold.n)
            except Exception:  # noqa: BLE001
                pass

    def _wait_executors(
        self, hold: CountHold, timeout_s: float, settle_s: float = 0.0, any_running: bool = False
    ) -> int:
        """Reads the executor count into ``hold`` until ``hold.n`` have been seen for ``settle_s`` seconds in a row
        (counting the reads already in ``hold``: the count may have held while the caller waited for something
        else), or with ``any_running`` until at least one runs; the last count, also at ``timeout_s``. Surplus
        executors are killed meanwhile."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._stop.is_set():
            self._observe(hold)
            if (hold.seen >= 1) if any_running else (hold.held_for(time.monotonic()) >= settle_s):
                return hold.seen
            time.sleep(VERIFY_POLL_S)
        return hold.seen

    # ---- desired state ----------------------------------------------------------------------------------
    def _ack(self, generation: int, executors: int, downtime_s: float, duration_s: float, error: str) -> None:
        body = {
            "generation": generation,
            "executors": executors,
            "profile": self.profile.to_json() if self.profile else None,
            "downtimeS": round(downtime_s, 3),
            "durationS": round(duration_s, 3),
            "error": error,
            "driver": self.driver_info(),
        }
        self.stats.applied.append(body)
        for attempt in range(5):
            try:
                self._request("POST", "/applied", body)
                return
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log.warning("streamscaler agent: ack failed (%s), retry %d", exc, attempt + 1)
                self._stop.wait(min(2**attempt, 5))

    def fetch_desired(self) -> tuple[int, int | None, Profile | None]:
        got = self._request("GET", "/desired")
        gen = int(got.get("generation", 0))
        execs = got.get("executors")
        return gen, (int(execs) if execs is not None else None), Profile.from_json(got.get("profile"))

    def _apply_live(self, generation: int, n: int) -> None:
        t0 = time.monotonic()
        error = ""
        try:
            self.scale_to(n)
            seen = self._wait_executors(CountHold(n), self.apply_timeout_s)
            if seen != n:
                error = f"executors: {seen} running after {self.apply_timeout_s:.0f} s, {n} desired"
        except Exception as exc:  # noqa: BLE001 - reported in the ack
            seen, error = -1, f"scaling failed: {exc}"
        self.desired_executors = n
        self.generation = generation
        self._ack(generation, seen, 0.0, time.monotonic() - t0, error)

    def _reconcile(self) -> None:
        """Keep the running executors at the desired count between generations: kill surplus ones (e.g.
        granted at start-up before the limit reached the master), idlest first."""
        n = self.desired_executors
        if n is None:
            return
        try:
            if len(self._staying(self.executors())) > n:
                self.scale_to(n)
        except Exception as exc:  # noqa: BLE001 - retried at the next poll
            log.debug("streamscaler agent: reconcile skipped: %s", exc)

    def _control_loop(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            if self._restart_to is not None or self._sc() is None:
                continue
            try:
                gen, n, profile = self.fetch_desired()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log.warning("streamscaler agent: desired state unavailable: %s", exc)
                continue
            if gen <= self.generation or n is None:
                self._reconcile()
                continue
            if profile is None or self.profile is None or profile.same_resources(self.profile):
                if profile is not None:
                    self.profile = Profile(
                        self.profile.cores if self.profile else profile.cores,
                        self.profile.memory_mib if self.profile else profile.memory_mib,
                        profile.name,
                        self.profile.resource if self.profile else profile.resource,
                    )
                self._apply_live(gen, n)
            elif self._build_query is None:
                self.generation = gen
                self._ack(gen, -1, 0.0, 0.0, "profile change needs the agent to own the session (agent.run)")
            else:
                self._restart_to = (gen, n, profile)

    # ---- session lifecycle (run) ------------------------------------------------------------------------
    def _session(self, profile: Profile | None, executors: int | None) -> Any:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(self._app_name)
        if self._master:
            builder = builder.master(self._master)
        conf = {"spark.dynamicAllocation.enabled": "false", **STANDALONE_DEFAULTS, **self._conf}
        if profile is not None:
            conf["spark.executor.cores"] = str(profile.cores)
            conf["spark.executor.memory"] = memory_conf(profile, self.memory_scale)
            conf.update(executor_conf(profile.resource))
            if (self._master or "").startswith("spark://"):
                conf["spark.cores.max"] = str(max(self.max_executors, executors or 1) * profile.cores)
        _forget_executor_resources(conf)
        for k, v in conf.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        self.spark = spark
        self._add_listener(spark)
        if executors is not None and (self._master or "").startswith("spark://"):
            deadline = time.monotonic() + 30
            while not self._request_total(executors) and time.monotonic() < deadline:
                time.sleep(0.2)  # the application is not registered with the master yet
        return spark

    def _add_listener(self, spark: Any) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        agent = self

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                agent.on_progress(event.progress.json)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self._listener = _Listener()
        spark.streams.addListener(self._listener)

    def _stop_query_at_boundary(self, timeout_s: float = 30.0) -> None:
        q = self.query
        if q is None:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and q.isActive:
            try:
                if not q.status.get("isTriggerActive", False):
                    break
            except Exception:  # noqa: BLE001
                break
            time.sleep(0.05)
        q.stop()

    def _wait_running(self, timeout_s: float, watch: CountHold | None = None) -> bool:
        """True once the (re)started query runs: a progress event arrived, or it is past initialisation and
        waiting for data or for its next trigger (a file source without new files runs no batch). ``watch``: the
        executor count is read into it meanwhile (every ``VERIFY_POLL_S``), surplus executors killed."""
        deadline = time.monotonic() + timeout_s
        read_at = -VERIFY_POLL_S
        while time.monotonic() < deadline:
            if watch is not None and time.monotonic() - read_at >= VERIFY_POLL_S:
                self._observe(watch)
                read_at = time.monotonic()
            q = self.query
            if self._progress_seen.is_set():
                return True
            try:
                if q is not None and q.isActive and str(q.status.get("message", "")).startswith("Waiting"):
                    return True
            except Exception:  # noqa: BLE001 - status unavailable while starting
                pass
            time.sleep(0.05)
        return False

    def _restart(self, generation: int, n: int, profile: Profile) -> None:
        t0 = time.monotonic()
        error = ""
        seen = -1
        downtime = 0.0
        old = self.profile
        try:
            self._stop_query_at_boundary()
            self.spark.stop()
            self.spark = None
            self._killing.clear()  # executor ids start again in the new application
            self.profile = profile
            self._progress_seen.clear()
            spark = self._session(profile, n)
            self.query = self._build_query(spark)
            # the count is read from the query's start on: the settle window runs while the query starts
            hold = CountHold(n)
            if not self._wait_running(self.apply_timeout_s, watch=hold):
                error = "the restarted query did not start running"
            self._wait_executors(hold, self.apply_timeout_s, any_running=True)
            downtime = time.monotonic() - t0
            seen = self._wait_executors(hold, self.apply_timeout_s, settle_s=RESTART_SETTLE_S)
            if seen != n and not error:
                error = f"executors: {seen} running after the restart, {n} desired"
        except Exception as exc:  # noqa: BLE001 - reported in the ack; try the old profile again
            error = f"restart failed: {exc}"
            downtime = time.monotonic() - t0
            log.exception("streamscaler agent: restart failed")
            if self.spark is None or self.query is None or not self.query.isActive:
                try:
                    self.profile = old
                    self.query = self._build_query(self._session(old, self.desired_executors))
                except Exception:  # noqa: BLE001
                    log.exception("streamscaler agent: restoring the old profile failed")
        self.desired_executors = n
        self.generation = generation
        self._ack(generation, seen, downtime, time.monotonic() - t0, error)

    def _start_threads(self) -> None:
        for target, name in ((self._ship_loop, "ship"), (self._control_loop, "control")):
            t = threading.Thread(target=target, name=f"streamscaler-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def start_run(
        self,
        build_query: Callable[[Any], Any],
        conf: dict[str, str] | None,
        master: str | None,
        profile: Profile | None,
        executors: int | None,
        app_name: str | None = None,
    ) -> None:
        self._build_query = build_query
        self._conf = {k: str(v) for k, v in (conf or {}).items()}
        self._master = master
        self._app_name = app_name or self._app_name
        try:  # start with the desired state if the control plane already has one
            gen, n, p = self.fetch_desired()
            if gen > 0 and n is not None:
                profile, executors, self.generation = p or profile, n, gen
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.warning("streamscaler agent: no desired state at start (%s)", exc)
        self.profile = profile
        self.desired_executors = executors
        spark = self._session(profile, executors)
        self.query = build_query(spark)
        self._start_threads()

    def serve(self, timeout_s: float | None = None) -> None:
        """Run the restart loop in this thread until ``stop()``, query failure or ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() > deadline:
                break
            if self._restart_to is not None:
                gen, n, profile = self._restart_to
                try:
                    self._restart(gen, n, profile)
                finally:
                    self._restart_to = None
                continue
            q = self.query
            if q is not None and not q.isActive and q.exception() is not None:
                self.error = RuntimeError(str(q.exception()))
                log.error("streamscaler agent: query failed: %s", self.error)
                break
            time.sleep(0.2)

    def stop(self, stop_session: bool = True) -> None:
        """Stop shipping/polling (after a final flush) and, under ``run``, the query and the session."""
        self._stop.set()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=120)
        for t in self._threads:
            t.join(timeout=15)
        if self._build_query is not None and stop_session:
            try:
                if self.query is not None and self.query.isActive:
                    self._stop_query_at_boundary()
                if self.spark is not None:
                    self.spark.stop()
            except Exception:  # noqa: BLE001
                log.exception("streamscaler agent: stopping the session failed")
        elif self.spark is not None and self._listener is not None:
            try:
                self.spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001
                pass

    _serve_thread: threading.Thread | None = None


def attach(
    spark: Any,
    application: str | None = None,
    operator: str | None = None,
    url: str | None = None,
    token: str | None = None,
    **options: Any,
) -> SparkAgent:
    """Put the queries of an existing session under monitoring and live executor control (no restarts)."""
    conf = spark.sparkContext.getConf()
    agent = SparkAgent(
        _setting("application", application, conf),
        _setting("operator", operator, conf),
        _setting("url", url, conf),
        _setting("token", token, conf),
        **options,
    )
    agent.spark = spark
    agent._add_listener(spark)
    agent._start_threads()
    return agent


def run(
    build_query: Callable[[Any], Any],
    conf: dict[str, str] | None = None,
    *,
    master: str | None = None,
    application: str | None = None,
    operator: str | None = None,
    url: str | None = None,
    token: str | None = None,
    profile: dict[str, Any] | Profile | None = None,
    executors: int | None = None,
    app_name: str | None = None,
    block: bool = True,
    timeout_s: float | None = None,
    **options: Any,
) -> SparkAgent:
    """Own the session lifecycle: build the session (``master``, ``conf``, the executor ``profile``
    {cores, memoryMiB, name} and ``executors``, replaced by the desired state when the control plane has one),
    start ``build_query(spark)`` and apply desired changes, restarting the query for a profile change.

    ``block=True`` serves in this thread until ``stop()`` (from another thread), query failure or ``timeout_s``
    and then stops everything; ``block=False`` serves in a daemon thread and returns at once (call ``stop()``).
    """
    conf = dict(conf or {})
    agent = SparkAgent(
        _setting("application", application, conf),
        _setting("operator", operator, conf),
        _setting("url", url, conf),
        _setting("token", token, conf),
        **options,
    )
    prof = profile if isinstance(profile, Profile) or profile is None else Profile.from_json(profile)
    agent.start_run(build_query, conf, master, prof, executors, app_name)
    if block:
        try:
            agent.serve(timeout_s)
        finally:
            agent.stop()
        return agent
    t = threading.Thread(target=agent.serve, args=(timeout_s,), name="streamscaler-serve", daemon=True)
    agent._serve_thread = t
    t.start()
    return agent
