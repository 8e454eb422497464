"""``manage.py apply -f FILE [-f FILE ...]``: create or update resources from manifests, all or nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import apply_documents, parse_documents
from autoscaler.schemas import ManifestError
from autoscaler.schemas.errors import prefixed

from ._common import add_owner_argument, fail, resolve_owner


class Command(BaseCommand):
    help = "Create or update resources from YAML/JSON manifests (idempotent; every document or none)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "-f",
            "--filename",
            action="append",
            required=True,
            help="manifest file, a directory of *.yaml/*.yml/*.json files, or - for standard input",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="validate against the database, store nothing"
        )
        add_owner_argument(parser)

    def handle(self, *args, **options) -> None:
        owner = resolve_owner(options["owner"])
        docs: list = []
        errors = []
        for path in self._files(options["filename"]):
            text = sys.stdin.read() if path == "-" else Path(path).read_text()
            try:
                docs += parse_documents(text)
            except ManifestError as exc:
                errors += prefixed(exc.errors, str(path))
        if errors:
            raise fail(self, ManifestError(errors), "apply")
        try:
            results = apply_documents(docs, owner, dry_run=options["dry_run"])
        except ManifestError as exc:
            raise fail(self, exc, "apply") from None
        suffix = " (dry run)" if options["dry_run"] else ""
        for result in results:
            self.stdout.write(f"{result}{suffix}")
            for warning in result.warnings:
                self.stderr.write(f"warning: {result.kind.lower()}/{result.name}: {warning}")

    @staticmethod
    def _files(names: list[str]) -> list[str | Path]:
        files: list[str | Path] = []
        for name in names:
            if name == "-":
                files.append(name)
                continue
            path = Path(name)
            if path.is_dir():
                files += sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml", ".json"})
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"-f: no such file or directory: {name}")
        return files
