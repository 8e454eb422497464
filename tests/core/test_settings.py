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


def test_debug_is_off_unless_django_debug_turns_it_on(tmp_path):
    assert import_settings(tmp_path).stdout.split()[1] == "False"
    assert import_settings(tmp_path, DEBUG="true").stdout.split()[1] == "False"  # only DJANGO_DEBUG counts
    for on in ("1", "true", "yes"):
        run = import_settings(tmp_path, DJANGO_DEBUG=on)
        assert run.returncode == 0 and run.stdout.split()[1] == "True", run.stderr


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("change-me-to-a-long-random-string", "is a placeholder"),  # .env.example's value
        ("django-insecure-" + "k3y" * 20, "is a placeholder"),
        ("", "is empty"),
        ("x" * 49, "is too short (49 characters; at least 50)"),
        ("ab" * 40, "has fewer than 5 distinct characters"),
    ],
)
def test_production_refuses_an_insecure_secret_key(tmp_path, key, reason):
    run = import_settings(tmp_path, SECRET_KEY=key)
    assert run.returncode != 0 and f"SECRET_KEY {reason}" in run.stderr, run.stderr
    assert import_settings(tmp_path, SECRET_KEY=key, DJANGO_DEBUG="1").returncode == 0  # a developer may


def test_production_accepts_a_strong_secret_key(tmp_path):
    run = import_settings(tmp_path, SECRET_KEY="Kq3" + "x7Zp" * 12)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["django.db.backends.sqlite3", "False", "51"]
    assert not (tmp_path / "var" / "secret_key").exists()  # the configured key is the key


def test_a_short_metrics_token_is_refused(tmp_path):
    run = import_settings(tmp_path, METRICS_TOKEN="short-token")
    assert run.returncode != 0 and "METRICS_TOKEN is too short (11 characters; at least 24)" in run.stderr
    assert import_settings(tmp_path, METRICS_TOKEN="m" * 12 + "3tr1cs" * 2).returncode == 0


def test_unset_key_is_generated_once_kept_private_and_strong(tmp_path):
    first = import_settings(tmp_path)
    assert first.returncode == 0, first.stderr
    path = tmp_path / "var" / "secret_key"
    key = path.read_text()
    assert len(key) >= 50 and len(set(key)) >= 5
    assert path.stat().st_mode & 0o777 == 0o600
    assert import_settings(tmp_path).returncode == 0
    assert import_settings(tmp_path, DJANGO_DEBUG="1").returncode == 0
    assert path.read_text() == key
    assert not [
        p.name for p in path.parent.iterdir() if p.name.startswith(".secret_key")
    ]  # no staging leftovers


def test_database_url_selects_postgresql(tmp_path):
    run = import_settings(tmp_path, DATABASE_URL="postgres://u:p@db.invalid:5432/x")
    assert run.stdout.split()[0] == "django.db.backends.postgresql", run.stderr


def test_the_embedded_sqlite_database_keeps_a_write_ahead_log(tmp_path):
    """The default SQLite file runs in WAL mode with full sync: readers do not wait for a writer, and a commit
    is on disk when it returns."""
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'autoscaler.settings'; django.setup(); "
        "from django.db import connection; c = connection.cursor(); "
        "print(c.execute('PRAGMA journal_mode').fetchone()[0], c.execute('PRAGMA synchronous').fetchone()[0])"
    )
    env = {"PATH": "/usr/bin:/bin", "AUTOSCALER_VAR_DIR": str(tmp_path / "var")}
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["wal", "2"]  # synchronous 2 = FULL


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
