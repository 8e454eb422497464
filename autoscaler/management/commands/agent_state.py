"""``manage.py agent_state {export,import,reset} APP``: move learned OM agents between installations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from autoscaler.control import agents
from autoscaler.models import Application

from ._common import add_owner_argument, resolve_owner


class Command(BaseCommand):
    help = "Export, import or reset the learned state of an application's Operator Manager agents."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["export", "import", "reset"])
        parser.add_argument("application", help="application name")
        parser.add_argument(
            "file", nargs="?", help="export: output file (default stdout); import: input file"
        )
        parser.add_argument("--operator", action="append", help="reset: only these operators (repeatable)")
        add_owner_argument(parser)

    def handle(self, *args, **opts) -> None:
        owner = resolve_owner(opts["owner"])
        app = Application.objects.filter(owner=owner, name=opts["application"]).first()
        if app is None:
            raise CommandError(
                f"application: {owner.username} has no application named {opts['application']!r}"
            )
        try:
            if opts["action"] == "export":
                text = json.dumps(agents.export(app), indent=1)
                if opts["file"]:
                    Path(opts["file"]).write_text(text)
                    self.stdout.write(f"exported the agents of {app.name} to {opts['file']}")
                else:
                    sys.stdout.write(text + "\n")
            elif opts["action"] == "import":
                if not opts["file"]:
                    raise CommandError("file: import needs the exported JSON file")
                try:
                    document = json.loads(Path(opts["file"]).read_text())
                except (OSError, json.JSONDecodeError) as exc:
                    raise CommandError(f"file: cannot read {opts['file']!r}: {exc}") from None
                n = agents.import_(app, document)
                self.stdout.write(f"imported {n} agent(s) into {app.name}")
            else:
                n = agents.reset(app, opts["operator"])
                self.stdout.write(f"reset {n} agent(s) of {app.name}")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
