"""``manage.py export KIND [NAME]``: print manifests that ``apply`` accepts back unchanged.

The spec only: the status the control loop observes is shown by ``get`` and ``describe``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import dump_documents, export
from autoscaler.schemas import ManifestError

from ._common import add_owner_argument, fail, resolve_owner


class Command(BaseCommand):
    help = "Print the manifest (spec only) of one resource, or of every resource of a kind when NAME is left out."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "kind", help="NodeTypeCatalog, Region, Application, Deployment (case-insensitive), or all"
        )
        parser.add_argument("name", nargs="?")
        parser.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        try:
            docs = export(options["kind"], options["name"], owner)
        except ValueError as exc:  # unknown kind
            raise CommandError(str(exc)) from None
        except ManifestError as exc:
            raise fail(self, exc, "export") from None
        if docs:
            self.stdout.write(dump_documents(docs, options["output"]), ending="")
