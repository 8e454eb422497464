"""A period in which no micro-batch started because the query is still busy with one triggered before it: the
Spark monitor reports overload (complete, estimated), not missing data; an idle query stays without data.

The driver's REST API is a small HTTP server on 127.0.0.1 answering the two calls the monitor makes (executors,
running jobs): a batch that outlasts a whole control period cannot be provoked on demand without a real cluster
(``test_bench_product`` does it live). The progress is kept in an in-memory store (no database)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connectors.base import Period
from connectors.spark.monitor import SparkMonitor
from connectors.spark.store import DriverState, InMemorySparkStore, ProgressRecord
from tests.connectors.spark.memory_wc import KEY, SMALL, wc_connector

T0 = 1_800_000_000.0  # period start (s since the epoch)


def gmt(t: float) -> str:
    """Spark's REST time format."""
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "GMT"


class DriverUI:
    """The driver's REST API: 1 executor of app-x and the running jobs ``jobs``."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        ui = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/api/v1/applications/app-x/executors":
                    body: Any = [{"id": "driver", "isActive": True}, {"id": "1", "isActive": True}]
                elif self.path == "/api/v1/applications/app-x/jobs?status=running":
                    body = ui.jobs
                else:
                    body = []
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def ui():
    server = DriverUI()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _monitor(
    interval_s: float, progress: list[ProgressRecord], ui_url: str, last_seen: float
) -> SparkMonitor:
    """The counter's monitor (trigger ``interval_s``) on a store holding ``progress`` and a driver of 1 small
    executor whose UI is ``ui_url`` and whose agent was last heard of at ``last_seen``."""
    store = InMemorySparkStore()
    store.add_progress(KEY, *progress)
    set_last_seen(store, ui_url, last_seen)
    return wc_connector(store, batch_interval_s=interval_s).monitor


def set_last_seen(store: InMemorySparkStore, ui_url: str, last_seen: float) -> None:
    store.set_driver(KEY, DriverState(ui_url, "app-x", 1, SMALL, last_seen))


def test_a_batch_running_through_the_period_is_overload_and_an_idle_query_has_no_data(ui):
    first = ProgressRecord("r", 0, T0 - 60, 1, 9000)
    # the last finished batch: triggered 12 s before the period, 600 records in 8 s (75 records/s arrived)
    last = ProgressRecord("r", 7, T0 - 12, 600, 8000)
    monitor = _monitor(5.0, [first, last], ui.url, T0 + 14)
    period = Period(0, T0, T0 + 15)

    # idle: the driver runs no job
    m = monitor.collect(period)
    assert not m.complete and "no progress from the Spark job" in m.reason
    assert "runs no job (idle)" in m.reason

    # busy: the next batch started when the last one ended (T0 - 4) and still runs at the period's end
    ui.jobs = [{"jobId": 9, "submissionTime": gmt(T0 - 3.5), "status": "RUNNING"}]
    m = monitor.collect(period)
    assert m.complete, m.reason
    c = m.operators["counter"]
    assert "overload" in c.reason and c.deployment == {"small": 1}
    assert c.utilisation == 1.0 and c.processing_rate is None and c.batch_duration_s is None
    assert c.input_rate == pytest.approx(600 / 8.0)
    in_flight = 15 + 4  # s: from T0 - 4 to the period's end
    assert c.response_time_s == pytest.approx(in_flight + 8.0 / 2)
    assert c.backlog == pytest.approx(600 / 8.0 * in_flight)
    assert m.path_response_time_s == {"src->counter->out": pytest.approx(c.response_time_s)}

    # a job that began late in the period after the query sat idle since the last batch: not a stall
    ui.jobs = [{"jobId": 9, "submissionTime": gmt(T0 + 12), "status": "RUNNING"}]
    assert not monitor.collect(period).complete


def _batch(batch_id: int, at: float, rows: int, ms: int) -> ProgressRecord:
    """One micro-batch's progress as the control plane stores it (run ``r``, triggered at epoch ``at``)."""
    return ProgressRecord("r", batch_id, at, rows, ms)


def _after_batch_17(ui: DriverUI) -> SparkMonitor:
    """A counter (trigger 2.5 s) whose last progress received is batch 17's: batch 16 ran 4 s from T0 - 12, batch
    17 took the 360 records that arrived meanwhile (90/s) and ran 8 s from T0 - 8; the agent reported at T0 + 9.
    Returns its monitor."""
    progress = [_batch(15, T0 - 40, 20, 1000), _batch(16, T0 - 12, 180, 4000), _batch(17, T0 - 8, 360, 8000)]
    return _monitor(2.5, progress, ui.url, T0 + 9)


def test_the_stalled_rate_is_the_last_batchs_records_over_their_arrival_time_and_a_named_batch_is_in_flight(
    ui,
):
    """After a step the last batch ran longer than the one before it: its records arrived while that earlier one
    ran (trigger to trigger), so the arrival rate is its records over that time, not over its own (longer)
    duration, which is the processing rate. A running job that names the next batch in its description is that
    batch in flight even when its earlier jobs finished and the oldest running one was submitted late."""
    monitor = _after_batch_17(ui)
    period = Period(0, T0, T0 + 10)
    # batch 18 began at T0 (when 17 ended); its first jobs finished, the running one was submitted at T0 + 6
    description = "\nid = q\nrunId = r\nbatch = 18"
    ui.jobs = [{"jobId": 40, "submissionTime": gmt(T0 + 6), "status": "RUNNING", "description": description}]
    m = monitor.collect(period)
    assert m.complete, m.reason
    c = m.operators["counter"]
    assert "overload" in c.reason
    assert c.input_rate == pytest.approx(360 / 4.0)  # not 360 / 8 = 45 (the processing rate)
    # batch 18 in flight since T0 holds what arrived during batch 17's 8 s: 4 s older on average
    assert c.response_time_s == pytest.approx(10 + 8.0 / 2)
    assert c.backlog == pytest.approx(90.0 * 10)

    # batch 17 ran past the period's end (its record arrived before the tick) and 18 began after it: nothing was
    # in flight in the period; the response time is at least what 17's records took (2 s waiting, 8 s in it)
    period = Period(0, T0 - 5, T0 - 1)
    set_last_seen(monitor.store, ui.url, T0 - 2)
    ui.jobs = [{"jobId": 40, "submissionTime": gmt(T0 + 1), "status": "RUNNING", "description": description}]
    c = monitor.collect(period).operators["counter"]
    assert "overload" in c.reason and c.response_time_s == pytest.approx(8.0 + 4.0 / 2) and c.backlog == 0.0

    # without the description the same late job is a query that sat idle: no stall, and the reason says so
    ui.jobs = [{"jobId": 40, "submissionTime": gmt(T0 + 6), "status": "RUNNING"}]
    m = monitor.collect(period)
    assert not m.complete and "not a stall" in m.reason


def test_a_finished_batch_whose_progress_is_on_its_way_is_the_batch_the_period_held(ui):
    """The driver runs batch 19 while the last progress received is batch 17's: batch 18 finished before the tick
    and its progress has not arrived. The period held batch 18 (from 17's end to 19's start): overload estimated
    as for a batch in flight, with its time in the period ending when 19 began. Two unshipped batches are an
    agent that lags: no data, and the reason names the batches."""
    monitor = _after_batch_17(ui)
    period = Period(0, T0, T0 + 10)
    # batch 18 ran from T0 (17's end) to T0 + 9, when 19 began
    ui.jobs = [{"jobId": 41, "submissionTime": gmt(T0 + 9), "status": "RUNNING",
                "description": "\nid = q\nrunId = r\nbatch = 19"}]  # fmt: skip
    m = monitor.collect(period)
    assert m.complete, m.reason
    c = m.operators["counter"]
    assert "batch 18 ran for 9.0 s" in c.reason and "not received" in c.reason
    assert c.utilisation == 1.0 and c.processing_rate is None
    assert c.input_rate == pytest.approx(360 / 4.0)
    assert c.response_time_s == pytest.approx(
        9 + 8.0 / 2
    )  # 18's 9 s run + half the 8 s its records took to come
    assert c.backlog == pytest.approx(90.0 * 9)

    # a batch of another run is not the next one's successor: the period stays without data
    ui.jobs[0]["description"] = "\nid = q\nrunId = other\nbatch = 19"
    ui.jobs[0]["submissionTime"] = gmt(T0 + 9.5)
    assert not monitor.collect(period).complete

    # batch 20 running: 18 and 19 both without progress is an agent that lags
    ui.jobs = [{"jobId": 42, "submissionTime": gmt(T0 + 9), "status": "RUNNING",
                "description": "\nid = q\nrunId = r\nbatch = 20"}]  # fmt: skip
    m = monitor.collect(period)
    assert not m.complete and "batches 18..19 has not been received" in m.reason
