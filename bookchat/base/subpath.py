"""Serving under a sub-path (``BOOKCHAT_URL_PREFIX``, e.g. ``/chat``): a proxy passes ``/chat/…`` on as ``/…``,
and bookchat writes every URL it makes with the prefix (Django's ``FORCE_SCRIPT_NAME``), its static files' too, and
keeps its cookies to that path."""

from __future__ import annotations

import re

from bookchat.base.errors import ConfigurationError

# Path segments of letters, digits and ``-._~``: no query, fragment, scheme, space or percent-escape to misread.
_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)+")


def url_prefix(raw: str) -> str:
    """``raw`` as a prefix: empty for the root, else a leading slash and no trailing one (``chat/`` → ``/chat``).
    Anything else is a ``ConfigurationError`` naming the setting."""
    value = raw.strip()
    if value.strip("/") == "":
        return ""
    prefix = "/" + value.strip("/")
    if not _PREFIX.fullmatch(prefix) or any(part in (".", "..") for part in prefix.split("/")):
        raise ConfigurationError(f"BOOKCHAT_URL_PREFIX={raw!r} is not a URL path like /chat (letters, digits and "
                                 "-._~ between slashes)", code="bad_setting")
    return prefix


def configured_prefix(bookchat: dict) -> str:
    """The ``BOOKCHAT`` namespace's prefix; a bad one counts as none here, for the system check to name
    (``bookchat.checks``) rather than Django's setup to fail on."""
    try:
        return url_prefix(str(bookchat.get("URL_PREFIX", "")))
    except ConfigurationError:
        return ""


def subpath_settings(bookchat: dict) -> dict:
    """Django's settings for the prefix: none of them at the root."""
    prefix = configured_prefix(bookchat)
    if not prefix:
        return {"FORCE_SCRIPT_NAME": None, "STATIC_URL": "static/"}
    # STATIC_URL is given whole: Django adds the script prefix to a relative one only once a request has set it.
    return {"FORCE_SCRIPT_NAME": prefix, "STATIC_URL": f"{prefix}/static/", "SESSION_COOKIE_PATH": f"{prefix}/",
            "CSRF_COOKIE_PATH": f"{prefix}/", "LANGUAGE_COOKIE_PATH": f"{prefix}/"}
