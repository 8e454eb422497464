"""``manage.py delete KIND NAME`` or ``manage.py delete -f FILE``: delete resources.

Deleting an application deletes its operators, streams and deployments. With ``-f`` every resource named in the
file is deleted in reverse dependency order, in one transaction: all of them or none.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from autoscaler.manifests import delete, parse_documents
from autoscaler.schemas import KIND_ORDER, FieldError, ManifestError
from autoscaler.schemas.documents import resolve_kind

from ._common import add_owner_argument, fail, resolve_owner


class Command(BaseCommand):
    help = "Delete one resource by kind and name, or every resource named in a manifest file (-f)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("kind", nargs="?")
        parser.add_argument("name", nargs="?")
        parser.add_argument("-f", "--filename", help="delete the resources named in this manifest file")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        try:
            targets = self._targets(options)
            with transaction.atomic():
                errors = []
                for kind, name in targets:
                    try:
                        delete(kind, name, owner)
                    except ManifestError as exc:
                        errors += [FieldError(f"{kind}/{name}", e.msg) for e in exc.errors]
                if errors:
                    raise ManifestError(errors)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except ManifestError as exc:
            raise fail(self, exc, "delete") from None
        for kind, name in targets:
            self.stdout.write(f"{kind.lower()}/{name} deleted")

    @staticmethod
    def _targets(options) -> list[tuple[str, str]]:
        if options["filename"]:
            if options["kind"]:
                raise CommandError("give either KIND NAME or -f FILE")
            docs = parse_documents(Path(options["filename"]).read_text())
            targets = []
            for i, doc in enumerate(docs):
                try:
                    targets.append((resolve_kind(str(doc["kind"])), str(doc["metadata"]["name"])))
                except (KeyError, TypeError):
                    raise CommandError(f"documents[{i}]: needs kind and metadata.name") from None
            return sorted(targets, key=lambda t: -KIND_ORDER[t[0]])
        if not (options["kind"] and options["name"]):
            raise CommandError("give KIND NAME or -f FILE")
        return [(resolve_kind(options["kind"]), options["name"])]
