from django.contrib import admin

from .models import (
    AgentState,
    ApplicationControl,
    Consolidation,
    Decision,
    RegionControl,
    RegionNode,
    RegionTick,
    SimulatedEngine,
    Tick,
    WaitingRequest,
)


@admin.register(ApplicationControl)
class ApplicationControlAdmin(admin.ModelAdmin):
    list_display = (
        "application",
        "last_tick_slot",
        "periods",
        "violated_periods",
        "reconfigured_periods",
        "total_cost",
        "tick_errors_total",
    )
    readonly_fields = ("ring_flags", "ring_cost", "ring_seconds", "am_state", "time_windows")


@admin.register(Tick)
class TickAdmin(admin.ModelAdmin):
    list_display = ("application", "slot", "status", "attempts", "dry_run", "latency_s", "finished_at")
    list_filter = ("status", "dry_run")
    search_fields = ("application__name",)


@admin.register(Decision)
class DecisionAdmin(admin.ModelAdmin):
    list_display = (
        "application",
        "operator",
        "slot",
        "outcome",
        "granted",
        "reason",
        "resource_cost",
        "violated",
    )
    list_filter = ("outcome", "granted", "violated")
    search_fields = ("application__name", "operator__name", "reason")


@admin.register(AgentState)
class AgentStateAdmin(admin.ModelAdmin):
    list_display = ("operator", "policy", "format_version", "steps", "last_slot", "updated_at")
    readonly_fields = ("blob",)


@admin.register(RegionTick)
class RegionTickAdmin(admin.ModelAdmin):
    list_display = ("region", "slot", "policy", "period_s", "created_at")
    readonly_fields = ("agent_state",)


@admin.register(RegionControl)
class RegionControlAdmin(admin.ModelAdmin):
    """``rm_period_s`` is editable here (empty = the shortest OM period of the region's applications)."""

    list_display = ("region", "rm_period_s", "rm_policy", "im_policy", "policy_source", "last_error")


@admin.register(RegionNode)
class RegionNodeAdmin(admin.ModelAdmin):
    list_display = ("region", "node_id", "node_type", "state", "provider", "acquired_slot", "released_slot")
    list_filter = ("state", "provider")
    search_fields = ("region__name", "node_id", "reason")


@admin.register(Consolidation)
class ConsolidationAdmin(admin.ModelAdmin):
    list_display = ("region", "slot", "application", "status", "frees", "updated_at")
    list_filter = ("status",)


@admin.register(WaitingRequest)
class WaitingRequestAdmin(admin.ModelAdmin):
    list_display = ("region", "application", "operator", "node_type", "slots", "since_slot", "last_slot")


@admin.register(SimulatedEngine)
class SimulatedEngineAdmin(admin.ModelAdmin):
    list_display = ("application", "applies", "updated_at")
