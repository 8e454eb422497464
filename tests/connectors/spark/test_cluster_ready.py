"""A starting standalone master whose UI answers ``/json/`` with its HTML page (seen once on a loaded machine: the
Spark contract tests' cluster fixture failed on the JSON decoding error) is a master not ready yet (``OSError``,
retried), never a failed start."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from connectors.spark import cluster as cluster_module
from connectors.spark.cluster import StandaloneCluster, master_json

PAGE = b'<!DOCTYPE html><html data-bs-theme="light"><head></head><body>Spark Master</body></html>'


@pytest.fixture
def master_ui():
    """A stand-in for a starting master's UI: its HTML page twice, then its JSON; ``served`` lists the requests."""
    answers = [PAGE, PAGE, json.dumps({"status": "ALIVE", "workers": []}).encode()]
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            body = answers[min(len(served), len(answers) - 1)]
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], served
    finally:
        server.shutdown()
        server.server_close()


def test_a_master_ui_answering_its_html_page_is_not_ready_yet(master_ui, monkeypatch, tmp_path):
    port, served = master_ui
    with pytest.raises(OSError, match="answered no JSON"):
        master_json(f"http://127.0.0.1:{port}")

    class StartingMaster:  # the spawned master process: running
        pid = 0

        def poll(self) -> None:
            return None

    monkeypatch.setattr(cluster_module, "_spawn", lambda *args, **kwargs: StartingMaster())
    c = StandaloneCluster(tmp_path, port=7077, webui_port=port)
    assert c.start() is c  # the second HTML answer retried, the JSON one is ready
    assert served == ["/json/"] * 3
