"""HTTP requests of the connectors to an engine (stdlib ``urllib``): no redirect is followed (a declared
endpoint could otherwise send the control plane to any address), the body read is bounded, and every failure is
one short line that holds no byte of the reply (``FetchError.reason``: "not reachable: timeout",
"answered HTTP 502", "answered non-JSON", ...). Remote bodies are never echoed to a user."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from typing import Any

#: largest reply body read (bytes); a longer one is refused
MAX_BODY_BYTES = 32 * 1024 * 1024


class FetchError(OSError):
    """A request failed; ``reason`` is one line naming what happened, ``status`` the HTTP code (0 if none)."""

    def __init__(self, reason: str, status: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 (urllib's signature)
        return None  # the 3xx reply is raised as an HTTPError and reported as "answered HTTP 3xx"


_OPENER = urllib.request.build_opener(_NoRedirect)


def _unreachable(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, TimeoutError | socket.timeout):
        return "not reachable: timeout"
    if isinstance(reason, ConnectionRefusedError):
        return "not reachable: connection refused"
    if isinstance(reason, socket.gaierror):
        return "not reachable: unknown host"
    if isinstance(reason, ConnectionError):
        return "not reachable: connection closed"
    if isinstance(reason, OSError) and reason.strerror:
        return f"not reachable: {reason.strerror.lower()}"
    return f"not reachable: {type(reason).__name__}"


def fetch(request: urllib.request.Request | str, timeout_s: float) -> bytes:
    """The body of a 2xx reply to ``request``; FetchError otherwise (see the module docstring)."""
    try:
        with _OPENER.open(request, timeout=timeout_s) as resp:
            body = resp.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise FetchError(f"answered HTTP {exc.code}", exc.code) from None
    except urllib.error.URLError as exc:
        raise FetchError(_unreachable(exc)) from None
    except http.client.HTTPException:
        raise FetchError("answered something that is not HTTP") from None
    except OSError as exc:  # a timeout or reset while reading the reply
        raise FetchError(_unreachable(exc)) from None
    except ValueError:  # a URL urllib cannot send (e.g. characters it cannot encode)
        raise FetchError("not reachable: not a valid URL") from None
    if len(body) > MAX_BODY_BYTES:
        raise FetchError(f"answered more than {MAX_BODY_BYTES} bytes")
    return body


def fetch_json(request: urllib.request.Request | str, timeout_s: float) -> Any:
    """The decoded JSON of a 2xx reply (an empty body is ``{}``); FetchError "answered non-JSON" otherwise."""
    body = fetch(request, timeout_s)
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except ValueError:
        raise FetchError("answered non-JSON", 200) from None
