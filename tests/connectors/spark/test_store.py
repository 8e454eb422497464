"""``InMemorySparkStore`` keeps the ``SparkStore`` contract (no database)."""

from __future__ import annotations

import pytest

from connectors.spark.store import InMemorySparkStore
from tests.connectors.spark.store_contract import Harness, SparkStoreContract


@pytest.fixture
def harness() -> Harness:
    store = InMemorySparkStore()
    return Harness(
        store=store,
        key="counter",
        other="splitter",
        add_progress=store.add_progress,
        add_latency=store.add_latency,
        set_driver=store.set_driver,
        add_ack=store.add_acknowledgement,
    )


class TestInMemorySparkStore(SparkStoreContract):
    pass
