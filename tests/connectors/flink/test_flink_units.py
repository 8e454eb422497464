"""Flink connector pieces that need no cluster: vertex resolution, settings validation, the trace schedule."""

from __future__ import annotations

import math

import pytest

from autoscaler.schemas.connectors import validate_connector
from connectors.flink.binding import BindingError, Vertex, resolve
from connectors.flink.monitor import METER_SPAN_S, FlinkMonitor, spread
from connectors.flink.pipelines.trace_source import Schedule, expected_counts, is_stop_word, sentence

VERTICES = [
    Vertex("a1", "Source: ticks[1] -> TableToDataStream -> sentences", 1),
    Vertex("b2", "splitter, filter, _stream_key_by_map_operator", 2),
    Vertex("c3", "counter", 2),
    Vertex("d4", "top, Filter -> Sink: discard", 1),
]


def test_operators_resolve_to_the_vertex_that_chains_them():
    found = resolve({"sentences": "sentences", "split": "splitter", "counter": "counter"}, VERTICES)
    assert {op: v.id for op, v in found.items()} == {"sentences": "a1", "split": "b2", "counter": "c3"}
    assert VERTICES[0].operators == ["ticks", "TableToDataStream", "sentences"]


def test_missing_vertex_is_rejected_with_the_list_of_vertices():
    with pytest.raises(BindingError) as err:
        resolve({"counter": "counter", "joiner": "joiner"}, VERTICES)
    msg = str(err.value)
    assert "operator 'joiner': no job vertex contains an operator named 'joiner'" in msg
    assert "'counter'" not in msg.split(". Vertices")[0]
    assert err.value.vertices == [v.name for v in VERTICES]
    assert "splitter, filter, _stream_key_by_map_operator" in msg


def test_operators_chained_into_one_vertex_cannot_be_scaled_apart():
    with pytest.raises(BindingError, match=r"\['filter', 'splitter'\] are chained into the same vertex"):
        resolve({"splitter": "splitter", "filter": "filter"}, VERTICES)


def test_flink_settings_validate_and_name_the_bad_field():
    settings, errors = validate_connector("flink", {"restUrl": "http://127.0.0.1:9", "jobName": "wc"})
    assert not errors and settings["applyTimeoutS"] == 60.0 and settings["vertices"] == {}
    _, errors = validate_connector("flink", {"jobId": "not-an-id", "applyTimeoutS": 0})
    locs = {e.loc for e in errors}
    assert locs == {"spec.connector.jobId", "spec.connector.applyTimeoutS"}, errors


def test_deployment_is_kept_when_parallelism_matches_else_reported_under_its_main_type():
    assert spread({"vm.small": 1, "vm.large": 2}, 3) == {"vm.small": 1, "vm.large": 2}
    assert spread({"vm.small": 1, "vm.large": 2}, 5) == {"vm.large": 5}
    assert spread({}, 2) == {"slot": 2}


def test_trace_schedule_emits_the_trace_rates_exactly_and_deterministically():
    s = Schedule([10.0, 40.0, 0.0, 25.0], step_s=2.0, rate_scale=0.5, ticks_per_s=10.0)
    per_step = [sum(s.count(i) for i in range(k * 20, (k + 1) * 20)) for k in range(4)]
    assert per_step == [10, 40, 0, 25]  # rate x scale x step_s records per step
    assert s.first_index(80) == 75 and math.isclose(s.cumulative(3.0), 10 + 20 * 1.0)
    assert sentence(7) == sentence(7) and len(sentence(7).split()) == 5
    counts = expected_counts(s, 80)
    assert sum(counts.values()) == sum(
        1 for r in range(75) for w in sentence(r).split() if not is_stop_word(w)
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "static-peak,magic"], "--runs: unknown run(s) ['magic']"),
        (["--runs", "ds2"], "static-peak is the baseline"),
        (["--cost-ms", "0"], "--cost-ms: must be > 0"),
    ],
)
def test_bench_flink_rejects_bad_options_before_starting_anything(args, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as err:
        call_command("bench_flink", *args)
    assert message in str(err.value)


class _MetricsOnly:
    """A REST stand-in that answers one vertex's metric query with fixed values (no cluster needed)."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def vertex_metrics(self, job_id: str, vertex_id: str, names: list[str]) -> dict[str, dict[str, float]]:
        return {n: {"sum": v, "avg": v} for n, v in self.values.items()}


class _Job:
    def __init__(self, values: dict[str, float]) -> None:
        self.rest = _MetricsOnly(values)


@pytest.mark.parametrize(
    "busy_ms, running_s, complete",
    [(0.0, 20.0, False), (0.0, METER_SPAN_S + 5, True), (12.0, 20.0, True)],
)
def test_zero_busy_time_of_a_fresh_vertex_with_flowing_records_is_incomplete(busy_ms, running_s, complete):
    values = {
        "numRecordsInPerSecond": 28.0,
        "busyTimeMsPerSecond": busy_ms,
        "backPressuredTimeMsPerSecond": 0.0,
    }
    monitor = FlinkMonitor(_Job(values), {"splitter": {"vm.small": 2}}, [], {"sentences"})
    m = monitor._operator("job", "splitter", Vertex("b2", "splitter", 2), "RUNNING", running_s)
    assert m.complete is complete
    if complete:
        assert m.utilisation == pytest.approx(busy_ms / 1000.0) and m.input_rate > 0
    else:
        assert m.input_rate is None and m.utilisation is None and "no busy time measured yet" in m.reason
