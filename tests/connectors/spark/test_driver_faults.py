"""A Spark driver that dies around a rescale, seen by the realizer: its agent silent and its UI (a real HTTP
server on 127.0.0.1, stopped to kill it) unreachable. Nothing is reported as applied or rolled back, the previous
allocation becomes the desired state again, and a driver already gone gets no new desired state at all. The
agent's side is an in-memory store (no database)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connectors.base import ScalingPlan
from connectors.spark.realizer import driver_gone
from connectors.spark.store import DriverState, InMemorySparkStore
from tests.connectors.spark.memory_wc import KEY, SMALL, wc_connector


class DriverUI:
    """The driver's REST API as far as the connector reads it: ``n`` active executors of application app-x."""

    def __init__(self, executors: int) -> None:
        rows = [{"id": "driver", "isActive": True}] + [
            {"id": str(i), "isActive": True} for i in range(executors)
        ]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/api/v1/applications/app-x/executors":
                    raw, code = json.dumps(rows).encode(), 200
                else:
                    raw, code = b"[]", 404
                self.send_response(code)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def kill(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ui():
    server = DriverUI(executors=2)
    yield server
    if server.thread.is_alive():
        server.kill()


@pytest.fixture
def store(ui):
    """The store of the ``wc`` application whose counter driver (UI ``ui``) reported 2 small executors just now,
    and whose desired state is those 2 executors (generation 1)."""
    store = InMemorySparkStore()
    _silent_for(store, ui, 0.0)
    store.set_desired(KEY, 2, SMALL)
    return store


def _silent_for(store: InMemorySparkStore, ui: DriverUI, seconds: float) -> None:
    store.set_driver(KEY, DriverState(ui.url, "app-x", 2, SMALL, time.time() - seconds))


def test_a_silent_agent_whose_driver_ui_answers_is_alive(store, ui):
    _silent_for(store, ui, 600)
    connector = wc_connector(store)
    binding = connector.realizer.bindings["counter"]
    assert driver_gone(store, binding) == ""
    assert connector.realizer.current() == {"counter": {"small": 2}}  # from the driver's REST API


def test_a_driver_gone_before_the_apply_gets_nothing_written(store, ui):
    ui.kill()
    _silent_for(store, ui, 600)
    connector = wc_connector(store)
    gone = driver_gone(store, connector.realizer.bindings["counter"])
    assert gone.startswith("the Spark driver is gone: no heartbeat from its agent for 600 s")
    assert f"its UI {ui.url} unreachable" in gone
    result = connector.realizer.apply(ScalingPlan({"counter": {"small": 3}}, slot=9))
    assert not result.ok and not result.rolled_back
    assert result.error == f"operator 'counter': {gone}; nothing applied"
    assert result.deployments == {"counter": {}}  # nothing runs; not the agent's last count (2)
    row = store.desired(KEY)
    assert (row.generation, row.executors) == (
        1,
        2,
    )  # a driver that comes back must not pick up a stale target


def test_a_driver_dying_while_the_rescale_waits_is_surfaced_and_the_previous_allocation_restored(store, ui):
    connector = wc_connector(store)
    realizer = connector.realizer
    realizer.apply_timeout_s = 120.0
    realizer.driver_silence_s = 1.0  # the heartbeat stored by the fixture is fresh: the driver lives at first
    threading.Timer(0.5, ui.kill).start()  # the driver dies after the desired state was written
    result = realizer.apply(ScalingPlan({"counter": {"large": 2}}, slot=9))
    assert not result.ok and not result.rolled_back
    info = result.details["counter"]
    assert info["generation"] == 2 and info["verified"] is False
    assert info["driver_gone"].startswith("the Spark driver is gone") and "unreachable" in info["driver_gone"]
    assert "no acknowledgement after" in result.error and "the Spark driver is gone" in result.error
    assert info["duration_s"] < 120.0  # it stopped waiting when the driver was found gone, not at the timeout
    assert info["restored_desired"] == 3 and "rollback_generation" not in info
    row = store.desired(KEY)
    assert (row.generation, row.executors, row.profile["name"]) == (3, 2, "small")  # the previous allocation
    assert result.deployments == {"counter": {}}


def test_without_an_earlier_desired_state_what_ran_before_is_restored(store, ui):
    store.clear_desired(KEY)  # the driver started from its own settings
    realizer = wc_connector(store).realizer
    realizer.driver_silence_s = 1.0
    threading.Timer(0.5, ui.kill).start()
    result = realizer.apply(ScalingPlan({"counter": {"large": 1}}, slot=9))
    assert not result.ok and not result.rolled_back
    info = result.details["counter"]
    assert info["generation"] == 1 and info["restored_desired"] == 2
    row = store.desired(KEY)
    assert (row.generation, row.executors, row.profile["name"]) == (2, 2, "small")  # the 2 small seen before
