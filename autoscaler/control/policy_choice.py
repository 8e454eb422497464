"""Which policy an application runs at each control level: its declared choice (``spec.policies``), else the
product's default (the recommended OM, the naive AM)."""

from __future__ import annotations

from typing import Any

from autoscaler.models import Application
from policies.registry import RECOMMENDED_OM, om_choice

#: the OM of an application that declares none: the recommended one, as a manifest writes it ({"name", "params"})
DEFAULT_OM_POLICY: dict[str, Any] = om_choice(RECOMMENDED_OM)
DEFAULT_AM_POLICY = "naive"


def policy_choice(
    application: Application, level: str, default: str | dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """(name, params) of the application's policy at ``level`` ("om", "am", ...); ``default`` (a name, or
    ``{"name", "params"}``) when unset. A choice without a name takes the default's name and params, its own
    params over them."""
    if isinstance(default, str):
        default_name, default_params = default, {}
    else:
        default_name, default_params = str(default["name"]), dict(default.get("params") or {})
    value = (application.policies or {}).get(level)
    if value is None:
        return default_name, default_params
    if isinstance(value, str):
        return value, {}
    params = dict(value.get("params") or {})
    if value.get("name") is None:
        return default_name, {**default_params, **params}
    return str(value["name"]), params
