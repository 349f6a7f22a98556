"""API keys outside the admin: create one (its value returned once), list them, revoke one by its prefix.

``manage.py apikey`` only translates its options into these. A key is validated by the model's own
``full_clean`` (origins normalised; a publishable key needs one, a secret key takes none), as in the admin.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from bookchat.base.errors import RequestError
from chat.models import ApiKey
from ingestion.models import Book, IngestionJob

MIN_PREFIX = 7  # the kind (pk_ or sk_) and 4 of the key's random characters
MAX_OVERLAP = timedelta(days=90)  # a rotation's old key is not a second permanent key


class ApiKeyError(RequestError):
    code = "invalid_api_key"


def api_key_create(*, kind: str, name: str = "", origins: Sequence[str] = (), book_slug: str | None = None,
                   publish_book: str | None = None) -> tuple[ApiKey, str]:
    """A new active key and its value, which is not stored (only its hash) and can't be shown again.
    ``publish_book``: a secret key that publishes that book (which need not exist yet) and does nothing else."""
    book = None
    if publish_book:
        if book_slug and book_slug != publish_book:
            raise ApiKeyError(f"a key that publishes {publish_book!r} is for that book only, not {book_slug!r}",
                              code="key_book", field="book")
        book_slug = None  # the book may not exist yet: the key names it by its slug
        name = name.strip() or f"publishes {publish_book}"
    if book_slug:
        book = Book.objects.roots().filter(slug=book_slug).first()
        if book is None:
            # `make run BOOK=` names the book at once, but it exists only once its first indexing has ended.
            if (build := IngestionJob.objects.first_builds().filter(book_slug=book_slug).first()) is not None:
                raise ApiKeyError(f"the book {book_slug!r} is being indexed for the first time "
                                  f"({build.progress_note}): create its key once that has ended",
                                  code="book_indexing", field="book")
            known = ", ".join(Book.objects.roots().order_by("slug").values_list("slug", flat=True)) or "none yet"
            raise ApiKeyError(f"unknown book {book_slug!r} (books: {known})", code="unknown_book", field="book")
    key = ApiKey(kind=kind, name=name.strip(), allowed_origins="\n".join(origins), book=book,
                 publish_book=publish_book or "")
    raw = key.issue()
    try:
        key.full_clean()
    except ValidationError as exc:
        raise ApiKeyError(_describe(exc), field=next(iter(exc.message_dict), None)) from None
    key.save()
    return key, raw


def api_key_list() -> list[ApiKey]:
    return list(ApiKey.objects.select_related("book").order_by("created_at", "id"))


@transaction.atomic
def api_key_revoke(*, prefix: str) -> ApiKey:
    """Deactivate the one key whose prefix starts with ``prefix`` (or whose whole value it is)."""
    key = _one_key(prefix)
    ApiKey.objects.filter(pk=key.pk).update(active=False)
    key.active = False
    return key


@transaction.atomic
def api_key_rotate(*, prefix: str, overlap: timedelta) -> tuple[ApiKey, str, ApiKey]:
    """A new key like the one ``prefix`` names (kind, name, origins, book, what it publishes), and the old one
    kept valid for ``overlap`` more (then refused, as if revoked): time to deploy the new value everywhere.
    Returns the new key, its value (shown once) and the old key."""
    old = _one_key(prefix)
    if not old.usable:
        raise ApiKeyError(f"the key {old.prefix}… ({old.name}) is revoked or expired: create a new one with "
                          "`apikey create`", code="key_not_active")
    if overlap < timedelta(0) or overlap > MAX_OVERLAP:
        raise ApiKeyError(f"the overlap must be between 0 and {MAX_OVERLAP.days} days", code="bad_overlap",
                          field="overlap")
    new = ApiKey(kind=old.kind, name=old.name, allowed_origins=old.allowed_origins, book=old.book,
                 publish_book=old.publish_book)
    raw = new.issue()
    new.save()
    until = timezone.now() + overlap
    old.expires_at = min(until, old.expires_at) if old.expires_at else until  # a rotation never lengthens a key's life
    ApiKey.objects.filter(pk=old.pk).update(expires_at=old.expires_at)
    return new, raw, old


def parse_overlap(text: str) -> timedelta:
    """``90m``, ``24h``, ``7d`` or a number of seconds; ApiKeyError for anything else."""
    match = re.fullmatch(r"\s*(\d{1,7})\s*([smhd]?)\s*", text or "")
    if not match:
        raise ApiKeyError(f"--overlap {text!r}: give a duration like 90m, 24h or 7d", code="bad_overlap",
                          field="overlap")
    return timedelta(seconds=int(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]])


def _one_key(prefix: str) -> ApiKey:
    """The one key whose prefix starts with ``prefix`` (or whose whole value it is), or ApiKeyError."""
    prefix = prefix.strip()
    if len(prefix) < MIN_PREFIX:  # "pk_" alone would pick whichever publishable key is the only one
        raise ApiKeyError(f"give at least {MIN_PREFIX} characters of the key's prefix, e.g. pk_AbC1 (`apikey list` "
                          "shows them)", code="unknown_key", field="prefix")
    exact = ApiKey.find(prefix)
    matches = [exact] if exact else list(ApiKey.objects.filter(prefix__startswith=prefix).order_by("id"))
    if not matches:
        raise ApiKeyError(f"no API key starts with {prefix!r} (`apikey list` shows the prefixes)",
                          code="unknown_key", status=404)
    if len(matches) > 1:
        shown = ", ".join(f"{key.prefix} ({key.name})" for key in matches)
        raise ApiKeyError(f"{prefix!r} starts {len(matches)} keys: {shown}; give more of the prefix",
                          code="ambiguous_key")
    return matches[0]


def api_key_summary(key: ApiKey) -> dict:
    """What may be shown of a key: everything but its value, which is not stored anyway."""
    return {
        "prefix": key.prefix,
        "kind": key.kind,
        "name": key.name,
        "origins": key.allowed_origins.split(),
        "book": key.book.slug if key.book else None,
        "publishes": key.publish_book or None,
        "active": key.active,
        "expires": key.expires_at.isoformat() if key.expires_at else None,
        "created": key.created_at.isoformat() if key.created_at else None,
        "last_used": key.last_used_at.isoformat() if key.last_used_at else None,
    }


def _describe(exc: ValidationError) -> str:
    labels = {field.name: str(field.verbose_name) for field in ApiKey._meta.fields}
    return "; ".join(f"{labels.get(field, field)}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
                     for field, messages in exc.message_dict.items())
