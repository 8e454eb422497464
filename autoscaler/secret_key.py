"""The Django ``SECRET_KEY``: the random key kept under ``var/`` when none is configured, and what makes a
configured key unfit for production (the rules of Django's ``security.W009`` deploy check plus the placeholders
this project ships)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

MIN_LENGTH = 50  # characters, as Django's deploy check
MIN_DISTINCT = 5  # distinct characters, as Django's deploy check
PLACEHOLDERS = ("change-me", "changeme", "collectstatic-only")  # .env.example's and the Dockerfile's


def insecure_secret_key_reason(key: str) -> str | None:
    """Why ``key`` must not sign sessions in production (a short phrase), or ``None`` when it is fit."""
    if not key.strip():
        return "is empty"
    lowered = key.lower()
    if any(p in lowered for p in PLACEHOLDERS) or lowered.startswith("django-insecure"):
        return "is a placeholder (the example value from .env.example or a Django default)"
    if len(key) < MIN_LENGTH:
        return f"is too short ({len(key)} characters; at least {MIN_LENGTH})"
    if len(set(key)) < MIN_DISTINCT:
        return f"has fewer than {MIN_DISTINCT} distinct characters"
    return None


def development_secret_key(path: Path) -> str:
    """A random key generated on first use and kept at ``path`` (mode 0600) so that sessions survive restarts;
    processes starting together agree on the first one written."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(MIN_LENGTH)
    staged = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key)
    try:
        os.link(
            staged, path
        )  # atomic and fails when another process was first: nobody reads a half-written key
    except FileExistsError:
        key = path.read_text().strip()
    finally:
        staged.unlink()
    return key
