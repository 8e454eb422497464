"""Per-day rollups of an application's observed periods (``SeriesChunk``), built incrementally from the control
plane's ledger (``Tick.metrics``) and decision log (``Decision``), and read back as numpy arrays.

One row per finished tick, at time ``slot * period_s`` (s since the epoch, the end of the observed period).
Columns (units):

- ``rate``: source rate entering the first scaled operators (tuples/s; the largest over them, as the AM's BO
  reads it); ``capacity``: the largest source rate the deployment in place sustains (tuples/s): the minimum
  over scaled operators of capacity / rate gain, capacity measured as processing rate / utilisation when the
  utilisation is >= 5 %, else from the queue model of the operator's declared ``serviceTimeMs`` (unknown, NaN,
  when it declares none: no assumed service time);
- ``rt_ms``: end-to-end response time (worst path, ms; inf when an operator is unstable);
- ``violated``, ``reconfigured``, ``no_data``: 0/1 flags (``violated`` NaN in a no-data period);
- ``cost``: resource cost of the period (currency); ``cost:<type>``: its share per node type;
- ``replicas:<operator>:<type>``: replicas in place during the period;
- ``agent_cost:<operator>``: the OM's weighted cost of the period (w_perf, w_res, w_rcf over its cost terms).

Beside the columns, each chunk keeps its scaling events (every proposal granted or denied, with its decision id)
and its missed slots with their reason, so the dashboard's markers and grey bands need no query over the
decision log or the ledger.

:func:`catch_up` is idempotent and cheap when nothing is new (one indexed query). It runs off the request path:
the Celery beat task ``dashboard.rollup`` (:mod:`dashboard.tasks`, every ``AUTOSCALER_ROLLUP_INTERVAL_S``) catches
up every application; the pages only read, and say how far the rollup has come when it is behind the ledger
(:func:`lag`). Concurrent catch-ups of one application (two workers, two beats) are serialised per application
(a PostgreSQL advisory lock; SQLite serialises writers itself) and each batch drops the periods another one has
already rolled up, so a period is never rolled up twice.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from django.db import connection, transaction

from autoscaler.control.models import Decision, Tick
from autoscaler.models import Application
from dashboard.models import SeriesChunk

DAY_S = 86400.0
BATCH_TICKS = 2000
#: a tick left running/applying longer than this is not waited for (a crashed worker; the dispatcher retries)
STALE_PENDING_S = 3600.0
BASE_COLUMNS = ("rate", "capacity", "rt_ms", "violated", "reconfigured", "no_data", "cost")
EVENT_OUTCOMES = frozenset(
    {
        Decision.Outcome.APPLIED,
        Decision.Outcome.APPLYING,
        Decision.Outcome.DRY_RUN,
        Decision.Outcome.FAILED,
        Decision.Outcome.ROLLED_BACK,
        Decision.Outcome.DENIED,
    }
)


def _static(app: Application) -> dict[str, Any]:
    """What the rollup needs from the definitions: managed operators, their rate gains, queue models, prices."""
    from autoscaler.control.am import managed_application
    from autoscaler.control.topology import topology
    from policies.operator_model import QueueModel

    topo = topology(app)
    names = [op.name for op in topo.operators]
    gains = managed_application(topo).rate_gains() if names else np.zeros(0)
    roots = [n for n, g in zip(names, gains, strict=True) if g == 1.0] or names[:1]
    models = {}
    for op in topo.operators:
        if op.service_time_ms:  # declared by the user; otherwise only the measured capacity is shown
            mean = op.service_time_ms / 1000.0
            models[op.name] = QueueModel(mean, mean * mean / 2.0)
    return {
        "names": names,
        "ids": {op.pk: op.name for op in topo.operators},
        "gains": dict(zip(names, (float(g) for g in gains), strict=True)),
        "roots": roots,
        "models": models,
        "types": topo.type_names,
        "prices": {t.name: float(t.price) for t in topo.node_types},
        "speedups": {t.name: float(t.speedup) for t in topo.node_types},
        "r_max_ms": float(app.r_max_ms),
    }


def _row(tick: dict[str, Any], decisions: list[tuple], st: dict[str, Any]) -> dict[str, float]:
    """The rollup row of one tick (column -> value)."""
    period_s = float(tick["period_s"])
    metrics = tick["metrics"] or {}
    ops = metrics.get("operators") or {}
    no_data = tick["status"] != Tick.Status.DONE
    row: dict[str, float] = {"no_data": float(no_data)}
    rates = [ops.get(r, {}).get("input_rate") for r in st["roots"]]
    rates = [float(v) for v in rates if v is not None]
    row["rate"] = max(rates) if rates else math.nan
    paths = metrics.get("path_response_time_s") or {}
    if paths:
        worst = max((math.inf if v is None else float(v)) for v in paths.values())
        row["rt_ms"] = worst * 1000.0
    else:
        row["rt_ms"] = math.nan
    caps = []
    any_violated = any_reconf = False
    cost = 0.0
    by_type = dict.fromkeys(st["types"], 0.0)
    for op_id, deployment, res_cost, violated, reconfigured, terms, weights in decisions:
        name = st["ids"].get(op_id)
        if name is None:
            continue
        dep = {t: int(n) for t, n in (deployment or {}).items()}
        any_violated |= bool(violated)
        any_reconf |= bool(reconfigured)
        cost += float(res_cost or 0.0)
        for t, n in dep.items():
            if t in by_type:
                by_type[t] += n * st["prices"][t] * period_s / 3600.0
            row[f"replicas:{name}:{t}"] = float(n)
        for t in st["types"]:
            row.setdefault(f"replicas:{name}:{t}", 0.0)
        if terms and weights:
            row[f"agent_cost:{name}"] = sum(
                float(weights.get(k, 0.0)) * float(terms.get(k) or 0.0) for k in ("perf", "res", "rcf")
            )
        m = ops.get(name) or {}
        util, proc = m.get("utilisation"), m.get("processing_rate")
        if util is not None and proc is not None and util >= 0.05:
            cap = float(proc) / float(util)
        elif dep and name in st["models"]:
            k = np.array([dep.get(t, 0) for t in st["types"]])
            s = np.array([st["speedups"][t] for t in st["types"]])
            cap = float(st["models"][name].capacity(k, s))
        else:
            cap = math.nan
        gain = st["gains"].get(name) or 1.0
        if math.isfinite(cap):
            caps.append(cap / gain)
    row["capacity"] = min(caps) if caps else math.nan
    if no_data:
        row["violated"] = math.nan
    elif paths:
        row["violated"] = float(any(v is None or v * 1000.0 > st["r_max_ms"] for v in paths.values()))
    else:
        row["violated"] = float(any_violated)
    row["reconfigured"] = float(any_reconf)
    row["cost"] = cost
    for t, c in by_type.items():
        row[f"cost:{t}"] = c
    return row


def _last_time(app: Application) -> float:
    v = (
        SeriesChunk.objects.filter(application=app)
        .order_by("-day")
        .values_list("last_time", flat=True)
        .first()
    )
    return -math.inf if v is None else float(v)


def _ticks_after(app: Application, last_time: float, limit: int) -> list[dict[str, Any]]:
    """Finished ticks after ``last_time``, oldest first, stopping before a recent still-pending tick."""
    period = float(app.om_period_s)
    lo = -(2**62) if not math.isfinite(last_time) else int(last_time // period) - 1
    rows = list(
        Tick.objects.filter(application=app, slot__gt=lo)
        .order_by("slot")
        .values("id", "slot", "period_s", "status", "reason", "metrics", "created_at")[: limit + 1]
    )
    out = []
    now = time.time()
    for r in rows[:limit]:
        t = r["slot"] * r["period_s"]
        if t <= last_time:
            continue
        if r["status"] in (Tick.Status.RUNNING, Tick.Status.APPLYING):
            if now - r["created_at"].timestamp() < STALE_PENDING_S:
                break
            continue
        out.append(r)
    return out


def explored(action: str, alternatives: dict[str, float] | None) -> bool:
    """Whether the OM chose an action its own estimates did not rank best (exploration, e.g. epsilon-greedy):
    the chosen action's value is above the lowest value of the alternatives (lower is better)."""
    if not alternatives or action not in alternatives:
        return False
    values = [float(v) for v in alternatives.values() if v is not None]
    chosen = alternatives[action]
    return chosen is not None and bool(values) and float(chosen) > min(values) + 1e-9


def catch_up(app: Application, max_ticks: int | None = None) -> int:
    """Roll up every finished tick newer than the rollup (at most ``max_ticks``); returns the rows added."""
    added = 0
    st: dict[str, Any] | None = None
    while max_ticks is None or added < max_ticks:
        last = _last_time(app)
        batch = _ticks_after(app, last, BATCH_TICKS)
        if not batch:
            break
        if max_ticks is not None:
            batch = batch[: max_ticks - added]
        st = st or _static(app)
        by_tick: dict[int, list[tuple]] = {}
        events: dict[int, list[tuple]] = {}
        for d in Decision.objects.filter(tick_id__in=[t["id"] for t in batch]).values_list(
            "tick_id",
            "operator_id",
            "deployment",
            "resource_cost",
            "violated",
            "reconfigured",
            "proposal__explanation__last_period_cost_terms",
            "proposal__explanation__weights",
            "id",
            "outcome",
            "proposal__explanation__action",
            "reason",
            "proposal__explanation__alternatives",
        ):
            by_tick.setdefault(d[0], []).append(d[1:8])
            if d[9] in EVENT_OUTCOMES and d[1] in st["ids"]:
                action = d[10] or ""
                events.setdefault(d[0], []).append(
                    (d[8], d[9], st["ids"][d[1]], action, d[11] or "", explored(action, d[12]))
                )
        times = np.array([t["slot"] * t["period_s"] for t in batch], dtype=float)
        rows = [_row(t, by_tick.get(t["id"], []), st) for t in batch]
        batch_events = [
            [float(t["slot"] * t["period_s"]), pk, outcome, op, action, reason, was_explored]
            for t in batch
            for pk, outcome, op, action, reason, was_explored in sorted(events.get(t["id"], []))
        ]
        batch_gaps = [
            [float(t["slot"] * t["period_s"]), float(t["period_s"]), t["reason"] or "missed"]
            for t in batch
            if t["status"] == Tick.Status.MISSED
        ]
        added += _append(app, times, rows, batch_events, batch_gaps)
    return added


#: first key of the PostgreSQL advisory lock held while one application's rollup is appended to (the second key
#: is the application's id): an arbitrary tag of this module, distinct from other advisory locks of the project
LOCK_CLASS = 0x524F4C4C  # "ROLL"


def _append(
    app: Application,
    times: np.ndarray,
    rows: list[dict[str, float]],
    events: list[list],
    gaps: list[list] | None = None,
) -> int:
    """Append rows (one per time, s), their scaling events and missed slots under the application's lock;
    returns the rows written."""
    gaps = gaps or []
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_CLASS, int(app.pk) & 0x7FFFFFFF])
        # another catch-up may have rolled up some of these periods while this one read them: keep the newer only
        done = _last_time(app)
        keep = np.flatnonzero(times > done)
        if len(keep) == 0:
            return 0
        if len(keep) < len(times):
            times, rows = times[keep], [rows[i] for i in keep.tolist()]
            events = [e for e in events if e[0] > done]
            gaps = [g for g in gaps if g[0] > done]
        _write(app, times, rows, events, gaps)
    return len(times)


def _write(
    app: Application, times: np.ndarray, rows: list[dict[str, float]], events: list[list], gaps: list[list]
) -> None:
    days = np.floor(times / DAY_S).astype(np.int64)
    for day in np.unique(days):
        sel = np.flatnonzero(days == day)
        chunk, _ = SeriesChunk.objects.select_for_update().get_or_create(application=app, day=int(day))
        columns = list(chunk.columns or BASE_COLUMNS)
        for i in sel:
            for c in rows[i]:
                if c not in columns:
                    columns.append(c)
        old_t, old_c = unpack(chunk)  # columns x rows
        if old_c.shape[0] < len(columns):
            old_c = np.vstack([old_c, np.full((len(columns) - old_c.shape[0], old_c.shape[1]), np.nan)])
        col_index = {c: j for j, c in enumerate(columns)}
        new_c = np.full((len(columns), len(sel)), np.nan, dtype=np.float32)
        for r, i in enumerate(sel):
            for c, v in rows[i].items():
                new_c[col_index[c], r] = v
        all_t = np.concatenate([old_t, times[sel]])
        all_c = np.hstack([old_c.astype(np.float32), new_c])
        chunk.columns = columns
        chunk.times = all_t.astype(np.float64).tobytes()
        chunk.values = np.ascontiguousarray(all_c, dtype=np.float32).tobytes()
        chunk.n_rows = len(all_t)
        chunk.last_time = float(all_t.max())
        chunk.events = list(chunk.events or []) + [e for e in events if int(e[0] // DAY_S) == day]
        chunk.gaps = list(chunk.gaps or []) + [g for g in gaps if int(g[0] // DAY_S) == day]
        chunk.save()


def unpack(chunk: SeriesChunk) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` of a chunk: float64 seconds, float32 ``columns x rows`` (one row per column)."""
    return _unpack(chunk.columns or [], chunk.times, chunk.values)


def _unpack(columns: list[str], times: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    t = np.frombuffer(bytes(times or b""), dtype=np.float64)
    v = np.frombuffer(bytes(values or b""), dtype=np.float32)
    n_cols = max(len(columns), 1)
    return t, v.reshape(n_cols, len(t)) if len(t) else np.zeros((len(columns), 0), dtype=np.float32)


class Frame:
    """Rollup rows of a time range: ``times`` (s, increasing), ``values`` (rows x columns, float32)."""

    def __init__(
        self,
        times: np.ndarray,
        columns: list[str],
        values: np.ndarray,
        events: list[list] | None = None,
        gaps: list[list] | None = None,
    ) -> None:
        self.times, self.columns = times, columns
        #: one contiguous float32 array per column (columns x rows): a column is read without a strided gather
        self.by_column = np.ascontiguousarray(np.asarray(values, dtype=np.float32).T)
        #: scaling events in the range, oldest first: [time (s), decision id, outcome, operator, action, reason,
        #: explored] (chunks rolled up before the last two existed have five items)
        self.events = events or []
        #: missed slots in the range, oldest first: [end of the period (s), period (s), reason]
        self.gaps = gaps or []
        self._index = {c: j for j, c in enumerate(columns)}

    def __len__(self) -> int:
        return len(self.times)

    def has(self, column: str) -> bool:
        return column in self._index

    @property
    def values(self) -> np.ndarray:
        """Rows x columns (float32, a transposed view of :attr:`by_column`)."""
        return self.by_column.T

    def col(self, column: str) -> np.ndarray:
        j = self._index.get(column)
        return self.by_column[j].astype(np.float64) if j is not None else np.full(len(self.times), np.nan)

    def cols(self, columns: list[str], dtype: type = np.float64) -> np.ndarray:
        """Several columns at once (rows x len(columns)); unknown columns are NaN. ``dtype=np.float32`` reads
        them as stored (no widening: what a maximum or a last value needs)."""
        if all(c in self._index for c in columns):
            return self.by_column[[self._index[c] for c in columns]].T.astype(dtype)
        out = np.full((len(columns), len(self.times)), np.nan, dtype=dtype)
        for i, c in enumerate(columns):
            if c in self._index:
                out[i] = self.by_column[self._index[c]]
        return out.T

    def prefixed(self, prefix: str) -> list[str]:
        return [c for c in self.columns if c.startswith(prefix)]


def load(
    app: Application, start: float | None = None, end: float | None = None, max_events: int | None = None
) -> Frame:
    """Rows with ``start <= time <= end`` (s since the epoch; None = unbounded); values stay float32.

    ``max_events``: read only the newest days' events until at least that many are in the range (a month holds
    thousands; decoding them all costs more than the rest of the read); None = all."""
    qs = SeriesChunk.objects.filter(application=app)
    if start is not None and math.isfinite(start):
        qs = qs.filter(day__gte=int(start // DAY_S))
    if end is not None and math.isfinite(end):
        qs = qs.filter(day__lte=int(end // DAY_S))
    parts = list(qs.order_by("day").values_list("columns", "times", "values", "gaps"))
    columns: list[str] = []
    for cols, _, _, _ in parts:
        for c in cols:
            if c not in columns:
                columns.append(c)
    index = {c: j for j, c in enumerate(columns)}
    lo_t = -math.inf if start is None else start
    hi_t = math.inf if end is None else end
    events: list[list] = []
    for evs in qs.order_by("-day").values_list("events", flat=True).iterator(chunk_size=4):
        events[:0] = [e for e in evs or [] if lo_t <= e[0] <= hi_t]
        if max_events is not None and len(events) >= max_events:
            break
    gaps = [g for *_, day_gaps in parts for g in day_gaps or [] if lo_t <= g[0] <= hi_t]
    ts, vs = [], []
    for cols, times, values, _ in parts:
        t, v = _unpack(cols, times, values)
        if list(cols) == columns:
            vs.append(v)
        else:
            full = np.full((len(columns), len(t)), np.nan, dtype=np.float32)
            full[[index[c] for c in cols]] = v
            vs.append(full)
        ts.append(t)
    if not ts:
        return Frame(np.zeros(0), columns, np.zeros((0, len(columns)), dtype=np.float32))
    times = np.concatenate(ts)
    lo = 0 if start is None else int(np.searchsorted(times, start, side="left"))
    hi = len(times) if end is None else int(np.searchsorted(times, end, side="right"))
    by_column = np.concatenate(vs, axis=1)[:, lo:hi]  # float32, columns x rows; widened to float64 when read
    return Frame(times[lo:hi], columns, by_column.T, events, gaps)


def state(app: Application) -> str:
    """A token that changes whenever the application's rollup changes: the chunk count and the newest chunk's
    update time and last period (rows are only appended, to the newest day or a new one, so any change shows
    there; a rebuild changes the count or the newest update). Two indexed queries that read no chunk data."""
    chunks = SeriesChunk.objects.filter(application=app)
    newest = chunks.order_by("-day").values_list("updated_at", "last_time").first()
    if newest is None:
        return "0:0:None"
    return f"{chunks.count()}:{newest[0].timestamp()}:{newest[1]}"


def lag(app: Application) -> dict[str, float | int | None]:
    """How far the rollup is behind the ledger: ``rolledTo`` (end of the last rolled-up period, s since the epoch,
    None before the first), ``ledgerLast`` (end of the newest finished tick, s, None without one) and
    ``behindPeriods`` (finished periods not rolled up yet, counted in control periods: missed slots included).
    Two or three indexed queries that stop at the first row they need."""
    last = _last_time(app)
    rolled = last if math.isfinite(last) else None
    finished = Tick.objects.filter(application=app).exclude(
        status__in=(Tick.Status.RUNNING, Tick.Status.APPLYING)
    )
    newest = finished.order_by("-slot").values_list("slot", "period_s").first()
    ledger = None if newest is None else float(newest[0] * newest[1])
    behind = 0
    if (
        ledger is not None and rolled is None
    ):  # from the oldest finished period (a count would read every row)
        oldest = finished.order_by("slot").values_list("slot", "period_s").first()
        behind = 1 + max(0, int(round((ledger - float(oldest[0] * oldest[1])) / float(newest[1]))))
    elif ledger is not None and ledger > rolled:
        behind = max(1, int(round((ledger - rolled) / float(newest[1]))))
    return {"rolledTo": rolled, "ledgerLast": ledger, "behindPeriods": behind}


def time_bounds(app: Application) -> tuple[float, float] | None:
    """(first, last) rolled-up time of the application (s), None when nothing is recorded."""
    rows = SeriesChunk.objects.filter(application=app, n_rows__gt=0)
    first = rows.order_by("day").values_list("times", flat=True).first()
    last = rows.order_by("-day").values_list("last_time", flat=True).first()
    if first is None or last is None:
        return None
    return float(np.frombuffer(bytes(first)[:8], dtype=np.float64)[0]), float(last)
