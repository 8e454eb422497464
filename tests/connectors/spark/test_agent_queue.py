"""The job-side agent's shipping queue and settings, without Spark (the query must never be blocked)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from connectors.spark.agent import Profile, SparkAgent, _setting, memory_conf


def progress(batch: int) -> str:
    return json.dumps({"batchId": batch, "timestamp": "2026-11-26T08:00:00Z", "numInputRows": 1})


def test_a_full_queue_drops_the_oldest_and_counts_it():
    agent = SparkAgent("a", "o", "http://127.0.0.1:9", "t", queue_size=3)
    for i in range(5):
        agent.on_progress(progress(i))
    assert agent.stats.dropped == 2 and agent.stats.enqueued == 5
    assert [item["batchId"] for _, item in agent._queue] == [2, 3, 4]


def test_an_unreachable_control_plane_never_raises_into_the_query_and_keeps_the_items():
    agent = SparkAgent("a", "o", "http://127.0.0.1:9", "t", request_timeout_s=0.5)
    agent.on_progress(progress(1))
    agent.on_progress("not json")  # a broken event is logged, not raised
    t0 = time.monotonic()
    assert agent._ship_once() is False
    assert time.monotonic() - t0 < 5
    assert agent.stats.post_failures == 1 and len(agent._queue) == 1


def test_batches_are_shipped_in_order_with_the_drop_counter():
    received = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(
                (
                    self.path,
                    self.headers["Authorization"],
                    json.loads(self.rfile.read(int(self.headers["Content-Length"]))),
                )
            )
            self.send_response(201)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = SparkAgent("app", "op", f"http://127.0.0.1:{server.server_port}", "tok", batch_size=2)
        for i in range(3):
            agent.on_progress(progress(i))
        agent.report_latency(0.5, 0.9, 10)
        assert agent.flush(5)
    finally:
        server.shutdown()
    assert [r[0] for r in received] == ["/api/v1/ingest/app/op/progress"] * 2
    assert received[0][1] == "Token tok"
    assert [p["batchId"] for r in received for p in r[2]["progress"]] == [0, 1, 2]
    assert received[1][2]["latency"][0]["n"] == 10 and agent.stats.shipped == 4


def test_settings_come_from_arguments_then_spark_conf_then_environment(monkeypatch):
    monkeypatch.setenv("STREAMSCALER_URL", "http://env")
    assert _setting("url", "http://arg", {"spark.streamscaler.url": "http://conf"}) == "http://arg"
    assert _setting("url", None, {"spark.streamscaler.url": "http://conf"}) == "http://conf"
    assert _setting("url", None, {}) == "http://env"
    monkeypatch.delenv("STREAMSCALER_TOKEN", raising=False)
    with pytest.raises(ValueError, match="'token' is not set .*STREAMSCALER_TOKEN"):
        _setting("token", None, {})


def test_executor_memory_of_a_profile_is_scaled_with_a_floor():
    assert memory_conf(Profile(2, 2048, "large"), 0.5) == "1024m"
    assert memory_conf(Profile(1, 512, "small"), 0.25) == "512m"
    assert Profile(1, 512, "a").same_resources(Profile(1, 512, "b"))
