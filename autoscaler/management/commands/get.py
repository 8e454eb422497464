"""``manage.py get KIND``: a table of the resources of a kind with their spec, status and age (like kubectl get).

``-o yaml|json`` prints the manifests with their read-only ``status`` (``export`` prints the spec only)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from autoscaler.control.resource_status import with_status
from autoscaler.manifests import dump_documents, export_resource, queryset

from ._common import add_kind_argument, add_owner_argument, kind_of, resolve_owner
from ._status_text import get_table


class Command(BaseCommand):
    help = "List resources of a kind: name, spec, status (what the engine runs) and age."

    def add_arguments(self, parser) -> None:
        add_kind_argument(parser)
        parser.add_argument("-o", "--output", choices=["table", "yaml", "json"], default="table")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        kind = kind_of(options)
        objects = list(queryset(kind, owner))
        if options["output"] != "table":
            if objects:
                docs = [with_status(export_resource(obj), obj) for obj in objects]
                self.stdout.write(dump_documents(docs, options["output"]), ending="")
            return
        if not objects:
            self.stdout.write(f"no {kind} found")
            return
        self.stdout.write(get_table(kind, objects))
