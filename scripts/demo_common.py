"""Process handling shared by the live demos (``demo_spark.py``, ``demo_flink.py``): the embedded SQLite set up for
several writers, the control plane (web server, Celery worker, Celery beat) as child process groups, the loop that
prints decisions as they are written, stopping every process group it started, and the API token file
(``python scripts/demo_common.py save-token USER``: the token goes to a file, never to the log)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sqlite_for_many_writers() -> None:
    """On the embedded SQLite default, several processes write (web/ingest, Celery worker, beat, this script):
    wait up to 60 s for a lock instead of 5 s, take write locks at BEGIN, and use the write-ahead log so readers
    do not block writers."""
    if os.environ.get("DATABASE_URL"):
        return
    var = Path(os.environ.get("AUTOSCALER_VAR_DIR", ROOT / "var"))
    var.mkdir(parents=True, exist_ok=True)
    db = var / "db.sqlite3"
    import sqlite3

    with sqlite3.connect(db) as conn:  # the journal mode is stored in the database file
        conn.execute("PRAGMA journal_mode=WAL")
    # IMMEDIATE: a write transaction takes the lock at BEGIN, so it waits (timeout) instead of failing at once
    # when a read transaction would have to be upgraded while another process writes
    os.environ["DATABASE_URL"] = f"sqlite:///{db}?timeout=60&transaction_mode=IMMEDIATE"


def stop_on_sigterm() -> None:
    """SIGTERM stops the demo like Ctrl-C (raises KeyboardInterrupt in the main loop)."""

    def _sigterm(signum, frame):  # noqa: ANN001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _sigterm)


def start_control_plane(port: int, var: Path, logs: Path) -> list[subprocess.Popen]:
    """Start the web server on ``port``, one Celery worker and Celery beat, each in its own process group with
    its output in ``logs/<name>.log``."""
    py = sys.executable
    logs.mkdir(parents=True, exist_ok=True)
    commands = {
        "web": [py, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        "celery-worker": [py, "-m", "celery", "-A", "autoscaler", "worker", "--pool=solo", "-l", "warning"],
        "celery-beat": [
            py, "-m", "celery", "-A", "autoscaler", "beat", "-l", "warning", "-s", str(var / "celerybeat-schedule"),
        ],
    }  # fmt: skip
    procs = []
    for name, cmd in commands.items():
        out = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        )
    return procs


def wait_http(url: str, timeout_s: float) -> None:
    """Wait until ``url`` answers (any HTTP status)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(1.0)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def print_decisions(app, seen: int) -> tuple[int, int]:
    """Print the decisions of ``app`` newer than primary key ``seen``; (last key, how many had complete metrics)."""
    from autoscaler.control.models import Decision

    complete = 0
    for d in Decision.objects.filter(application=app, pk__gt=seen).select_related("operator").order_by("pk"):
        seen = d.pk
        obs = d.observed or {}
        complete += bool(obs.get("complete"))
        explanation = d.proposal.get("explanation", {}) if d.proposal else {}
        rate = obs.get("input_rate")
        resp = obs.get("response_time_s") or obs.get("response_time")
        print(
            f"slot {d.slot} {d.operator.name:>8}: rate "
            + (f"{rate:7.1f} t/s" if isinstance(rate, int | float) else "    n/a    ")
            + (f", R {resp:5.1f} s" if isinstance(resp, int | float) else "")
            + f", {d.deployment} -> {explanation.get('action', '-')!s:<24} {d.outcome:<11} {d.reason[:60]}",
            flush=True,
        )
    return seen, complete


def slo_line(app) -> str | None:
    """One line with the application's running SLO summary (all periods so far and the sliding window):
    violations and reconfigurations as % of periods against eta_V / eta_R, cost in $/h; None before a period."""
    from autoscaler.control.aggregates import summary
    from autoscaler.control.models import ApplicationControl

    control = ApplicationControl.objects.filter(application=app).select_related("application").first()
    if control is None or not control.periods:
        return None
    s = summary(control)

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100.0 * x:.1f} %"

    w = s["window"]
    cost = s["cost_per_hour"]
    flag = "within budget" if s["within_eta_v"] and s["within_eta_r"] else "OVER BUDGET"
    return (
        f"SLO {app.name}: {s['periods']} periods, violations {pct(s['violation_fraction'])} "
        f"(window {pct(w['violation_fraction'])}, eta_V {pct(s['eta_v'])}), reconfigurations "
        f"{pct(s['reconfiguration_fraction'])} (window {pct(w['reconfiguration_fraction'])}, eta_R "
        f"{pct(s['eta_r'])}), cost " + ("n/a" if cost is None else f"{cost:.3f} $/h") + f": {flag}"
    )


def print_slo(app, last_periods: int) -> int:
    """Print :func:`slo_line` when a period was recorded since ``last_periods``; returns the period count."""
    from autoscaler.control.models import ApplicationControl

    periods = (
        ApplicationControl.objects.filter(application=app).values_list("periods", flat=True).first() or 0
    )
    if periods != last_periods:
        line = slo_line(app)
        if line:
            print(line, flush=True)
    return periods


def watch(app, procs: list[subprocess.Popen], seconds: float, started: float) -> int:
    """Print decisions until ``seconds`` after ``started`` (0: until Ctrl-C/SIGTERM) or until a process of
    ``procs`` exits; returns how many decisions had complete metrics."""
    seen = complete = periods = 0
    try:
        while not seconds or time.time() - started < seconds:
            seen, new_complete = print_decisions(app, seen)
            complete += new_complete
            periods = print_slo(app, periods)
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                print(f"demo: a process exited ({dead[0].args[:4]}); stopping", file=sys.stderr, flush=True)
                break
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    return complete


def terminate(procs: list[subprocess.Popen], timeout_s: float) -> None:
    """SIGTERM each process group, SIGKILL what is left after ``timeout_s``."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:  # the whole group: JVMs and Python workers too
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def save_api_token(username: str, var: Path) -> Path:
    """Write the API token of ``username`` (created if missing) to ``var/<username>-api-token`` with mode 0600 and
    return that path; the token itself is never printed (demo logs are shared and kept)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.get(username=username)
    key = Token.objects.get_or_create(user=user)[0].key
    var.mkdir(parents=True, exist_ok=True)
    path = var / f"{username}-api-token"
    path.unlink(missing_ok=True)  # a fresh file: the mode applies (an existing file would keep its own)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """``save-token USER``: save USER's API token under the var directory and print the file's path."""
    parser = argparse.ArgumentParser(prog="demo_common.py", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    save = sub.add_parser("save-token", help="write USER's API token to var/USER-api-token (mode 0600)")
    save.add_argument("username")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    var = Path(os.environ.get("AUTOSCALER_VAR_DIR", ROOT / "var"))
    try:
        path = save_api_token(args.username, var)
    except Exception as exc:  # noqa: BLE001 - one line for the demo log, not a traceback
        print(f"demo: cannot save the API token of {args.username!r}: {exc}", file=sys.stderr)
        return 1
    print(f"API token of {args.username}: in {path} (mode 0600; e.g. TOKEN=$(cat {path}))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
