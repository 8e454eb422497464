"""The ``wc`` application of the Spark tests (``conftest.APP``) on an in-memory store: no database.

src -> counter -> out, counter controlled on 1 x small (catalog: small 1 core 512 MiB speedup 1, large 2 cores
1024 MiB speedup 2), driver UIs allowed on 127.0.0.1 as the region declares; built from plain values as the
control plane builds it from the stored application (``autoscaler.control.connectors``).
"""

from __future__ import annotations

from connectors.endpoints import AllowList
from connectors.spark.connector import ControlledOperator, NodeType, SparkConnector, build
from connectors.spark.store import SparkStore

#: the store's key of the controlled operator ``counter``
KEY = "counter"
#: the endpoints the application's region declares
ENDPOINTS = ["spark://127.0.0.1:1024-65535", "http://127.0.0.1:1024-65535"]
SMALL = {"name": "small", "cores": 1, "memoryMiB": 512}


def wc_connector(
    store: SparkStore, batch_interval_s: float = 1.0, apply_timeout_s: float = 60.0
) -> SparkConnector:
    """The connector of ``wc`` on ``store``: micro-batch trigger ``batch_interval_s`` (s), apply timeout (s)."""
    counter = ControlledOperator(
        KEY, {"small": 1}, [NodeType("small", 1, 512, 1.0), NodeType("large", 2, 1024, 2.0)]
    )
    return build(
        store,
        ["src", "counter", "out"],
        [("src", "counter"), ("counter", "out")],
        {"counter": counter},
        ui_url=None,
        executor_memory_scale=1.0,
        batch_interval_s=batch_interval_s,
        apply_timeout_s=apply_timeout_s,
        allowed=AllowList(ENDPOINTS),
    )
