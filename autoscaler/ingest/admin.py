"""Admin of ingest tokens: list, inspect and revoke (delete). Tokens are created and rotated with
``manage.py ingest_token`` so that the secret never passes through a web page; only its first characters and
hash are stored."""

from __future__ import annotations

from django.contrib import admin

from autoscaler.ingest.models import IngestToken


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    list_display = ("application", "owner", "prefix", "created_at", "rotated_at", "last_used_at")
    list_select_related = ("application__owner",)
    search_fields = ("application__name", "application__owner__username", "prefix")
    readonly_fields = ("application", "prefix", "created_at", "rotated_at", "last_used_at")
    exclude = ("key_hash",)

    @admin.display(description="owner")
    def owner(self, obj: IngestToken) -> str:
        return obj.application.owner.get_username()

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj: IngestToken | None = None) -> bool:
        return False
