"""Engine endpoints the control plane may contact (the guard against server-side request forgery).

Staff declare the engines' addresses: on a Region (``spec.endpoints``) or in the ``AUTOSCALER_ENGINE_ENDPOINTS``
setting. An Application's connector may reference only addresses those cover, and the connectors contact only
such addresses: a URL a user typed (or a job's agent reported) that no declaration covers is never requested.

An endpoint is ``scheme://host[:port][/path]`` with scheme ``http``, ``https`` or ``spark``; the port is one
number, an inclusive range ``LOW-HIGH`` (e.g. ``http://127.0.0.1:4040-4099`` for Spark driver UIs, which take
the next free port) or, when left out, the scheme's default (80, 443, 7077). It covers a URL of the same scheme
and host (compared as text, case-insensitive: ``127.1`` is not ``127.0.0.1``), a port in its range and a path
equal to its path or below it (``/flink`` covers ``/flink/jobs``, not ``/flinkx``). A URL with user info, a
query (``?``), a fragment (``#``), ``%`` escapes, backslashes, ``.``/``..`` segments, spaces, control or
non-ASCII characters is never covered. Spark masters ``local``, ``local[n]``, ``local[*]`` and ``local[n,f]``
name no address and are always allowed. Pure standard library: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SCHEMES = ("http", "https", "spark")
#: the JobManager address a Flink connector uses when ``restUrl`` is left out (``connectors.flink.connector``)
FLINK_DEFAULT_REST_URL = "http://127.0.0.1:8081"
DEFAULT_PORTS = {"http": 80, "https": 443, "spark": 7077}
#: Spark masters that run in the job's own process: no address to contact
LOCAL_MASTER = re.compile(r"^local(\[(\d+|\*)(,\d+)?\])?$")
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$")
_FORBIDDEN = re.compile(r"[\s\x00-\x1f\x7f%\\?#@]")


class EndpointError(ValueError):
    """A URL or an endpoint declaration that is not of the accepted form (the message says why)."""


@dataclass(frozen=True)
class Address:
    """What a URL points at: scheme, host (lower case), port and path (no trailing ``/``)."""

    scheme: str
    host: str
    port: int
    path: str


@dataclass(frozen=True)
class Endpoint:
    """One declared endpoint: scheme, host (lower case), inclusive port range and path prefix ("" = any)."""

    scheme: str
    host: str
    low_port: int
    high_port: int
    path: str

    def covers(self, address: Address) -> bool:
        """Whether ``address`` is this endpoint or below its path."""
        return (
            address.scheme == self.scheme
            and address.host == self.host
            and self.low_port <= address.port <= self.high_port
            and (not self.path or address.path == self.path or address.path.startswith(self.path + "/"))
        )


def _split(text: str) -> tuple[str, list[str], str]:
    """(scheme, host[:port] parts, path) of ``scheme://netloc[/path]``; EndpointError on any other shape."""
    if not isinstance(text, str) or not text:
        raise EndpointError("must be a non-empty URL")
    if not text.isascii():
        raise EndpointError("must hold ASCII characters only")
    bad = _FORBIDDEN.search(text)
    if bad:
        char = bad.group()
        what = repr(char) if char.isprintable() and not char.isspace() else "a space or control character"
        raise EndpointError(f"must not contain {what} (no user info, query, fragment or escapes)")
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise EndpointError(f"must start with one of {', '.join(s + '://' for s in SCHEMES)}")
    netloc, slash, path = rest.partition("/")
    path = (slash + path).rstrip("/")
    if any(segment in (".", "..") for segment in path.split("/")):
        raise EndpointError("must not contain '.' or '..' path segments")
    if not netloc:
        raise EndpointError("names no host")
    parts = netloc.split(",") if scheme == "spark" else [netloc]  # spark://h1:7077,h2:7077 (standby masters)
    return scheme, parts, path


def _host_port(part: str) -> tuple[str, str | None]:
    """(host in lower case, port text or None) of ``host[:port]`` or ``[v6]:port``."""
    if part.startswith("["):
        host, _, tail = part.partition("]")
        host += "]"
        if tail and not tail.startswith(":"):
            raise EndpointError(f"{part!r} is not host[:port]")
        port = tail[1:] if tail else None
    else:
        host, colon, port = part.partition(":")
        port = port if colon else None
    if not _HOST.match(host):
        raise EndpointError(f"{host!r} is not a host name or IP address")
    return host.lower(), port


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise EndpointError(f"port {text!r} is not a number in 1..65535")
    return int(text)


def parse_addresses(url: str) -> list[Address]:
    """The addresses a URL points at (several for a Spark master with standbys); EndpointError if malformed."""
    scheme, parts, path = _split(url)
    addresses = []
    for part in parts:
        host, port = _host_port(part)
        addresses.append(Address(scheme, host, DEFAULT_PORTS[scheme] if port is None else _port(port), path))
    return addresses


def parse_endpoint(text: str) -> Endpoint:
    """One endpoint declaration (see the module docstring); EndpointError if malformed."""
    scheme, parts, path = _split(text)
    if len(parts) != 1:
        raise EndpointError("declare one host per endpoint")
    host, port = _host_port(parts[0])
    if port is None:
        low = high = DEFAULT_PORTS[scheme]
    elif "-" in port:
        first, _, last = port.partition("-")
        low, high = _port(first), _port(last)
        if low > high:
            raise EndpointError(f"port range {port!r} is empty")
    else:
        low = high = _port(port)
    return Endpoint(scheme, host, low, high, path)


class AllowList:
    """The endpoints the control plane may contact. Declarations that do not parse are left out (never widen)."""

    def __init__(self, endpoints: Iterable[str]) -> None:
        self.endpoints: list[Endpoint] = []
        for text in endpoints:
            try:
                self.endpoints.append(parse_endpoint(text))
            except EndpointError:
                continue

    def refusal(self, url: str) -> str | None:
        """None when every address of ``url`` is covered, else the one-line reason it is not."""
        try:
            addresses = parse_addresses(url)
        except EndpointError as exc:
            return str(exc)
        for address in addresses:
            if not any(ep.covers(address) for ep in self.endpoints):
                return (
                    f"{url!r} is not an engine endpoint declared by staff on the application's regions "
                    "(spec.endpoints) or in AUTOSCALER_ENGINE_ENDPOINTS"
                )
        return None

    def allows(self, url: str) -> bool:
        return self.refusal(url) is None


def connector_urls(engine: str, settings: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """Every engine address of camelCase connector ``settings``: (path under ``spec.connector``, URL).

    ``flink``: ``restUrl``; ``spark``: ``master`` (unless local), ``uiUrl``, ``operators.<name>.uiUrl``."""
    found: list[tuple[tuple[str, ...], str]] = []
    settings = settings or {}
    if engine == "flink":
        found.append((("restUrl",), str(settings.get("restUrl") or FLINK_DEFAULT_REST_URL)))
    elif engine == "spark":
        master = settings.get("master")
        if master is not None and not LOCAL_MASTER.match(str(master)):
            found.append((("master",), str(master)))
        if settings.get("uiUrl"):
            found.append((("uiUrl",), str(settings["uiUrl"])))
        for name, bound in sorted((settings.get("operators") or {}).items()):
            if isinstance(bound, dict) and bound.get("uiUrl"):
                found.append((("operators", str(name), "uiUrl"), str(bound["uiUrl"])))
    return found


def refused_urls(
    engine: str, settings: dict[str, Any], allowed: AllowList
) -> list[tuple[tuple[str, ...], str]]:
    """(path under ``spec.connector``, reason) of every address of ``settings`` that ``allowed`` does not cover."""
    refused = []
    for loc, url in connector_urls(engine, settings):
        reason = allowed.refusal(url)
        if reason is not None:
            refused.append((loc, reason))
    return refused
