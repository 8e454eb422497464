"""A local Flink cluster started from the ``apache-flink`` pip package (``.venv-flink``).

``FLINK_HOME`` is the installed ``pyflink`` directory (it ships ``bin/``, ``lib/`` and ``conf/``). Every process
gets its own configuration directory (``FLINK_CONF_DIR``), log and pid directory under ``<root>``:

- ``<root>/jobmanager``: bound to 127.0.0.1, REST on ``rest_port``, adaptive scheduler with a 1 s cooldown after
  rescaling, file checkpoints every ``checkpoint_interval_s`` seconds under ``<root>/checkpoints``;
- ``<root>/tm/<node_id>``: one TaskManager of a profile (task slots, process memory MiB, CPU cores), whose
  resource id is ``node_id`` (so ``GET /taskmanagers`` names it).

Processes are started and stopped with ``bin/jobmanager.sh`` / ``bin/taskmanager.sh start|stop``; the state of
the cluster is on disk only, so another process (a Celery worker) can reopen it with ``FlinkCluster(root)``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from connectors.flink.rest import FlinkRest, FlinkRestError
from connectors.processes import runs_with

ROOT = Path(__file__).resolve().parents[2]
FLINK_VENV = ROOT / ".venv-flink"
#: how long (s) a running JobManager or TaskManager may take to be ready (liveness bound on a loaded host)
START_TIMEOUT_S = 240.0
#: minimum TaskManager process memory (MiB) that fits a PyFlink worker
MIN_TM_MEMORY_MB = 1024


class FlinkClusterError(RuntimeError):
    """A Flink process did not start or stop as asked (the message names it and points at its log)."""


def flink_python() -> Path:
    """The interpreter of ``.venv-flink`` (``FLINK_PYTHON`` overrides)."""
    return Path(os.environ.get("FLINK_PYTHON") or FLINK_VENV / "bin" / "python")


def flink_home() -> Path:
    """The Flink distribution: ``FLINK_HOME`` or the pyflink directory inside ``.venv-flink``."""
    if os.environ.get("FLINK_HOME"):
        return Path(os.environ["FLINK_HOME"])
    found = sorted((FLINK_VENV / "lib").glob("python3*/site-packages/pyflink"))
    if not found or not (found[0] / "bin" / "jobmanager.sh").exists():
        raise FlinkClusterError(
            "no Flink distribution: run `source scripts/flink_env.sh` (creates .venv-flink) or set FLINK_HOME"
        )
    return found[0]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: polls (0.5 s apart) in a row without a daemon of its directory before a starting daemon counts as exited
DAEMON_GONE_POLLS = 4


def started_from(pid: int, proc_dir: Path) -> bool:
    """Whether process ``pid`` is a Flink daemon started for ``proc_dir``: the start scripts pass every daemon
    ``--configDir <proc_dir>/conf``, which the launching shell has on its command line too until it execs the
    JVM (the pid file is written meanwhile: under load a poll can see the shell)."""
    return runs_with(pid, "--configDir", str(proc_dir / "conf"))


def _pid_files(proc_dir: Path) -> dict[Path, list[int]]:
    """``proc_dir``'s pid files (``flink-*.pid``, written by ``flink-daemon.sh``) and the pids each lists."""
    return {
        f: [int(x) for x in f.read_text().split() if x.isdigit()]
        for f in sorted(proc_dir.glob("flink-*.pid"))
    }


def drop_stale_pids(proc_dir: Path) -> list[int]:
    """Remove from ``proc_dir``'s pid files every pid that is no longer a process started for ``proc_dir``
    (:func:`started_from`); returns the pids removed.

    ``flink-daemon.sh stop`` kills the last pid of its file after checking only that *some* process has it. A
    daemon that died by itself (or with its process group) leaves its pid behind, and on a busy host the pid is
    soon another process's: pid_max is 32,768 here and every JVM thread takes one. Stopping such a directory then
    killed an unrelated process -- another cluster's TaskManager, say. Pruned first, ``stop`` kills only its own
    daemons."""
    removed: list[int] = []
    for pid_file, pids in _pid_files(proc_dir).items():
        kept = [pid for pid in pids if started_from(pid, proc_dir)]
        removed += [pid for pid in pids if pid not in kept]
        if kept:
            pid_file.write_text("".join(f"{pid}\n" for pid in kept))
        else:
            pid_file.unlink()
    return removed


def daemon_pids(proc_dir: Path) -> list[int]:
    """The pids of ``proc_dir``'s pid files that run a daemon started for it (:func:`started_from`)."""
    return [pid for pids in _pid_files(proc_dir).values() for pid in pids if started_from(pid, proc_dir)]


#: log lines that say why a daemon stopped: a signal, a fatal error, an out-of-memory, a task that would not cancel
STOP_CAUSES = re.compile(
    r"RECEIVED SIGNAL|Fatal error|FATAL|OutOfMemoryError|did not react to cancelling|Terminating TaskManager"
    r"|Task did not exit gracefully|Could not register|Closing TaskExecutor connection|heartbeat.*timed out",
    re.IGNORECASE,
)


def stop_causes(proc_dir: Path, limit: int = 4) -> str:
    """The first ``limit`` lines of the daemon's ``.log`` files under ``proc_dir/log`` that say why it stopped
    (:data:`STOP_CAUSES`), each cut to 300 characters; "" when none does. A failure message shows them before
    the log's tail, which after a stop is only the shutdown sequence."""
    found: list[str] = []
    for f in sorted((proc_dir / "log").glob("*.log")):
        for line in f.read_text(errors="replace").splitlines():
            if STOP_CAUSES.search(line):
                found.append(line[:300])
                if len(found) >= limit:
                    return " | ".join(found)
    return " | ".join(found)


def log_tail(proc_dir: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of the daemon's ``.out`` and ``.log`` files under ``proc_dir/log``."""
    parts = []
    for f in sorted((proc_dir / "log").glob("*.out")) + sorted((proc_dir / "log").glob("*.log")):
        text = f.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"{f.name}: " + " | ".join(text))
    return "; ".join(parts) or f"no log in {proc_dir / 'log'}"


@dataclass(frozen=True)
class TaskManagerProfile:
    """A TaskManager node type: ``slots`` task slots, ``memory_mb`` process memory (MiB), ``cpu_cores``."""

    slots: int = 1
    memory_mb: int = MIN_TM_MEMORY_MB
    cpu_cores: float = 1.0
    node_type: str = ""


def _base_java_opts(home: Path) -> str:
    conf = yaml.safe_load((home / "conf" / "config.yaml").read_text()) or {}
    return str(conf.get("env", {}).get("java", {}).get("opts", {}).get("all", ""))


class FlinkCluster:
    """A standalone Flink session cluster rooted at ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path, rest_port: int | None = None) -> None:
        self.root = Path(root)
        self.home = flink_home()
        state = self._state()
        self.rest_port = int(rest_port or state.get("rest_port") or 0)

    # ---- configuration -------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        path = self.root / "cluster.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _save_state(self, **values: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        state = {**self._state(), **values}
        (self.root / "cluster.json").write_text(json.dumps(state, indent=1))

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def rest(self, timeout_s: float = 5.0) -> FlinkRest:
        return FlinkRest(self.rest_url, timeout_s=timeout_s)

    def _config(self, extra: dict[str, Any]) -> dict[str, Any]:
        state = self._state()
        conf: dict[str, Any] = {
            "env.java.opts.all": _base_java_opts(self.home),
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": int(state["rpc_port"]),
            "jobmanager.memory.process.size": "1024m",
            "jobmanager.scheduler": "adaptive",
            "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "1s",
            "jobmanager.adaptive-scheduler.resource-wait-timeout": "10s",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "execution.checkpointing.interval": f"{int(state.get('checkpoint_interval_s', 5))}s",
            "execution.checkpointing.dir": "file://" + str(self.root / "checkpoints"),
            "execution.checkpointing.savepoint-dir": "file://" + str(self.root / "savepoints"),
            "state.backend.type": "hashmap",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1000,
            "restart-strategy.fixed-delay.delay": "1s",
            "metrics.latency.interval": 0,
            # the REST metric store refreshes every 2 s (default 10 s), so a reading is at most 2 s old
            "metrics.fetcher.update-interval": 2000,
            # job details over REST are cached this long (default 3 s): a rescale's restart shows up in polls
            "web.refresh-interval": 250,
            "python.executable": str(flink_python()),
            "python.client.executable": str(flink_python()),
            "parallelism.default": 1,
        }
        conf.update(extra)
        return conf

    def _write_conf(self, directory: Path, extra: dict[str, Any]) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties", "logback.xml"):
            src = self.home / "conf" / name
            if src.exists():
                shutil.copy(src, directory / name)
        (directory / "config.yaml").write_text(yaml.safe_dump(self._config(extra), sort_keys=True))
        return directory

    def _env(self, proc_dir: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            FLINK_HOME=str(self.home),
            FLINK_CONF_DIR=str(proc_dir / "conf"),
            FLINK_LOG_DIR=str(proc_dir / "log"),
            FLINK_PID_DIR=str(proc_dir),
        )
        env.pop("PYTHONPATH", None)
        return env

    def _script(self, proc_dir: Path, script: str, action: str, timeout_s: float = 60.0) -> None:
        (proc_dir / "log").mkdir(parents=True, exist_ok=True)
        if action == "stop":
            drop_stale_pids(proc_dir)
        out = subprocess.run(
            ["bash", str(self.home / "bin" / script), action],
            env=self._env(proc_dir),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if out.returncode != 0:
            raise FlinkClusterError(
                f"{script} {action} failed ({out.returncode}): {out.stderr or out.stdout}"
            )

    # ---- JobManager ----------------------------------------------------------------------------------------
    def start(self, checkpoint_interval_s: int = 5) -> FlinkCluster:
        """Start the JobManager (if not running) and wait until its REST API answers; returns ``self``."""
        if self.running():
            return self
        self.rest_port = self.rest_port or free_port()
        self._save_state(
            rest_port=self.rest_port, rpc_port=free_port(), checkpoint_interval_s=int(checkpoint_interval_s)
        )
        jm = self.root / "jobmanager"
        self._write_conf(jm / "conf", {})
        self._script(jm, "jobmanager.sh", "start")
        self._wait(lambda: self.rest(2.0).get("/overview"), f"JobManager REST on {self.rest_url}", jm)
        return self

    def running(self) -> bool:
        """Whether the JobManager's REST API answers."""
        if not self.rest_port:
            return False
        try:
            self.rest(2.0).get("/overview")
            return True
        except FlinkRestError:
            return False

    def _wait(self, probe, what: str, proc_dir: Path, timeout_s: float = START_TIMEOUT_S):
        """Poll ``probe`` until it answers truthy while the daemon of ``proc_dir`` runs. A daemon that exited
        fails at once (its log's last lines in the error); one that runs but is not ready after ``timeout_s`` (a
        bound for liveness, generous: a JVM starting on a loaded 2-core host took over 60 s) fails too."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        missing = 0  # polls in a row that found no daemon of proc_dir
        while time.monotonic() < deadline:
            try:
                result = probe()
                if result:
                    return result
            except (FlinkRestError, KeyError) as exc:
                last = exc
            # a daemon being exec'd reads an empty command line for a moment (CI, loaded: a JobManager that was
            # starting was taken for one that exited), so it counts as gone only when DAEMON_GONE_POLLS polls in a
            # row do not find it
            missing = 0 if daemon_pids(proc_dir) else missing + 1
            if missing >= DAEMON_GONE_POLLS:
                raise FlinkClusterError(f"{what} exited before it was ready ({last}): {log_tail(proc_dir)}")
            time.sleep(0.5)
        raise FlinkClusterError(
            f"{what} not ready after {timeout_s:.0f} s ({last}); logs in {proc_dir / 'log'}"
        )

    # ---- TaskManagers --------------------------------------------------------------------------------------
    def start_taskmanager(self, node_id: str, profile: TaskManagerProfile, wait: bool = True) -> str:
        """Start TaskManager ``node_id`` with ``profile``; waits until the JobManager lists it. Returns the id."""
        if not self._state().get("rpc_port"):
            raise FlinkClusterError(f"cluster at {self.root} has no JobManager: start() it first")
        tm = self.root / "tm" / node_id
        memory = max(int(profile.memory_mb), MIN_TM_MEMORY_MB)
        self._write_conf(
            tm / "conf",
            {
                "taskmanager.resource-id": node_id,
                "taskmanager.numberOfTaskSlots": int(profile.slots),
                "taskmanager.memory.process.size": f"{memory}m",
                "taskmanager.cpu.cores": float(profile.cpu_cores),
            },
        )
        (tm / "profile.json").write_text(json.dumps(asdict(profile)))
        self._script(tm, "taskmanager.sh", "start")
        if wait:
            self._wait(lambda: node_id in self.taskmanager_ids(), f"TaskManager {node_id}", tm)
        return node_id

    def stop_taskmanager(self, node_id: str) -> None:
        """Stop TaskManager ``node_id`` (its process); its directory moves to ``<root>/tm-stopped``."""
        tm = self.root / "tm" / node_id
        if not tm.exists():
            return
        self._script(tm, "taskmanager.sh", "stop")
        stopped = self.root / "tm-stopped"
        stopped.mkdir(parents=True, exist_ok=True)
        (tm / "profile.json").unlink(missing_ok=True)
        tm.rename(stopped / f"{node_id}-{int(time.time() * 1000)}")  # logs kept for diagnosis

    def ensure_taskmanager(self, node_id: str, profile: TaskManagerProfile) -> bool:
        """Start TaskManager ``node_id`` with ``profile`` again when the JobManager does not list it (it stopped:
        its logs move to ``<root>/tm-stopped``); True when it had to be started."""
        if node_id in self.taskmanager_ids():
            return False
        self.stop_taskmanager(node_id)
        self.start_taskmanager(node_id, profile)
        return True

    def local_taskmanagers(self) -> dict[str, TaskManagerProfile]:
        """TaskManagers started by this cluster object (id -> profile), from their directories."""
        base = self.root / "tm"
        out: dict[str, TaskManagerProfile] = {}
        for d in sorted(base.iterdir()) if base.exists() else []:
            if (d / "profile.json").exists():
                out[d.name] = TaskManagerProfile(**json.loads((d / "profile.json").read_text()))
        return out

    def taskmanager_ids(self) -> list[str]:
        """Ids of the TaskManagers registered at the JobManager."""
        return [tm["id"] for tm in self.rest(3.0).get("/taskmanagers").get("taskmanagers", [])]

    # ---- jobs ----------------------------------------------------------------------------------------------
    def submit_python(
        self, script: str | Path, args: list[str] | None = None, pyfiles: list[str | Path] | None = None
    ) -> str:
        """Submit a PyFlink job detached (``flink run -d -py``); returns the job id."""
        cmd = [
            "bash", str(self.home / "bin" / "flink"), "run", "-d", "-m", f"127.0.0.1:{self.rest_port}",
            "-pyexec", str(flink_python()), "-pyclientexec", str(flink_python()), "-py", str(script),
        ]  # fmt: skip
        if pyfiles:
            cmd += ["-pyfs", ",".join(str(p) for p in pyfiles)]
        cmd += list(args or [])
        env = self._env(self.root / "jobmanager")
        env["PATH"] = f"{flink_python().parent}:{env.get('PATH', '')}"
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        for line in out.stdout.splitlines():
            if "JobID" in line:
                return line.split("JobID")[-1].strip()
        raise FlinkClusterError(
            f"flink run {script} failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-3000:]}"
        )

    def job_diagnosis(self, job_id: str, seen: str = "") -> str:
        """One line for a failure message: why a TaskManager started here stopped, when one did (first: long
        messages get cut), what the caller saw (``seen``), the job's state now, the TaskManagers the JobManager
        lists and the job's latest root exception."""
        rest = self.rest()
        registered = self.taskmanager_ids()
        missing = [node_id for node_id in self.local_taskmanagers() if node_id not in registered]
        causes = "".join(
            f"TaskManager {node_id} not registered, why: "
            f"{stop_causes(self.root / 'tm' / node_id) or 'no cause logged'}; "
            for node_id in missing
        )
        gone = {
            node_id: ("running" if daemon_pids(self.root / "tm" / node_id) else "exited")
            + f": {log_tail(self.root / 'tm' / node_id, 5)}"
            for node_id in missing
        }
        return (
            f"{causes}{seen}; job state {rest.job(job_id)['state']}; TaskManagers registered: {registered}"
            f"{f', started here and not registered: {gone}' if gone else ''}; "
            f"root exception: {rest.failure_cause(job_id) or 'none'}"
        )

    def cancel_all(self) -> None:
        """Cancel every running job."""
        rest = self.rest(5.0)
        for job in rest.get("/jobs").get("jobs", []):
            if job["status"] not in ("FINISHED", "CANCELED", "FAILED"):
                rest.patch(f"/jobs/{job['id']}?mode=cancel")

    def stop(self) -> None:
        """Stop every TaskManager and the JobManager started under ``root``."""
        for node_id in self.local_taskmanagers():
            try:
                self.stop_taskmanager(node_id)
            except FlinkClusterError:
                pass
        jm = self.root / "jobmanager"
        if jm.exists():
            self._script(jm, "jobmanager.sh", "stop")
