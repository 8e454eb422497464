"""Failed-login counting for the HTML login page, per (username, client address), in Django's cache.

After ``LOGIN_THROTTLE_ATTEMPTS`` failures within ``LOGIN_THROTTLE_WINDOW_S`` seconds (counted from the first
failure of the window), the pair is locked for ``LOGIN_THROTTLE_LOCKOUT_S`` seconds: every attempt is refused,
even one with the right password, so guessing gets nowhere. A successful login clears the count. The cache is
per process unless ``CACHE_URL`` names a shared Redis database (as docker-compose.yml does).
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

PREFIX = "login-throttle"


def _key(kind: str, username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.strip().lower()}\0{address}".encode()).hexdigest()
    return f"{PREFIX}:{kind}:{digest}"


def client_address(request: HttpRequest | None) -> str:
    """The address the request came from (``REMOTE_ADDR``: behind a proxy, the proxy's)."""
    return (request.META.get("REMOTE_ADDR") or "unknown") if request is not None else "unknown"


def locked_for_s(username: str, address: str) -> int:
    """Seconds until the pair may try again (0: not locked)."""
    until = cache.get(_key("locked", username, address))
    if until is None:
        return 0

    return max(1, int(until - time.time()))


def record_failure(username: str, address: str) -> bool:
    """Count a failed attempt; True when it locks the pair."""

    count_key = _key("failures", username, address)
    cache.add(count_key, 0, timeout=settings.LOGIN_THROTTLE_WINDOW_S)
    try:
        failures = cache.incr(count_key)
    except ValueError:  # the window expired between add and incr
        cache.set(count_key, 1, timeout=settings.LOGIN_THROTTLE_WINDOW_S)
        failures = 1
    if failures < settings.LOGIN_THROTTLE_ATTEMPTS:
        return False
    lockout = settings.LOGIN_THROTTLE_LOCKOUT_S
    cache.set(_key("locked", username, address), time.time() + lockout, timeout=lockout)
    cache.delete(count_key)
    return True


def clear(username: str, address: str) -> None:
    """Forget the failures of the pair (after a successful login)."""
    cache.delete(_key("failures", username, address))
