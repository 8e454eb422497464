"""``spark-standalone`` node provider: a node = a Spark standalone Worker process of the node type's size.

Region ``provider.settings``:

- ``masterUrl`` (``spark://host:port``, required) and ``masterWebUi`` (``http://host:port``, required): the
  master the workers register with and whose ``/json/`` tells which workers exist and which host executors;
- ``managed`` (default ``true``): ``false`` for a user's own cluster: ``nodes()`` still reports the master's
  workers, but ``acquire``/``release`` raise ``ProviderError("workers are not managed")``;
- ``typedWorkers`` (default = ``managed``): a worker of node type ``T`` advertises the custom resource
  ``nodetype_<T>`` (amount = its cores, ``connectors.spark.placement``) and the connector makes the executors
  of an operator deployed on ``T`` request it, so node types of the same size (differing in speed or price)
  land on their own workers;
- ``memoryScale`` (default 1.0): worker memory = node type memoryMiB x this factor (at least 512 MiB);
- ``stateDir`` (default ``<AUTOSCALER_VAR_DIR>/spark-workers``): where the provider keeps, per region, the
  workers it started (``<region>.json``: node id -> pid, cores, memory, node type, web UI port), so that another
  process (a different Celery worker) can release them.

A node is busy while the master reports used cores on it (an executor runs there); busy nodes are refused by
``release`` (left running, not in the returned list). Workers run in their own process group on 127.0.0.1,
logs under the state directory.
"""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from connectors.infrastructure import Node, NodeProvider, NodeSpec, ProviderError, state_root
from connectors.processes import runs_with
from connectors.spark.cluster import master_json, start_worker, stop_group
from connectors.spark.placement import resource_name, typed_workers

#: how long ``release`` waits for the master to drop the stopped workers from its ALIVE list (s, upper bound)
RELEASE_DEREGISTER_S = 30.0


def _started_worker(entry: dict[str, Any]) -> bool:
    """Whether the pid of a state entry is still the Worker the provider started (its web UI port on the command
    line), not a process that took the pid since the Worker died."""
    pid = int(entry["pid"])
    return runs_with(pid, "org.apache.spark.deploy.worker.Worker") and runs_with(
        pid, "--webui-port", str(entry["webui_port"])
    )


def _default_state_dir() -> Path:
    return state_root() / "spark-workers"


class SparkWorkerProvider(NodeProvider):
    kind = "spark-standalone"

    def __init__(self, region_name: str, settings: dict[str, Any]) -> None:
        for key in ("masterUrl", "masterWebUi"):
            if not str(settings.get(key, "")):
                raise ValueError(f"region {region_name!r}: provider.settings.{key} is required")
        if not str(settings["masterUrl"]).startswith("spark://"):
            raise ValueError(f"region {region_name!r}: provider.settings.masterUrl must start with spark://")
        self.region = region_name
        self.master_url = str(settings["masterUrl"])
        self.web_url = str(settings["masterWebUi"]).rstrip("/")
        self.managed = bool(settings.get("managed", True))
        self.typed = typed_workers({"kind": self.kind, "settings": settings})
        self.memory_scale = float(settings.get("memoryScale", 1.0))
        self.state_dir = Path(settings.get("stateDir") or _default_state_dir())
        self.state_file = self.state_dir / f"{region_name}.json"

    # ---- durable bookkeeping ----------------------------------------------------------------------------
    @contextmanager
    def _state(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The region's started workers, read and written under an exclusive file lock."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / f"{self.region}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
            yield state
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
            tmp.replace(self.state_file)

    def _master_workers(self) -> dict[int, dict[str, Any]]:
        try:
            workers = master_json(self.web_url).get("workers", [])
        except OSError as exc:
            raise ProviderError(
                f"region {self.region!r}: the Spark master at {self.web_url} is unreachable: {exc}"
            ) from exc
        out = {}
        for w in workers:
            if w.get("state") != "ALIVE":
                continue
            port = str(w.get("webuiaddress", "")).rstrip("/").rsplit(":", 1)[-1]
            if port.isdigit():
                out[int(port)] = w
        return out

    # ---- NodeProvider -----------------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        alive = self._master_workers()
        with self._state() as state:
            ours = {int(v["webui_port"]): k for k, v in state.items()}
            types = {k: v["node_type"] for k, v in state.items()}
        out = []
        for port, w in sorted(alive.items()):
            node_id = ours.get(port, w["id"])
            out.append(
                Node(
                    node_id,
                    types.get(node_id, f"{w.get('cores')}c-{w.get('memory')}m"),
                    busy=int(w.get("coresused", 0)) > 0,
                    details={
                        "worker": w["id"],
                        "cores": w.get("cores"),
                        "coresUsed": w.get("coresused"),
                        "memoryMiB": w.get("memory"),
                        "managed": node_id in types,
                    },
                )
            )
        return out

    def acquire(self, spec: NodeSpec, count: int) -> list[Node]:
        if not self.managed:
            raise ProviderError(
                f"region {self.region!r}: workers are not managed (provider.settings.managed)"
            )
        memory = max(int(spec.memory_mb * self.memory_scale), 512)
        started: list[Node] = []
        for _ in range(count):
            try:
                w = start_worker(
                    self.master_url,
                    self.web_url,
                    spec.cores,
                    memory,
                    self.state_dir / "logs",
                    name=f"{self.region}-{spec.node_type}",
                    resources={resource_name(spec.node_type): spec.cores} if self.typed else None,
                )
            except (RuntimeError, OSError) as exc:
                raise ProviderError(
                    f"region {self.region!r}: starting a {spec.node_type} worker failed after "
                    f"{len(started)} of {count}: {exc}"
                ) from exc
            node_id = f"{self.region}-{spec.node_type}-{w.webui_port}"
            with self._state() as state:
                state[node_id] = {**w.to_json(), "node_type": spec.node_type}
            started.append(Node(node_id, spec.node_type, details={"worker": w.worker_id, "pid": w.pid}))
        return started

    def release(self, node_ids: list[str]) -> list[str]:
        if not self.managed:
            raise ProviderError(
                f"region {self.region!r}: workers are not managed (provider.settings.managed)"
            )
        alive = self._master_workers()
        stopped = []
        gone: set[int] = set()
        with self._state() as state:
            for node_id in node_ids:
                entry = state.get(node_id)
                if entry is None:
                    continue
                w = alive.get(int(entry["webui_port"]))
                if w is not None and int(w.get("coresused", 0)) > 0:
                    continue  # an executor runs there: refused
                if _started_worker(entry):
                    stop_group(int(entry["pid"]))
                del state[node_id]
                stopped.append(node_id)
                gone.add(int(entry["webui_port"]))
        self._wait_until_deregistered(gone)
        return stopped

    def _wait_until_deregistered(self, ports: set[int]) -> None:
        """Wait (at most ``RELEASE_DEREGISTER_S`` seconds) until the master lists none of the stopped workers'
        ports as ALIVE: it notices a dead worker asynchronously, and until then ``nodes()`` would show a released
        worker as an unmanaged node of the region."""
        deadline = time.monotonic() + RELEASE_DEREGISTER_S
        while ports and time.monotonic() < deadline:
            try:
                if not ports & set(self._master_workers()):
                    return
            except ProviderError:
                return  # the master is gone: nothing lists the workers any more
            time.sleep(0.2)

    def stop_all(self) -> list[str]:
        """Stop every worker this region's provider started, busy or not (tests, demo shutdown)."""
        with self._state() as state:
            ids = list(state)
            for entry in state.values():
                if _started_worker(entry):
                    stop_group(int(entry["pid"]))
            state.clear()
        return ids
