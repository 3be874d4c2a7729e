"""Settings, read from the environment (every variable is in docs/configuration.md).

With nothing set, the platform runs on its embedded defaults: SQLite under var/,
an in-memory channel layer, tool tasks in-process. Production sets DATABASE_URL,
REDIS_URL, SECRET_KEY, SECRETS_KEYRING and DEBUG=false.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url
from csp import constants as csp
from django.core.exceptions import ImproperlyConfigured

from core import backends
from engine.settings import (
    env_bool,
    env_float,
    env_int,
    env_int_list,
    env_list,
    env_renamed,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "dev-only-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = env_secret("SECRET_KEY") or _DEV_SECRET_KEY
if not DEBUG and SECRET_KEY == _DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG=false")
if not DEBUG and len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters when DEBUG=false")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])


def _trusted_proxies(values: list[str]) -> list[str]:
    try:
        return [str(ipaddress.ip_network(value, strict=False)) for value in values]
    except ValueError as exc:
        raise ImproperlyConfigured(f"TRUSTED_PROXIES: {exc}") from None


def _proxy_ssl_header(name: str | None) -> tuple[str, str] | None:
    """``X-Forwarded-Proto`` → Django's ("HTTP_X_FORWARDED_PROTO", "https")."""
    if not name:
        return None
    if not re.fullmatch(r"[A-Za-z0-9-]+", name):
        raise ImproperlyConfigured(f"SECURE_PROXY_SSL_HEADER must be a header name, got {name!r}")
    return ("HTTP_" + name.upper().replace("-", "_"), "https")


# Behind a reverse proxy: the proxies whose X-Forwarded-For is believed (addresses or
# networks), the header that says the original request was https, and whether the proxy's
# X-Forwarded-Host names the site. See docs/production.md, "Behind a proxy (https)".
TRUSTED_PROXIES = _trusted_proxies(env_list("TRUSTED_PROXIES", []))
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env_str("SECURE_PROXY_SSL_HEADER"))
USE_X_FORWARDED_HOST = env_bool("USE_X_FORWARDED_HOST", False)

# Keyring for the secret store: "id:base64key,id:base64key", oldest first, the last
# one encrypts. Parsed and checked by secrets_app.crypto at start.
SECRETS_KEYRING = env_secret("SECRETS_KEYRING")
# Pepper for the keyed hash of API keys; derived from SECRET_KEY when unset.
API_KEY_PEPPER = env_secret("API_KEY_PEPPER")
# Bearer token for /metrics; unset: only direct requests from loopback are answered.
METRICS_TOKEN = env_secret("METRICS_TOKEN")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by us: the API docs work offline
    "csp",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "core",
    "secrets_app",
    "realtime",
    "sessions_app",
    "tools_app",
    "usage_app",
    "webhooks_app",
    "knowledge_app",
    "postcall_app",
    "mcp_app",
    "telephony_app",
    "evals_app",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "platform_site.api_errors.ApiNotFoundMiddleware",
]

ROOT_URLCONF = "platform_site.urls"
ASGI_APPLICATION = "platform_site.asgi.application"

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
                "csp.context_processors.nonce",
            ],
        },
    },
]


# The embedded default's SQLite is written by requests, session records and background
# threads (indexing, post-call analysis, webhook deliveries) at once. Transactions take the
# write lock when they begin (IMMEDIATE): a deferred one that read first and then wrote
# would fail at once with "database is locked" instead of waiting its turn (SQLite cannot
# wait for a lock the reader itself blocks). WAL lets reads go on beside the one writer;
# a writer waits up to ``timeout`` seconds for the lock. The tests' database is a file too
# (TEST NAME): Django's default for SQLite, a shared-cache in-memory database, locks whole
# tables and never waits for them ("database table is locked"), so it cannot run the same
# threads the embedded default runs.
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}


def _database(url: str | None) -> dict[str, object]:
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "platform.sqlite3",
            "OPTIONS": dict(_SQLITE_OPTIONS),
            "TEST": {"NAME": str(VAR_DIR / "test-platform.sqlite3")},
        }
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    return dict(config)


DATABASES = {"default": _database(env_str("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "secrets_app.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]


def _redis_url(url: str | None, name: str = "REDIS_URL", *, cluster: bool = False) -> str | None:
    schemes = {"redis", "rediss", "unix"} | (
        {"redis+cluster", "rediss+cluster"} if cluster else set()
    )
    for each in (url or "").split(","):
        if each.strip() and urlparse(each.strip()).scheme not in schemes:
            raise ImproperlyConfigured(
                f"{name} must start with one of {', '.join(sorted(schemes))}"
            )
    return url or None


REDIS_URL = _redis_url(env_str("REDIS_URL"))
# Each shared role on a server of its own (core/backends.py; docs/configuration.md, "Shared
# services"); unset, it is on REDIS_URL. Several comma-separated channel-layer URLs are shards.
CHANNEL_LAYER_URL = _redis_url(env_str("CHANNEL_LAYER_URL"), "CHANNEL_LAYER_URL")
SESSION_STATE_URL = _redis_url(env_str("SESSION_STATE_URL"), "SESSION_STATE_URL", cluster=True)
COUNTERS_URL = _redis_url(env_str("COUNTERS_URL"), "COUNTERS_URL", cluster=True)


def _public_url(url: str | None) -> str | None:
    if url and (urlparse(url).scheme not in {"http", "https"} or not urlparse(url).netloc):
        raise ImproperlyConfigured("PUBLIC_URL must look like https://platform.example.com")
    return url.rstrip("/") if url else None


# The platform's address as browsers reach it (behind a proxy the request may not tell).
# Baked into the npm package of the browser library; unset: taken from the request.
PUBLIC_URL = _public_url(env_str("PUBLIC_URL"))

# REDIS_URL is the one switch between the embedded platform and production
# (core/backends.py): the channel layer, Celery and mail follow it.
CHANNEL_LAYERS = backends.channel_layers(CHANNEL_LAYER_URL or REDIS_URL)

# Celery: on its broker (Redis or RabbitMQ, amqp://) when configured, else on REDIS_URL;
# otherwise tasks run in-process. Tool outcomes come back on the session's channel, so no
# result backend is needed; one can be named for tasks of your own.
CELERY_BROKER_URL = backends.celery_broker(env_str("CELERY_BROKER_URL"), REDIS_URL)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ALWAYS_EAGER = backends.tasks_inline_by_default(REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Webhook deliveries have their own queue and worker (a slow receiver never holds a sandbox
# task process); mail and the rest go to the "celery" queue.
CELERY_TASK_ROUTES = {
    "tools.execute": {"queue": "sandbox"},
    "webhooks.deliver": {"queue": "webhooks"},
    # Parsing and embedding documents is slow CPU work: it must never hold up tool calls.
    "knowledge.index_document": {"queue": "knowledge"},
    "knowledge.refresh_due": {"queue": "knowledge"},
    # Post-call analysis (an LLM request per session) and the retention purge.
    "postcall.*": {"queue": "postcall"},
    "telephony.housekeeping": {"queue": "postcall"},  # beside the retention purge
    # Agent tests and simulations hold an LLM conversation for minutes: never a tool call's
    # or a webhook's worker.
    "evals.test_run": {"queue": "evals"},
    "evals.simulation": {"queue": "evals"},
}
# Celery beat (`celery -A platform_site beat`) runs the retention purge and phone housekeeping.
RETENTION_PURGE_INTERVAL_S = env_int("RETENTION_PURGE_INTERVAL_S", 3600, minimum=60)
# Post-call analysis reruns: per session in all, and per workspace per hour.
ANALYSIS_MAX_RERUNS = env_int("ANALYSIS_MAX_RERUNS", 5, minimum=0)
ANALYSIS_RERUNS_PER_HOUR = env_int("ANALYSIS_RERUNS_PER_HOUR", 60, minimum=1)
CELERY_BEAT_SCHEDULE = {
    "retention-purge": {"task": "postcall.retention_purge", "schedule": RETENTION_PURGE_INTERVAL_S},
    # Post-call analyses pending past their timeout (a lost task) end as failed.
    "analysis-sweep": {"task": "postcall.analysis_sweep", "schedule": 300},
    # Phone calls that never streamed, and expired session tokens (telephony_app/tasks.py).
    "phone-housekeeping": {"task": "telephony.housekeeping", "schedule": 600},
    # URL documents whose refresh_hours have passed (knowledge_app/tasks.py).
    "knowledge-refresh": {"task": "knowledge.refresh_due", "schedule": 300},
    # Agent test runs and simulations left unfinished by a lost worker (evals_app/tasks.py).
    "evals-stuck-sweep": {"task": "evals.stuck_sweep", "schedule": 600},
}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a long handler must not hold back queued calls
CELERY_WORKER_MAX_TASKS_PER_CHILD = env_int("CELERY_WORKER_MAX_TASKS_PER_CHILD", 200, minimum=1)
# KiB; a child past this (after a task) is replaced, so V8 memory never accumulates.
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int("CELERY_WORKER_MAX_MEMORY_MB", 512, minimum=64) * 1024
# Keep the task process's database connection between tasks (Celery closes it around every
# task otherwise: a new PostgreSQL connection per tool call, about 4 ms); Django still
# checks it (CONN_HEALTH_CHECKS) and recycles it after CONN_MAX_AGE.
CELERY_DB_REUSE_MAX = 1000

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
WHITENOISE_USE_FINDERS = True  # serve app static files without a collectstatic step


# Recordings (docs/privacy.md, "Recordings"): encrypted objects in their own storage alias,
# the filesystem under VAR_DIR unless RECORDINGS_S3_BUCKET names an S3-compatible bucket.
def _recordings_storage() -> dict[str, object]:
    bucket = env_str("RECORDINGS_S3_BUCKET")
    if not bucket:
        location = env_str("RECORDINGS_DIR") or str(VAR_DIR / "recordings")
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {
                "location": location,
                "file_permissions_mode": 0o600,
                "directory_permissions_mode": 0o700,
            },
        }
    from botocore.config import Config  # only with a bucket: boto3 is not needed otherwise

    options = {
        "bucket_name": bucket,
        "endpoint_url": env_str("RECORDINGS_S3_ENDPOINT_URL") or None,
        "region_name": env_str("RECORDINGS_S3_REGION") or None,
        "access_key": env_secret("RECORDINGS_S3_ACCESS_KEY_ID"),
        "secret_key": env_secret("RECORDINGS_S3_SECRET_ACCESS_KEY"),
        "location": env_str("RECORDINGS_S3_PREFIX", "recordings"),
        "default_acl": None,
        "querystring_auth": False,  # objects are served by the platform, never linked
        "file_overwrite": False,
        # A bucket that hangs gives up in seconds, not botocore's minutes: a store holds its
        # spool (up to 230 MB) and a draining process waits for it.
        "client_config": Config(
            connect_timeout=5,
            read_timeout=env_float("RECORDINGS_S3_TIMEOUT_S", 30.0),
            retries={"mode": "standard", "max_attempts": 3},
        ),
    }
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "recordings": _recordings_storage(),
}
# A recording stops growing past this many seconds (both channels, 16 kHz, 64 kB a second).
RECORDING_MAX_SECONDS = env_int("RECORDING_MAX_SECONDS", 3600, minimum=10)
# Where the audio is spooled while a session runs (deleted at its end): VAR_DIR/spool.
RECORDING_SPOOL_DIR = env_str("RECORDING_SPOOL_DIR") or str(VAR_DIR / "spool")
# How long a signed recording URL works.
RECORDING_URL_TTL_S = env_int("RECORDING_URL_TTL_S", 300, minimum=10)

LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "dashboard:login"

# Password reset and invitation mail. The console backend prints mail to the log in dev;
# set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and EMAIL_HOST… to send.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Voice agents <noreply@localhost>")
# Mail is sent off the request: by a Celery worker with Redis, else by a thread.
MAIL_QUEUE = backends.mail_queue(REDIS_URL)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["secrets_app.authentication.SecretKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["secrets_app.authentication.HasWorkspace"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JsonParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "platform_site.openapi.ApiSchema",
    "EXCEPTION_HANDLER": "platform_site.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": ["secrets_app.authentication.ApiKeyRateThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Voice agent platform API",
    "DESCRIPTION": "Agents, session tokens, session records, secrets, API keys, usage and the "
    "audit log of one workspace: the workspace of the secret key you authenticate with, "
    "`Authorization: Bearer sk_…`. Each operation names the key scope it needs (`x-scope`); "
    'every error answers `{"error": {"code", "message", "fields"?}}`.',
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Test runs and simulations share one set of statuses (named once in the schema).
    "ENUM_NAME_OVERRIDES": {"RunStatusEnum": "evals_app.models.Status"},
    # One tag per resource, in the order a newcomer meets them (Swagger UI keeps it); every
    # operation has exactly one of these (tests/test_openapi.py).
    "TAGS": [
        {
            "name": "Agents",
            "description": "Saved agents: instructions, greeting, voice, providers and tools "
            "(a server tool's JavaScript handler runs on the platform, in the sandbox). Pages "
            "and session tokens name an agent by its slug.",
        },
        {
            "name": "Agent versions",
            "description": "Published versions of an agent: publish the draft, roll back, "
            "compare two versions, split new sessions between two, pin a key to one "
            "(docs/versions.md).",
        },
        {
            "name": "Agent tests",
            "description": "Scripted conversations with expectations per turn, run against an "
            "agent's draft or a version, and simulated conversations an LLM holds with it "
            "(docs/testing-agents.md).",
        },
        {
            "name": "Session tokens",
            "description": "Short-lived, single-use tokens your server mints with its secret "
            "key, so that a page opens one session of one agent without a publishable key "
            "(`wss://HOST/v1/session?token=…`).",
        },
        {
            "name": "Sessions",
            "description": "Records of realtime sessions (transcript, per-turn latencies, "
            "tool calls, usage), and ending a live one.",
        },
        {
            "name": "Secrets",
            "description": "Credentials of your own services, for tool handlers. Write-only: "
            "a value is never shown again, and is sent only to the hosts its secret allows.",
        },
        {
            "name": "Keys",
            "description": "Publishable keys (`pk_…`, for web pages) and secret keys "
            "(`sk_…`, for your servers and this API, with scopes). A key's plaintext is shown "
            "once, when it is made.",
        },
        {
            "name": "Usage",
            "description": "What the workspace's sessions consumed, per day or per agent, "
            "and its quotas.",
        },
        {
            "name": "Knowledge bases",
            "description": "Documents an agent answers from (PDF, Markdown, text, HTML, DOCX, "
            "uploaded or fetched from a URL), indexed off the request, and searched with "
            "full text and embeddings together. Agents cite the passages they were given.",
        },
        {
            "name": "MCP servers",
            "description": "Connections to the workspace's own MCP servers (streamable HTTP "
            "or SSE), their tools listed through the egress guard; agents are given tools "
            "by name. Credentials go in headers as secret references, sent only to the "
            "secrets' allowed hosts.",
        },
        {
            "name": "Phone",
            "description": "Carrier accounts (Twilio, Telnyx) and the phone numbers your "
            "agents answer, with the voice webhook URL to paste into the carrier's console.",
        },
        {
            "name": "Retention",
            "description": "How long the workspace keeps what its sessions said, zero "
            "retention (keep nothing said) and redaction of stored transcripts.",
        },
        {
            "name": "Audit events",
            "description": "The workspace's audit log: who changed what, when, and from "
            "which address.",
        },
    ],
}

# Product limits (all in docs/limits.md).
SECRET_VALUE_MAX_BYTES = env_int("SECRET_VALUE_MAX_BYTES", 64 * 1024, minimum=1)
SECRETS_PER_WORKSPACE_MAX = env_int("SECRETS_PER_WORKSPACE_MAX", 100, minimum=1)
SESSION_LIMIT_PER_WORKSPACE = env_int("SESSION_LIMIT_PER_WORKSPACE", 20, minimum=1)
API_KEY_LAST_USED_PRECISION_S = env_float("API_KEY_LAST_USED_PRECISION_S", 60.0)
HEALTHZ_CACHE_S = env_float("HEALTHZ_CACHE_S", 1.0)  # /healthz checks at most this often
# Realtime sessions, per publishable key and client address: new sockets a minute, and
# sessions open at once (so one client can never take the whole workspace limit).
WS_CONNECTIONS_PER_MINUTE = env_int("WS_CONNECTIONS_PER_MINUTE", 30, minimum=1)
SESSIONS_PER_ADDRESS = env_int("SESSIONS_PER_ADDRESS", 3, minimum=1)
TURNS_PER_MINUTE = env_int("TURNS_PER_MINUTE", 20, minimum=1)  # per session
LLM_REQUESTS_PER_MINUTE = env_int("LLM_REQUESTS_PER_MINUTE", 120, minimum=1)  # per key
CONTEXT_NOTES_MAX = env_int("CONTEXT_NOTES_MAX", 20, minimum=0)  # per session
# What one socket may send: messages a second (audio frames included; 5 s of it at once),
# and audio at most this many times faster than it is spoken (10 s of it at once).
WS_MESSAGES_PER_SECOND = env_int("WS_MESSAGES_PER_SECOND", 100, minimum=1)
AUDIO_MAX_SPEED = env_float("AUDIO_MAX_SPEED", 2.0)
# Bytes one socket may send, counted as they arrive (before anything buffers them): this
# many KB a second (never less than twice the audio allowance), 4 s of it at once.
WS_INBOUND_KB_PER_SECOND = env_int("WS_INBOUND_KB_PER_SECOND", 512, minimum=64)
if not 1.0 <= AUDIO_MAX_SPEED <= 100.0:  # also refuses nan
    raise ImproperlyConfigured(f"AUDIO_MAX_SPEED must be from 1 to 100, got {AUDIO_MAX_SPEED}")
# What one LLM request may carry (instructions, history, tools' results); the oldest turns
# are left out past it.
LLM_REQUEST_MAX_BYTES = env_int("LLM_REQUEST_MAX_KB", 128, minimum=8) * 1024
SESSION_IDLE_TIMEOUT_S = env_int("SESSION_IDLE_TIMEOUT_S", 300, minimum=5)
SESSION_MAX_DURATION_S = env_int("SESSION_MAX_DURATION_S", 1800, minimum=10)
SESSION_TOKEN_TTL_S = env_int("SESSION_TOKEN_TTL_S", 60, minimum=5)
SESSION_TOKEN_TTL_MAX_S = 3600
# Agent tests and simulations (docs/testing-agents.md): tests per agent, turns per test,
# seconds a turn may take; simulations started at once, unfinished per workspace, turns each.
AGENT_TESTS_MAX = env_int("AGENT_TESTS_MAX", 50, minimum=1)
AGENT_TEST_TURNS_MAX = env_int("AGENT_TEST_TURNS_MAX", 20, minimum=1)
AGENT_TEST_TURN_TIMEOUT_S = env_int("AGENT_TEST_TURN_TIMEOUT_S", 60, minimum=5)
AGENT_TEST_SPOKEN_MAX_S = env_int("AGENT_TEST_SPOKEN_MAX_S", 15, minimum=1)
SIMULATIONS_PER_BATCH_MAX = env_int("SIMULATIONS_PER_BATCH_MAX", 10, minimum=1)
SIMULATIONS_IN_FLIGHT_MAX = env_int("SIMULATIONS_IN_FLIGHT_MAX", 20, minimum=1)
SIMULATION_TURNS_MAX = env_int("SIMULATION_TURNS_MAX", 20, minimum=1)
# Unfinished test runs per workspace; seconds one reply_matches/tool_arguments pattern may
# take (run in a child process, killed past it); minutes a run or simulation may stay
# `running` before the sweep finishes it as an error.
TEST_RUNS_IN_FLIGHT_MAX = env_int("TEST_RUNS_IN_FLIGHT_MAX", 5, minimum=1)
AGENT_TEST_PATTERN_TIMEOUT_S = env_int("AGENT_TEST_PATTERN_TIMEOUT_S", 2, minimum=1)
EVALS_STUCK_AFTER_MIN = env_int("EVALS_STUCK_AFTER_MIN", 120, minimum=10)
# Test runs and simulations of one workspace queued or running at once on the evals queue
# (the rest parked: fairness between workspaces); a slot lapses after the TTL (a worker
# was killed holding it; a run ends by EVALS_STUCK_AFTER_MIN), swept every
# EVALS_PARKED_SWEEP_S.
EVALS_WORKSPACE_CONCURRENCY = env_int("EVALS_WORKSPACE_CONCURRENCY", 2, minimum=1)
EVALS_SLOT_TTL_S = env_float("EVALS_SLOT_TTL_S", EVALS_STUCK_AFTER_MIN * 60.0 + 300.0)
EVALS_PARKED_SWEEP_S = env_float("EVALS_PARKED_SWEEP_S", 30.0)
# Phone calls (docs/phone.md): seconds a carrier has to open the media stream after its
# webhook was answered, and how far a Telnyx signature's timestamp may be from now.
PHONE_STREAM_TOKEN_TTL_S = env_int("PHONE_STREAM_TOKEN_TTL_S", 30, minimum=5)
TELNYX_SIGNATURE_TOLERANCE_S = env_int("TELNYX_SIGNATURE_TOLERANCE_S", 300, minimum=5)
# Calls a number answers a minute (a signed webhook over it is turned away as busy).
INBOUND_CALLS_PER_MINUTE = env_int("INBOUND_CALLS_PER_MINUTE", 60, minimum=1)
# Outbound calls: per workspace a minute; seconds the callee has to answer before the
# stream's token expires; Twilio's and Telnyx's REST APIs (dialled through the egress
# guard).
OUTBOUND_CALLS_PER_MINUTE = env_int("OUTBOUND_CALLS_PER_MINUTE", 10, minimum=1)
# Countries outbound calls may ring besides the calling number's own (ISO codes, or *).
OUTBOUND_CALL_COUNTRIES = env_list("OUTBOUND_CALL_COUNTRIES", [])
PHONE_OUTBOUND_TOKEN_TTL_S = env_int("PHONE_OUTBOUND_TOKEN_TTL_S", 120, minimum=30)
TWILIO_API_URL = (env_str("TWILIO_API_URL") or "https://api.twilio.com").rstrip("/")
TELNYX_API_URL = (env_str("TELNYX_API_URL") or "https://api.telnyx.com").rstrip("/")
# REST API requests per secret key, and per address for requests without a valid key.
API_REQUESTS_PER_MINUTE = env_int("API_REQUESTS_PER_MINUTE", 120, minimum=1)
# Failed dashboard and admin logins, per account and per client address, in 15 minutes.
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 5, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 20, minimum=1)
LOGIN_FAILURE_WINDOW_S = 15 * 60
# Password-reset requests and sign-ups per client address an hour (each sends a mail).
ACCOUNT_MAILS_PER_ADDRESS_PER_HOUR = env_int("ACCOUNT_MAILS_PER_ADDRESS_PER_HOUR", 10, minimum=1)
EMAIL_VERIFICATION_MAX_AGE_S = 3 * 24 * 3600

# HTTPS: cookies are only sent over https when DEBUG=false (set HTTPS=false to serve a
# DEBUG=false platform over plain http, e.g. on a private network); HSTS is sent on
# https responses only.
HTTPS = env_bool("HTTPS", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy: scripts from this site or carrying the response's nonce only,
# nothing from another site (django-csp adds the nonce a page uses).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp.SELF],
        "script-src": [csp.SELF, csp.NONCE],
        # client.js injects its default UI's <style>; styles cannot run code.
        "style-src": [csp.SELF, csp.UNSAFE_INLINE],
        "img-src": [csp.SELF, "data:"],
        "connect-src": [csp.SELF],
        "object-src": [csp.NONE],
        "base-uri": [csp.SELF],
        "form-action": [csp.SELF],
        "frame-ancestors": [csp.NONE],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "filters": {"credential_urls": {"()": "platform_site.log_masking.CredentialUrlFilter"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # httpx logs every request's full URL at INFO: a tool's fetch URL may carry a secret
    # value the egress proxy put in (and provider URLs may carry keys).
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # The MCP SDK logs what servers send (session ids that may echo a credential,
        # unparsable bodies with their text) and what is sent (tool arguments: what the
        # caller said): silenced; mcp_app logs its own fixed sentences instead.
        "mcp": {"level": "CRITICAL", "propagate": False, "handlers": []},
        # "Not Found: /recordings/<token>": a recording's signed URL is a bearer link, and
        # so are other URLs (platform_site/log_masking.py).
        "django.request": {"filters": ["credential_urls"]},
    },
}

# Realtime sessions.
STT_PROVIDER = env_str("STT_PROVIDER", "local")
TTS_PROVIDER = env_str("TTS_PROVIDER", "local")
STT_TIMEOUT_S = env_float("STT_TIMEOUT_S", 10.0)
TTS_TIMEOUT_S = env_float("TTS_TIMEOUT_S", 10.0)
# Pauses before each retry of a provider call that failed before producing anything
# (docs/providers.md, "Retries and fallbacks"); empty: no retries.
PROVIDER_RETRY_DELAYS_MS = env_int_list("PROVIDER_RETRY_DELAYS_MS", [200, 600])
# Circuit breakers (docs/providers.md, "Circuit breakers"): failed calls in a row that make
# a provider skipped for a workspace (0: never), and the pause between its probes.
PROVIDER_BREAKER_FAILURES = env_int("PROVIDER_BREAKER_FAILURES", 3, minimum=0)
PROVIDER_BREAKER_COOLDOWN_S = env_float("PROVIDER_BREAKER_COOLDOWN_S", 30.0)
BARGE_IN_MIN_WORDS = env_int("BARGE_IN_MIN_WORDS", 1, minimum=0)
# Each provider reads its own settings (LLM_BASE_URL, ASSEMBLYAI_API_KEY, ORPHEUS_URL,
# LOCAL_STT_END_SILENCE_MS…) in its folder under engine/providers/; the system
# checks (sessions_app/checks.py) refuse unknown names and bad values at start.
# The scripted "fake" providers: only where this is on (the test suite turns it on).
ALLOW_FAKE_PROVIDERS = env_bool("ALLOW_FAKE_PROVIDERS", False)
TOOL_RUNNER = env_str("TOOL_RUNNER", "sandbox")
MAX_TOOL_STEPS = env_int("MAX_TOOL_STEPS", 5, minimum=1)
# Tool calls one LLM step may make; more fail at once (tell the model to call fewer).
MAX_TOOL_CALLS_PER_STEP = env_int("MAX_TOOL_CALLS_PER_STEP", 8, minimum=1)
CLIENT_TOOL_TIMEOUT_S = env_float("CLIENT_TOOL_TIMEOUT_S", 10.0)
CONFIGURE_TIMEOUT_S = env_float("CONFIGURE_TIMEOUT_S", 10.0)
# Seconds a session waits for `resume` after an unclean disconnect.
SESSION_RESUME_TTL = env_float("SESSION_RESUME_TTL", 120.0)
# On SIGTERM a web process drains (realtime/drain.py): it exits once its sessions have moved
# (browsers reconnect at once) or its phone calls ended, and after this many seconds at most.
# The orchestrator's own kill timeout must be longer (docs/scaling.md, "Deploys").
DRAIN_GRACE_S = env_float("DRAIN_GRACE_S", 60.0)

# Tool sandbox (published in docs/sandbox.md, "Sandbox limits").
SANDBOX_WALL_TIME_S = env_float("SANDBOX_WALL_TIME_S", 30.0)
# CPU per call: handlers saved with an agent, and code a browser sent (lower).
SANDBOX_CPU_TIME_S = env_float("SANDBOX_CPU_TIME_S", 10.0)
SANDBOX_INLINE_CPU_TIME_S = env_float("SANDBOX_INLINE_CPU_TIME_S", 2.0)
# Jailed worker processes per parent (the embedded platform, or each Celery task process),
# started on demand; at most this many calls of one workspace run at once.
SANDBOX_WORKERS = env_int("SANDBOX_WORKERS", 6, minimum=1)
SANDBOX_WORKSPACE_CONCURRENCY = env_int("SANDBOX_WORKSPACE_CONCURRENCY", 4, minimum=1)
# With Celery: calls queued or running at once, all workspaces together; set it to the
# sandbox workers' processes (their --concurrency, summed over every worker).
SANDBOX_QUEUE_SLOTS = env_int("SANDBOX_QUEUE_SLOTS", 6, minimum=1)
# RLIMIT_DATA of each worker process (V8 needs about 640 MB of address space to start).
SANDBOX_WORKER_MEMORY_BYTES = env_int("SANDBOX_WORKER_MEMORY_MB", 768, minimum=640) * 1024 * 1024
SANDBOX_HEAP_BYTES = env_int("SANDBOX_HEAP_MB", 64, minimum=16) * 1024 * 1024
SANDBOX_MAX_FETCHES = env_int("SANDBOX_MAX_FETCHES", 50, minimum=0)
SANDBOX_MAX_CONCURRENT_FETCHES = env_int("SANDBOX_MAX_CONCURRENT_FETCHES", 6, minimum=1)
SANDBOX_MAX_RESULT_BYTES = env_int("SANDBOX_MAX_RESULT_BYTES", 64 * 1024, minimum=1024)
SANDBOX_MAX_CONSOLE_BYTES = env_int("SANDBOX_MAX_CONSOLE_BYTES", 16 * 1024, minimum=0)
SANDBOX_FETCH_MAX_BYTES = env_int("SANDBOX_FETCH_MAX_MB", 2, minimum=1) * 1024 * 1024
SANDBOX_FETCH_MAX_REQUEST_BYTES = env_int("SANDBOX_FETCH_MAX_REQUEST_KB", 1024, minimum=1) * 1024
SANDBOX_FETCH_TIMEOUT_S = env_float("SANDBOX_FETCH_TIMEOUT_S", 10.0)
# Every URL the platform dials for a customer (ctx.fetch, webhooks, workspaces' provider
# URLs) goes through one egress guard (egress/, core/outbound.py): public
# addresses on these ports only. The development switch allows any address and port; it
# is refused in production. The old names (SANDBOX_EGRESS_*) still work.
EGRESS_PORTS = env_int_list(env_renamed("EGRESS_PORTS", "SANDBOX_EGRESS_PORTS"), [80, 443])
DEV_ALLOW_PRIVATE_EGRESS = env_bool(
    env_renamed("DEV_ALLOW_PRIVATE_EGRESS", "SANDBOX_EGRESS_ALLOW_PRIVATE"), False
)
if DEV_ALLOW_PRIVATE_EGRESS and not DEBUG:
    raise ImproperlyConfigured(
        "DEV_ALLOW_PRIVATE_EGRESS=true (or SANDBOX_EGRESS_ALLOW_PRIVATE) is for development "
        "only: it is refused when DEBUG=false"
    )

# Post-call webhooks: delivered through the same egress guard as ctx.fetch, retried with
# doubling delays for WEBHOOK_RETRY_WINDOW_S.
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 5.0)
WEBHOOK_RETRY_BASE_S = env_float("WEBHOOK_RETRY_BASE_S", 30.0)
WEBHOOK_RETRY_MAX_S = env_float("WEBHOOK_RETRY_MAX_S", 3600.0)
WEBHOOK_RETRY_WINDOW_S = env_float("WEBHOOK_RETRY_WINDOW_S", 24 * 3600.0)
# Deliveries of one workspace in flight at once (across every webhook worker); one over the
# cap is parked in Redis (never in the queue, never in a worker) until a slot is given back;
# each webhook worker sweeps the parked ones every WEBHOOK_PARKED_SWEEP_S (lapsed slots).
WEBHOOK_WORKSPACE_IN_FLIGHT = env_int("WEBHOOK_WORKSPACE_IN_FLIGHT", 4, minimum=1)
WEBHOOK_PARKED_SWEEP_S = env_float("WEBHOOK_PARKED_SWEEP_S", 10.0)
# An endpoint whose attempts failed this many times in a row is disabled (its owner mailed).
WEBHOOK_DISABLE_AFTER_FAILURES = env_int("WEBHOOK_DISABLE_AFTER_FAILURES", 15, minimum=1)
# A stored event body past this many bytes has its transcript cut (docs/webhooks.md).
WEBHOOK_PAYLOAD_MAX_BYTES = env_int("WEBHOOK_PAYLOAD_MAX_BYTES", 256 * 1024, minimum=16 * 1024)

# Knowledge bases (docs/knowledge.md, limits in docs/limits.md): what one document and one
# workspace may hold, and the fences around parsing (a child process per document).
KNOWLEDGE_DOCUMENT_MAX_BYTES = env_int("KNOWLEDGE_DOCUMENT_MAX_MB", 10, minimum=1) * 1024 * 1024
KNOWLEDGE_DOCUMENT_MAX_CHARACTERS = env_int("KNOWLEDGE_DOCUMENT_MAX_CHARACTERS", 2_000_000)
KNOWLEDGE_PDF_MAX_PAGES = env_int("KNOWLEDGE_PDF_MAX_PAGES", 500, minimum=1)
KNOWLEDGE_PARSE_TIMEOUT_S = env_float("KNOWLEDGE_PARSE_TIMEOUT_S", 60.0)
KNOWLEDGE_PARSE_MEMORY_MB = env_int("KNOWLEDGE_PARSE_MEMORY_MB", 1024, minimum=128)
KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS = env_int("KNOWLEDGE_WORKSPACE_MAX_DOCUMENTS", 1000)
KNOWLEDGE_WORKSPACE_MAX_CHUNKS = env_int("KNOWLEDGE_WORKSPACE_MAX_CHUNKS", 20_000)
KNOWLEDGE_WORKSPACE_MAX_BASES = env_int("KNOWLEDGE_WORKSPACE_MAX_BASES", 50)
KNOWLEDGE_FETCH_TIMEOUT_S = env_float("KNOWLEDGE_FETCH_TIMEOUT_S", 20.0)
KNOWLEDGE_WORKSPACE_MAX_BYTES = env_int("KNOWLEDGE_WORKSPACE_MAX_MB", 500, minimum=1) * 1024 * 1024
# Documents of one workspace queued or being indexed at once (the rest parked: fairness on
# the shared knowledge queue); a slot lapses after the TTL (a worker died holding it).
KNOWLEDGE_WORKSPACE_IN_FLIGHT = env_int("KNOWLEDGE_WORKSPACE_IN_FLIGHT", 1, minimum=1)
KNOWLEDGE_INDEX_SLOT_TTL_S = env_float("KNOWLEDGE_INDEX_SLOT_TTL_S", 1800.0)
KNOWLEDGE_PARKED_SWEEP_S = env_float("KNOWLEDGE_PARKED_SWEEP_S", 30.0)
# Searches: per workspace, over the REST API (a live session's searches are its turns'),
# and questions of one workspace waiting for or on a web process's embedding thread.
KNOWLEDGE_SEARCHES_PER_MINUTE = env_int("KNOWLEDGE_SEARCHES_PER_MINUTE", 60, minimum=1)
KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY = env_int(
    "KNOWLEDGE_WORKSPACE_SEARCH_CONCURRENCY", 2, minimum=1
)
# A workspace's own embedding connection (docs/knowledge.md): passages per request, the
# longest wait for an indexing request and for a question in a turn (past it the turn's
# search ranks by full text alone), and the longest vector taken.
KNOWLEDGE_EMBEDDING_BATCH = env_int("KNOWLEDGE_EMBEDDING_BATCH", 64, minimum=1)
KNOWLEDGE_EMBEDDING_TIMEOUT_S = env_float("KNOWLEDGE_EMBEDDING_TIMEOUT_S", 30.0)
KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S = env_float("KNOWLEDGE_EMBEDDING_QUESTION_TIMEOUT_S", 3.0)
KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS = env_int("KNOWLEDGE_EMBEDDING_MAX_DIMENSIONS", 4096, minimum=8)
# All of one document's requests together: a provider that answers each just in time must
# not keep a knowledge worker past its workspace's slot (which would then lapse, and let
# that workspace take one more worker).
KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S = env_float("KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S", 600.0)
if not 0 < KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S < KNOWLEDGE_INDEX_SLOT_TTL_S / 2:
    raise ImproperlyConfigured(
        "KNOWLEDGE_EMBEDDING_DOCUMENT_TIMEOUT_S must be above 0 and below half of "
        "KNOWLEDGE_INDEX_SLOT_TTL_S (a document's parsing and fetching share the slot)"
    )

# Request bodies (platform_site/body_limit.py, docs/limits.md): refused with 413 before they
# are held in memory; the upload routes take a document and its multipart wrapping.
HTTP_BODY_MAX_BYTES = env_int("HTTP_BODY_MAX_KB", 1024, minimum=64) * 1024
HTTP_UPLOAD_BODY_MAX_BYTES = KNOWLEDGE_DOCUMENT_MAX_BYTES + 1024 * 1024
HTTP_UPLOAD_PATHS = (
    r"/api/v1/knowledge-bases/[^/]+/documents",  # knowledge_app/urls.py
    r"/w/[^/]+/knowledge/[^/]+/",  # frontend/dashboard/knowledge.py: a base's page
)
DATA_UPLOAD_MAX_MEMORY_SIZE = HTTP_BODY_MAX_BYTES  # Django's own check, for form and JSON bodies
# A body must arrive within this (plus 1 s per 16 KB received): a body trickled or left
# unfinished is answered 408 instead of holding its connection for good.
HTTP_BODY_TIMEOUT_S = env_int("HTTP_BODY_TIMEOUT_S", 30, minimum=1)
HTTP_HEAD_TIMEOUT_S = env_int("HTTP_HEAD_TIMEOUT_S", 20, minimum=1)  # platform_site/request_head
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024  # an uploaded file past this waits on disk
# The shortest refresh interval a URL document may have (docs/knowledge.md).
KNOWLEDGE_REFRESH_MIN_HOURS = env_int("KNOWLEDGE_REFRESH_MIN_HOURS", 1, minimum=1)

# MCP servers as tool sources (docs/mcp.md, limits in docs/limits.md).
MCP_WORKSPACE_MAX_SERVERS = env_int("MCP_WORKSPACE_MAX_SERVERS", 20, minimum=1)
MCP_SERVER_MAX_TOOLS = env_int("MCP_SERVER_MAX_TOOLS", 100, minimum=1)
MCP_LIST_TIMEOUT_S = env_float("MCP_LIST_TIMEOUT_S", 10.0)
# A refresh's whole tool list (names, descriptions, schemas), across its pages.
MCP_LIST_MAX_BYTES = env_int("MCP_LIST_MAX_KB", 2048, minimum=64) * 1024
MCP_TOOL_TIMEOUT_S = env_float("MCP_TOOL_TIMEOUT_S", 10.0)  # a call, unless the agent says
MCP_TOOL_MAX_TIMEOUT_S = env_float("MCP_TOOL_MAX_TIMEOUT_S", 60.0)
MCP_RESPONSE_MAX_BYTES = env_int("MCP_RESPONSE_MAX_KB", 1024, minimum=16) * 1024
