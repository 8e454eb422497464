"""Apply a scaling plan to Spark: desired state for the job's agent, acknowledgement, verification, rollback.

Per operator of the plan:

1. The target ``{node type: n}`` becomes one executor profile: Spark runs one profile per operator (one
   streaming query = one Spark application with one executor size). A target mixing node types is realised as
   its total on the type with the most replicas (ties: the node type with more cores, then the faster one);
   ``ApplyResult.details[op]["collapsed_from"]`` records the original target.
2. A new generation of the desired state ``{executors: n, profile: {name, cores, memoryMiB}}`` is written to
   the ``connectors.spark.store.SparkStore`` the control plane serves the agent from; the agent in the driver applies it live (same cores/memory) or by
   a restart from the checkpoint (other cores/memory) and acknowledges it.
3. The realizer waits at most ``apply_timeout_s`` for the acknowledgement, then verifies the executor count on
   the driver's REST API (the agent's reported count when no UI is reachable); after a restart the count must
   hold for ``RESTART_SETTLE_S`` (a surplus executor granted to the new application can register late).
4. On timeout, an error in the acknowledgement or a count mismatch, the previous desired state is written again
   (a new generation: the agent returns to it) and the result is ``ok=False, rolled_back=True`` with the error.
   When nothing was desired before (the driver started from its own settings), the previous state is what ran
   before the apply (the executors seen then, on their node type's profile).
5. The driver gone (killed, crashed: no heartbeat from its agent for ``driver_silence_s`` and its UI
   unreachable) while waiting: the wait ends at once, the previous desired state is written again (a restarted
   driver starts with it: the agent reads the desired state at start) and the result is ``ok=False,
   rolled_back=False`` (nothing runs), ``details[op]["driver_gone"]`` with the reason and
   ``details[op]["restored_desired"]`` the generation of the previous allocation. A driver already gone before
   the apply gets nothing written (a driver that comes back must not pick up a stale target): ``ok=False``,
   "nothing applied". ``current()`` reports no executor for an operator whose driver is gone (never the
   agent's last count).

``ApplyResult.downtime_s`` is the largest downtime (s) the agents measured (0 for live changes); the per-operator
``details`` hold ``generation``, ``downtime_s``, ``duration_s`` (request to verified, s) and ``verified``.
"""

from __future__ import annotations

import time
from typing import Any

from connectors.base import ApplyResult, Deployment, Realizer, ScalingPlan
from connectors.spark.monitor import Binding, rest_executors, running_deployment
from connectors.spark.store import Acknowledgement, DesiredState, SparkStore

POLL_S = 0.1  # s between reads of the acknowledgement / the executor count
#: a driver whose agent has not been heard of for this long (s) and whose UI does not answer is gone; the agent
#: sends a heartbeat every ``ship_interval_s`` (1 s by default) and backs off at most 10 s after a failed post
DRIVER_SILENCE_S = 20.0
#: s between two liveness checks of the driver while waiting for an acknowledgement
LIVENESS_EVERY_S = 1.0
#: after a restart (an acknowledgement with downtime) the executor count must read as desired for this long (s):
#: a surplus executor the master granted the new application before its limit can register after the first ones
RESTART_SETTLE_S = 3.0


def driver_gone(store: SparkStore, binding: Binding, silence_s: float = DRIVER_SILENCE_S) -> str:
    """Why the operator's Spark driver is gone (``""`` while it lives or was never seen): its agent silent for
    more than ``silence_s`` seconds and its driver UI not answering (or unknown)."""
    status = store.driver(binding.operator)
    if status is None:
        return ""
    silent_s = time.time() - status.last_seen
    if silent_s <= silence_s:
        return ""
    ui = binding.ui_url or status.ui_url or binding.fallback_ui_url
    if ui:
        try:
            rest_executors(ui, status.app_id if not binding.ui_url else "")
            return ""  # the UI answers: the driver lives, only its agent is silent
        except (OSError, ValueError, KeyError):
            pass
    where = f"its UI {ui} unreachable" if ui else "no driver UI known"
    return f"the Spark driver is gone: no heartbeat from its agent for {silent_s:.0f} s and {where}"


class SparkRealizer(Realizer):
    def __init__(
        self,
        bindings: dict[str, Binding],
        profiles: dict[str, dict[str, dict[str, Any]]],
        store: SparkStore,
        apply_timeout_s: float = 60.0,
        driver_silence_s: float = DRIVER_SILENCE_S,
    ) -> None:
        """``profiles``: operator -> node type -> ``{name, cores, memoryMiB, speedup}``; ``store``: where the
        desired state is written and the agent's side read; ``apply_timeout_s`` and ``driver_silence_s`` in
        seconds (see module docstring)."""
        self.bindings = bindings
        self.profiles = profiles
        self.store = store
        self.apply_timeout_s = apply_timeout_s
        self.driver_silence_s = driver_silence_s

    def current(self) -> dict[str, Deployment]:
        return {
            name: (
                {}
                if driver_gone(self.store, b, self.driver_silence_s)
                else running_deployment(self.store, b)[0]
            )
            for name, b in self.bindings.items()
        }

    def single_type(self, operator: str, target: Deployment) -> tuple[str, int]:
        """The one node type (and total executors) realising ``target`` (see module docstring)."""
        live = {t: int(n) for t, n in target.items() if int(n) > 0}
        total = sum(live.values())
        if not live:
            raise ValueError(f"operator {operator!r}: the target has no replica")
        known = self.profiles.get(operator, {})
        unknown = [t for t in live if t not in known]
        if unknown:
            raise ValueError(f"operator {operator!r}: unknown node type(s) {unknown} for this region")

        def rank(t: str) -> tuple:
            p = known[t]
            return (live[t], p.get("cores", 1), p.get("speedup", 1.0), t)

        return max(live, key=rank), total

    def apply(self, plan: ScalingPlan) -> ApplyResult:
        store = self.store
        details: dict[str, Any] = {}
        errors: list[str] = []
        rolled_back = False
        downtime = 0.0
        for op_name, target in plan.targets.items():
            binding = self.bindings.get(op_name)
            if binding is None:
                errors.append(f"operator {op_name!r} is not controlled on Spark (no Deployment)")
                continue
            try:
                node_type, n = self.single_type(op_name, target)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            profile = {k: v for k, v in self.profiles[op_name][node_type].items() if k != "speedup"}
            gone = driver_gone(store, binding, self.driver_silence_s)
            if gone:  # nothing written: a driver that comes back must not pick up a stale target
                errors.append(f"operator {op_name!r}: {gone}; nothing applied")
                details[op_name] = {"driver_gone": gone, "verified": False}
                continue
            previous = store.desired(binding.operator)
            if not (previous.generation > 0 and previous.executors):
                previous = self._running_as_desired(op_name, binding)
            t0 = time.monotonic()
            gen = store.set_desired(binding.operator, n, profile)
            info: dict[str, Any] = {"generation": gen, "executors": n, "node_type": node_type}
            if len([t for t, k in target.items() if k > 0]) > 1:
                info["collapsed_from"] = dict(target)
            ok, error, ack = self._await(binding, gen, n, node_type)
            info.update(duration_s=round(time.monotonic() - t0, 3), verified=ok)
            if ack is not None:
                info["downtime_s"] = ack.downtime_s
                downtime = max(downtime, ack.downtime_s)
            gone = "" if ok else driver_gone(store, binding, self.driver_silence_s)
            if gone:  # the driver died meanwhile: restore the previous desired state, no one to wait for
                errors.append(f"operator {op_name!r}: {error}")
                info.update(error=error, driver_gone=gone)
                if previous.executors:
                    info["restored_desired"] = store.set_desired(
                        binding.operator, previous.executors, previous.profile or {}
                    )
                details[op_name] = info
                continue
            if not ok:
                errors.append(f"operator {op_name!r}: {error}")
                info["error"] = error
                if previous.executors:
                    back = store.set_desired(binding.operator, previous.executors, previous.profile or {})
                    info["rollback_generation"] = back
                    rolled_back = True
                    prev_type = (previous.profile or {}).get("name", node_type)
                    back_ok, back_err, _ = self._await(binding, back, previous.executors, prev_type)
                    info["rollback_verified"] = back_ok
                    if not back_ok:
                        info["rollback_error"] = back_err
            details[op_name] = info
        return ApplyResult(
            ok=not errors,
            deployments=self.current(),
            downtime_s=downtime,
            error="; ".join(errors),
            rolled_back=rolled_back,
            details=details,
        )

    def _running_as_desired(self, operator: str, binding: Binding) -> DesiredState:
        """What runs now as a desired state (generation 0), for an operator whose driver started from its own
        settings (nothing desired yet); no executors when it cannot be expressed."""
        running, _ = running_deployment(self.store, binding)
        live = {t: n for t, n in running.items() if n > 0}
        if len(live) == 1 and next(iter(live)) in self.profiles.get(operator, {}):
            node_type, n = next(iter(live.items()))
            profile = {k: v for k, v in self.profiles[operator][node_type].items() if k != "speedup"}
            return DesiredState(0, n, profile)
        return DesiredState(0, None, None)

    def _await(
        self, binding: Binding, generation: int, n: int, node_type: str
    ) -> tuple[bool, str, Acknowledgement | None]:
        """``(ok, error, ack)`` once the agent acknowledged ``generation`` (or a later one) and ``n`` executors
        are running, or the timeout passed."""
        started = time.monotonic()
        deadline = started + self.apply_timeout_s
        next_check = started + LIVENESS_EVERY_S
        ack = None
        while time.monotonic() < deadline:
            ack = self.store.acknowledgement(binding.operator, generation)
            if ack is not None:
                break
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + LIVENESS_EVERY_S
                gone = driver_gone(self.store, binding, self.driver_silence_s)
                if gone:
                    waited = time.monotonic() - started
                    return False, f"no acknowledgement after {waited:.0f} s: {gone}", None
            time.sleep(POLL_S)
        if ack is None:
            return False, f"no acknowledgement from the Spark job within {self.apply_timeout_s:.0f} s", None
        if ack.error:
            return False, f"the Spark job failed to apply generation {generation}: {ack.error}", ack
        seen: Deployment = {}
        settle_s = RESTART_SETTLE_S if ack.downtime_s > 0 else 0.0
        held_since: float | None = None
        while True:  # the REST API can lag the agent's own view by a moment
            seen, source = running_deployment(self.store, binding)
            if sum(seen.values()) == n:
                now = time.monotonic()
                held_since = now if held_since is None else held_since
                if now - held_since >= settle_s:
                    return True, "", ack
            else:
                held_since = None
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        return (
            False,
            f"verification: {seen or 'no executor'} running ({source}), {n} x {node_type} desired",
            ack,
        )
