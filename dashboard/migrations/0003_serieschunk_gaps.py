"""Missed slots kept in the rollup (``SeriesChunk.gaps``) so that the dashboard reads them without a query over
the ledger; the chunks rolled up before are filled in here from the ledger's missed ticks. The chunks' values
are stored by column from now on (``columns x rows``, was ``rows x columns``): existing ones are transposed."""

import numpy as np
from django.db import migrations, models

DAY_S = 86400.0


def fill_gaps(apps, schema_editor):
    """Each existing chunk gets the missed ticks of its day that it rolled up (up to its ``last_time``)."""
    SeriesChunk = apps.get_model("dashboard", "SeriesChunk")
    Tick = apps.get_model("control", "Tick")
    chunks: dict[tuple[int, int], list] = {}
    for chunk in SeriesChunk.objects.only("id", "application_id", "day", "last_time"):
        chunks[(chunk.application_id, chunk.day)] = [chunk, []]
    if not chunks:
        return
    missed = Tick.objects.filter(status="missed").order_by("application_id", "slot")
    for app_id, slot, period_s, reason in missed.values_list("application_id", "slot", "period_s", "reason"):
        t = float(slot * period_s)
        entry = chunks.get((app_id, int(t // DAY_S)))
        if entry is not None and t <= entry[0].last_time:
            entry[1].append([t, float(period_s), reason or "missed"])
    for chunk, gaps in chunks.values():
        if gaps:
            chunk.gaps = gaps
            chunk.save(update_fields=["gaps"])


def by_columns(apps, schema_editor):
    """Rewrite each chunk's values from ``rows x columns`` to ``columns x rows`` (float32, C order)."""
    SeriesChunk = apps.get_model("dashboard", "SeriesChunk")
    for chunk in SeriesChunk.objects.only("id", "columns", "times", "values").iterator(chunk_size=50):
        n_rows = len(bytes(chunk.times or b"")) // 8
        if n_rows == 0:
            continue
        v = np.frombuffer(bytes(chunk.values), dtype=np.float32).reshape(n_rows, max(len(chunk.columns), 1))
        chunk.values = np.ascontiguousarray(v.T).tobytes()
        chunk.save(update_fields=["values"])


def by_rows(apps, schema_editor):
    """The reverse of :func:`by_columns`."""
    SeriesChunk = apps.get_model("dashboard", "SeriesChunk")
    for chunk in SeriesChunk.objects.only("id", "columns", "times", "values").iterator(chunk_size=50):
        n_rows = len(bytes(chunk.times or b"")) // 8
        if n_rows == 0:
            continue
        v = np.frombuffer(bytes(chunk.values), dtype=np.float32).reshape(max(len(chunk.columns), 1), n_rows)
        chunk.values = np.ascontiguousarray(v.T).tobytes()
        chunk.save(update_fields=["values"])


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0002_serieschunk_events"),
        ("control", "0004_reliability"),
    ]

    operations = [
        migrations.AddField(
            model_name="serieschunk",
            name="gaps",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="missed slots (no decision): [end of the period (s), period (s), reason]",
            ),
        ),
        migrations.RunPython(fill_gaps, migrations.RunPython.noop),
        migrations.RunPython(by_columns, by_rows),
    ]
