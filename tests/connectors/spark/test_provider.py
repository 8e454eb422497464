"""The spark-standalone node provider: Worker processes acquired and released on a real master."""

from __future__ import annotations

import sys
import time

import pytest

from connectors.infrastructure import NodeSpec, ProviderError
from connectors.providers import build_provider
from connectors.spark.cluster import StandaloneCluster, master_json, process_alive


def test_settings_are_checked_with_the_field_named(tmp_path):
    with pytest.raises(ValueError, match=r"provider.settings.masterUrl is required"):
        build_provider("r", {"kind": "spark-standalone", "settings": {"masterWebUi": "http://127.0.0.1:1"}})
    with pytest.raises(ValueError, match=r"masterUrl must start with spark://"):
        build_provider(
            "r",
            {
                "kind": "spark-standalone",
                "settings": {"masterUrl": "http://x", "masterWebUi": "http://127.0.0.1:1"},
            },
        )


def test_an_unmanaged_cluster_refuses_to_start_or_stop_workers(tmp_path):
    p = build_provider(
        "own",
        {
            "kind": "spark-standalone",
            "settings": {
                "masterUrl": "spark://127.0.0.1:1",
                "masterWebUi": "http://127.0.0.1:1",
                "managed": False,
                "stateDir": str(tmp_path),
            },
        },
    )
    with pytest.raises(ProviderError, match="workers are not managed"):
        p.acquire(NodeSpec("small", 1, 512), 1)
    with pytest.raises(ProviderError, match="workers are not managed"):
        p.release(["own-small-1"])
    with pytest.raises(ProviderError, match="unreachable"):
        p.nodes()


def test_without_the_spark_extra_acquiring_a_worker_is_a_provider_error(tmp_path, monkeypatch):
    """pyspark is the [spark] extra (the web image has none): starting a worker without it fails like a worker
    that does not start (ProviderError, the reason named), not with an ImportError out of the region step."""
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError
    p = build_provider(
        "nospark",
        {
            "kind": "spark-standalone",
            "settings": {
                "masterUrl": "spark://127.0.0.1:1",
                "masterWebUi": "http://127.0.0.1:1",
                "stateDir": str(tmp_path),
            },
        },
    )
    with pytest.raises(ProviderError, match=r"pyspark is not installed.*\[spark\] extra"):
        p.acquire(NodeSpec("small", 1, 512), 1)


@pytest.mark.slow
def test_workers_are_acquired_listed_and_only_idle_ones_released(tmp_path):
    from pyspark.sql import SparkSession

    with StandaloneCluster(tmp_path / "master") as cluster:
        settings = {
            "masterUrl": cluster.master_url,
            "masterWebUi": cluster.web_url,
            "stateDir": str(tmp_path),
        }
        provider = build_provider("pool", {"kind": "spark-standalone", "settings": settings})
        nodes = provider.acquire(NodeSpec("small", 1, 1024), 2)
        assert [n.node_type for n in nodes] == ["small", "small"]
        listed = provider.nodes()
        assert sorted(n.node_id for n in listed) == sorted(n.node_id for n in nodes)
        assert not any(n.busy for n in listed)
        assert {w["cores"] for w in master_json(cluster.web_url)["workers"]} == {1}
        spark = (
            SparkSession.builder.master(cluster.master_url)
            .appName("busy")
            .config("spark.cores.max", "1")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(n.busy for n in provider.nodes()):
                time.sleep(0.5)
            busy = [n.node_id for n in provider.nodes() if n.busy]
            assert len(busy) == 1
            idle = [n.node_id for n in nodes if n.node_id not in busy]
            # a second provider (another process) finds the workers through the durable state
            other = build_provider("pool", {"kind": "spark-standalone", "settings": settings})
            assert other.release([n.node_id for n in nodes]) == idle
            assert [n.node_id for n in provider.nodes()] == busy
        finally:
            spark.stop()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(n.busy for n in provider.nodes()):
            time.sleep(0.5)
        assert provider.release(busy) == busy
        assert provider.nodes() == []
        assert not any(process_alive(n.details["pid"]) for n in nodes)
