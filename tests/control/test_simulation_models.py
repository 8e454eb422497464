"""The model a simulation of an application runs each operator on (``autoscaler.control.am.simulation_models``):
the engine model its OM fitted from its own metrics once there is one (a Spark operator's micro-batch model),
else the M/G/1 queue of the learned service time; the AM's BO and the what-if replay both simulate with it
(issue 21, item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.control.agents import load_policy
from autoscaler.control.am import simulation_models
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import AgentState, ApplicationControl
from autoscaler.control.rails import effective_rails_data, parse_rails
from autoscaler.control.tick import run_tick
from autoscaler.control.topology import topology
from dashboard.monitor import whatif
from dashboard.tasks import rollup_all
from policies.engine_model import MicroBatchQueueModel
from policies.operator_model import QueueModel
from tests.policies.test_model_based_engine import A_S, B_S, MicroBatchEngine

pytestmark = pytest.mark.django_db

BASE_SLOT = 29_000_000  # 60 s periods of the Taxi trace


def test_the_whatif_replays_an_operator_on_the_engine_model_its_om_fitted():
    app = simulated_pipeline("mb", n_operators=1, om_policy="model-based", om_params={"capacity_bound": True})
    for slot in range(BASE_SLOT, BASE_SLOT + 30):
        run_tick(app.pk, slot)
    rollup_all()
    topo = topology(app)
    (model,) = simulation_models(app, topo)
    assert type(model) is QueueModel  # the simulated engine reports no micro-batches: no engine model
    params = whatif.validate(app, {"policy": "threshold"})[0]
    on_queue = whatif.run(app, params)["simulated"]

    # the operator's OM goes through micro-batch periods (as on Spark) and stores what it learned
    op = topo.operators[0]
    control = ApplicationControl.objects.get(application=app)
    agent = AgentState.objects.get(operator=op)
    policy = load_policy(agent, op, topo, control, parse_rails(effective_rails_data(app, control)))
    engine, n_types = MicroBatchEngine(), len(topo.type_names)
    for k, rate in [(1, 20.0), (1, 30.0), (2, 40.0), (2, 60.0), (3, 90.0), (3, 50.0)]:
        for _ in range(3):
            obs = engine.period(k, rate)
            obs.deployment = np.array([k] + [0] * (n_types - 1))
            policy.step(obs)
    agent.blob = policy.state_bytes()
    agent.save()

    (model,) = simulation_models(app, topo)
    assert isinstance(model, MicroBatchQueueModel)
    assert model.overhead_s == pytest.approx(A_S, rel=1e-6) and model.service_mean_s == pytest.approx(
        B_S, rel=1e-6
    )
    # a batch overhead of 1 s against the pipeline's R_max of 100 ms: every replayed period violates
    on_engine = whatif.run(app, params)["simulated"]
    assert on_engine["violationFraction"] == 1.0 > on_queue["violationFraction"]
