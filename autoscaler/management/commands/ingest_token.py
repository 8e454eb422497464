"""``manage.py ingest_token APP``: the ingest token of an application's engine agents (create, rotate, revoke).

- ``ingest_token APP --output FILE``: create the token and write it to FILE (mode 0600), nothing else printed
  but a confirmation naming the file;
- ``ingest_token APP --print``: create it and print it to standard output (only the token, one line; the
  confirmation goes to standard error), e.g. ``STREAMSCALER_TOKEN=$(manage.py ingest_token wc --print)``;
- ``--rotate`` with either: replace an existing token (the old one stops working at once); without it an
  application that already has a token is an error and nothing changes;
- ``ingest_token APP --revoke``: delete the token;
- ``ingest_token APP``: say whether it has one (first characters, creation, last use), never the secret.

The token writes that application's ingest endpoints only (``autoscaler.ingest.authentication``).
"""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from autoscaler.ingest import tokens
from autoscaler.ingest.models import IngestToken
from autoscaler.models import Application


def _owner(username: str | None):
    """The named user, or the default owner; never created here (a typo must change nothing)."""
    name = username or settings.AUTOSCALER_DEFAULT_OWNER
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise CommandError(f"--owner: no user named {name!r}")
    return user


def _open_private(path: str) -> int:
    """A file descriptor writing ``path`` (created or truncated), readable by its owner only (0600)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise CommandError(f"--output: cannot write {path!r}: {exc.strerror}") from None
    os.fchmod(fd, 0o600)  # an existing file keeps its mode on open
    return fd


class Command(BaseCommand):
    help = "Create, rotate, revoke or inspect the ingest token of an application's engine agents."

    def add_arguments(self, parser) -> None:
        parser.add_argument("application", help="application name")
        parser.add_argument(
            "--owner", help="username owning the application (default: $AUTOSCALER_DEFAULT_OWNER)"
        )
        out = parser.add_mutually_exclusive_group()
        out.add_argument("--print", action="store_true", help="print the new token to standard output")
        out.add_argument("--output", metavar="FILE", help="write the new token to FILE (mode 0600)")
        out.add_argument("--revoke", action="store_true", help="delete the application's token")
        parser.add_argument("--rotate", action="store_true", help="replace an existing token")

    def handle(self, *args, **opts) -> None:
        owner = _owner(opts["owner"])
        app = Application.objects.filter(owner=owner, name=opts["application"]).first()
        if app is None:
            raise CommandError(
                f"application: {owner.username} has no application named {opts['application']!r}"
            )
        existing = IngestToken.objects.filter(application=app).first()
        if opts["revoke"]:
            if opts["rotate"]:
                raise CommandError("--rotate: not with --revoke")
            self.stdout.write(f"revoked the ingest token of {app.name}" if tokens.revoke(app) else
                              f"{app.name} has no ingest token")  # fmt: skip
            return
        if not (opts["print"] or opts["output"]):
            if opts["rotate"]:
                raise CommandError("--rotate: give --print or --output FILE (a new token is shown only once)")
            self.stdout.write(self._status(app, existing))
            return
        if existing is not None and not opts["rotate"]:
            raise CommandError(
                f"application: {app.name} already has an ingest token ({existing.prefix}...); "
                "--rotate replaces it"
            )
        fd = _open_private(opts["output"]) if opts["output"] else None
        try:
            secret = tokens.issue(app, rotate=opts["rotate"])
            if fd is not None:
                os.write(fd, (secret + "\n").encode())
        finally:
            if fd is not None:
                os.close(fd)
        what = "rotated" if existing is not None else "created"
        if fd is not None:
            self.stdout.write(
                f"{what} the ingest token of {app.name}; written to {opts['output']} (mode 0600)"
            )
        else:
            self.stderr.write(f"{what} the ingest token of {app.name}")
            self.stdout.write(secret)

    @staticmethod
    def _status(app: Application, token: IngestToken | None) -> str:
        if token is None:
            return f"{app.name} has no ingest token (create one with --print or --output FILE)"
        used = token.last_used_at.isoformat() if token.last_used_at else "never"
        return (
            f"{app.name}: ingest token {token.prefix}... created {token.created_at.isoformat()}, "
            f"rotated {token.rotated_at.isoformat()}, last used {used}"
        )
