"""Authentication of the ingest endpoints: an application's ingest token, or (for compatibility) its owner's
API token or session.

An ingest token authenticates as an :class:`IngestPrincipal` (not a user): it is accepted by the ingest views
only (this class is in no other view's ``authentication_classes``; everywhere else DRF's ``TokenAuthentication``
answers 401 for it) and only for its own application (``autoscaler.ingest.views.operator_of``).
"""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from autoscaler.ingest import tokens
from autoscaler.ingest.models import IngestToken


class IngestPrincipal:
    """Who an ingest token speaks for: the agents of one application. Never staff, never a user."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, token: IngestToken) -> None:
        self.token = token
        self.application = token.application
        self.pk = self.id = f"ingest-{token.pk}"  # per-token identity, e.g. for throttling
        self.username = f"ingest:{token.application.name}"

    def __str__(self) -> str:
        return self.username

    def get_username(self) -> str:
        return self.username

    def has_perm(self, perm: str, obj: object = None) -> bool:
        return False


class IngestTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token ssi_...``; any other credentials are left to the next authentication class."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[IngestPrincipal, IngestToken] | None:
        parts = authentication.get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].decode("latin-1").lower() != self.keyword.lower():
            return None
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError:
            return None
        if not tokens.is_ingest_secret(secret):
            return None
        token = tokens.lookup(secret)
        if token is None:
            raise exceptions.AuthenticationFailed("invalid ingest token")
        tokens.touch(token)
        return IngestPrincipal(token), token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
