"""The Flink connector against a real local Flink cluster started from the apache-flink pip package.

One module-scoped cluster (JobManager + one 4-slot TaskManager) runs one bounded WordCount job driven by a slice
of the Taxi trace; the tests run in file order against it: metrics -> observation, a missing vertex rejected, a
rescale beyond the cluster's slots rolled back, TaskManager acquisition/release, and a live rescale of the
counter whose keyed state must come out exact once the job finishes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from connectors.base import Period, ScalingPlan
from connectors.flink.binding import BindingError
from connectors.flink.cluster import FlinkCluster, FlinkClusterError, TaskManagerProfile, flink_home
from connectors.flink.connector import build, check_settings
from connectors.flink.jobs import submit_wordcount
from connectors.flink.pipelines.trace_source import Schedule, expected_counts, load_rates, read_counts
from connectors.flink.provider import FlinkTaskManagerProvider
from connectors.infrastructure import NodeSpec
from policies.paths import taxi_trace

pytestmark = pytest.mark.slow

OPERATORS = ["sentences", "splitter", "counter", "top"]
STREAMS = [("sentences", "splitter"), ("splitter", "counter"), ("counter", "top")]
JOB = dict(trace_start=600, steps=30, step_s=4.0, rate_scale=0.5, duration_s=110.0, ticks_per_s=50.0,
           cost_ms=1.0, parallelism=2, job_name="wc-test")  # fmt: skip


@pytest.fixture(autouse=True)
def declared_endpoints(settings):
    """Staff declare the test clusters' JobManagers (free ports on 127.0.0.1) as engine endpoints."""
    settings.AUTOSCALER_ENGINE_ENDPOINTS = ["http://127.0.0.1:1024-65535"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        flink_home()
    except FlinkClusterError as exc:
        pytest.fail(f"{exc} (scripts/test.sh sources scripts/flink_env.sh)")
    root = tmp_path_factory.mktemp("flink")
    c = FlinkCluster(root)
    try:
        c.start()
        c.start_taskmanager("tm-base", TaskManagerProfile(slots=4, memory_mb=1536, node_type="vm.medium"))
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def job(cluster):
    counts_dir = Path(cluster.root) / "counts"
    job_id = submit_wordcount(cluster, taxi_trace(), counts_dir=counts_dir, **JOB)
    return {"id": job_id, "counts_dir": counts_dir, "submitted": time.time()}


@pytest.fixture
def connector(cluster, job):
    settings = {"restUrl": cluster.rest_url, "jobName": "wc-test", "applyTimeoutS": 45}
    return build(settings, OPERATORS, STREAMS, {"splitter": {"vm.small": 2}, "counter": {"vm.small": 2}})


def _vertex(cluster, job_id, name):
    return next(v for v in cluster.rest().job(job_id)["vertices"] if v["name"] == name)


def test_running_job_metrics_become_a_complete_observation(connector):
    deadline = time.time() + 90
    while True:
        now = time.time()
        metrics = connector.monitor.collect(Period(1, now - 10, now))
        backlog = metrics.operators["sentences"].backlog if "sentences" in metrics.operators else None
        if (metrics.complete and backlog is not None) or time.time() > deadline:
            break
        assert metrics.complete or metrics.reason  # incomplete periods always say why, never zeros
        assert all(m.input_rate is None for m in metrics.operators.values() if not m.complete)
        time.sleep(2)
    assert metrics.complete, metrics.reason
    ops = metrics.operators
    assert set(ops) == set(OPERATORS)
    assert ops["sentences"].input_rate > 0 and ops["sentences"].backlog is not None
    # each sentence has 5 words, 1 in 10 vocabulary words is filtered: the counter sees more than the source
    assert ops["counter"].input_rate > ops["sentences"].input_rate
    for name in ("splitter", "counter", "top"):
        assert 0 < ops[name].utilisation <= 1
        assert ops[name].service_time_mean_s > 0
    assert ops["splitter"].deployment == {"vm.small": 2} and ops["top"].deployment == {"slot": 1}
    e2e = metrics.path_response_time_s["sentences->splitter->counter->top"]
    assert 0 < e2e < 30
    # the path's time is shared among its operators (queueing estimates): the shares add up to the path's time
    shares = [ops[name].response_time_s for name in OPERATORS if ops[name].response_time_s is not None]
    assert {"splitter", "counter", "top"} <= {n for n in OPERATORS if ops[n].response_time_s is not None}
    assert sum(shares) == pytest.approx(e2e, rel=1e-6) and all(0 <= s <= e2e for s in shares)
    assert ops["counter"].response_time_p95_s >= ops["counter"].response_time_s


def test_binding_naming_a_missing_vertex_is_rejected_with_the_vertices(cluster, job):
    settings = {"restUrl": cluster.rest_url, "jobName": "wc-test"}
    found = check_settings(settings, OPERATORS)
    assert found["counter"].name == "counter" and found["splitter"].parallelism == 2
    with pytest.raises(BindingError) as err:
        check_settings({**settings, "vertices": {"counter": "count-words"}}, OPERATORS)
    assert "operator 'counter': no job vertex contains an operator named 'count-words'" in str(err.value)
    assert "counter" in err.value.vertices and any(v.endswith("sentences") for v in err.value.vertices)


@pytest.mark.django_db
def test_stored_application_binds_through_the_factory(cluster, job, django_user_model, tmp_path):
    from django.core.management import call_command

    from autoscaler.control.connectors import build_connector, check_binding
    from autoscaler.models import Application

    django_user_model.objects.create_user("flinker", password="pw-flinker-1")
    examples = Path(__file__).resolve().parents[3] / "manifests" / "examples"
    text = (examples / "app-flink-wordcount.yaml").read_text()
    text = text.replace("http://127.0.0.1:8081", cluster.rest_url).replace(
        "jobName: wordcount", "jobName: wc-test"
    )
    (tmp_path / "a.yaml").write_text((examples / "catalog-vm-example.yaml").read_text() + "\n---\n" + text)
    call_command("apply", "-f", str(tmp_path / "a.yaml"), "--owner", "flinker")
    app = Application.objects.get(name="flink-wordcount")
    assert {op: v.name for op, v in check_binding(app).items()}["counter"] == "counter"
    connector = build_connector(app)
    assert connector.engine == "flink"
    assert connector.realizer.current()["counter"] == {"vm.small": 2}
    Application.objects.filter(pk=app.pk).update(connector={**app.connector, "vertices": {"top": "topk"}})
    with pytest.raises(BindingError, match="'topk'"):
        check_binding(Application.objects.get(pk=app.pk))


def _flink_app(rest_url: str, job_name: str, **connector) -> dict:
    """An Application manifest of the WordCount operators bound to ``job_name`` at ``rest_url``."""
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Application",
        "metadata": {"name": "wc-flink"},
        "spec": {
            "engine": "flink",
            "connector": {"restUrl": rest_url, "jobName": job_name, **connector},
            "slo": {"rMaxMs": 2000, "etaV": 0.05, "etaR": 0.1},
            "operators": [
                {"name": op, "kind": kind}
                for op, kind in zip(OPERATORS, ["source", "operator", "operator", "sink"], strict=True)
            ],  # fmt: skip
            "streams": [list(s) for s in STREAMS],
            "policies": {"om": "ql-pds-plus"},
        },
    }


@pytest.mark.django_db
def test_apply_rejects_a_missing_vertex_in_the_cli_api_and_form(cluster, job, django_user_model, tmp_path,
                                                                capsys):  # fmt: skip
    import yaml
    from django.core.management import CommandError, call_command
    from django.test import Client
    from rest_framework.test import APIClient

    from autoscaler.models import Application

    user = django_user_model.objects.create_user("binder", password="pw-binder-1")
    wrong = _flink_app(cluster.rest_url, "wc-test", vertices={"counter": "count-words"})
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(wrong))
    started = time.monotonic()
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("apply", "-f", str(tmp_path / "wrong.yaml"), "--owner", "binder")
    assert time.monotonic() - started < 10
    printed = capsys.readouterr().err
    assert "spec.connector.vertices.counter: operator 'counter'" in printed
    assert "no job vertex contains an operator named 'count-words'" in printed
    assert "'splitter, filter, _stream_key_by_map_operator'" in printed  # the vertices that exist

    api = APIClient()
    api.force_authenticate(user)
    extra = _flink_app(cluster.rest_url, "wc-test")
    extra["spec"]["operators"].insert(2, {"name": "joiner", "kind": "operator"})
    extra["spec"]["streams"] = [["sentences", "splitter"], ["splitter", "joiner"], ["joiner", "counter"],
                                ["counter", "top"]]  # fmt: skip
    response = api.post("/api/v1/applications/", extra, format="json")
    assert response.status_code == 400, response.content
    errors = {e["loc"]: e["msg"] for e in response.json()["errors"]}
    assert set(errors) == {"spec.operators[2].name"}, errors
    assert (
        "operator 'joiner': no job vertex contains an operator named 'joiner'"
        in errors["spec.operators[2].name"]
    )
    assert "'counter'" in errors["spec.operators[2].name"]

    web = Client()
    web.force_login(user)
    form = {
        "name": "wc-flink", "engine": "flink", "r_max_ms": "2000", "eta_v": "0.05", "eta_r": "0.1",
        "connector": f"restUrl: {cluster.rest_url}\njobName: wc-test\nvertices: {{top: topk}}",
        "om_period_s": "60", "am_period_s": "600", "policy_om": "ql-pds-plus",
        "operators-TOTAL_FORMS": "4", "operators-INITIAL_FORMS": "0",
        "streams-TOTAL_FORMS": "3", "streams-INITIAL_FORMS": "0",
        "paths-TOTAL_FORMS": "0", "paths-INITIAL_FORMS": "0",
    }  # fmt: skip
    for i, (op, kind) in enumerate(zip(OPERATORS, ["source", "operator", "operator", "sink"], strict=True)):
        form[f"operators-{i}-name"], form[f"operators-{i}-kind"] = op, kind
    for i, (src, dst) in enumerate(STREAMS):
        form[f"streams-{i}-source"], form[f"streams-{i}-target"] = src, dst
    page = web.post("/applications/new/", form)
    assert page.status_code == 400
    html = page.content.decode()
    assert "no job vertex contains an operator named &#x27;topk&#x27;" in html
    assert not Application.objects.exists()  # nothing stored by any of the three

    right = _flink_app(cluster.rest_url, "wc-test", vertices={"counter": "counter"})
    response = api.post("/api/v1/applications/", right, format="json")
    assert response.status_code == 201, response.content
    assert "warnings" not in response.json()


@pytest.mark.django_db
def test_apply_before_the_job_runs_warns_and_the_first_tick_reports_the_binding(cluster, job, django_user_model,
                                                                                 tmp_path, capsys):  # fmt: skip
    import yaml
    from django.core.management import call_command

    from autoscaler.control.connectors import build_connector
    from autoscaler.models import Application

    django_user_model.objects.create_user("later", password="pw-later-1")
    doc = _flink_app(cluster.rest_url, "wc-deployed-later", vertices={"counter": "count-words"})
    (tmp_path / "later.yaml").write_text(yaml.safe_dump(doc))
    call_command("apply", "-f", str(tmp_path / "later.yaml"), "--owner", "later")
    printed = capsys.readouterr()
    assert printed.out == "application/wc-flink created\n"
    assert printed.err.startswith("warning: application/wc-flink: binding not checked")
    assert "no running Flink job named 'wc-deployed-later'" in printed.err
    app = Application.objects.get(name="wc-flink")
    # the job "is deployed" under that name: the connector's first observation names the missing vertex
    Application.objects.filter(pk=app.pk).update(connector={**app.connector, "jobName": "wc-test"})
    connector = build_connector(Application.objects.get(pk=app.pk))
    now = time.time()
    with pytest.raises(BindingError) as err:
        connector.monitor.collect(Period(1, now - 10, now))
    assert "operator 'counter': no job vertex contains an operator named 'count-words'" in str(err.value)
    assert "counter" in err.value.vertices


def test_rescale_beyond_the_slots_is_detected_and_rolled_back(cluster, job, connector):
    before = cluster.rest().resource_requirements(job["id"])
    result = connector.realizer.apply(ScalingPlan({"counter": {"vm.small": 7}}, slot=2))
    assert not result.ok and result.rolled_back
    assert "vertex 'counter': target parallelism 7" in result.error and "insufficient slots" in result.error
    assert result.details["restored"] is True
    assert _vertex(cluster, job["id"], "counter")["parallelism"] == 2
    assert cluster.rest().resource_requirements(job["id"]) == before
    assert result.deployments["counter"] == {"vm.small": 2}


def test_taskmanagers_are_acquired_and_only_idle_ones_released(cluster, job):
    provider = FlinkTaskManagerProvider("local", {"clusterDir": str(cluster.root), "memoryScale": 1.0})
    started = provider.acquire(NodeSpec("vm.small", cores=2, memory_mb=1024), 1)
    assert [n.node_id for n in started] == ["local-vm.small-1"]
    deadline = time.time() + 60  # the TaskManager registers its slots asynchronously after it is up
    while True:
        tms = {tm["id"]: tm for tm in cluster.rest().get("/taskmanagers")["taskmanagers"]}
        if tms.get("local-vm.small-1", {}).get("slotsNumber") == 2 or time.time() > deadline:
            break
        time.sleep(0.5)
    assert tms["local-vm.small-1"]["slotsNumber"] == 2
    nodes = {n.node_id: n for n in provider.nodes()}
    assert nodes["tm-base"].busy and not nodes["local-vm.small-1"].busy
    assert nodes["local-vm.small-1"].node_type == "vm.small"
    pid_file = next((Path(cluster.root) / "tm" / "local-vm.small-1").glob("*.pid"))
    pid = int(pid_file.read_text().split()[-1])
    assert provider.release(["tm-base", "local-vm.small-1"]) == ["local-vm.small-1"]
    deadline = time.time() + 20
    while time.time() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.5)
    assert not os.path.exists(f"/proc/{pid}")
    assert [n.node_id for n in provider.nodes()] == ["tm-base"]


def test_live_rescale_of_one_vertex_keeps_state_exact(cluster, job, connector):
    result = connector.realizer.apply(ScalingPlan({"counter": {"vm.small": 3}}, slot=3))
    assert result.ok, result.error
    assert result.deployments["counter"] == {"vm.small": 3}
    assert _vertex(cluster, job["id"], "counter")["parallelism"] == 3
    assert _vertex(cluster, job["id"], "splitter, filter, _stream_key_by_map_operator")["parallelism"] == 2
    assert 0 < result.downtime_s < 40 and result.details["elapsed_s"] < 45
    now = time.time()
    counter = connector.monitor.collect(Period(4, now - 10, now)).operators["counter"]
    assert counter.deployment == {"vm.small": 3}
    # right after the restart the counter is incomplete with a reason ("not settled", or on a loaded machine
    # e.g. its meters not updated yet), never zeros
    assert (
        not counter.complete and counter.reason and counter.input_rate is None
    ) or counter.input_rate > 0, counter
    # the bounded source ends; the counts then must be exactly what the trace slice produced
    deadline = job["submitted"] + JOB["duration_s"] + 120
    while cluster.rest().job(job["id"])["state"] != "FINISHED":
        assert time.time() < deadline, cluster.rest().job(job["id"])["state"]
        time.sleep(2)
    schedule = Schedule(load_rates(str(taxi_trace()), JOB["trace_start"], JOB["steps"]), JOB["step_s"],
                        JOB["rate_scale"], JOB["ticks_per_s"])  # fmt: skip
    expected = expected_counts(schedule, int(JOB["duration_s"] * JOB["ticks_per_s"]))
    got = read_counts(str(job["counts_dir"]))
    assert sum(expected.values()) > 1000
    assert got == expected
