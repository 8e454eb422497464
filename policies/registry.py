"""Names of every policy of the control hierarchy, as used in manifests, the API and the CLI.

Classes are imported lazily so that validating a manifest does not import numpy-heavy modules it does not need.
"""

from __future__ import annotations

import importlib
from typing import Any

# Operator Manager policies: name -> "module:Class".
OM_POLICIES: dict[str, str] = {
    "threshold": "policies.om.threshold:ThresholdCheapest",
    "threshold-speedup": "policies.om.threshold:ThresholdFastest",
    "threshold-first": "policies.om.threshold:ThresholdFirst",
    "ql": "policies.om.qlearning:QLearning",
    "ql-pds": "policies.om.qlearning:QLearningPDS",
    "ql-pds-plus": "policies.om.qlearning:QLearningPDSPlus",
    "model-based": "policies.om.model_based:ModelBased",
    "predictive": "policies.om.predictive:Predictive",
    "dql": "policies.om.deep:DeepQLearning",
    "dql-pds": "policies.om.deep:DeepQLearningPDS",
    "dql-pds-plus": "policies.om.deep:DeepQLearningPDSPlus",
    "dp-discounted": "policies.om.offline:OfflineOptimum",
    "dp-average": "policies.om.average:AverageCostOptimum",
    "clairvoyant": "policies.om.clairvoyant:Clairvoyant",
    "ds2": "policies.om.ds2:DS2",
    "hpa": "policies.om.hpa:HPA",
}

#: old names kept working (manifests written with them still validate and run): alias -> registered name.
#: ``dp`` was the discounted (gamma) optimum of the level model, which is no bound on the average cost the
#: benchmarks report; it is now named for what it is.
OM_ALIASES: dict[str, str] = {"dp": "dp-discounted"}
ALIASES_BY_LEVEL: dict[str, dict[str, str]] = {"om": OM_ALIASES}
#: OM policies that need the whole trace in advance (offline references of the benchmarks, not controllers)
OFFLINE_OM: tuple[str, ...] = ("dp-discounted", "dp-average", "clairvoyant")

# Application Manager, Region Manager and Infrastructure Manager policies (issue 4 fills these in).
AM_POLICIES: dict[str, str] = {
    "naive": "policies.am.naive:NaiveAM",
    "bo": "policies.am.bo:BayesianAM",
    "centralized": "policies.am.centralized:CentralizedAM",
}
RM_POLICIES: dict[str, str] = {
    "simple": "policies.rm.simple:SimpleProvisioning",
    "model-based": "policies.rm.model_based:ModelBasedRM",
}
IM_POLICIES: dict[str, str] = {
    "cheapest-first": "policies.im.global_policy:CheapestFirst",
    "region-preference": "policies.im.global_policy:RegionPreference",
}

POLICIES_BY_LEVEL: dict[str, dict[str, str]] = {
    "om": OM_POLICIES,
    "am": AM_POLICIES,
    "rm": RM_POLICIES,
    "im": IM_POLICIES,
}


#: Named OM variants used by the benchmarks: name -> (registered policy, parameters). In a manifest the same
#: is written as the policy plus ``params``.
OM_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # model-based whose per-replica bound is also closed by the capacity measured from utilisation
    "model-based-capacity": ("model-based", {"capacity_bound": True}),
    # ... that may also reconfigure several replicas (or, at K_max under overload, the node type) in one step
    "model-based-multistep": ("model-based", {"capacity_bound": True, "multi_step": True}),
    # ... that plans for the rate a rising trend reaches when its scale-out takes effect (policies.forecast)
    "model-based-trend": ("model-based", {"capacity_bound": True, "multi_step": True, "trend_periods": 3}),
    # ... without the micro-batch engine model (policies.engine_model): the linear per-replica bound only, as
    # before issue 21 (bench_spark's comparison)
    "model-based-trend-linear": (
        "model-based",
        {"capacity_bound": True, "multi_step": True, "trend_periods": 3, "engine_model": "off"},
    ),
    # ... without restart_aware: a change that stops the job (Flink) is planned for like a live one, as before
    # (bench_flink's comparison)
    "model-based-trend-restart-blind": (
        "model-based",
        {"capacity_bound": True, "multi_step": True, "trend_periods": 3, "restart_aware": False},
    ),
}


#: the OM policy the demos and ``bench_loop``'s demo scenario run: the best one measured through the product's
#: own loop (``manage.py bench_loop``, docs/benchmarks.md "The control loop a user runs")
RECOMMENDED_OM = "model-based-trend"


def om_choice(name: str) -> dict[str, Any]:
    """A manifest's ``spec.policies.om`` for an OM policy or named variant: ``{"name", "params"}`` (a variant is
    written as its registered policy plus its parameters, so the manifest says what runs)."""
    base, params = OM_VARIANTS.get(name, (name, {}))
    return {"name": base, "params": dict(params)}


def resolve_om(name: str) -> tuple[type, dict[str, Any]]:
    """The class and parameters of an OM policy or named variant (``OM_VARIANTS``); ValueError if unknown."""
    base, params = OM_VARIANTS.get(name, (name, {}))
    try:
        return load("om", base), dict(params)
    except ValueError:
        known = sorted([*OM_POLICIES, *OM_VARIANTS])
        raise ValueError(f"unknown om policy {name!r}: choose one of {', '.join(known)}") from None


def canonical(level: str, name: str) -> str:
    """The registered name of ``name`` at ``level``: an old alias (``OM_ALIASES``) maps to its new name."""
    return ALIASES_BY_LEVEL.get(level, {}).get(name, name)


def load(level: str, name: str) -> type:
    """The class implementing policy ``name`` (or an alias of it) at ``level`` ("om", "am", "rm", "im")."""
    table = POLICIES_BY_LEVEL.get(level)
    if table is None:
        raise ValueError(f"unknown policy level {level!r}: choose one of {', '.join(POLICIES_BY_LEVEL)}")
    name = canonical(level, name)
    if name not in table:
        raise ValueError(f"unknown {level} policy {name!r}: choose one of {', '.join(sorted(table))}")
    module, _, cls = table[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def validate_params(level: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Check a policy name and its parameters; raise ValueError naming the field. Returns merged params.

    AM, RM and IM parameters are those of the options registry (:mod:`policies.options`); OM parameters are
    the policy class's. Policies not implemented yet accept only an empty parameter set.
    """
    table = POLICIES_BY_LEVEL.get(level, {})
    name = canonical(level, name)
    if name not in table:
        raise ValueError(f"unknown {level} policy {name!r}: choose one of {', '.join(sorted(table))}")
    from policies import options

    if options.has_options(level, name):
        # the typed options registry owns these parameters (types, bounds, defaults); the policy class may add
        # checks of its own on the merged values
        merged = options.validate(level, name, params)
        validator = getattr(load(level, name), "validate_params", None)
        if validator is not None:
            validator(dict(merged))
        return merged
    try:
        cls = load(level, name)
    except (ImportError, AttributeError):
        if params:
            raise ValueError(f"params: policy {name!r} takes no parameters yet") from None
        return {}
    validator = getattr(cls, "validate_params", None)
    return validator(params) if validator else dict(params)
