"""Django settings, read from environment variables with embedded defaults (the README's configuration table lists
them all; the production values are in .env.example and docker-compose.yml).

| variable             | default                                          |
|----------------------|--------------------------------------------------|
| DJANGO_DEBUG         | false (the demo and developers set 1)            |
| SECRET_KEY           | generated once, kept in var/secret_key (mode 0600); an explicit key must be strong unless DEBUG |
| DATABASE_URL         | sqlite:///<project>/var/db.sqlite3               |
| CELERY_BROKER_URL    | filesystem://  (kombu filesystem transport under var/broker/) |
| CACHE_URL            | none: per-process memory (redis://host:6379/N shares it between processes) |
| ALLOWED_HOSTS        | localhost,127.0.0.1,[::1] (comma separated)      |
| METRICS_TOKEN        | none: /metrics answers staff only                |
| SECURE_* / *_COOKIE_SECURE | Django's defaults (off); production values in .env.example |
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from autoscaler.secret_key import development_secret_key, insecure_secret_key_reason

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AUTOSCALER_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    """A boolean environment variable: 1/true/yes/on (any case) is true."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated environment variable as a list of non-empty, stripped items."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    """An integer environment variable; a value that is not an integer stops the start with the variable's name."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: {value!r} is not an integer") from None


# Debug pages list every URL pattern and settings: off unless a developer or the demo asks for it.
DEBUG = env_bool("DJANGO_DEBUG", False)
_configured_key = os.environ.get("SECRET_KEY")
if _configured_key is None or (DEBUG and not _configured_key.strip()):
    # unset: a random key generated once into var/ (fine for one host; several hosts share an explicit SECRET_KEY)
    SECRET_KEY = development_secret_key(VAR_DIR / "secret_key")
else:
    if not DEBUG and (reason := insecure_secret_key_reason(_configured_key)):
        raise ImproperlyConfigured(
            f"SECRET_KEY {reason}; set a long random key (or DJANGO_DEBUG=1 to develop)"
        )
    SECRET_KEY = _configured_key
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

# HTTPS: Django's defaults (off) so that a plain-HTTP run on 127.0.0.1 works; production turns them on
# (.env.example; `manage.py check --deploy` is clean with those values). Behind a TLS-terminating proxy, set
# SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https (the proxy must set that header and strip a client's).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# path regexes (without the leading slash) still served over plain HTTP, e.g. in-cluster agents' ingest calls
SECURE_REDIRECT_EXEMPT = env_list("SECURE_REDIRECT_EXEMPT", "")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)  # seconds browsers keep to HTTPS only (0: no header)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
_proxy_header = env_list("SECURE_PROXY_SSL_HEADER", "")
if _proxy_header and len(_proxy_header) != 2:
    raise ImproperlyConfigured(
        "SECURE_PROXY_SSL_HEADER: expected 'HEADER,value', e.g. HTTP_X_FORWARDED_PROTO,https"
    )
SECURE_PROXY_SSL_HEADER = tuple(_proxy_header) or None

# Where login lands without `next`: the fleet overview (Django's default /accounts/profile/ does not exist).
LOGIN_REDIRECT_URL = "dashboard:fleet"
# Login page throttling, per (username, client address): after LOGIN_THROTTLE_ATTEMPTS failures within
# LOGIN_THROTTLE_WINDOW_S seconds, every attempt is refused for LOGIN_THROTTLE_LOCKOUT_S seconds.
LOGIN_THROTTLE_ATTEMPTS = env_int("LOGIN_THROTTLE_ATTEMPTS", 5)
LOGIN_THROTTLE_WINDOW_S = env_int("LOGIN_THROTTLE_WINDOW_S", 300)
LOGIN_THROTTLE_LOCKOUT_S = env_int("LOGIN_THROTTLE_LOCKOUT_S", 900)

# Bearer token of the Prometheus scraper on /metrics; without one, /metrics answers staff users only.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()
METRICS_TOKEN_MIN_LENGTH = 24  # characters
if METRICS_TOKEN and len(METRICS_TOKEN) < METRICS_TOKEN_MIN_LENGTH and not DEBUG:
    raise ImproperlyConfigured(
        f"METRICS_TOKEN is too short ({len(METRICS_TOKEN)} characters; at least {METRICS_TOKEN_MIN_LENGTH})"
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "autoscaler.apps.AutoscalerConfig",
    "django_celery_beat",
    "autoscaler.control",
    "autoscaler.ingest",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "autoscaler.urls"
WSGI_APPLICATION = "autoscaler.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # before the apps' templates: drf_spectacular/ pages that load nothing from other hosts
        "DIRS": [BASE_DIR / "autoscaler" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if not os.environ.get("DATABASE_URL"):
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        # a reused connection (Celery workers keep theirs across tasks) is checked before its first use in each
        # request or task (autoscaler.control.apps marks it for the check before every task),
        # so one the server terminated is replaced instead of failing the task
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # the embedded default: write-ahead logging lets the web server read while a Celery worker writes (the
    # rollback journal blocked readers and fsynced twice per commit: 18 % of bench_loop's time went to commits);
    # synchronous=FULL keeps every committed transaction across a power loss. A DATABASE_URL's own
    # ?init_command=... wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's cache (login throttling, dashboard data): per process unless CACHE_URL names a Redis database that
# all web processes share (docker-compose.yml sets one, so the throttle counts across gunicorn workers).
CACHE_URL = os.environ.get("CACHE_URL", "")
if CACHE_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one before collectstatic
# serve the apps' static files also without collectstatic: with DEBUG now off by default, a run on the
# embedded defaults (tests, runserver) still gets its pages' scripts and styles; production collects them anyway
WHITENOISE_USE_FINDERS = True
# production (DEBUG off): collectstatic writes content-hashed, gzip-compressed copies that WhiteNoise serves with a
# ten-year max-age ("immutable"); pages link the hashed names, so a new release busts the browsers' caches. Without
# collectstatic, or with DEBUG on (edited files show at once), pages link the plain names, served from the apps
# (dashboard.staticfiles). One storage whatever DEBUG: the image's collectstatic runs with DEBUG on.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "dashboard.staticfiles.CompressedManifestOrPlainStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "autoscaler.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # JSON bodies only: any other media type is a 415 in the API's error format (see autoscaler.api.errors).
    "DEFAULT_PARSER_CLASSES": ["autoscaler.api.parsers.StrictJSONParser"],
    # ``login``: POSTs to /api/v1/token/ per username and client address (autoscaler.api.throttling).
    "DEFAULT_THROTTLE_RATES": {"login": os.environ.get("API_LOGIN_THROTTLE_RATE", "5/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Autoscaler control plane API",
    "DESCRIPTION": "Declarative resources of the SLO-driven stream-processing autoscaler. "
    "Every resource is a manifest (apiVersion, kind, metadata.name, spec).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # nothing from other hosts on the docs pages (templates in autoscaler/templates/drf_spectacular/ too):
    # system fonts instead of Google Fonts, no badge from Swagger's online validator
    "REDOC_UI_SETTINGS": {
        "theme": {
            "typography": {
                "fontFamily": "system-ui, sans-serif",
                "headings": {"fontFamily": "system-ui, sans-serif"},
            }
        }
    },
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "OAS_VERSION": "3.1.0",  # pydantic emits JSON Schema 2020-12 (numeric exclusiveMinimum/Maximum)
    # every operation documents the error statuses it can answer with the one error schema
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "autoscaler.api.openapi.document_error_responses",
    ],
}

# Celery: a broker that needs no server by default (kombu's filesystem transport under var/broker/).
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "data_folder_processed": str(BROKER_DIR / "processed"),
        "store_processed": False,
        "control_folder": str(BROKER_DIR / "control"),  # exchange bindings; kombu's default is ./control
    }
if os.environ.get("CELERY_BROKER_VISIBILITY_TIMEOUT_S"):
    # seconds before the Redis transport redelivers a message no worker acknowledged (default 300, see
    # autoscaler.control.apps); a redelivered tick is older than its period and is recorded as stale
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **globals().get("CELERY_BROKER_TRANSPORT_OPTIONS", {}),
        "visibility_timeout": float(os.environ["CELERY_BROKER_VISIBILITY_TIMEOUT_S"]),
    }
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TIMEZONE = TIME_ZONE
# fraction of each control period over which the dispatcher spreads the applications' ticks (0 = all at once)
AUTOSCALER_DISPATCH_SPREAD = float(os.environ.get("AUTOSCALER_DISPATCH_SPREAD", "0.5"))
# seconds between two dispatches (the beat entry of autoscaler.control.apps)
AUTOSCALER_DISPATCH_INTERVAL_S = float(os.environ.get("AUTOSCALER_DISPATCH_INTERVAL_S", "5"))
# seconds between two runs of dashboard.rollup (the beat entry of dashboard.apps): the dashboards' charts follow the
# control loop with at most this delay (plus the run's own time); the pages never build rollups themselves
AUTOSCALER_ROLLUP_INTERVAL_S = float(os.environ.get("AUTOSCALER_ROLLUP_INTERVAL_S", "10"))
if AUTOSCALER_ROLLUP_INTERVAL_S <= 0:
    raise ImproperlyConfigured("AUTOSCALER_ROLLUP_INTERVAL_S must be > 0 (seconds)")
# a tick that begins more than this many control periods after its slot began is stale: recorded, not applied
# (0 turns the rule off, e.g. to replay ticks of old slots)
AUTOSCALER_STALE_AFTER_PERIODS = float(os.environ.get("AUTOSCALER_STALE_AFTER_PERIODS", "1"))

# The owner of applications applied from the command line when no --owner is given.
AUTOSCALER_DEFAULT_OWNER = os.environ.get("AUTOSCALER_DEFAULT_OWNER", "admin")

# Engine addresses every application may reference and the control plane may contact, besides those staff declare
# on regions (``spec.endpoints``): comma-separated, e.g. "http://127.0.0.1:8081,spark://127.0.0.1:7077". See
# ``connectors.endpoints`` for the form (ports or port ranges, path prefixes). Default: none.
AUTOSCALER_ENGINE_ENDPOINTS = [
    e.strip() for e in os.environ.get("AUTOSCALER_ENGINE_ENDPOINTS", "").split(",") if e.strip()
]


#: directories whose files a simulated application may name as its ``spec.connector.trace`` (absolute paths,
#: separated by ``os.pathsep``); empty: only the traces shipped in ``connectors/traces/``
AUTOSCALER_TRACE_DIRS = [
    d for d in os.environ.get("AUTOSCALER_TRACE_DIRS", "").split(os.pathsep) if d.strip()
]


def _check_endpoints(endpoints: list[str]) -> None:
    from connectors.endpoints import EndpointError, parse_endpoint

    for endpoint in endpoints:
        try:
            parse_endpoint(endpoint)
        except EndpointError as exc:
            raise ImproperlyConfigured(f"AUTOSCALER_ENGINE_ENDPOINTS: {endpoint!r}: {exc}") from None


_check_endpoints(AUTOSCALER_ENGINE_ENDPOINTS)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
