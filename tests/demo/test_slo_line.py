"""The demos' running SLO summary line (scripts/demo_common.py ``slo_line``): it reports what the control loop
recorded for the application, against its budgets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import ApplicationControl
from autoscaler.control.tick import run_tick

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from demo_common import slo_line  # noqa: E402

pytestmark = pytest.mark.django_db


def test_no_line_before_the_first_period_then_the_recorded_fractions():
    app = simulated_pipeline("slo-line", n_operators=1, rate_scale=3.0)
    assert slo_line(app) is None
    for slot in range(10, 14):
        run_tick(app.pk, slot)
    control = ApplicationControl.objects.get(application=app)
    line = slo_line(app)
    assert line.startswith(f"SLO slo-line: {control.periods} periods, ")
    expected = 100.0 * control.violated_periods / control.periods
    assert f"violations {expected:.1f} %" in line
    assert "eta_V 5.0 %" in line and "eta_R 10.0 %" in line
    assert line.endswith("within budget") or line.endswith("OVER BUDGET")
    if control.violated_periods / control.periods > app.eta_v:
        assert line.endswith("OVER BUDGET")
