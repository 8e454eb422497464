"""The command lines ``python -m policies.simulate`` and ``python -m benchmarks``, run as real processes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.paper_tables import render_tables

REPO = Path(__file__).resolve().parents[2]


def _run(python: str, module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def _simulate(python: str, trace: Path | str, *extra: str) -> subprocess.CompletedProcess:
    base = [
        "--trace",
        str(trace),
        "--infra",
        "A",
        "--node-types",
        "3",
        "--k-max",
        "10",
        "--policy",
        "threshold",
    ]
    # later options override earlier ones (argparse keeps the last occurrence)
    return _run(python, "policies.simulate", *base, *extra)


def _assert_usage_error(proc: subprocess.CompletedProcess, fragment: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in proc.stderr


def test_simulate_json_has_exactly_the_documented_keys(python, taxi_head):
    proc = _simulate(python, taxi_head, "--steps", "500", "--seed", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert set(rec) == {
        "policy",
        "infra",
        "node_types",
        "k_max",
        "steps",
        "seed",
        "avg_cost",
        "violations_pct",
        "reconfigurations_pct",
        "avg_resource_cost",
        "wall_seconds",
        "avg_replicas",
        "calibrate",
        "rate_range_tuples_s",
        "rerangings",
        "mu",
        "r_max_s",
        "gamma",
        "rate_levels",
        "steps_above_range",
    }
    assert rec["calibrate"] is False and rec["rate_range_tuples_s"] == 650.0 and rec["rerangings"] == 0
    assert (rec["policy"], rec["infra"], rec["node_types"], rec["k_max"], rec["steps"], rec["seed"]) == (
        "threshold",
        "A",
        3,
        10,
        500,
        4,
    )
    assert 0 < rec["avg_cost"] < 1 and rec["avg_resource_cost"] >= 0.7 and rec["wall_seconds"] > 0


def test_simulate_text_output_and_weights(python, taxi_head):
    proc = _simulate(python, taxi_head, "--steps", "300", "--weights", "0.0,1.0,0.0", "--policy", "hpa")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("hpa on infrastructure A, 3 node types, K_max 10, 300 steps")


def test_simulate_missing_trace(python, tmp_path):
    _assert_usage_error(_simulate(python, tmp_path / "nope.txt"), "--trace: trace")


def test_simulate_non_numeric_trace_line(python, bad_trace):
    _assert_usage_error(_simulate(python, bad_trace), "line 3: not a number")


def test_simulate_unknown_policy(python, taxi_head):
    _assert_usage_error(
        _simulate(python, taxi_head, "--policy", "oracle"), "--policy: unknown policy 'oracle'"
    )


def test_simulate_k_max_below_one(python, taxi_head):
    _assert_usage_error(_simulate(python, taxi_head, "--k-max", "0"), "--k-max: must be >= 1")


@pytest.mark.parametrize("n", ["0", "11"])
def test_simulate_node_types_out_of_range(python, taxi_head, n):
    _assert_usage_error(_simulate(python, taxi_head, "--node-types", n), "--node-types: must be in 1..10")


@pytest.mark.parametrize(
    ("weights", "fragment"),
    [
        ("0.5,0.5,0.5", "must sum to 1"),
        ("1.2,-0.2,0", "weights.res must be >= 0"),
        ("0.5,0.5", "three numbers"),
    ],
)
def test_simulate_weights_not_on_the_simplex(python, taxi_head, weights, fragment):
    _assert_usage_error(_simulate(python, taxi_head, "--weights", weights), fragment)


def test_simulate_unknown_infrastructure_and_bad_params(python, taxi_head):
    _assert_usage_error(_simulate(python, taxi_head, "--infra", "C"), "--infra: unknown infrastructure")
    _assert_usage_error(
        _simulate(python, taxi_head, "--params", '{"threshold": 3}'), "params.threshold: must be in (0, 1]"
    )


def test_simulate_missing_required_option(python):
    _assert_usage_error(_run(python, "policies.simulate", "--infra", "A"), "required")


def test_bench_paper_tables_smoke(python, taxi_head, tmp_path):
    trace = tmp_path / "taxi.txt"  # named like the published trace, so the published values are shown
    shutil.copy(taxi_head, trace)
    out = tmp_path / "bench.md"
    proc = _run(
        python,
        "benchmarks",
        "paper-tables",
        "--trace",
        str(trace),
        "--steps",
        "2000",
        "--seeds",
        "1",
        "--jobs",
        "2",
        "--policies",
        "threshold,threshold-speedup,ds2,hpa,hpa:fastest",
        "--node-types",
        "3",
        "--k-max",
        "10",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "<!-- BEGIN paper-tables -->" in text and "<!-- END paper-tables -->" in text
    assert "Command: `python -m benchmarks paper-tables --trace" in text
    main, type0 = text.split("#### Type-0 start.")
    rows = [line for line in main.splitlines() if line.startswith("| 3 | ")]
    names = [r.split("|")[2].strip() for r in rows]
    assert names == ["threshold", "threshold-speedup", "ds2", "hpa", "hpa:fastest"]
    # HPA adding the fastest type (B: speedup 30) keeps one replica: 0.2 * 30 / 300, no violation
    assert "| 0.0200 | 0.0 | 0.0 | 30.00 |" in rows[4]
    rows0 = [line for line in type0.splitlines() if line.startswith("| 3 | ")]
    assert [r.split("|")[2].strip() for r in rows0] == ["threshold", "threshold-speedup"]
    assert rows0[0] != rows[0]  # a type-0 start changes the cheapest-type threshold's deployment
    assert "(0.0366)" in rows[0]  # published TB-C, infrastructure A, N_res 3, K_max 10
    assert "(0.6024)" in rows[0]  # published TB-C, infrastructure B
    assert "Fidelity" in text and "not comparable" in text
    assert proc.stdout.strip().endswith(text.split("\n<!-- END")[0].strip().splitlines()[-1])


def test_bench_decision_latency_smoke(python, taxi_head, tmp_path):
    out = tmp_path / "bench.md"
    proc = _run(
        python,
        "benchmarks",
        "decision-latency",
        "--trace",
        str(taxi_head),
        "--calls",
        "300",
        "--policies",
        "threshold,hpa",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "<!-- BEGIN decision-latency -->" in text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "trivial do-nothing (baseline)" in rows and "threshold" in rows and "hpa" in rows
    p50 = float(rows["hpa"].split("|")[2])
    assert 0 < p50 < 10_000  # microseconds


def test_bench_bad_arguments(python, tmp_path):
    _assert_usage_error(_run(python, "benchmarks", "tables"), "benchmark: expected one of")
    _assert_usage_error(
        _run(python, "benchmarks", "paper-tables", "--policies", "nope", "--output", str(tmp_path / "x.md")),
        "--policies: unknown policy 'nope'",
    )
    _assert_usage_error(
        _run(python, "benchmarks", "paper-tables", "--trace", str(tmp_path / "missing.txt")), "--trace"
    )
    _assert_usage_error(_run(python, "benchmarks", "paper-tables", "--k-max", "0"), "--k-max: 0 out of range")
    assert not (tmp_path / "x.md").exists()


def test_unavailable_policies_are_reported():
    text = render_tables({}, {"ql": "ImportError: not yet"}, ["ql"], ["A"], [3], [10], "taxi", {})
    assert "| 3 | ql | not available |" in text


def test_benchmarks_list_names_every_benchmark_of_the_registry(python):
    import benchmarks

    proc = _run(python, "benchmarks", "--list")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == [b.name for b in benchmarks.BENCHMARKS]
    assert {"paper-tables", "ql-family", "deep-rl", "model-based", "loop", "spark", "flink"} <= set(names)


def test_every_benchmark_of_the_registry_resolves_to_its_entry_point():
    import benchmarks
    from benchmarks import _load

    for bench in benchmarks.BENCHMARKS:
        target = _load(bench.target)
        assert callable(target), bench.name
        if bench.django:  # the manage.py command is a thin wrapper of the same class
            import importlib

            wrapper = importlib.import_module(f"autoscaler.management.commands.{bench.command}")
            assert wrapper.Command is target, bench.name
