"""How the rollup stores what the dashboard reads: the missed slots with their reasons (no query over the ledger
per request), the values by column, and the migration that brought chunks rolled up before to both."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from autoscaler.control import slots
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.tick import run_tick
from dashboard.models import SeriesChunk
from dashboard.monitor import chart_data, rollup
from dashboard.tasks import rollup_all

pytestmark = pytest.mark.django_db

BASE_SLOT = 29_000_000  # 60-s periods: 2025-02-20
migration = importlib.import_module("dashboard.migrations.0003_serieschunk_gaps")


@pytest.fixture
def with_gaps(alice):
    """An application with 30 ticks around three missed slots (two reasons), rolled up."""
    app = simulated_pipeline("gappy", n_operators=2, owner="alice", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 10):
        run_tick(app.pk, slot)
    slots.record_missed(
        app, [(BASE_SLOT + 10, 60.0, "worker_down", "w"), (BASE_SLOT + 11, 60.0, "worker_down", "w")]
    )
    slots.record_missed(app, [(BASE_SLOT + 12, 60.0, "database_down", "d")])
    for slot in range(BASE_SLOT + 13, BASE_SLOT + 30):
        run_tick(app.pk, slot)
    rollup_all()
    return app


def test_the_rollup_keeps_missed_slots_and_the_dashboard_reads_them_without_the_ledger(with_gaps):
    t10 = (BASE_SLOT + 10) * 60.0
    assert rollup.load(with_gaps).gaps == [
        [t10, 60.0, "worker_down"],
        [t10 + 60, 60.0, "worker_down"],
        [t10 + 120, 60.0, "database_down"],
    ]
    with CaptureQueriesContext(connection) as q:
        d = chart_data.dashboard_data(with_gaps, "all")
    assert d["gaps"] == [
        [t10 * 1000, (t10 + 120) * 1000, "worker_down"],
        [(t10 + 120) * 1000, (t10 + 180) * 1000, "database_down"],
    ]
    ledger = [x["sql"] for x in q.captured_queries if "control_tick" in x["sql"]]
    assert len(ledger) == 1, ledger  # only the lag (newest finished tick), an indexed lookup


def test_values_are_stored_by_column_and_read_back_per_column(with_gaps):
    chunk = SeriesChunk.objects.get(application=with_gaps)
    t, by_column = rollup.unpack(chunk)
    assert by_column.shape == (len(chunk.columns), len(t)) == (len(chunk.columns), 30)
    frame = rollup.load(with_gaps)
    for j, c in enumerate(chunk.columns):
        assert np.array_equal(frame.col(c), by_column[j].astype(float), equal_nan=True)
    # a window of the rows: the same values as the whole frame's slice
    part = rollup.load(with_gaps, t[5], t[14])
    assert len(part) == 10 and np.array_equal(part.values, frame.values[5:15], equal_nan=True)
    assert np.array_equal(part.cols(["rate", "nope"])[:, 0], frame.col("rate")[5:15], equal_nan=True)
    assert np.isnan(part.cols(["rate", "nope"])[:, 1]).all()


def test_the_migration_transposes_old_chunks_and_fills_their_gaps_from_the_ledger(with_gaps):
    before = rollup.load(with_gaps)
    gaps = list(before.gaps)
    # a chunk as rolled up before the migration: rows x columns, no gaps
    chunk = SeriesChunk.objects.get(application=with_gaps)
    migration.by_rows(apps, None)
    chunk.refresh_from_db()
    rows = np.frombuffer(bytes(chunk.values), dtype=np.float32).reshape(30, len(chunk.columns))
    assert np.array_equal(rows, before.values, equal_nan=True)
    SeriesChunk.objects.update(gaps=[])
    migration.fill_gaps(apps, None)
    migration.by_columns(apps, None)
    after = rollup.load(with_gaps)
    assert after.gaps == gaps
    assert np.array_equal(after.values, before.values, equal_nan=True)
