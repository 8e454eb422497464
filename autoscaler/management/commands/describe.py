"""``manage.py describe KIND NAME``: one resource's spec, status and (deployments) recent history with the
decisions that made each change (like kubectl describe)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import find

from ._common import add_kind_argument, add_owner_argument, kind_of, resolve_owner
from ._status_text import describe


class Command(BaseCommand):
    help = "Show one resource: spec, status (what the engine runs) and recent history with decision ids."

    def add_arguments(self, parser) -> None:
        add_kind_argument(parser)
        parser.add_argument("name")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        kind = kind_of(options)
        obj = find(kind, options["name"], owner)
        if obj is None:
            raise CommandError(f"name: no {kind} named {options['name']!r}")
        self.stdout.write(describe(kind, obj))
