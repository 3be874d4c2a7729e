"""Settings, read from the environment (see the README's configuration table).

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

from platform_site.env import (
    env_bool,
    env_float,
    env_int,
    env_int_list,
    env_list,
    env_secret,
    env_str,
)
from sessions_app.providers import registry as speech_providers

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
# X-Forwarded-Host names the site. See the README's "Behind a proxy (https)".
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
    "secrets_app",
    "sessions_app",
    "tools_app",
    "usage_app",
    "webhooks_app",
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


def _database(url: str | None) -> dict[str, object]:
    if not url:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "platform.sqlite3"}
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


def _redis_url(url: str | None) -> str | None:
    if url and urlparse(url).scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured("REDIS_URL must start with redis://, rediss:// or unix://")
    return url or None


REDIS_URL = _redis_url(env_str("REDIS_URL"))


def _public_url(url: str | None) -> str | None:
    if url and (urlparse(url).scheme not in {"http", "https"} or not urlparse(url).netloc):
        raise ImproperlyConfigured("PUBLIC_URL must look like https://platform.example.com")
    return url.rstrip("/") if url else None


# The platform's address as browsers reach it (behind a proxy the request may not tell).
# Baked into the npm package of the browser library; unset: taken from the request.
PUBLIC_URL = _public_url(env_str("PUBLIC_URL"))

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "platform_site.channel_layer.ResilientRedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: on Redis when configured; otherwise tasks run in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = REDIS_URL is None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ROUTES = {"tools.execute": {"queue": "sandbox"}}  # others: the "celery" queue
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
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

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
MAIL_QUEUE = "celery" if REDIS_URL else "thread"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["secrets_app.authentication.SecretKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["secrets_app.authentication.HasWorkspace"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "platform_site.openapi.ApiSchema",
    "EXCEPTION_HANDLER": "platform_site.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": ["secrets_app.authentication.ApiKeyRateThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Voice agent platform API",
    "DESCRIPTION": "Workspace keys, secrets, agents and sessions. Authenticate with "
    "`Authorization: Bearer sk_…`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Product limits (all in the README's "Limits" table).
SECRET_VALUE_MAX_BYTES = env_int("SECRET_VALUE_MAX_BYTES", 64 * 1024, minimum=1)
SECRETS_PER_WORKSPACE_MAX = env_int("SECRETS_PER_WORKSPACE_MAX", 100, minimum=1)
SESSION_LIMIT_PER_WORKSPACE = env_int("SESSION_LIMIT_PER_WORKSPACE", 20, minimum=1)
API_KEY_LAST_USED_PRECISION_S = env_float("API_KEY_LAST_USED_PRECISION_S", 60.0)
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
if not 1.0 <= AUDIO_MAX_SPEED <= 100.0:  # also refuses nan
    raise ImproperlyConfigured(f"AUDIO_MAX_SPEED must be from 1 to 100, got {AUDIO_MAX_SPEED}")
# What one LLM request may carry (instructions, history, tools' results); the oldest turns
# are left out past it.
LLM_REQUEST_MAX_BYTES = env_int("LLM_REQUEST_MAX_KB", 128, minimum=8) * 1024
SESSION_IDLE_TIMEOUT_S = env_int("SESSION_IDLE_TIMEOUT_S", 300, minimum=5)
SESSION_MAX_DURATION_S = env_int("SESSION_MAX_DURATION_S", 1800, minimum=10)
SESSION_TOKEN_TTL_S = env_int("SESSION_TOKEN_TTL_S", 60, minimum=5)
SESSION_TOKEN_TTL_MAX_S = 3600
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
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # httpx logs every request's full URL at INFO: a tool's fetch URL may carry a secret
    # value the egress proxy put in (and provider URLs may carry keys).
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}

# Realtime sessions.
LLM_BASE_URL = env_str("LLM_BASE_URL") or None
LLM_API_KEY = env_secret("LLM_API_KEY")
LLM_MODEL = env_str("LLM_MODEL", "gpt-4o-mini")
LLM_TIMEOUT_S = env_float("LLM_TIMEOUT_S", 30.0)
STT_PROVIDER = env_str("STT_PROVIDER", "local")
TTS_PROVIDER = env_str("TTS_PROVIDER", "local")
STT_TIMEOUT_S = env_float("STT_TIMEOUT_S", 10.0)
TTS_TIMEOUT_S = env_float("TTS_TIMEOUT_S", 10.0)
# Pauses before each retry of a provider call that failed before producing anything
# (README "Retries and fallbacks"); empty: no retries.
PROVIDER_RETRY_DELAYS_MS = env_int_list("PROVIDER_RETRY_DELAYS_MS", [200, 600])
BARGE_IN_MIN_WORDS = env_int("BARGE_IN_MIN_WORDS", 1, minimum=0)
# Offline engines (the embedded default): the end-of-turn model (smart-turn v3) at the
# first pause, and the fixed silence that ends a turn without it.
LOCAL_STT_TURN_MODEL = env_bool("LOCAL_STT_TURN_MODEL", True)
LOCAL_STT_END_SILENCE_MS = env_int("LOCAL_STT_END_SILENCE_MS", 600, minimum=150)
# Cloud speech providers.
ASSEMBLYAI_API_KEY = env_secret("ASSEMBLYAI_API_KEY")
ASSEMBLYAI_BASE_URL = env_str("ASSEMBLYAI_BASE_URL", "https://streaming.assemblyai.com")
ASSEMBLYAI_SPEECH_MODEL = env_str("ASSEMBLYAI_SPEECH_MODEL", "universal-streaming-english")
ORPHEUS_URL = env_str("ORPHEUS_URL")
ORPHEUS_API_KEY = env_secret("ORPHEUS_API_KEY")
ELEVENLABS_API_KEY = env_secret("ELEVENLABS_API_KEY")
ELEVENLABS_BASE_URL = env_str("ELEVENLABS_BASE_URL", "wss://api.elevenlabs.io")
ELEVENLABS_MODEL = env_str("ELEVENLABS_MODEL", "eleven_flash_v2_5")
OPENAI_API_KEY = env_secret("OPENAI_API_KEY")
OPENAI_TTS_BASE_URL = env_str("OPENAI_TTS_BASE_URL", "https://api.openai.com/v1")
OPENAI_TTS_MODEL = env_str("OPENAI_TTS_MODEL", "gpt-4o-mini-tts")
_speech_settings: tuple[tuple[speech_providers.Kind, str], ...] = (
    ("stt", STT_PROVIDER),
    ("tts", TTS_PROVIDER),
)
for _kind, _name in _speech_settings:
    if _name not in speech_providers.names(_kind):
        _known = ", ".join(speech_providers.names(_kind))
        raise ImproperlyConfigured(f"{_kind.upper()}_PROVIDER={_name!r}: use one of {_known}")
TOOL_RUNNER = env_str("TOOL_RUNNER", "sandbox")
MAX_TOOL_STEPS = env_int("MAX_TOOL_STEPS", 5, minimum=1)
# Tool calls one LLM step may make; more fail at once (tell the model to call fewer).
MAX_TOOL_CALLS_PER_STEP = env_int("MAX_TOOL_CALLS_PER_STEP", 8, minimum=1)
CLIENT_TOOL_TIMEOUT_S = env_float("CLIENT_TOOL_TIMEOUT_S", 10.0)
CONFIGURE_TIMEOUT_S = env_float("CONFIGURE_TIMEOUT_S", 10.0)
# Seconds a session waits for `resume` after an unclean disconnect.
SESSION_RESUME_TTL = env_float("SESSION_RESUME_TTL", 120.0)

# Tool sandbox (published in the README's "Sandbox limits").
SANDBOX_WALL_TIME_S = env_float("SANDBOX_WALL_TIME_S", 30.0)
# CPU per call: handlers saved with an agent, and code a browser sent (lower).
SANDBOX_CPU_TIME_S = env_float("SANDBOX_CPU_TIME_S", 10.0)
SANDBOX_INLINE_CPU_TIME_S = env_float("SANDBOX_INLINE_CPU_TIME_S", 2.0)
# Jailed worker processes per parent (the embedded platform, or each Celery task process),
# started on demand; at most this many calls of one workspace run at once.
SANDBOX_WORKERS = env_int("SANDBOX_WORKERS", 6, minimum=1)
SANDBOX_WORKSPACE_CONCURRENCY = env_int("SANDBOX_WORKSPACE_CONCURRENCY", 4, minimum=1)
# RLIMIT_DATA of each worker process (V8 needs about 640 MB of address space to start).
SANDBOX_WORKER_MEMORY_BYTES = env_int("SANDBOX_WORKER_MEMORY_MB", 768, minimum=640) * 1024 * 1024
SANDBOX_HEAP_BYTES = env_int("SANDBOX_HEAP_MB", 64, minimum=16) * 1024 * 1024
SANDBOX_MAX_FETCHES = env_int("SANDBOX_MAX_FETCHES", 50, minimum=0)
SANDBOX_MAX_CONCURRENT_FETCHES = env_int("SANDBOX_MAX_CONCURRENT_FETCHES", 6, minimum=1)
SANDBOX_MAX_RESULT_BYTES = env_int("SANDBOX_MAX_RESULT_BYTES", 64 * 1024, minimum=1024)
SANDBOX_MAX_CONSOLE_BYTES = env_int("SANDBOX_MAX_CONSOLE_BYTES", 16 * 1024, minimum=0)
SANDBOX_FETCH_MAX_BYTES = env_int("SANDBOX_FETCH_MAX_MB", 5, minimum=1) * 1024 * 1024
SANDBOX_FETCH_MAX_REQUEST_BYTES = env_int("SANDBOX_FETCH_MAX_REQUEST_KB", 1024, minimum=1) * 1024
SANDBOX_FETCH_TIMEOUT_S = env_float("SANDBOX_FETCH_TIMEOUT_S", 10.0)
SANDBOX_EGRESS_PORTS = env_int_list("SANDBOX_EGRESS_PORTS", [80, 443])
SANDBOX_EGRESS_ALLOW_PRIVATE = env_bool("SANDBOX_EGRESS_ALLOW_PRIVATE", False)
if SANDBOX_EGRESS_ALLOW_PRIVATE and not DEBUG:
    raise ImproperlyConfigured("SANDBOX_EGRESS_ALLOW_PRIVATE=true is refused when DEBUG=false")

# Post-call webhooks: delivered through the same egress guard as ctx.fetch (public addresses
# and SANDBOX_EGRESS_PORTS only), retried with doubling delays for WEBHOOK_RETRY_WINDOW_S.
WEBHOOK_TIMEOUT_S = env_float("WEBHOOK_TIMEOUT_S", 10.0)
WEBHOOK_RETRY_BASE_S = env_float("WEBHOOK_RETRY_BASE_S", 30.0)
WEBHOOK_RETRY_MAX_S = env_float("WEBHOOK_RETRY_MAX_S", 3600.0)
WEBHOOK_RETRY_WINDOW_S = env_float("WEBHOOK_RETRY_WINDOW_S", 24 * 3600.0)
