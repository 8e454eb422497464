"""``manage.py delete KIND NAME``: delete one resource (an application with its operators and deployments)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import delete
from autoscaler.schemas import ManifestError
from autoscaler.schemas.documents import resolve_kind

from ._common import add_owner_argument, fail, resolve_owner


class Command(BaseCommand):
    help = "Delete one resource by kind and name."

    def add_arguments(self, parser) -> None:
        parser.add_argument("kind")
        parser.add_argument("name")
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        try:
            kind = resolve_kind(options["kind"])
            delete(kind, options["name"], owner)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except ManifestError as exc:
            raise fail(self, exc, "delete") from None
        self.stdout.write(f"{kind.lower()}/{options['name']} deleted")
