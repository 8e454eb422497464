"""Run the whole control plane on one machine without Docker and watch decisions flow.

    .venv/bin/python scripts/demo_control.py [--period 10] [--seconds 0] [--port 8000]

Uses the embedded defaults unless the environment says otherwise (SQLite under var/, kombu's filesystem broker):
migrates, creates a running simulated application ``demo-taxi`` (3 scaled operators, taxi trace x2, threshold
OMs, T_OM = --period s), then starts the web server, one Celery worker and Celery beat, and prints every decision
as it is written. Ctrl-C (or --seconds) stops the three processes. /metrics and /api/v1/control/... are served on
--port.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo_common import print_slo  # noqa: E402 - scripts/ is on sys.path when run as a script

from policies.registry import RECOMMENDED_OM, om_choice  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--period", type=float, default=10.0, help="T_OM of the demo application (s)")
    parser.add_argument(
        "--seconds", type=float, default=0.0, help="stop after this many seconds (0 = Ctrl-C)"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--policy",
        default=RECOMMENDED_OM,
        help="OM policy (or named variant) of the demo application; default: the best measured in bench_loop",
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
    py = sys.executable
    subprocess.run([py, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)

    import django

    django.setup()
    from autoscaler.control.builders import simulated_pipeline
    from autoscaler.control.models import Decision
    from autoscaler.models import Application

    Application.objects.filter(owner__username="demo", name="demo-taxi").delete()
    choice = om_choice(args.policy)
    app = simulated_pipeline(
        "demo-taxi",
        n_operators=3,
        om_policy=choice["name"],
        om_params=choice["params"],
        owner="demo",
        period_s=args.period,
        rate_scale=0.6,
    )
    var = Path(os.environ.get("AUTOSCALER_VAR_DIR", ROOT / "var"))
    var.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen([py, "manage.py", "runserver", f"127.0.0.1:{args.port}", "--noreload"], cwd=ROOT),
        subprocess.Popen(
            [py, "-m", "celery", "-A", "autoscaler", "worker", "--pool=solo", "-l", "warning"], cwd=ROOT
        ),
        subprocess.Popen(
            [
                py,
                "-m",
                "celery",
                "-A",
                "autoscaler",
                "beat",
                "-l",
                "warning",
                "-s",
                str(var / "celerybeat-schedule"),
            ],
            cwd=ROOT,
        ),
    ]
    print(
        f"demo: application demo-taxi (id {app.pk}), T_OM = {args.period:g} s; metrics at "
        f"http://127.0.0.1:{args.port}/metrics; Ctrl-C to stop",
        flush=True,
    )
    seen = periods = 0
    started = time.time()
    try:
        while not args.seconds or time.time() - started < args.seconds:
            for d in (
                Decision.objects.filter(application=app, pk__gt=seen)
                .select_related("operator")
                .order_by("pk")
            ):
                seen = d.pk
                explanation = d.proposal.get("explanation", {}) if d.proposal else {}
                print(
                    f"slot {d.slot} {d.operator.name:>4}: rate {d.observed.get('input_rate') or 0:7.1f} t/s, "
                    f"{d.deployment} -> {explanation.get('action', '-')!s:<28} {d.outcome:<9} {d.reason[:60]}",
                    flush=True,
                )
            periods = print_slo(app, periods)
            if any(p.poll() is not None for p in procs):
                print("demo: a process exited; stopping", file=sys.stderr)
                return 1
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0 if seen else 1


if __name__ == "__main__":
    sys.exit(main())
