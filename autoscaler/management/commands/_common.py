"""Helpers shared by the manifest commands: owner option and error printing."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from autoscaler.manifests import default_owner
from autoscaler.schemas import ManifestError
from autoscaler.schemas.documents import resolve_kind


def add_owner_argument(parser) -> None:
    parser.add_argument(
        "--owner",
        help="username owning applications and deployments (default: $AUTOSCALER_DEFAULT_OWNER, created if missing)",
    )


def add_kind_argument(parser) -> None:
    parser.add_argument("kind", help="NodeTypeCatalog, Region, Application, Deployment (case-insensitive)")


def kind_of(options: dict) -> str:
    """The resource kind the command names; CommandError naming the field when there is no such kind."""
    try:
        return resolve_kind(options["kind"])
    except ValueError as exc:
        raise CommandError(f"kind: {exc}") from None


def resolve_owner(username: str | None):
    if username is None:
        return default_owner()
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"--owner: no user named {username!r}")
    return user


def fail(command: BaseCommand, exc: ManifestError, what: str) -> CommandError:
    """Print every error (field path: reason) to stderr and return the CommandError to raise (exit status 1)."""
    for error in exc.errors:
        command.stderr.write(f"error: {error}")
    return CommandError(f"{what}: {len(exc.errors)} error(s); nothing was changed")
