"""Typed-worker placement without a cluster: resource names, which regions are typed, what the realizer asks."""

from __future__ import annotations

import json

import pytest

from autoscaler.control.connectors import build_connector
from connectors.spark.agent import Profile
from connectors.spark.cluster import resources_conf
from connectors.spark.placement import executor_conf, resource_name, typed_workers


def test_a_node_type_becomes_a_spark_resource_name_without_dots():
    assert resource_name("exec.small") == "nodetype_exec_small"
    assert resource_name("M5-Large") == "nodetype_m5_large"
    assert executor_conf("nodetype_a") == {"spark.executor.resource.nodetype_a.amount": "1"}
    assert executor_conf("") == {}
    with pytest.raises(ValueError, match="empty name"):
        resource_name("")


def test_workers_are_typed_when_the_provider_starts_them_or_the_user_says_so():
    assert not typed_workers({})
    assert not typed_workers({"kind": "bookkeeping", "settings": {}})
    assert typed_workers({"kind": "spark-standalone", "settings": {}})
    assert not typed_workers({"kind": "spark-standalone", "settings": {"managed": False}})
    assert typed_workers({"kind": "spark-standalone", "settings": {"managed": False, "typedWorkers": True}})
    assert not typed_workers({"kind": "spark-standalone", "settings": {"typedWorkers": False}})


def test_a_worker_advertises_its_resources_through_a_resources_file(tmp_path):
    props = resources_conf(tmp_path, {"nodetype_fast": 2})
    key, path = props.read_text().split()
    assert key == "spark.worker.resourcesFile"
    assert json.loads(open(path).read()) == [
        {"id": {"componentName": "spark.worker", "resourceName": "nodetype_fast"}, "addresses": ["0", "1"]}
    ]
    with pytest.raises(ValueError, match="letters, digits and _ only"):
        resources_conf(tmp_path, {"node.type": 1})
    with pytest.raises(ValueError, match="amount must be >= 1"):
        resources_conf(tmp_path, {"nodetype_a": 0})


def test_same_size_profiles_on_other_workers_are_a_restart_not_a_live_change():
    fast = Profile.from_json({"name": "fast", "cores": 1, "memoryMiB": 512, "resource": "nodetype_fast"})
    std = Profile.from_json({"name": "std", "cores": 1, "memoryMiB": 512, "resource": "nodetype_std"})
    assert fast.to_json()["resource"] == "nodetype_fast"
    assert not fast.same_resources(std)
    assert fast.same_resources(Profile(1, 512, "fast-again", "nodetype_fast"))
    assert "resource" not in Profile(1, 512, "plain").to_json()


@pytest.mark.django_db
def test_the_realizer_requests_the_node_type_resource_only_on_typed_regions(django_user_model, make_app):
    app, _ = make_app(django_user_model.objects.create_user("carol"))
    profiles = build_connector(app).realizer.profiles["counter"]
    assert "resource" not in profiles["small"]  # a bookkeeping region: executors go anywhere
    region = app.operators.get(name="counter").deployment.region
    region.provider = {
        "kind": "spark-standalone",
        "settings": {"masterUrl": "spark://127.0.0.1:7077", "masterWebUi": "http://127.0.0.1:8080"},
    }
    region.save()
    app.refresh_from_db()
    profiles = build_connector(app).realizer.profiles["counter"]
    assert profiles["small"]["resource"] == "nodetype_small"
    assert profiles["large"]["resource"] == "nodetype_large"
