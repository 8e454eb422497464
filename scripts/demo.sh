#!/usr/bin/env bash
# Set up .venv if needed, migrate the database, apply the example manifests and start the dev server on
# http://127.0.0.1:8000 (API docs at /api/v1/docs/, admin at /admin/). Prints an API token for the owner
# of the example applications (user "admin"; set a password with: .venv/bin/python manage.py changepassword admin).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py apply -f manifests/examples
.venv/bin/python manage.py drf_create_token admin | sed 's/^/API token: /'
exec .venv/bin/python manage.py runserver "${DEMO_ADDR:-127.0.0.1:8000}"
