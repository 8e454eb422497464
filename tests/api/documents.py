"""Manifest documents the API tests send (plain data; each test copies what it changes)."""

from __future__ import annotations

import copy

WORDCOUNT = {
    "apiVersion": "autoscaler/v1",
    "kind": "Application",
    "metadata": {"name": "wordcount"},
    "spec": {
        "engine": "simulated",
        "slo": {"rMaxMs": 60, "etaV": 0.05, "etaR": 0.10},
        "operators": [
            {"name": "sentences", "kind": "source"},
            {"name": "splitter", "kind": "operator", "maxParallelism": 20},
            {"name": "counter", "kind": "operator", "maxParallelism": 20},
            {"name": "top", "kind": "sink"},
        ],
        "streams": [["sentences", "splitter"], ["splitter", "counter"], ["counter", "top"]],
        "policies": {"om": "ql-pds-plus", "am": "naive"},
    },
}


def application(name: str = "wordcount", **spec) -> dict:
    doc = copy.deepcopy(WORDCOUNT)
    doc["metadata"]["name"] = name
    doc["spec"].update(spec)
    return doc
