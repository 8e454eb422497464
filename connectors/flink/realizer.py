"""Apply per-vertex parallelism to a running Flink job through the adaptive scheduler's resource requirements.

``apply(plan)``: parallelism of an operator = total replicas of its target deployment (node types are TaskManager
profiles; Flink places subtasks on any free slot, so the mix of types is realised by the node provider, not per
vertex). Steps:

0. a job that is restarting (a failover, a TaskManager lost, the scheduler taking up new slots) is waited for
   until it and every vertex are RUNNING again (at most ``timeout_s``; else nothing is applied and the apply
   fails with the reason), so that the change starts from the parallelism actually running;
1. ``GET /jobs/:id/resource-requirements``, set ``upperBound`` = target parallelism (``lowerBound`` 1) of every
   changed vertex, ``PUT`` it back;
2. poll the job every ``POLL_S`` until every changed vertex reports its target parallelism and every vertex is
   RUNNING; the downtime (s) is the time from the first poll that saw a vertex leave RUNNING (or the job leave
   RUNNING) until all are RUNNING again. A restart shorter than one poll (the REST server caches job details for
   ``web.refresh-interval``) is taken from the job's own status timestamps instead: RUNNING minus RESTARTING,
   when both fall after the request;
3. failure: the job came back RUNNING below the target with no free slot left (insufficient slots), or
   ``timeout_s`` passed, or after ``SLOT_GRACE_S`` the target still exceeds the cluster's slots -> the previous
   requirements are PUT back and waited for (``ok=False``, the error names the vertices, targets, what was
   reached and the free/total slots; ``rolled_back=True`` only when the previous parallelism runs again, else
   the error says why the restore was not verified);
4. the job failed or was cancelled during the rescale (a terminal state: FAILED, CANCELED, FINISHED) -> nothing
   can be restored: ``ok=False, rolled_back=False``, ``details["job_gone"]``, the error names the state and the
   deployments are empty (nothing runs); so are they when no job of that name/id runs at all. The JobManager
   unreachable -> ``ok=False`` with the reason (``details["unavailable"]``), never an exception; a request it
   answers with a client error (4xx, e.g. a bound above the job's max parallelism) -> ``ok=False``,
   ``details["refused"]``, nothing applied. After any
   failure the deployments the realizer (and the monitor) report are the previous ones, never the target.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from connectors.base import ApplyResult, ConnectorError, Deployment, Realizer, ScalingPlan
from connectors.flink.binding import BindingError
from connectors.flink.monitor import FlinkJob, JobNotRunning, spread
from connectors.flink.rest import FlinkRestError

POLL_S = 0.2
#: after this long (s) a target above the cluster's total slots is reported instead of waiting for the timeout
SLOT_GRACE_S = 8.0


TERMINAL = ("FINISHED", "CANCELED", "FAILED")
#: how the reason of a failed wait starts when the job reached a terminal state meanwhile
JOB_GONE = "job gone"


def _steady(job: dict) -> bool:
    """The job and each of its vertices are RUNNING (not restarting, not scheduling)."""
    return job.get("state") == "RUNNING" and all(
        v.get("status") == "RUNNING" for v in job.get("vertices", [])
    )


def _restart_span_s(job: dict, since_ms: float) -> float:
    """Seconds between the job's last RESTARTING and its last RUNNING status, if both came after ``since_ms``
    (epoch ms); 0.0 when the job did not restart since then (or does not report its timestamps)."""
    stamps = job.get("timestamps") or {}
    down, up = float(stamps.get("RESTARTING") or 0), float(stamps.get("RUNNING") or 0)
    if down >= since_ms and up >= down:
        return round((up - down) / 1000.0, 3)
    return 0.0


class FlinkRealizer(Realizer):
    def __init__(self, job: FlinkJob, deployments: dict[str, Deployment], timeout_s: float = 60.0) -> None:
        self.job = job
        self.deployments = {k: dict(v) for k, v in deployments.items()}
        self.timeout_s = timeout_s

    def _known(self) -> dict[str, Deployment]:
        """The deployments last applied (when the engine cannot be asked)."""
        return {k: dict(v) for k, v in self.deployments.items()}

    def current(self) -> dict[str, Deployment]:
        _, _, bound = self.job.snapshot()
        return {op: spread(self.deployments.get(op, {}), v.parallelism) for op, v in bound.items()}

    def apply(self, plan: ScalingPlan) -> ApplyResult:
        """Apply ``plan`` (see module docstring); never raises for an unreachable JobManager or a vanished job:
        the result says what happened (``ok=False`` with the reason)."""
        known = self._known()
        try:
            return self._apply(plan, known)
        except BindingError:
            raise
        except JobNotRunning as exc:  # the JobManager answers but runs no such job: nothing runs
            self._keep(known)
            nothing = {op: {} for op in {*known, *plan.targets}}
            return ApplyResult(False, nothing, error=f"Flink unavailable: {exc}", details={"job_gone": True})
        except ConnectorError as exc:  # unreachable before the request (nothing applied) or while reading it
            self._keep(known)
            if (
                isinstance(exc, FlinkRestError) and 400 <= exc.status < 500
            ):  # it answered: the request is refused
                error = f"Flink refused the reconfiguration: {exc}"
                return ApplyResult(False, known, error=error, details={"refused": True})
            return ApplyResult(False, known, error=f"Flink unavailable: {exc}", details={"unavailable": True})

    def _apply(self, plan: ScalingPlan, known: dict[str, Deployment]) -> ApplyResult:
        job_id, job, bound = self.job.snapshot()
        if not _steady(job):  # mid-restart (a failover, another rescale): parallelism is in flux, wait it out
            waited = self._await_steady(job_id, time.monotonic() + self.timeout_s)
            if waited is None:
                return ApplyResult(
                    False, self._known(),
                    error=f"job {job_id} did not return to RUNNING within {self.timeout_s:.0f} s: nothing applied",
                )  # fmt: skip
            job_id, job, bound = self.job.snapshot()
        targets: dict[str, int] = {}
        for op, dep in plan.targets.items():
            if op not in bound:
                return ApplyResult(
                    False, self.current(), error=f"operator {op!r} is not bound to a job vertex"
                )
            n = sum(int(x) for x in dep.values())
            if n < 1:
                return ApplyResult(
                    False, self.current(), error=f"operator {op!r}: target parallelism {n} < 1"
                )
            targets[op] = n
        before = self.job.rest.resource_requirements(job_id)
        wanted = copy.deepcopy(before)
        changed = {bound[op].id: n for op, n in targets.items() if bound[op].parallelism != n}
        for vid, n in changed.items():
            wanted[vid] = {"parallelism": {"lowerBound": 1, "upperBound": n}}
        for op, dep in plan.targets.items():
            self.deployments[op] = {t: int(x) for t, x in dep.items() if int(x) > 0}
        if not changed:
            return ApplyResult(True, self.current(), details={"job": job_id, "unchanged": True})
        started = time.monotonic()
        requested_ms = time.time() * 1000.0
        self.job.rest.set_resource_requirements(job_id, wanted)
        ok, downtime, reached, why = self._await(job_id, changed, started + self.timeout_s)
        gone = not ok and why.startswith(JOB_GONE)
        # a restart that fell between two polls: ask the job when it stopped and resumed
        if ok and downtime == 0.0:
            downtime = _restart_span_s(self._job_or_empty(job_id), requested_ms)
        details: dict[str, Any] = {"job": job_id, "targets": changed, "reached": reached,
                                   "elapsed_s": round(time.monotonic() - started, 3)}  # fmt: skip
        if ok:
            return ApplyResult(True, self.current(), downtime_s=downtime, details=details)
        names = {v.id: v.name for v in bound.values()}
        error = (
            "; ".join(
                f"vertex {names.get(vid, vid)!r}: target parallelism {n}, reached {reached.get(vid)}"
                for vid, n in changed.items()
            )
            + f" ({why})"
        )
        self._keep(known)  # not applied: the engine runs (at most) what ran before
        if gone:  # the job failed or was cancelled: no parallelism to restore, nothing runs
            details.update(restored=False, job_gone=True)
            nothing = {op: {} for op in bound}
            return ApplyResult(False, nothing, downtime_s=downtime, error=f"{error}; nothing to restore",
                               details=details)  # fmt: skip
        previous = {vid: int(before[vid]["parallelism"]["upperBound"]) for vid in changed}
        try:
            self.job.rest.set_resource_requirements(job_id, before)
        except FlinkRestError as exc:  # the job ended or the JobManager went away meanwhile
            details.update(restored=False, restore_error=str(exc)[:300])
            return ApplyResult(False, known, downtime_s=downtime, error=f"{error}; restore failed: {exc}",
                               rolled_back=False, details=details)  # fmt: skip
        restored, back_down, back_reached, back_why = self._await(
            job_id, previous, time.monotonic() + self.timeout_s
        )
        details.update(restored=restored, rollback_downtime_s=back_down)
        if not restored:  # rolled back only when the previous parallelism runs again
            error += f"; restore not verified: reached {back_reached} ({back_why})"
        return ApplyResult(
            False,
            self._current_or({op: {} for op in bound} if back_why.startswith(JOB_GONE) else known),
            downtime_s=downtime + back_down,
            error=error,
            rolled_back=restored,
            details=details,
        )

    def _keep(self, deployments: dict[str, Deployment]) -> None:
        """Make ``deployments`` the last applied ones (in place: the monitor shares the dict)."""
        self.deployments.clear()
        self.deployments.update({k: dict(v) for k, v in deployments.items()})

    def _current_or(self, fallback: dict[str, Deployment]) -> dict[str, Deployment]:
        """``current()``, or ``fallback`` when the JobManager or the job cannot be read."""
        try:
            return self.current()
        except ConnectorError:
            return fallback

    def _job_or_empty(self, job_id: str) -> dict:
        try:
            return self.job.rest.job(job_id)
        except FlinkRestError:
            return {}

    def _await_steady(self, job_id: str, deadline: float) -> dict | None:
        """Poll until the job and every vertex are RUNNING; the job, or None at ``deadline`` or a terminal state."""
        while True:
            job = self._job_or_empty(job_id)
            if _steady(job):
                return job
            if job.get("state") in TERMINAL or time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)

    def _await(self, job_id: str, targets: dict[str, int], deadline: float) -> tuple[bool, float, dict, str]:
        """Poll until ``targets`` (vertex id -> parallelism) are reached with every vertex RUNNING.

        Returns (ok, downtime s, vertex id -> parallelism reached, reason of a failure)."""
        down_since: float | None = None
        started = time.monotonic()
        downtime = 0.0
        reached: dict[str, int] = {}
        restarted = False
        while True:
            now = time.monotonic()
            try:
                job = self.job.rest.job(job_id)
            except FlinkRestError as exc:
                job, why = {}, str(exc)
            running = _steady(job)
            reached = {v["id"]: int(v["parallelism"]) for v in job.get("vertices", []) if v["id"] in targets}
            if not running:
                restarted = True
                if down_since is None:
                    down_since = now
            elif down_since is not None:
                downtime += now - down_since
                down_since = None
            if running and reached and all(reached.get(vid) == n for vid, n in targets.items()):
                return True, downtime, reached, ""
            if job.get("state") in TERMINAL:  # failed or cancelled: it will never reach the targets
                return False, downtime, reached, f"{JOB_GONE}: {job_id} is {job['state']}"
            if running and (restarted or now - started > SLOT_GRACE_S):
                slots = self._slots()
                needed = max(targets.values())
                if slots and slots[1] < needed and (restarted or slots[0] == 0):
                    why = f"insufficient slots: {needed} needed, {slots[1]} in the cluster ({slots[0]} free)"
                    return False, downtime, reached, why
            if now > deadline:
                if down_since is not None:
                    downtime += now - down_since
                slots = self._slots()
                why = f"timeout after {self.timeout_s:.0f} s; slots free/total {slots}"
                return False, downtime, reached, why
            time.sleep(POLL_S)

    def _slots(self) -> tuple[int, int] | None:
        try:
            o = self.job.rest.get("/overview")
            return int(o["slots-available"]), int(o["slots-total"])
        except (FlinkRestError, KeyError):
            return None
