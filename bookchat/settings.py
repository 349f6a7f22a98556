"""Django settings for bookchat. Everything a user may change comes from ``BOOKCHAT_*`` variables
(see ``bookchat.base.conf``) plus ``DATABASE_URL``; when that is unset, the embedded PostgreSQL runs
under the data directory.
"""

from __future__ import annotations

from pathlib import Path

from bookchat import logins
from bookchat.base import broker, conf, embedded_db, languages, queues, secret_keys, security, subpath

BASE_DIR = Path(__file__).resolve().parent.parent
# templates/ and static/ sit at the top of a checkout; a wheel carries them inside this package (pyproject.toml).
IN_CHECKOUT = (BASE_DIR / "manage.py").is_file() and (BASE_DIR / "templates").is_dir()
SITE_DIR = BASE_DIR if IN_CHECKOUT else Path(__file__).resolve().parent
BOOKCHAT = conf.from_environment()

DATA_DIR = Path(BOOKCHAT["DATA_DIR"])
if not DATA_DIR.is_absolute():
    DATA_DIR = BASE_DIR / DATA_DIR
BOOKCHAT["DATA_DIR"] = str(DATA_DIR)

DEBUG = BOOKCHAT["DEBUG"]


# The key: BOOKCHAT_SECRET_KEY, else the one generated into the data folder (bookchat.base.secret_keys). What was signed
# with an older key stays valid while it is a fallback: BOOKCHAT_SECRET_KEY_FALLBACKS's, then those `manage.py
# secretkey rotate` kept in the data folder (the manual's Security page, "Rotate the secret key").
SECRET_KEY = BOOKCHAT["SECRET_KEY"] or secret_keys.generated_key(DATA_DIR)
SECRET_KEY_FALLBACKS = [key for key in secret_keys.fallbacks(DATA_DIR, BOOKCHAT["SECRET_KEY_FALLBACKS"])
                        if key != SECRET_KEY]
ALLOWED_HOSTS = [h.strip() for h in BOOKCHAT["ALLOWED_HOSTS"].split(",") if h.strip()]
if DEBUG:
    ALLOWED_HOSTS += ["testserver"]

# SECURE_SSL_REDIRECT, SECURE_REDIRECT_EXEMPT, SESSION_/CSRF_COOKIE_SECURE, SECURE_HSTS_*, SECURE_PROXY_SSL_HEADER
# and SILENCED_SYSTEM_CHECKS, from BOOKCHAT_HTTPS and friends (see bookchat.base.security; the manual, "Deploying and
# running").
globals().update(security.https_settings(BOOKCHAT))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "axes",  # failed admin logins counted and locked out (bookchat.logins)
    "django_otp",  # the admin's second factor (bookchat.twofactor): an authenticator app and recovery codes
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "bookchat",
    "ingestion",
    "chat",
    "chat.lti",  # LTI 1.3 launches (chat/lti), on django-lti's registrations and keys
    "lti_tool",
    "audit",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "bookchat.base.security.ContentSecurityPolicyMiddleware",
    # An LMS-launched session's pages: framed by its platform only, its cookies partitioned (chat.lti.framing). Outside
    # the session, CSRF and frame-options middleware, so that it sees the cookies and headers they set.
    "chat.lti.framing.LaunchedFramingMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "bookchat.base.security.ProbesByAddressMiddleware",  # /api/v1/health and ready answer a probe by IP address
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The reader's language on the student-facing pages (switch's cookie, else an LTI launch's, else Accept-Language);
    # English in the admin, the API and MCP (bookchat.base.languages says why).
    "bookchat.base.languages.ReaderLanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",  # request.user.is_verified(): has this session given a code?
    "django.contrib.messages.middleware.MessageMiddleware",
    "bookchat.twofactor.login.TwoFactorMiddleware",  # the admin: log in with the code, set up an app if required
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login's answer into the lockout page
]

# django-axes' backend first: it refuses a locked-out user name or address before a password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
globals().update(logins.axes_settings(BOOKCHAT))
OTP_TOTP_ISSUER = "bookchat"  # the name authenticator apps show beside the user name

ROOT_URLCONF = "bookchat.urls"
WSGI_APPLICATION = "bookchat.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Searched before the apps' own (as a site's templates should be, to override the admin's); from a
        # wheel the app loader finds the folder again as the bookchat app's, which is harmless.
        "DIRS": [SITE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",  # LANGUAGES, LANGUAGE_CODE, LANGUAGE_BIDI: the switch, dir
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "audit.api.pages.handoff_form_context",  # the chat page's "Ask the course staff" form (audit's)
            ],
        },
    },
]

DATABASE_URL = conf.environment_value("DATABASE_URL")  # or DATABASE_URL_FILE
if DATABASE_URL:
    import dj_database_url

    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATABASES = {"default": embedded_db.ensure_running(DATA_DIR).django_settings() | {"CONN_MAX_AGE": 60}}
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The interface's languages (bookchat.base.languages): catalogues in bookchat/locale (the page and the widget) and
# chat/locale (the pipeline's words), compiled by `python -m bookchat.base.catalogues`; any other falls back to English.
LANGUAGES = languages.LANGUAGES
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# STATIC_URL ("static/", or under BOOKCHAT_URL_PREFIX "/chat/static/"), FORCE_SCRIPT_NAME and the cookies' paths
# (bookchat.base.subpath; the manual, "Behind a proxy").
globals().update(subpath.subpath_settings(BOOKCHAT))
# From a wheel, bookchat/static is found as the bookchat app's static folder (listing it too would find it twice).
STATICFILES_DIRS = [SITE_DIR / "static"] if IN_CHECKOUT else []
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise serves from finders, but wants the folder
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_MAX_AGE = 0 if DEBUG else 3600  # widget.js keeps its name across releases: cache it for an hour

REST_FRAMEWORK = {
    # Who may call (chat/channels/access.py): a key in a header, a publishable key in the URL, the chat page's session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chat.channels.access.SecretKeyAuthentication",
        "chat.channels.access.PublishableKeyAuthentication",
        "chat.channels.access.PageSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["chat.channels.access.HasClient"],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # Bodies are JSON only, read strictly (chat.channels.parsers); this also tells the schema so.
    "DEFAULT_PARSER_CLASSES": ["chat.channels.parsers.JSONBodyParser"],
    "EXCEPTION_HANDLER": "chat.channels.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "bookchat API",
    "DESCRIPTION": "Ask a book questions and get cited, grounded answers.",
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],  # the schema and docs are public: a key sent along is not even looked at
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "chat.channels.openapi.finish_schema",
                             "audit.api.contract.finish_schema"],
    "SWAGGER_UI_DIST": "SIDECAR",  # bundled: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
# Request bodies Django will read at all; the API refuses bodies over BOOKCHAT_MAX_REQUEST_BYTES itself.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, BOOKCHAT["MAX_REQUEST_BYTES"])

Q_CLUSTER = {
    "name": "bookchat",
    # "orm": "default" (Postgres) or "redis": the URL; a bad value is named by the system check (bookchat.base.broker).
    **broker.q_cluster_broker_or_default(BOOKCHAT["Q_BROKER"]),
    "workers": BOOKCHAT["TASK_WORKERS"],
    "timeout": 3600,
    "retry": 3700,
    "max_attempts": 1,
    "catch_up": False,
    "label": "Tasks",
    # The same broker, whose sentinel also records the worker's heartbeat (/metrics, `manage.py worker alive`).
    "broker_class": "bookchat.task_workers.broker",
    # The background queue's cluster (bookchat.base.queues): `qcluster` with Q_CLUSTER_NAME=background.
    "ALT_CLUSTERS": queues.alt_clusters(timeout=3600, retry=3700),
}

# A bad BOOKCHAT_LOG_LEVEL would stop Django's setup with a bare ValueError; INFO until the system check names it.
LOG_LEVEL = BOOKCHAT["LOG_LEVEL"] if BOOKCHAT["LOG_LEVEL"] in conf.choices("LOG_LEVEL") else "INFO"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"without_traceback": {"()": "bookchat.base.security.WithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        **{name: {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False}
           for name in ("bookchat", "ingestion", "chat", "audit")},
        # One WARNING line per failed admin login (name, address, browser), one per lockout.
        "axes": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        # One line per request for a host not in ALLOWED_HOSTS (it names the host), not a traceback each.
        "django.security.DisallowedHost": {"handlers": ["console"], "level": "WARNING", "propagate": False,
                                           "filters": ["without_traceback"]},
    },
}

# E-mail to staff (new hand-offs, audit.handoff_mail): SMTP when BOOKCHAT_EMAIL_HOST is set, else Django's console
# backend, which writes each message to the log (development, and a deployment that has no mail server yet).
EMAIL_BACKEND = ("django.core.mail.backends.smtp.EmailBackend" if BOOKCHAT["EMAIL_HOST"]
                 else "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = BOOKCHAT["EMAIL_HOST"] or "localhost"
EMAIL_PORT = BOOKCHAT["EMAIL_PORT"]
EMAIL_HOST_USER = BOOKCHAT["EMAIL_USER"]
EMAIL_HOST_PASSWORD = BOOKCHAT["EMAIL_PASSWORD"]
EMAIL_USE_TLS = BOOKCHAT["EMAIL_TLS"]
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = SERVER_EMAIL = BOOKCHAT["EMAIL_FROM"]
