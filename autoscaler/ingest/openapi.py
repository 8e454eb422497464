"""The ingest token in the OpenAPI schema (a security scheme ``ingestToken``); imported by the views."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class IngestTokenScheme(OpenApiAuthenticationExtension):
    target_class = "autoscaler.ingest.authentication.IngestTokenAuthentication"
    name = "ingestToken"

    def get_security_definition(self, auto_schema) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token ssi_...`: an application's ingest token (`manage.py ingest_token APP`); "
            "it writes that application's ingest endpoints only.",
        }
