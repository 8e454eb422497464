"""The connector contract (tests/connectors/connector_contract.py) on a real PySpark structured-streaming job on the
module's standalone cluster (``cluster``: two workers of 2 cores and 2048 MiB): the memory-sink word count of
``wordcount``, fed a file whenever it has caught up (at most one a second), its driver agent shipping to an
in-memory ingest endpoint (``store_ingest``: the control plane's ingest contract over an ``InMemorySparkStore``, no
database, so the four tests share one driver); observed, scaled live by one executor, asked for more executors
than the cluster's 4 cores hold (rolled back), and its streaming query stopped for the period without data (the
contract's last test; restarted from its checkpoint afterwards)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from connector_contract import ConnectorContract, Harness

from connectors.base import Deployment, Period, PeriodMetrics, ScalingPlan
from connectors.http_fetch import FetchError
from connectors.spark.monitor import rest_executors
from connectors.spark.store import InMemorySparkStore
from tests.celery_procs import wait_until
from tests.connectors.spark.memory_wc import KEY, wc_connector
from tests.connectors.spark.store_ingest import StoreIngest
from tests.connectors.spark.wordcount import build_query_factory, start_agent, write_words

pytestmark = pytest.mark.slow

#: the query's trigger interval (s) and the length of an observed period (s): ten micro-batches
TRIGGER_S = 1.0
PERIOD_S = 10.0
#: the engine's own report is awaited; the bound only stops a hung test (a loaded 2-core machine is slow)
WAIT_S = 300.0
#: how long the agent waits for the executors of a change (s: the agent's default; an executor JVM took over 30 s to
#: register at load 15), and the realizer for the agent's acknowledgement
AGENT_APPLY_TIMEOUT_S = 60.0
APPLY_TIMEOUT_S = 150.0
#: executors of a 1-core profile the cluster cannot run: 4 cores in all
UNSATISFIABLE_SMALL = 9
#: the words of one input file
WORDS = {"alpha": 20, "beta": 10, "gamma": 5}


class Feeder:
    """Writes a small file of words (``WORDS``) at most every trigger interval while the query keeps up, so that
    micro-batches carry rows and a slow machine's query never falls ever further behind: a file is written only
    when at most one written file is not processed yet (``processed()``: rows the stored progress counts)."""

    def __init__(self, directory: Path, processed: Callable[[], int]) -> None:
        self.directory = directory
        self.processed = processed
        self.files = 0
        self.rows = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="contract-feeder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        per_file = sum(WORDS.values())
        while not self._stop.is_set():
            if self.rows - self.processed() <= per_file:
                self.rows += write_words(self.directory, f"f{self.files:05d}.json", WORDS)
                self.files += 1
                self._stop.wait(TRIGGER_S)
            else:
                self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def wait_for(predicate, what: str):
    """``predicate()``'s first truthy value, polled until ``WAIT_S`` (only a hung engine takes that long)."""
    return wait_until(predicate, WAIT_S, what, step=0.5)


def executors(ui_url: str) -> int | None:
    """The executors the driver's REST API lists, None while it does not answer (a loaded machine)."""
    try:
        return len(rest_executors(ui_url))
    except FetchError:
        return None


@pytest.fixture(scope="module")
def harness(cluster, tmp_path_factory):
    store = InMemorySparkStore()
    token = "ssi_" + secrets.token_urlsafe(24)
    work = tmp_path_factory.mktemp("spark-contract")
    in_dir = work / "in"
    in_dir.mkdir()
    build_query = build_query_factory(in_dir, work / "ck")
    feeder = Feeder(in_dir, lambda: sum(r.num_input_rows for r in store.progress(KEY, 0, time.time() + 60)))
    ingest = StoreIngest(store, "wc", {"counter": KEY}, token).start()
    conn = wc_connector(store, batch_interval_s=TRIGGER_S, apply_timeout_s=APPLY_TIMEOUT_S)
    slots = iter(range(1, 100_000))
    agent = None

    def period(start: float, end: float) -> PeriodMetrics:
        return conn.monitor.collect(Period(next(slots), start, end))

    def complete_period() -> PeriodMetrics:
        deadline = time.monotonic() + WAIT_S
        while True:
            now = time.time()
            metrics = period(now - PERIOD_S, now)
            if metrics.complete or time.monotonic() > deadline:
                return metrics
            time.sleep(1)

    def scaled(current: dict[str, Deployment]) -> ScalingPlan:
        return ScalingPlan({"counter": {"small": sum(current["counter"].values()) + 1}}, 1)

    def unsatisfiable(current: dict[str, Deployment]) -> ScalingPlan:
        return ScalingPlan({"counter": {"small": UNSATISFIABLE_SMALL}}, 2)

    def without_data() -> PeriodMetrics:
        """The streaming query stopped (its driver, agent and executors live on): a period after the stop
        holds no micro-batch. The query is restarted from its checkpoint afterwards."""
        feeder.stop()
        agent.query.stop()
        start = time.time()
        time.sleep(PERIOD_S + 2 * TRIGGER_S)  # the period is over and the agent has shipped what it had
        try:
            return period(start, start + PERIOD_S)
        finally:
            agent.query = build_query(agent.spark)
            feeder.start()

    try:
        agent = start_agent(build_query, cluster.master_url, ingest.url, token, AGENT_APPLY_TIMEOUT_S)
        feeder.start()
        # the first batches ran (executors up, the query past its start-up) and surplus executors granted before
        # the limit reached the master are gone: the engine runs what it was started with
        wait_for(lambda: len(store.progress(KEY, 0, time.time() + 60)) >= 3, "three micro-batches")
        ui = agent.driver_info()["uiUrl"]
        wait_for(lambda: executors(ui) == 1, "one executor")
        yield Harness(conn, ["counter"], complete_period, scaled, unsatisfiable, without_data)
    finally:
        feeder.stop()
        try:
            if agent is not None:
                agent.stop()
        finally:
            ingest.stop()


class TestSparkConnectorContract(ConnectorContract):
    """The four guarantees, in order (the last one stops the streaming query for a period)."""
