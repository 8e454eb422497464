"""Issue 24 item 1: the simulator for one's own workload -- operator settings, a catalogue from a manifest file,
rate ranges with a warning when the trace leaves them, CSV traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from policies import simulate
from policies.catalogue import load_catalogue
from policies.sim.trace import load_trace

REPO = Path(__file__).resolve().parents[2]
CATALOGUE_B = REPO / "manifests" / "examples" / "catalog-infra-b.yaml"


def _argv(trace: Path, *extra: str) -> list[str]:
    base = ["--trace", str(trace), "--k-max", "10", "--policy", "threshold"]
    if "--catalogue" not in extra:
        base += ["--infra", "A", "--node-types", "3"]
    return [*base, *extra]


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    rc = simulate.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# ---- traces --------------------------------------------------------------------------------------------------------
def test_csv_trace_with_comments_header_and_a_named_or_indexed_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("# exported from the broker\n\ntimestamp,rate,lag\n0,100.5,3\n60,200,4\n# gap\n120,300,1\n")
    np.testing.assert_array_equal(load_trace(p, column="rate"), [100.5, 200.0, 300.0])
    np.testing.assert_array_equal(load_trace(p, column=2), [3.0, 4.0, 1.0])
    np.testing.assert_array_equal(load_trace(p, column="2", steps=2), [3.0, 4.0])
    with pytest.raises(ValueError, match="line 3: 3 columns: choose the rate column"):
        load_trace(p)
    with pytest.raises(ValueError, match="line 3: no column named 'rps'"):
        load_trace(p, column="rps")
    single = tmp_path / "s.txt"
    single.write_text("rate\n1\n2\n")
    np.testing.assert_array_equal(load_trace(single), [1.0, 2.0])


def test_bad_trace_lines_are_named(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,rate\n0,10\n1,n/a\n")
    with pytest.raises(ValueError, match=r"line 3: not a number: 'n/a'"):
        load_trace(p, column="rate")
    q = tmp_path / "q.csv"
    q.write_text("t,rate\n0,10\n1\n")
    with pytest.raises(ValueError, match="line 3: no column 1"):
        load_trace(q, column="rate")
    r = tmp_path / "r.txt"
    r.write_text("10\n-5\n")
    with pytest.raises(ValueError, match="line 2: rate must be a finite number >= 0"):
        load_trace(r)


def test_cli_reads_a_csv_column_and_names_the_bad_line(tmp_path, taxi_head, capsys):
    rates = load_trace(taxi_head, steps=300)
    p = tmp_path / "t.csv"
    p.write_text("minute,rate\n" + "".join(f"{i},{r}\n" for i, r in enumerate(rates)))
    plain = simulate.run(_argv(taxi_head, "--steps", "300"))
    from_csv = simulate.run(_argv(p, "--column", "rate"))
    assert from_csv["avg_cost"] == plain["avg_cost"] and from_csv["steps"] == 300
    rc, out, err = _main(capsys, *_argv(p))
    assert rc == 2 and out == "" and "--trace:" in err and "line 1: 2 columns" in err


# ---- catalogue -------------------------------------------------------------------------------------------------------
def test_catalogue_from_a_manifest_file_runs_as_the_built_in_infrastructure(taxi_head):
    types = load_catalogue(CATALOGUE_B)
    assert [t.speedup for t in types[:3]] == [1.0, 0.05, 30.0]
    builtin = simulate.run(["--trace", str(taxi_head), "--infra", "B", "--node-types", "3", "--k-max", "10",
                            "--policy", "ds2", "--steps", "800"])  # fmt: skip
    manifest = simulate.run(["--trace", str(taxi_head), "--catalogue", str(CATALOGUE_B), "--node-types", "3",
                             "--k-max", "10", "--policy", "ds2", "--steps", "800"])  # fmt: skip
    assert manifest["infra"] == "catalog-infra-b"
    for key in ("avg_cost", "violations_pct", "reconfigurations_pct", "avg_resource_cost"):
        assert manifest[key] == builtin[key], key


def test_catalogue_errors_name_the_field(tmp_path, taxi_head, capsys):
    bad = tmp_path / "c.yaml"
    bad.write_text(
        "kind: NodeTypeCatalog\nmetadata: {name: x}\nspec:\n  nodeTypes:\n"
        "    - {name: a, speedup: 1.0, pricePerHour: 1.0}\n    - {name: b, speedup: 0, pricePerHour: 1.0}\n"
    )
    with pytest.raises(ValueError, match=r"spec.nodeTypes\[1\].speedup: must be > 0, got 0"):
        load_catalogue(bad)
    two = tmp_path / "two.yaml"
    doc = "kind: NodeTypeCatalog\nmetadata: {{name: {n}}}\nspec:\n  nodeTypes:\n    - {{name: t, speedup: {s}, pricePerHour: 1}}\n"
    two.write_text(doc.format(n="one", s=1.0) + "---\n" + doc.format(n="two", s=2.0))
    with pytest.raises(ValueError, match="found 2: choose one with FILE:NAME"):
        load_catalogue(two)
    assert load_catalogue(two, "two")[0].speedup == 2.0
    rc, out, err = _main(capsys, *_argv(taxi_head, "--catalogue", f"{two}:two", "--infra", "A"))
    assert rc == 2 and "--infra: give either --infra or --catalogue" in err
    rc, out, err = _main(capsys, *_argv(taxi_head, "--catalogue", str(bad)))
    assert rc == 2 and out == "" and "--catalogue:" in err and "speedup" in err
    rc, out, err = _main(capsys, *_argv(taxi_head, "--catalogue", f"{two}:two", "--node-types", "2"))
    assert rc == 2 and "--node-types: the catalogue has 1 types, got 2" in err


# ---- operator settings and rate range ---------------------------------------------------------------------------------
def test_r_max_mu_gamma_and_levels_reach_the_operator():
    args = simulate.build_parser().parse_args(
        _argv(
            Path("x"),
            "--r-max",
            "20ms",
            "--mu",
            "1600",
            "--gamma",
            "0.999",
            "--rate-levels",
            "40",
            "--rate-max",
            "6000",
        )  # fmt: skip
    )
    weights, _ = simulate.check_args(args)
    spec = simulate.operator_spec(args, weights)
    assert spec.r_max_s == pytest.approx(0.02) and spec.gamma == 0.999
    assert spec.model.service_mean_s == pytest.approx(1 / 1600)
    assert (spec.rate_levels.n, spec.rate_levels.max_rate, spec.rate_levels.grow) == (40, 6000.0, False)
    auto = simulate.operator_spec(
        simulate.build_parser().parse_args(_argv(Path("x"), "--rate-max", "auto")), weights
    )
    assert auto.rate_levels.grow


def test_tighter_bound_means_more_violations(taxi_head):
    loose = simulate.run(_argv(taxi_head, "--steps", "1000", "--r-max", "0.05"))
    tight = simulate.run(_argv(taxi_head, "--steps", "1000", "--r-max", "10ms"))
    assert loose["r_max_s"] == 0.05 and tight["r_max_s"] == pytest.approx(0.01)
    assert tight["violations_pct"] > loose["violations_pct"] + 5.0


def test_trace_above_the_range_warns_and_auto_range_follows_it(taxi_head, capsys):
    """A 1,600-tuples/s operator on a trace 8x the Taxi one: with the paper's 650 tuples/s range most steps are
    read as the top level (a warning says how many); --rate-max auto grows the range over the trace."""
    common = ["--mu", "1600", "--rate-scale", "8", "--steps", "600", "--policy", "model-based", "--json"]
    rc, out, err = _main(capsys, *_argv(taxi_head, *common))
    assert rc == 0
    assert err.startswith("warning: ") and "have rates >= 650 tuples/s" in err and "--rate-max auto" in err
    fixed = simulate.json.loads(out)
    assert fixed["steps_above_range"] > 300 and fixed["rate_range_tuples_s"] == 650.0
    rc, out, err = _main(capsys, *_argv(taxi_head, *common, "--rate-max", "auto"))
    assert rc == 0 and err == ""
    auto = simulate.json.loads(out)
    assert auto["steps_above_range"] == 0 and auto["rerangings"] >= 1
    assert auto["rate_range_tuples_s"] >= float(np.max(load_trace(taxi_head, steps=600))) * 8
    assert auto["avg_cost"] < fixed["avg_cost"]


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (
            ["--params", '{"mu": 1600}'],
            "'mu' is a setting of the simulated operator, not a parameter of policy",
        ),
        (["--params", '{"gamma": 0.9}'], "use --gamma"),
        (["--r-max", "fast"], "--r-max: expected seconds (0.05) or milliseconds (50ms)"),
        (["--r-max", "0ms"], "--r-max: must be > 0 s"),
        (["--gamma", "1"], "--gamma: must be in (0, 1)"),
        (["--rate-levels", "0"], "--rate-levels: must be >= 1"),
        (["--rate-max", "lots"], "--rate-max: expected tuples/s or auto"),
        (["--rate-max", "auto", "--calibrate"], "not with --calibrate"),
    ],
)
def test_bad_options_are_one_line_errors(taxi_head, capsys, extra, fragment):
    rc, out, err = _main(capsys, *_argv(taxi_head, "--steps", "50", *extra))
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and fragment in err and len(err.strip().splitlines()) == 1
