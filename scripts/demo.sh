#!/usr/bin/env bash
# The live demo on embedded defaults (SQLite under var/, kombu's filesystem broker: no server needed).
# Sets up .venv if needed, migrates, applies the example manifests, prints an API token for "admin", then starts
# the web server (http://127.0.0.1:8000), a Celery worker and Celery beat with a running simulated application
# ("demo-taxi", Taxi trace, RL operator managers) and prints every scaling decision as it is written.
# Ctrl-C stops every process it started. DEMO_SECONDS=N stops by itself after N seconds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py apply -f manifests/examples
.venv/bin/python manage.py drf_create_token admin | sed 's/^/API token: /'
exec .venv/bin/python scripts/demo_control.py --policy "${DEMO_POLICY:-ql-pds-plus}" \
    --period "${DEMO_PERIOD:-10}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}"
