"""Fixtures shared by the test packages: users (alice, bob, a staff user), a fast password hasher, and the
example catalogs and regions as they ship, and ``run_demo`` (the README's demo command, end to end).

Test packages add their own clients on top (``tests/core``: API clients with tokens; ``tests/web``: logged-in
Django clients and a browser). A package may still define a fixture of the same name (``tests/ingest`` has
password-less users): the nearer ``conftest.py`` wins. Helpers are fixtures here, not importable functions: this
file is imported as a top-level ``conftest`` module, which other modules cannot import reliably."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoscaler import manifests

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "manifests" / "examples"
SHARED_EXAMPLES = ("catalog-vm-example.yaml", "catalog-infra-a.yaml", "catalog-infra-b.yaml", "regions.yaml")


# ---- the engines' JVMs -------------------------------------------------------------------------------------------
#: every JVM the tests start (Spark master, workers, executors and drivers' gateways; Flink's job and task managers
#: and clients) inherits this: client-VM ergonomics (C1 compiler only, one compiler thread, serial GC unless a GC is
#: given explicitly). The tests' JVMs live for seconds to minutes, so C2's start-up compilation was about a third of
#: their CPU: Spark's contract and live tests used 290 CPU-s (machine-wide) with the default, 177 with this; Flink's
#: contract and live tests 168 and 133 (docs/benchmarks.md, "Test suite time"). Semantics are unchanged; the demo and
#: the benchmarks, run by a user, do not set it.
TEST_JVM_OPTION = "-XX:+NeverActAsServerClassMachine"
if TEST_JVM_OPTION not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {TEST_JVM_OPTION}".strip()


# ---- parallel runs (scripts/test.sh: pytest -n 3 --dist loadgroup --no-loadscope-reorder) ------------------------
#: tests that run a real engine, in groups each run by one worker (one engine cluster of the group at a time,
#: module fixtures shared; the Flink connector tests share one session cluster): tests/<path> prefixes, longest
#: group first. The engines' end-to-end tests (Spark pipelines and demo, both engines' fault tests, each with
#: clusters of its own) are a third group, so that no group is the critical path of the suite on three workers
ENGINE_GROUPS = {
    "engine-flink": ("tests/connectors/flink/",),
    "engine-spark-connector": ("tests/connectors/spark/",),
    "engine-end-to-end": (
        "tests/connectors/spark_pipelines/",
        "tests/demo/test_demo.py",
        "tests/reliability/test_engine_faults.py",
    ),
}


def engine_group(nodeid: str) -> str | None:
    """The xdist group of a test that runs a real engine (None for the others)."""
    for group, prefixes in ENGINE_GROUPS.items():
        if nodeid.startswith(prefixes):
            return group
    return None


def group_of(nodeid: str) -> str:
    """The xdist work unit of a test: its engine's group (:func:`engine_group`), else its module."""
    nodeid = nodeid.replace("\\", "/")
    return engine_group(nodeid) or nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` with the groups of :func:`group_of`: one worker runs all tests of an engine group (one
    of its clusters at a time, module fixtures shared), each other module runs on one worker. xdist's own loadgroup
    cannot be used: it tags grouped tests by rewriting ``item._nodeid``, which pytest 9 no longer reads (the node
    id is ``item._id``), so every test silently became a unit of its own and two Spark clusters ran at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class EngineGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return EngineGroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The engine groups first, so that with ``--no-loadscope-reorder`` the workers start with one engine group each
    (the longest units) and share the rest as they free up; inside an engine group the tests of a module stay
    together (pytest-django orders by database use across modules, which would set a module's cluster up again
    for every run of its tests), in pytest-django's order within the module."""
    rank = {group: i for i, group in enumerate(ENGINE_GROUPS)}
    order: dict[str, tuple[int, str]] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        engine = engine_group(item.nodeid.replace("\\", "/"))
        order[item.nodeid] = (rank[engine], module) if engine else (len(rank), "")
    items.sort(key=lambda item: order[item.nodeid])


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create users with passwords; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    """A regular user ``alice`` (password ``pw-alice-1``)."""
    return django_user_model.objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def bob(django_user_model):
    """A regular user ``bob`` (password ``pw-bob-1``)."""
    return django_user_model.objects.create_user("bob", password="pw-bob-1")


@pytest.fixture
def staff(django_user_model):
    """A staff user ``ops`` (password ``pw-ops-1``): may write catalogs and regions."""
    return django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)


@pytest.fixture
def shared(db):
    """The example catalogs (``vm-example``, ``infra-a``, ``infra-b``) and regions, applied as they ship."""
    docs = []
    for name in SHARED_EXAMPLES:
        docs += manifests.parse_documents((EXAMPLES / name).read_text())
    return manifests.apply_documents(docs, None)


@dataclass
class DemoRun:
    """What one run of ``scripts/demo.sh`` left: its output, its var directory, the decisions of ticks in which
    every operator had complete metrics as (operator, outcome, observed), and the processes still alive."""

    output: str
    var: Path
    decisions: list[tuple[str, str, dict]]
    leftover: list[str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_of(var: Path) -> list[str]:
    """Live processes started for a demo: their environment holds ``AUTOSCALER_VAR_DIR=<var>`` (children inherit
    it, the Spark and Flink JVMs too) or their command line names ``var`` (e.g. ``-Dlog.file=<var>/...``)."""
    marker = f"AUTOSCALER_VAR_DIR={var}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat.split(")")[-1].split()[0] == "Z":
            continue
        if marker in env.split(b"\0") or str(var) in cmd:
            found.append(f"{pid}: {cmd[:200]}")
    return found


def _complete_ticks(db_path: Path, application: str) -> int:
    """Ticks of ``application`` whose operators all had complete metrics (a tick with one incomplete operator
    records "no_data" for all of them), read from the demo's SQLite database while it runs (0 before it exists)."""
    if not db_path.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5.0) as db:
            rows = db.execute(
                "SELECT d.slot, d.observed FROM control_decision d "
                "JOIN autoscaler_application a ON a.id = d.application_id "
                "WHERE a.name = ? AND d.outcome != 'no_data'",
                (application,),
            ).fetchall()
    except sqlite3.Error:  # not migrated yet, or busy
        return 0
    return len({slot for slot, obs in rows if json.loads(obs).get("complete")})


def _demo_rows(var: Path, sql: str, application: str) -> list[tuple]:
    """The rows of ``sql`` (one ``?``: the application's name) in the demo's SQLite database under ``var``."""
    with sqlite3.connect(var / "db.sqlite3") as db:
        return db.execute(sql, (application,)).fetchall()


def _demo_failure(var: Path, application: str) -> str:
    """What a failed demo's log lines cut short: the distinct reasons of its ticks without data (from its
    database, in full, oldest first) and the last lines of its pipelines' logs."""
    parts = []
    try:
        rows = _demo_rows(
            var,
            "SELECT t.status, t.error, COUNT(*), MIN(t.slot) FROM control_tick t "
            "JOIN autoscaler_application a ON a.id = t.application_id WHERE a.name = ? "
            "GROUP BY t.status, t.error ORDER BY MIN(t.slot)",
            application,
        )
        parts += [f"{n} tick(s) {status} from slot {first}: {error}" for status, error, n, first in rows]
    except sqlite3.Error as exc:
        parts.append(f"ticks not readable: {exc}")
    for stage_log in sorted(var.glob("*-demo/logs/*.log")):
        lines = stage_log.read_text(errors="replace").splitlines()[-5:]
        parts.append(f"{stage_log.name}: " + " | ".join(line[:300] for line in lines))
    return "\n".join(parts) + "\n--- the demo's output ---\n"


@pytest.fixture
def run_demo(tmp_path):
    """``run_demo(args, seconds, application, ticks=2, ready=None)``: run ``bash scripts/demo.sh *args`` (15-s
    periods, the embedded defaults, a fresh var directory) until the demo has recorded ``ticks`` ticks with
    complete metrics for ``application``, printed its SLO line and ``ready(var)`` holds, then stop it as a user
    does (SIGTERM: it stops every process it started); ``seconds`` only bounds a demo that never gets there (it
    then stops by itself, ``DEMO_SECONDS``). The demo must exit 0. Returns a :class:`DemoRun` with the decisions
    recorded for ``application``. What is waited for is what the engine and the loop report, not a duration:
    a loaded machine takes longer, a quiet one less."""

    def run(
        args: list[str],
        seconds: int,
        application: str,
        ticks: int = 2,
        ready: Callable[[Path], bool] | None = None,
    ) -> DemoRun:
        var = tmp_path / "var"
        env = {
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")
        }
        env.update(AUTOSCALER_VAR_DIR=str(var), DEMO_SECONDS=str(seconds), DEMO_PORT=str(_free_port()),
                   DEMO_PERIOD="15")  # fmt: skip
        log = tmp_path / "demo.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen(["bash", "scripts/demo.sh", *args], cwd=ROOT, env=env, stdout=sink,
                                    stderr=subprocess.STDOUT)  # fmt: skip
            deadline = time.monotonic() + seconds + 600
            try:
                while proc.poll() is None:
                    assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
                    text = log.read_text(errors="replace")
                    if (
                        f"SLO {application}: " in text
                        and _complete_ticks(var / "db.sqlite3", application) >= ticks
                        and (ready is None or ready(var))
                    ):
                        proc.send_signal(signal.SIGTERM)
                        break
                    time.sleep(3.0)
                proc.wait(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
        out = log.read_text(errors="replace")
        assert proc.returncode == 0, _demo_failure(var, application) + out[-4000:]
        rows = _demo_rows(
            var,
            "SELECT o.name, d.outcome, d.observed FROM control_decision d "
            "JOIN autoscaler_application a ON a.id = d.application_id "
            "JOIN autoscaler_operator o ON o.id = d.operator_id WHERE a.name = ?",
            application,
        )
        # a tick with one incomplete operator records "no_data" for all of them
        decided = [(name, outcome, json.loads(obs)) for name, outcome, obs in rows
                   if outcome != "no_data" and json.loads(obs).get("complete")]  # fmt: skip
        assert decided, f"no decision with complete metrics among {len(rows)}: {out[-3000:]}"
        return DemoRun(out, var, decided, _processes_of(var))

    return run
