"""Per-application ingest tokens: issue, rotate, revoke, look up. The secret is never stored, only its SHA-256
(the secret has 256 random bits, so a fast hash is enough); nothing here logs it.

A token reads ``ssi_<43 url-safe characters>``; agents send it as ``Authorization: Token <secret>``, the same
header as an owner's API token (which keeps working on the ingest endpoints, for compatibility).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from autoscaler.ingest.models import IngestToken

PREFIX = "ssi_"
SHOWN_CHARS = 8  # of the secret after the prefix, kept to recognise a token in the admin
TOUCH_EVERY = dt.timedelta(minutes=1)


def digest(secret: str) -> str:
    """SHA-256 of a secret, hex (64 characters)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def is_ingest_secret(secret: str) -> bool:
    """Whether ``secret`` has the shape of an ingest token (not an owner's API token)."""
    return secret.startswith(PREFIX)


def issue(application, *, rotate: bool = False) -> str:
    """Create the application's ingest token and return its secret (the only time it is available).

    An application has at most one token: with ``rotate`` an existing one is replaced (it stops working at
    once); without, an existing token is a ``ValueError``."""
    secret = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        row = IngestToken.objects.select_for_update().filter(application=application).first()
        if row is not None and not rotate:
            raise ValueError(f"application {application.name!r} already has an ingest token: rotate it")
        if row is None:
            row = IngestToken(application=application)
        row.key_hash = digest(secret)
        row.prefix = secret[: len(PREFIX) + SHOWN_CHARS]
        row.last_used_at = None
        row.save()
    return secret


def revoke(application) -> bool:
    """Delete the application's ingest token; True when there was one."""
    deleted, _ = IngestToken.objects.filter(application=application).delete()
    return bool(deleted)


def lookup(secret: str) -> IngestToken | None:
    """The token whose secret this is (with its application and owner), or ``None``."""
    if not is_ingest_secret(secret):
        return None
    return IngestToken.objects.select_related("application").filter(key_hash=digest(secret)).first()


def touch(token: IngestToken) -> None:
    """Record a use of the token, at most once per ``TOUCH_EVERY``."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= TOUCH_EVERY:
        IngestToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
