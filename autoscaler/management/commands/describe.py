"""``manage.py describe KIND NAME``: one resource's spec, status and (deployments) recent history with the
decisions that made each change (like kubectl describe)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import find
from autoscaler.schemas.documents import resolve_kind

from ._common import add_owner_argument, resolve_owner
from ._status_text import describe


class Command(BaseCommand):
    help = "Show one resource: spec, status (what the engine runs) and recent history with decision ids."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "kind", help="NodeTypeCatalog, Region, Application, Deployment (case-insensitive)"
        )
        parser.add_argument("name")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        try:
            kind = resolve_kind(options["kind"])
        except ValueError as exc:
            raise CommandError(f"kind: {exc}") from None
        obj = find(kind, options["name"], owner)
        if obj is None:
            raise CommandError(f"name: no {kind} named {options['name']!r}")
        self.stdout.write(describe(kind, obj))
