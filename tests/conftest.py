"""Fixtures shared by the test packages: users (alice, bob, a staff user), a fast password hasher, and the
example catalogs and regions as they ship, and ``run_demo`` (the README's demo command, end to end).

Test packages add their own clients on top (``tests/core``: API clients with tokens; ``tests/web``: logged-in
Django clients and a browser). A package may still define a fixture of the same name (``tests/ingest`` has
password-less users): the nearer ``conftest.py`` wins. Helpers are fixtures here, not importable functions: this
file is imported as a top-level ``conftest`` module, which other modules cannot import reliably."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoscaler import manifests

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "manifests" / "examples"
SHARED_EXAMPLES = ("catalog-vm-example.yaml", "catalog-infra-a.yaml", "catalog-infra-b.yaml", "regions.yaml")


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


@pytest.fixture
def run_demo(tmp_path):
    """``run_demo(args, seconds, application)``: run ``bash scripts/demo.sh *args`` for ``seconds`` of control
    loop (15-s periods) on the embedded defaults in a fresh var directory, assert it exited 0 after at least that
    long, and return a :class:`DemoRun` with the decisions recorded for ``application``."""

    def run(args: list[str], seconds: int, application: str) -> DemoRun:
        var = tmp_path / "var"
        env = {
            k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")
        }
        env.update(AUTOSCALER_VAR_DIR=str(var), DEMO_SECONDS=str(seconds), DEMO_PORT=str(_free_port()),
                   DEMO_PERIOD="15")  # fmt: skip
        started = time.monotonic()
        proc = subprocess.run(["bash", "scripts/demo.sh", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=seconds + 600)  # fmt: skip
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        assert time.monotonic() - started >= seconds  # it ran for the requested time
        with sqlite3.connect(var / "db.sqlite3") as db:
            rows = db.execute(
                "SELECT o.name, d.outcome, d.observed FROM control_decision d "
                "JOIN autoscaler_application a ON a.id = d.application_id "
                "JOIN autoscaler_operator o ON o.id = d.operator_id WHERE a.name = ?",
                (application,),
            ).fetchall()
        # a tick with one incomplete operator records "no_data" for all of them
        decided = [(name, outcome, json.loads(obs)) for name, outcome, obs in rows
                   if outcome != "no_data" and json.loads(obs).get("complete")]  # fmt: skip
        assert decided, f"no decision with complete metrics among {len(rows)}: {out[-3000:]}"
        return DemoRun(out, var, decided, _processes_of(var))

    return run
