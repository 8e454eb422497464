"""Django settings, read from environment variables with embedded defaults.

| variable             | default                                          |
|----------------------|--------------------------------------------------|
| DEBUG                | true                                             |
| SECRET_KEY           | generated once, kept in var/secret_key (DEBUG only; required otherwise) |
| DATABASE_URL         | sqlite:///<project>/var/db.sqlite3               |
| CELERY_BROKER_URL    | filesystem://  (kombu filesystem transport under var/broker/) |
| ALLOWED_HOSTS        | localhost,127.0.0.1,[::1] (comma separated)      |
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

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


def development_secret_key(path: Path) -> str:
    """A random key generated on first use and persisted at ``path`` so that sessions survive restarts."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


DEBUG = env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = development_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

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
        "DIRS": [],
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
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
WHITENOISE_USE_FINDERS = DEBUG  # serve app static files without collectstatic in development

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "autoscaler.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
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
    "COMPONENT_SPLIT_REQUEST": True,
    "OAS_VERSION": "3.1.0",  # pydantic emits JSON Schema 2020-12 (numeric exclusiveMinimum/Maximum)
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
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TIMEZONE = TIME_ZONE
# fraction of each control period over which the dispatcher spreads the applications' ticks (0 = all at once)
AUTOSCALER_DISPATCH_SPREAD = float(os.environ.get("AUTOSCALER_DISPATCH_SPREAD", "0.5"))

# The owner of applications applied from the command line when no --owner is given.
AUTOSCALER_DEFAULT_OWNER = os.environ.get("AUTOSCALER_DEFAULT_OWNER", "admin")

# Engine addresses every application may reference and the control plane may contact, besides those staff declare
# on regions (``spec.endpoints``): comma-separated, e.g. "http://127.0.0.1:8081,spark://127.0.0.1:7077". See
# ``connectors.endpoints`` for the form (ports or port ranges, path prefixes). Default: none.
AUTOSCALER_ENGINE_ENDPOINTS = [
    e.strip() for e in os.environ.get("AUTOSCALER_ENGINE_ENDPOINTS", "").split(",") if e.strip()
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
