"""A Spark standalone cluster on 127.0.0.1 from the pip package alone (no ``sbin/`` scripts are shipped).

``SPARK_HOME`` is the installed ``pyspark`` package; processes are started with
``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master|worker.Worker`` in their own process group
(a worker's executors are its children, so stopping the group stops them too), logs go to
``<var dir>/spark/<name>.log``. Readiness is read from the master's ``/json/`` (workers, cores, used cores,
applications). Ports default to free ones (bound to port 0 first), so parallel runs do not collide.

Usage::

    with StandaloneCluster(var_dir) as cluster:           # a master
        cluster.add_worker(cores=1, memory_mb=1024)        # waits until the master lists it ALIVE
        cluster.master_url                                 # spark://127.0.0.1:<port>
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: how long (s) a running master or worker may take to be ready; one that exits fails at once (a liveness bound:
#: Flink's daemons took over 60 s on this 2-core host at load 16)
READY_TIMEOUT_S = 240.0


def spark_home() -> Path:
    """The installed ``pyspark`` package (the project's ``[spark]`` extra); RuntimeError when it is missing, so a
    node provider reports it like any other failure to start a Spark process."""
    try:
        import pyspark
    except ImportError as exc:
        raise RuntimeError(
            "pyspark is not installed: Spark processes need the project's [spark] extra (pip install '.[spark]')"
        ) from exc

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_HOME", str(spark_home()))
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.setdefault("SPARK_NO_DAEMONIZE", "1")
    return env


def master_json(web_url: str, timeout_s: float = 3.0) -> dict[str, Any]:
    """The master's ``/json/`` (workers, cores, coresused, activeapps, ...). ``OSError`` when the master cannot be
    asked, and when the answer is not JSON: a starting master once answered ``/json/`` with its HTML page on a
    loaded machine (its UI listening before all of its handlers were attached, presumably), a master not ready
    yet rather than a failed start."""
    url = web_url.rstrip("/") + "/json/"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        body = resp.read()
    try:
        return json.loads(body)
    except ValueError as exc:
        raise OSError(f"{url} answered no JSON (a master UI still starting?): {exc}") from None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def stop_group(pid: int, timeout_s: float = 15.0) -> None:
    """SIGTERM the process group led by ``pid``, SIGKILL it after ``timeout_s``."""
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not process_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)  # leftovers of the group (executors)
                except (ProcessLookupError, PermissionError):
                    pass
                return
            time.sleep(0.1)


def _spawn(cls: str, args: list[str], log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=spark_env(),
            start_new_session=True,
        )


def resources_conf(work_dir: Path, resources: dict[str, int]) -> Path:
    """A worker properties file pointing at a resources file that advertises ``resources`` (name -> amount;
    addresses ``0..amount-1``), so no discovery script is needed. Returns the properties file."""
    for res, amount in resources.items():
        if not res or not all(c.isalnum() or c == "_" for c in res):
            raise ValueError(f"resource name {res!r}: letters, digits and _ only")
        if int(amount) < 1:
            raise ValueError(f"resource {res!r}: amount must be >= 1, got {amount}")
    allocations = [
        {
            "id": {"componentName": "spark.worker", "resourceName": res},
            "addresses": [str(i) for i in range(int(n))],
        }
        for res, n in sorted(resources.items())
    ]
    res_file = work_dir / "resources.json"
    res_file.write_text(json.dumps(allocations))
    props = work_dir / "worker.properties"
    props.write_text(f"spark.worker.resourcesFile {res_file}\n")
    return props


@dataclass
class WorkerProcess:
    """One standalone Worker: pid (= its process group), cores, memory (MiB), web UI port, master's id."""

    pid: int
    cores: int
    memory_mb: int
    webui_port: int
    log: str
    worker_id: str = ""
    resources: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def start_worker(
    master_url: str,
    master_web_url: str,
    cores: int,
    memory_mb: int,
    log_dir: Path,
    name: str = "worker",
    wait: bool = True,
    resources: dict[str, int] | None = None,
) -> WorkerProcess:
    """Start a Worker of ``cores`` and ``memory_mb`` MiB registered with the master; waits until it is ALIVE.

    ``resources``: custom resources the worker advertises, name -> amount (e.g. ``{"nodetype_small": 2}``);
    executors that request ``spark.executor.resource.<name>.amount`` are placed only on workers offering it.
    """
    port = free_port()
    work_dir = log_dir / f"{name}-{port}"
    work_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "--host",
        "127.0.0.1",
        "--cores",
        str(cores),
        "--memory",
        f"{memory_mb}m",
        "--webui-port",
        str(port),
        "--work-dir",
        str(work_dir),
    ]
    if resources:
        args += ["--properties-file", str(resources_conf(work_dir, resources))]
    args.append(master_url)
    proc = _spawn("org.apache.spark.deploy.worker.Worker", args, log_dir / f"{name}-{port}.log")
    w = WorkerProcess(
        proc.pid, cores, memory_mb, port, str(log_dir / f"{name}-{port}.log"), resources=dict(resources or {})
    )
    if wait:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark worker exited with {proc.returncode}; see {w.log}")
            found = find_worker(master_web_url, port)
            if found and found.get("state") == "ALIVE":
                w.worker_id = found["id"]
                return w
            time.sleep(0.3)
        stop_group(proc.pid)
        raise RuntimeError(f"the Spark worker did not register within {READY_TIMEOUT_S:.0f} s; see {w.log}")
    return w


def find_worker(master_web_url: str, webui_port: int) -> dict[str, Any] | None:
    """The master's entry of the worker whose web UI listens on ``webui_port``."""
    try:
        workers = master_json(master_web_url).get("workers", [])
    except OSError:
        return None
    for entry in workers:
        if str(entry.get("webuiaddress", "")).rstrip("/").endswith(f":{webui_port}") and entry.get(
            "state"
        ) in ("ALIVE", "UNKNOWN"):
            return entry
    return None


class StandaloneCluster:
    """A master (and workers) on 127.0.0.1, stopped as a whole by ``stop()`` / the context manager."""

    def __init__(self, var_dir: str | Path, port: int | None = None, webui_port: int | None = None) -> None:
        self.log_dir = Path(var_dir) / "spark"
        self.port = port or free_port()
        self.webui_port = webui_port or free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.web_url = f"http://127.0.0.1:{self.webui_port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[WorkerProcess] = []

    def start(self) -> StandaloneCluster:
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port)]
        self.master = _spawn("org.apache.spark.deploy.master.Master", args, self.log_dir / "master.log")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                raise RuntimeError(f"the Spark master exited; see {self.log_dir / 'master.log'}")
            try:
                if master_json(self.web_url).get("status") == "ALIVE":
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the Spark master did not start within {READY_TIMEOUT_S:.0f} s")

    def add_worker(
        self, cores: int, memory_mb: int, resources: dict[str, int] | None = None
    ) -> WorkerProcess:
        w = start_worker(self.master_url, self.web_url, cores, memory_mb, self.log_dir, resources=resources)
        self.workers.append(w)
        return w

    def remove_worker(self, worker: WorkerProcess) -> None:
        stop_group(worker.pid)
        self.workers = [w for w in self.workers if w.pid != worker.pid]

    def state(self) -> dict[str, Any]:
        return master_json(self.web_url)

    def stop(self) -> None:
        for w in list(self.workers):
            stop_group(w.pid)
        self.workers = []
        if self.master is not None:
            stop_group(self.master.pid)
            self.master.wait(timeout=10)
            self.master = None

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
