#!/usr/bin/env bash
# The live demo on embedded defaults (SQLite under var/, kombu's filesystem broker: no server needed).
#   bash scripts/demo.sh [--engine spark|flink|simulated]      (or DEMO_ENGINE=...; the option wins)
# Sets up .venv if needed, migrates, applies the example manifests and writes an API token for "admin" to
# var/admin-api-token (mode 0600; the log shows the path only, never the token); then
# starts the web server (http://127.0.0.1:8000), a Celery worker and Celery beat, and one application under an RL
# operator manager, printing every scaling decision as it is written:
# - spark (default): a Spark standalone master and workers on 127.0.0.1 and the WordCount pipeline as two Spark
#   applications ("demo-wordcount", Taxi trace compressed so a day takes 20 minutes; scripts/demo_spark.py);
# - flink: a local Flink cluster from the apache-flink pip package (.venv-flink, scripts/flink_env.sh) running the
#   PyFlink WordCount job with the trace-driven source ("demo-flink-wordcount"; scripts/demo_flink.py);
# - simulated: the simulated application "demo-taxi" (scripts/demo_control.py).
# Ctrl-C stops every process it started. DEMO_SECONDS=N stops by itself after N seconds. The demo runs Django with
# DEBUG on (DJANGO_DEBUG=1, on 127.0.0.1 only); set DJANGO_DEBUG=0 to see what production shows.
set -euo pipefail
ENGINE="${DEMO_ENGINE:-spark}"
while [ $# -gt 0 ]; do
    case "$1" in
    --engine) [ $# -ge 2 ] || { echo "--engine: missing value (spark, flink or simulated)" >&2; exit 2; }
        ENGINE="$2"; shift 2 ;;
    --engine=*) ENGINE="${1#--engine=}"; shift ;;
    -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (usage: demo.sh [--engine spark|flink|simulated])" >&2; exit 2 ;;
    esac
done
case "$ENGINE" in
spark|flink|simulated) ;;
*) echo "--engine/DEMO_ENGINE: ${ENGINE} is not one of spark, flink, simulated" >&2; exit 2 ;;
esac
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
export DJANGO_DEBUG="${DJANGO_DEBUG:-1}"
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py apply -f manifests/examples
.venv/bin/python scripts/demo_common.py save-token admin
case "$ENGINE" in
spark)
    exec .venv/bin/python scripts/demo_spark.py ${DEMO_POLICY:+--policy "$DEMO_POLICY"} \
        --period "${DEMO_PERIOD:-20}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}" ;;
flink)
    source scripts/flink_env.sh >/dev/null
    exec .venv/bin/python scripts/demo_flink.py ${DEMO_POLICY:+--policy "$DEMO_POLICY"} \
        --period "${DEMO_PERIOD:-20}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}" ;;
simulated)
    exec .venv/bin/python scripts/demo_control.py ${DEMO_POLICY:+--policy "$DEMO_POLICY"} \
        --period "${DEMO_PERIOD:-10}" --seconds "${DEMO_SECONDS:-0}" --port "${DEMO_PORT:-8000}" ;;
esac
