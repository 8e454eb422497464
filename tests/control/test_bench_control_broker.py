"""``bench_control --broker`` publishes to the broker its workers listen on, whatever the environment says."""

from __future__ import annotations

from benchmarks.control.command import bench_producer


def test_the_producer_uses_the_broker_option_over_the_environment(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/3")
    producer = bench_producer("redis://127.0.0.1:6379/9")
    conn = producer.connection_for_write()
    assert (conn.hostname, conn.port, conn.virtual_host) == ("127.0.0.1", 6379, "9")
