"""Build the connector of a stored Application (``build_connector``); check a Flink application's binding.

``simulated``: the trace-driven engine kept in the database (``autoscaler.control.simulated_engine``). ``spark``
and ``flink``: the stored definition (operators, streams, declared deployments, node types of the regions,
validated connector settings) is read here and handed as plain values to the engine's connector library
(``connectors.spark.connector.build``, ``connectors.flink.connector.build``, imported on first use: an engine
whose library cannot be imported is ``ConnectorUnavailable``); the Spark connector reads and writes the ingest
tables through ``autoscaler.ingest.spark_store.OrmSparkStore``. The engine addresses of a Spark or Flink
connector must be covered by the endpoints staff declared on the application's regions or in
``AUTOSCALER_ENGINE_ENDPOINTS`` (``connectors.endpoints``); when one is not, the application gets a
``RefusedConnector`` that contacts nothing and reports every period as incomplete with the reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autoscaler.control.simulated_engine import build_simulated_connector
from autoscaler.control.topology import deployment_of
from autoscaler.ingest.spark_store import OrmSparkStore
from autoscaler.models import Application
from autoscaler.schemas.connectors import SparkSettings
from connectors.base import Connector, Deployment
from connectors.endpoints import AllowList, refused_urls
from connectors.refused import RefusedConnector

if TYPE_CHECKING:
    from connectors.flink.binding import Vertex


class ConnectorUnavailable(ValueError):
    """The application's engine has no connector in this build."""


#: engine -> (module, function) building its connector from plain values
ENGINE_BUILDERS = {
    "spark": ("connectors.spark.connector", "build"),
    "flink": ("connectors.flink.connector", "build"),
}


def build_connector(application: Application) -> Connector:
    """The connector of ``application``."""
    if application.engine == "simulated":
        return build_simulated_connector(application)
    if application.engine in ENGINE_BUILDERS:
        build = _engine_builder(*ENGINE_BUILDERS[application.engine], application)
        allowed = engine_allow_list(application)
        refused = refused_urls(application.engine, dict(application.connector or {}), allowed)
        if refused:
            reasons = "; ".join(f"connector.{'.'.join(loc)}: {why}" for loc, why in refused)
            return RefusedConnector(application.engine, f"engine not contacted: {reasons}")
        if application.engine == "spark":
            return build(OrmSparkStore(), **spark_arguments(application), allowed=allowed)
        operators, streams, deployments = _application_parts(application)
        return build(dict(application.connector or {}), operators, streams, deployments)
    raise ConnectorUnavailable(f"application {application.name!r}: unknown engine {application.engine!r}")


def engine_allow_list(application: Application) -> AllowList:
    """The endpoints ``application``'s connector may contact: those declared on its regions and in the setting."""
    from autoscaler.manifests import engine_endpoints

    return AllowList(engine_endpoints(application.regions.values_list("name", flat=True)))


def _engine_builder(module: str, function: str, application: Application) -> Callable[..., Connector]:
    """``module.function`` (imported on first use), or ConnectorUnavailable naming what is missing."""
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise ConnectorUnavailable(
            f"application {application.name!r}: the {application.engine} connector is not available ({exc})"
        ) from exc


def spark_arguments(application: Application) -> dict[str, Any]:
    """The arguments of ``connectors.spark.connector.build`` (but the store and the endpoints) for a stored
    Spark application: operators, streams, controlled operators (key: the Operator's primary key; the node types
    of their deployment's region catalog) and the settings of ``SparkSettings``."""
    from connectors.spark.connector import ControlledOperator, NodeType

    settings = SparkSettings.model_validate(application.connector or {})
    operators = list(application.operators.all().select_related("deployment__region__catalog"))
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    controlled: dict[str, ControlledOperator] = {}
    for op in operators:
        dep = deployment_of(op)
        if dep is None:
            continue
        bound = settings.operators.get(op.name)
        region = dep.region
        controlled[op.name] = ControlledOperator(
            key=op.pk,
            declared=dict(dep.replicas),
            node_types=[
                NodeType(t.name, int(t.cores), t.memory_mib, float(t.speedup))
                for t in region.catalog.node_types.all()
            ],
            provider=dict(region.provider or {}),
            ui_url=(bound.ui_url if bound and bound.ui_url else None),
        )
    return {
        "operators": [op.name for op in operators],
        "streams": streams,
        "controlled": controlled,
        "ui_url": settings.ui_url,
        "executor_memory_scale": settings.executor_memory_scale,
        "batch_interval_s": settings.batch_interval_s,
        "apply_timeout_s": settings.apply_timeout_s,
    }


def _application_parts(
    application: Application,
) -> tuple[list[str], list[tuple[str, str]], dict[str, Deployment]]:
    """Operator names, streams (name pairs) and the declared deployment of every controlled operator."""
    ops = list(application.operators.all().select_related("deployment"))
    deployments: dict[str, Deployment] = {}
    for op in ops:
        dep = deployment_of(op)
        if dep is not None:
            deployments[op.name] = {t: int(n) for t, n in dep.replicas.items() if n > 0}
    streams = [(s.source.name, s.target.name) for s in application.streams.select_related("source", "target")]
    return [op.name for op in ops], streams, deployments


def check_binding(application: Application) -> dict[str, Vertex]:
    """Resolve every operator of a stored Flink ``application`` to a vertex of its running job (operator ->
    vertex).

    Raises ``BindingError`` (message lists the vertices that exist) for a missing or shared vertex, and
    ``ConnectorError`` when the job cannot be found or reached."""
    from connectors.flink.connector import check_settings

    operators, _, _ = _application_parts(application)
    return check_settings(dict(application.connector or {}), operators)
