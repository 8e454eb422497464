"""Settings from the environment, the Celery app, and the OpenAPI schema's validity."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def import_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    code = (
        "import autoscaler.settings as s; print(s.DATABASES['default']['ENGINE'], s.DEBUG, len(s.SECRET_KEY))"
    )
    base = {"PATH": "/usr/bin:/bin", "AUTOSCALER_VAR_DIR": str(tmp_path / "var")}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, capture_output=True, text=True
    )


def test_production_requires_a_secret_key(tmp_path):
    run = import_settings(tmp_path, DEBUG="false")
    assert run.returncode != 0 and "SECRET_KEY must be set when DEBUG is false" in run.stderr
    run = import_settings(tmp_path, DEBUG="false", SECRET_KEY="x" * 50)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["django.db.backends.sqlite3", "False", "50"]


def test_development_key_is_generated_once_and_kept(tmp_path):
    first = import_settings(tmp_path)
    assert first.returncode == 0, first.stderr
    key = (tmp_path / "var" / "secret_key").read_text()
    assert len(key) >= 50
    assert import_settings(tmp_path).returncode == 0
    assert (tmp_path / "var" / "secret_key").read_text() == key


def test_database_url_selects_postgresql(tmp_path):
    run = import_settings(tmp_path, DATABASE_URL="postgres://u:p@db.invalid:5432/x")
    assert run.stdout.split()[0] == "django.db.backends.postgresql", run.stderr


def test_celery_app_uses_the_configured_broker(tmp_path):
    from kombu import Connection

    from autoscaler import celery_app

    assert celery_app.conf.broker_url == settings.CELERY_BROKER_URL
    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        pytest.skip("a network broker is configured; the serverless default is what this test checks")
    options = celery_app.conf.broker_transport_options
    for key in ("data_folder_in", "data_folder_out", "data_folder_processed", "control_folder"):
        assert Path(options[key]).is_relative_to(settings.VAR_DIR), (
            key
        )  # nothing lands in the working directory
    # a message really goes through the default transport, which needs no server (folders moved to tmp_path)
    moved = {
        key: str(tmp_path / Path(value).name) for key, value in options.items() if key.endswith("folder_in")
    }
    moved |= {key: str(tmp_path / Path(value).name) for key, value in options.items() if "folder" in key}
    for folder in set(moved.values()):
        Path(folder).mkdir(exist_ok=True)
    with Connection(celery_app.conf.broker_url, transport_options={**options, **moved}) as conn:
        queue = conn.SimpleQueue(f"test-{uuid.uuid4().hex}")
        queue.put({"hello": "broker"})
        message = queue.get(timeout=5)
        assert message.payload == {"hello": "broker"}
        message.ack()
        queue.close()


def test_openapi_schema_validates(tmp_path, capsys):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--file", str(target))
    assert "/api/v1/applications/{name}/" in target.read_text()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "autoscaler/api/" in line]
    assert warnings == []  # the manifest API documents itself completely
