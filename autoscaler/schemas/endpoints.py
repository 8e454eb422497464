"""The endpoint check of an Application's connector: every engine address it references (Flink ``restUrl``,
Spark ``master``, ``uiUrl``, ``operators.<name>.uiUrl``) must be covered by an endpoint staff declared on one of
the application's regions or in ``AUTOSCALER_ENGINE_ENDPOINTS`` (``connectors.endpoints``). The declared
endpoints come from ``References.engine_endpoints``; this module needs no database."""

from __future__ import annotations

from typing import Any

from connectors.endpoints import AllowList, refused_urls

from .connectors import validate_connector
from .errors import FieldError, join_loc


def connector_endpoint_errors(
    engine: str, connector: dict[str, Any], endpoints: list[str]
) -> list[FieldError]:
    """One error per connector address that ``endpoints`` do not cover, at its path under ``spec.connector``.
    Settings that are themselves invalid are reported by the connector's own check, not here."""
    settings, errors = validate_connector(engine, connector or {})
    if errors:
        return []
    allowed = AllowList(endpoints)
    return [
        FieldError(join_loc("spec", "connector", *loc), reason)
        for loc, reason in refused_urls(engine, settings, allowed)
    ]
