from django.contrib import admin

from .models import AgentState, ApplicationControl, Decision, RegionTick, SimulatedEngine, Tick


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
    readonly_fields = ("ring_flags", "ring_cost", "ring_seconds", "am_state")


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
    list_display = ("region", "slot", "policy", "created_at")


@admin.register(SimulatedEngine)
class SimulatedEngineAdmin(admin.ModelAdmin):
    list_display = ("application", "applies", "updated_at")
