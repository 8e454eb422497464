"""Login throttling of the token endpoint: at most ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["login"]``
requests (default 5 per minute) per (username, client address); beyond that a 429 in the API's error format."""

from __future__ import annotations

import hashlib

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from .parsers import StrictJSONParser


class LoginRateThrottle(SimpleRateThrottle):
    """Counts POSTs per username (as sent, case-folded) and client address (``REMOTE_ADDR``)."""

    scope = "login"

    def get_cache_key(self, request: Request, view) -> str:
        data = request.data if isinstance(request.data, dict) else {}
        username = str(data.get("username", ""))[:150].casefold()
        ident = hashlib.sha256(f"{username}\0{self.get_ident(request)}".encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ThrottledObtainAuthToken(ObtainAuthToken):
    """``POST {"username", "password"}`` (JSON) -> ``{"token"}``: the user's API token."""

    parser_classes = [StrictJSONParser]
    throttle_classes = [LoginRateThrottle]

    @extend_schema(
        request=inline_serializer(
            "TokenRequest",
            {"username": serializers.CharField(), "password": serializers.CharField()},
        ),
        responses={200: inline_serializer("TokenResponse", {"token": serializers.CharField()})},
        auth=[],
    )
    def post(self, request: Request, *args, **kwargs):
        return super().post(request, *args, **kwargs)
