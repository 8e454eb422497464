"""The trace schedule and record generators: deterministic, time-compressed, rate-scaled (no Spark needed)."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.spark.trace_source import (
    STOP_WORDS,
    FileTraceGenerator,
    TraceDataSource,
    TraceSchedule,
    TraceStreamReader,
    expected_word_counts,
    load_trace,
    sentence_of,
    sentence_records,
    taxi_of,
)


def test_compression_and_scale_give_the_trace_rates_per_wall_second():
    rates = np.array([100.0, 300.0, 0.0, 50.0])
    s = TraceSchedule(rates, compress=60.0, rate_scale=0.5)  # one trace minute per wall second
    assert s.step_s == 1.0 and s.duration_s == 4.0
    assert list(s.per_step) == [50, 150, 0, 25] and s.total == 225
    assert s.rate_at(1.5) == 150.0 and s.rate_at(2.2) == 0.0 and s.rate_at(9) == 0.0
    day = TraceSchedule(np.full(1440, 10.0), compress=72.0)  # a day of trace in 20 wall minutes
    assert day.duration_s == pytest.approx(1200.0) and day.total == round(1440 * 10 * 60 / 72)


def test_created_times_and_counts_agree():
    s = TraceSchedule(np.array([7.0, 0.0, 13.0, 5.0]), compress=30.0, rate_scale=1.0)
    created = s.created(np.arange(s.total))
    assert np.all(np.diff(created) >= 0) and created[0] == 0.0 and created[-1] < s.duration_s
    for e in np.linspace(-1, s.duration_s + 1, 97):
        # count_at(e) records are exactly those created at or before e
        assert s.count_at(float(e)) == int(np.sum(created <= e))
    assert s.count_at(s.duration_s + 5) == s.total


def test_records_are_deterministic_per_index_and_seed():
    s = TraceSchedule(load_trace("taxi_last_month", 0, 2), compress=60.0, rate_scale=0.05)
    a = list(sentence_records(s, 1000.0, 0, s.total, seed=4))
    b = list(sentence_records(s, 1000.0, 5, 9, seed=4))
    assert a[5:9] == b  # a slice regenerates identically
    assert [r[0] for r in a] == list(range(s.total)) and all(r[1] >= 1000.0 for r in a)
    assert sentence_of(3, 4) == sentence_of(3, 4) != sentence_of(3, 5)
    assert taxi_of(11, 1) == taxi_of(11, 1) and taxi_of(11, 1) != taxi_of(12, 1)
    counts = expected_word_counts(range(500), seed=4)
    assert not set(counts) & set(STOP_WORDS)
    assert sum(counts.values()) < 500 * 6  # stop words were filtered
    top = counts.most_common(1)[0][1]
    assert top > 3 * np.median(list(counts.values()))  # skewed: top words stand out


def test_reader_offsets_partitions_and_replay():
    opts = {
        "kind": "sentences",
        "trace": "taxi_last_month",
        "tracestart": "0",
        "traceminutes": "1",
        "compress": "60",
        "ratescale": "0.1",
        "seed": "2",
        "numpartitions": "3",
        "starttime": "5.0",
    }
    reader = TraceStreamReader(opts)  # lower-cased names, as Spark passes them
    start = reader.initialOffset()
    assert start == {"index": 0, "t0": "5.0"}
    end = reader.latestOffset(start, None)
    assert end["index"] == reader.schedule.total  # t0 far in the past: everything is available
    parts = reader.partitions(start, end)
    assert len(parts) == 3
    rows = [r for p in parts for r in reader.read(p)]
    assert [r[0] for r in rows] == list(range(end["index"]))
    again = [
        r for p in TraceStreamReader(opts).partitions(start, end) for r in TraceStreamReader(opts).read(p)
    ]
    assert rows == again
    assert reader.partitions(end, end) == []


def test_bad_options_name_the_field():
    with pytest.raises(ValueError, match="kind"):
        TraceStreamReader({"kind": "nope"})
    with pytest.raises(ValueError, match="compress"):
        TraceSchedule(np.ones(3), compress=0)
    with pytest.raises(ValueError, match="traceStart"):
        load_trace("taxi_last_month", 10**9)
    with pytest.raises(ValueError, match="trace"):
        load_trace("/nonexistent/trace.txt")
    assert TraceDataSource.name() == "trace"


def test_file_generator_writes_the_same_records_and_resumes(tmp_path):
    import json

    opts = {"kind": "taxi", "traceMinutes": "2", "compress": "60", "rateScale": "0.05", "seed": "3"}
    gen = FileTraceGenerator(tmp_path, {**opts, "startTime": "100.0"})
    s = gen.schedule
    assert gen.write_available(now=100.0 + 0.5) == s.count_at(0.5) > 0
    again = FileTraceGenerator(tmp_path, opts)  # a restart: same t0 (from _t0), continues after the last file
    assert again.t0 == 100.0 and again.next_index == s.count_at(0.5)
    again.write_available(now=1e12)
    assert again.write_available(now=1e12) == 0
    rows = [
        json.loads(line) for f in sorted(tmp_path.glob("part-*.json")) for line in f.read_text().splitlines()
    ]
    expected = list(TraceStreamReader({**opts, "startTime": "100.0"}).read(_Part((0, s.total, 100.0))))
    assert [tuple(r.values()) for r in rows] == expected
    assert not list(tmp_path.glob(".*tmp"))


class _Part:
    def __init__(self, value):
        self.value = value
