"""The per-application lock every writer of an application's control state takes (the tick, the AM's tuning,
agent reset/import): a PostgreSQL session advisory lock ``(LOCK_NAMESPACE, application id)``, released by the
server when the holder's connection dies; other applications are not blocked. On other databases (SQLite) the
database's own write lock serialises the transactions and this lock is a no-op."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connection

LOCK_NAMESPACE = 0x5CA1  # first key of pg_advisory_lock(int, int); the second is the application id


@contextlib.contextmanager
def application_lock(application_id: int) -> Iterator[None]:
    """Serialise the control-state writers of one application across processes (see module doc)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, application_id])
    try:
        yield
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, application_id])
