"""Schema-driven fuzzing of the whole REST API (Schemathesis, in-process through the WSGI application).

Every operation of ``/api/v1/schema/`` gets generated requests (bodies and parameters that fit the schema and
ones that do not), once with a non-staff user's token and once with a staff user's. A fixed seed and a bounded
number of examples per operation and mode keep the run reproducible and short. Checked on every answer: no
server error (5xx), a documented status code, the documented content type, and a body that matches the
documented schema of that status. Every failing operation is reported, not only the first.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, seed, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from autoscaler import manifests

from .documents import application

pytestmark = pytest.mark.django_db
WC_SPLITTER = {
    "apiVersion": "autoscaler/v1",
    "kind": "Deployment",
    "metadata": {"name": "wc-splitter"},
    "spec": {
        "application": "wordcount",
        "operator": "splitter",
        "region": "vm-local",
        "replicas": {"vm.small": 2},
    },
}

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = 10  # per operation and generation mode
SEED = 18


#: path parameters naming the fuzzing user's stored resources (the other runs generate any names)
STORED = {
    "applications": "wordcount",
    "deployments": "wc-splitter",
    "regions": "vm-local",
    "catalogs": "vm-example",
}


def stored_path_parameters(path: str) -> dict[str, str] | None:
    """Path parameters that address a stored resource of the operation's path, None if it has none."""
    if "{application}" in path:
        return {"application": "wordcount", "operator": "splitter"}
    if "{name}" not in path:
        return None
    return {"name": next(name for kind, name in STORED.items() if f"/{kind}/" in path)}


def fuzz(
    operation, mode: GenerationMode, headers: dict[str, str], path_parameters: dict[str, str] | None = None
) -> None:
    """Generated requests of one operation in one mode; raises on the first failing check (shrunk)."""

    @seed(SEED)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    def run(case) -> None:
        cache.clear()  # the login throttle would answer 429 to most token requests (documented, but dull)
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


@pytest.fixture
def keep_test_connection():
    """The WSGI application closes the database connection after each request (``close_old_connections``); in
    a test that would close the connection holding the test's transaction (PostgreSQL). Django's test client
    disconnects the same signal handlers."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.usefixtures("keep_test_connection")
@pytest.mark.parametrize("is_staff", [False, True], ids=["non-staff", "staff"])
def test_every_operation_conforms_to_its_schema(django_user_model, shared, is_staff):
    user = django_user_model.objects.create_user("fuzzer", password="pw-fuzz-1", is_staff=is_staff)
    manifests.apply_documents([application(regions=["vm-local"]), WC_SPLITTER], user)
    headers = {"Authorization": f"Token {Token.objects.create(user=user).key}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", get_wsgi_application())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30  # every route is described (a broken schema would list few or none)
    failures = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                fuzz(operation, mode, headers)
            except Unsatisfiable:  # nothing of the operation can be made invalid (no parameter, no body)
                assert mode == GenerationMode.NEGATIVE, operation.label
            except (Exception, BaseExceptionGroup) as exc:  # collected, reported together below
                failures.append(f"{operation.label} [{mode.value}]: {type(exc).__name__}: {exc}"[:3000])
        stored = stored_path_parameters(operation.path)
        if stored is not None:  # the same operation on a stored resource (reads answer real bodies)
            try:
                fuzz(operation, GenerationMode.POSITIVE, headers, stored)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.label} {stored}: {type(exc).__name__}: {exc}"[:3000])
    assert not failures, "\n\n".join(failures)
