#!/usr/bin/env bash
# The live demo on embedded defaults (SQLite under var/, kombu's filesystem broker: no server needed).
# Sets up .venv if needed, migrates, applies the example manifests and prints an API token for "admin"; then
# (DEMO_ENGINE=spark, the default) starts a Spark standalone master and workers on 127.0.0.1, the web server
# (http://127.0.0.1:8000), a Celery worker and Celery beat, and the WordCount pipeline as two Spark applications
# ("demo-wordcount": splitter and counter, Taxi trace compressed so a day takes 20 minutes) under an RL operator
# manager, and prints every scaling decision as it is written (scripts/demo_spark.py).
# DEMO_ENGINE=simulated runs the simulated application "demo-taxi" instead (scripts/demo_control.py).
# Ctrl-C stops every process it started. DEMO_SECONDS=N stops by itself after N seconds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py apply -f manifests/examples
.venv/bin/python manage.py drf_create_token admin | sed 's/^/API token: /'
case "${DEMO_ENGINE:-spark}" in
spark)
    exec .venv/bin/python scripts/demo_spark.py --policy "${DEMO_POLICY:-ql-pds-plus}" \
        --period "${DEMO_PERIOD:-20}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}" ;;
simulated)
    exec .venv/bin/python scripts/demo_control.py --policy "${DEMO_POLICY:-ql-pds-plus}" \
        --period "${DEMO_PERIOD:-10}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}" ;;
*)
    echo "DEMO_ENGINE: ${DEMO_ENGINE} is not one of spark, simulated" >&2; exit 2 ;;
esac
