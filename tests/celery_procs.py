"""Processes that the worker tests (``tests/control``) and the fault suite (``tests/reliability``) start on
127.0.0.1: ``celery`` workers and beats of this checkout, and private ``redis-server`` brokers (stopping one
disturbs nobody else)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def database_url() -> str:
    """The URL of this test run's (PostgreSQL) database, for processes that share it."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_until(predicate: Callable[[], object], timeout: float, what: str, step: float = 0.1) -> object:
    """Poll ``predicate`` until it returns a true value (returned); ``timeout`` (s) is only an upper bound."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


def start_redis(exe: str, port: int, data_dir: Path) -> subprocess.Popen:
    """A ``redis-server`` without persistence on ``127.0.0.1:port``, once it accepts connections."""
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(data_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: port_open(port), 15, f"the private redis-server on port {port}", step=0.05)
    return proc


class CeleryProcess:
    """``python -m celery -A autoscaler <args>`` with its output in ``log``; returns once ``ready`` is logged
    (``start_timeout_s`` is only an upper bound)."""

    def __init__(
        self, args: list[str], env: dict[str, str], log: Path, ready: str, start_timeout_s: float = 60.0
    ) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "autoscaler", *args],
            cwd=ROOT,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + start_timeout_s
        while ready not in log.read_text():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{log.stem} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (a warm shutdown), SIGKILL after 20 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
