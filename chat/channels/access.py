"""Who may call the REST API: DRF authentication classes, the default permission, and CORS for keys.

Every API request (but the public health check, schema and docs, whose views say ``AllowAny``)
is one of:

- **a publishable key** (``pk_…``) from a web page (``PublishableKeyAuthentication``): accepted
  only with an ``Origin`` header on the key's allow-list, and only then do responses carry CORS
  headers for that origin. Browsers send the key in the query string (``?key=pk_…``), so that the
  CORS preflight, which carries no custom headers, can be checked against the key too;
- **a secret key** (``sk_…``) from a server, in ``Authorization: Bearer`` or ``X-Bookchat-Key``
  (``SecretKeyAuthentication``): refused when the request comes from a browser origin or carries
  the key in its URL. A publishable key sent in a header is judged as in the query string. A secret key that
  publishes a book (``ApiKey.publish_book``: a ``PublisherClient``) may only publish it (ingestion's publishing
  API, ``ingestion.api.views``, which reads the key through ``bookchat.base.api.ApiCaller``): ``HasClient``
  refuses it everywhere else, and only such a key may publish;
- **the chat page** (``PageSessionAuthentication``): a session that rendered ``/``, with DRF's own
  CSRF enforcement, and no key;
- **anonymous**, when ``BOOKCHAT_ANONYMOUS_API`` allows it (by default only under DEBUG): the
  default permission ``HasClient`` lets it through as an anonymous ``Client``.

An authenticated request's ``request.auth`` is its ``Client``. A refused request gets 401 or
403 with the usual JSON error and no CORS headers, so a page on a foreign origin cannot read
anything, not even why. ``chat.channels.api.ClientView``, the base of the API's views, answers CORS
preflights and adds the CORS headers of an allowed origin.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission

from bookchat.base.api import ApiCaller
from bookchat.base.conf import setting
from bookchat.base.errors import RequestError
from chat.models import ApiKey
from ingestion.models import Book

PAGE_SESSION_FLAG = "bookchat_page"
PAGE_CONVERSATIONS = "bookchat_conversations"
# Set by an LMS launch (chat.lti): the learner's pseudonym, and the course's book, the only one the session may ask.
PAGE_LEARNER = "bookchat_learner"
PAGE_BOUND_BOOK = "bookchat_bound_book"
ALLOWED_HEADERS = "Content-Type, Authorization, X-Bookchat-Key, X-CSRFToken"
KEY_REQUIRED = ("an API key is required: send a secret key in an Authorization: Bearer header, or use a "
                "publishable key from an allowed web page")


@dataclass
class Client(ApiCaller):
    """The caller of one API request. API callers keep their conversations themselves (``session_id``). As an
    ``ApiCaller`` it tells other apps' endpoints (ingestion's publishing API) its key and the book it publishes."""

    channel: str  # "widget" (publishable key), "api" (secret key or anonymous), "page" (the chat page), "mcp"
    key: ApiKey | None = None
    cors_origin: str | None = None

    @property
    def key_label(self) -> str | None:
        return f"{self.key.prefix}… ({self.key.name})" if self.key is not None else None

    @property
    def publishes(self) -> str | None:
        return None

    @property
    def learner(self) -> str:
        """The learner's pseudonym (an LMS launch), kept on their conversations, audit rows and hand-offs."""
        return ""

    def check_book(self, slug: str | None) -> str | None:
        """The book to answer from: a key limited to one book answers only from that one."""
        if self.key is None or self.key.book_id is None:
            return slug
        if slug not in (None, self.key.book.slug):
            raise RequestError(f"this key is for the book {self.key.book.slug!r}, not {slug!r}", code="key_book",
                               field="book", status=403)
        return self.key.book.slug

    def key_book(self) -> str | None:
        return self.key.book.slug if self.key is not None and self.key.book_id else None

    def conversation(self, book_slug: str) -> uuid.UUID | None:
        """The conversation this client is in on a book, when it doesn't say (only the page remembers)."""
        return None

    def conversations(self) -> list[uuid.UUID]:
        return []

    def remember(self, book_slug: str, session_id: str | None) -> None:
        """Note the conversation an answer went to (``None``: start afresh next time)."""

    def rate_buckets(self, ip_tag: str, conversation: str | None = None) -> list[tuple[str, str]]:
        """The limits this client's questions count against, the student's own first, then the ceilings: (bucket, the
        setting that sizes it). ``ip_tag``: the keyed hash of the client's IP (``chat.channels.throttling``);
        ``conversation``: the one the question continues (``None`` for a first question: only the ceilings)."""
        return [*self.own_buckets(ip_tag, conversation), *self.ceilings(ip_tag)]

    def own_buckets(self, ip_tag: str, conversation: str | None) -> list[tuple[str, str]]:
        """The student's own limit: the conversation's (none before a conversation exists)."""
        if not conversation:
            return []
        return [(f"conversation:{self.key.pk if self.key else '-'}:{conversation}", "RATE_CONVERSATION")]

    def ceilings(self, ip_tag: str) -> list[tuple[str, str]]:
        """The limits shared by everyone behind this client's key or address, narrowest last."""
        if self.key is None:
            return [(f"ip:{ip_tag}", "RATE_ANONYMOUS")]
        return [(f"key:{self.key.pk}", "RATE_KEY")]

    def search_buckets(self, ip_tag: str, conversation: str | None = None) -> list[tuple[str, str]]:
        """The limits this client's searches count against: the reader's own (its conversation's, sized for a search
        per keystroke: ``RATE_SEARCH``) and a ceiling on the narrowest of its question ceilings (its address, or a
        secret key's whole traffic: ``RATE_SEARCH_ADDRESS``). A search before any conversation counts in the ceiling
        only."""
        own = [(f"search:{bucket}", "RATE_SEARCH") for bucket, _ in self.own_buckets(ip_tag, conversation)]
        return [*own, (f"search:{self.ceilings(ip_tag)[-1][0]}", "RATE_SEARCH_ADDRESS")]


@dataclass
class PublisherClient(Client):
    """A book's CI with the key that publishes that one book (``ApiKey.publish_book``); it can't ask."""

    channel: str = "publish"

    @property
    def publishes(self) -> str | None:
        return self.key.publish_book


@dataclass
class WidgetClient(Client):
    """A docs site's widget: a publishable key from one of its origins. Each conversation has its own limit; the key's
    and each address's on the key are ceilings, sized for a class asking at once."""

    channel: str = "widget"

    def ceilings(self, ip_tag: str) -> list[tuple[str, str]]:
        return [*super().ceilings(ip_tag), (f"key:{self.key.pk}:ip:{ip_tag}", "RATE_KEY_IP")]


@dataclass
class AssistantClient(Client):
    """An AI assistant over MCP (``mcp_server``): with a secret key over HTTP, or none over stdio, where the
    operator may bind it to one book (``manage.py mcp --book``) as a key can be bound."""

    channel: str = "mcp"
    book: str | None = None

    def check_book(self, slug: str | None) -> str | None:
        slug = super().check_book(slug)
        if self.book is None:
            return slug
        if slug not in (None, self.book):
            raise RequestError(f"this server answers from the book {self.book!r} only, not {slug!r}",
                               code="key_book", field="book", status=403)
        return self.book

    def key_book(self) -> str | None:
        return super().key_book() or self.book


@dataclass
class PageClient(Client):
    """The chat page: its conversations (one per book) live in its Django session."""

    channel: str = "page"
    session: object = field(default=None, repr=False)

    @property
    def learner(self) -> str:
        return str(self.session.get(PAGE_LEARNER) or "")

    def bound_book(self) -> str | None:
        """The course's book of a launched session (``chat.lti``), the only one it may ask; None elsewhere."""
        return self.session.get(PAGE_BOUND_BOOK) or None

    def check_book(self, slug: str | None) -> str | None:
        bound = self.bound_book()
        if bound is None:
            return super().check_book(slug)
        if slug not in (None, bound) and not str(slug).startswith(f"{bound}--"):
            raise RequestError(f"this course's session answers from the book {bound!r} only, not {slug!r}",
                               code="key_book", field="book", status=403)
        return slug or bound

    def key_book(self) -> str | None:
        return self.bound_book()

    def conversation(self, book_slug: str) -> uuid.UUID | None:
        return _uuid_or_none(self.session.get(PAGE_CONVERSATIONS, {}).get(book_slug))

    def conversations(self) -> list[uuid.UUID]:
        ids = (_uuid_or_none(value) for value in self.session.get(PAGE_CONVERSATIONS, {}).values())
        return [i for i in ids if i is not None]  # the session only holds ids we stored, but not worth a 500

    def own_buckets(self, ip_tag: str, conversation: str | None) -> list[tuple[str, str]]:
        """The page session's own limit (its conversations, one per book, share it). Before the session has a key,
        the address's own page bucket stands in for it."""
        return [(f"page:{self.session.session_key or f'ip:{ip_tag}'}", "RATE_PAGE")]

    def ceilings(self, ip_tag: str) -> list[tuple[str, str]]:
        return [(f"page-ip:{ip_tag}", "RATE_ADDRESS")]

    def remember(self, book_slug: str, session_id: str | None) -> None:
        conversations = dict(self.session.get(PAGE_CONVERSATIONS, {}))
        if session_id:
            conversations[book_slug] = str(session_id)
        else:
            conversations.pop(book_slug, None)
        self.session[PAGE_CONVERSATIONS] = conversations


def _uuid_or_none(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def anonymous_allowed() -> bool:
    value = str(setting("ANONYMOUS_API")).strip().lower()
    if value in ("", "auto"):
        return bool(settings.DEBUG)
    return value in ("1", "true", "yes", "on")


def refuse(message: str, code: str) -> exceptions.PermissionDenied:
    return exceptions.PermissionDenied(detail=message, code=code)


def header_key(request) -> str:
    """The key sent in ``Authorization: Bearer`` or ``X-Bookchat-Key`` ("" when none)."""
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else request.headers.get("X-Bookchat-Key", "").strip()


def active_key(raw: str) -> ApiKey | None:
    """The active key whose raw value is ``raw``; ``None`` for an unknown, revoked or expired one."""
    key = ApiKey.find(raw) if raw and len(raw) < 200 else None
    return key if key is not None and key.usable else None


def bound_book(request) -> Book | None:
    """The book that the active key ``request`` sends (in a header or ``?key=``) is bound to; ``None`` without
    one. Looks only: the key is neither checked against the origin nor touched (the schema asks this)."""
    key = active_key(header_key(request) or request.GET.get("key", "").strip())
    return key.book if key is not None and key.book_id else None


def key_client(raw: str, origin: str | None, *, in_url: bool) -> Client:
    """The client a key makes, or the PermissionDenied saying why it may not be used here."""
    if raw.startswith("sk_") and in_url:
        raise refuse("secret keys must not appear in URLs: send them in an Authorization: Bearer header",
                     "secret_key_in_url")
    key = active_key(raw)
    if key is None:
        raise refuse("this API key is unknown or has been revoked", "invalid_key")
    if key.kind == ApiKey.SECRET:
        if origin:
            raise refuse("secret keys are for servers and are never accepted from a web page; use a publishable "
                         "key in the page", "secret_key_in_browser")
        key.touch()
        return PublisherClient(key=key) if key.publish_book else Client("api", key)
    if not key.origins():
        raise refuse("this publishable key has no allowed origins; add the site's origin to it in the admin",
                     "no_allowed_origins")
    if not origin:
        raise refuse("publishable keys work only from web pages on their allowed origins, and this request has no "
                     "Origin header", "origin_required")
    if not key.allows_origin(origin):
        raise refuse(f"the origin {origin[:200]} is not allowed for this key", "origin_not_allowed")
    key.touch()
    return WidgetClient(key=key, cors_origin=origin)


class SecretKeyAuthentication(BaseAuthentication):
    """A key in ``Authorization: Bearer`` or ``X-Bookchat-Key``."""

    def authenticate(self, request):
        raw = header_key(request)
        if not raw:
            return None
        return request._request.user, key_client(raw, request.headers.get("Origin"), in_url=False)

    def authenticate_header(self, request):
        return 'Bearer realm="bookchat"'


class PublishableKeyAuthentication(BaseAuthentication):
    """A key in the query string (``?key=pk_…``), from a page on one of the key's origins."""

    def authenticate(self, request):
        raw = request.query_params.get("key", "").strip()
        if not raw:
            return None
        return request._request.user, key_client(raw, request.headers.get("Origin"), in_url=True)


class PageSessionAuthentication(SessionAuthentication):
    """The chat page's own calls: a session that rendered ``/``, and (on POST) its CSRF token."""

    def authenticate(self, request):
        session = request._request.session
        if not session.get(PAGE_SESSION_FLAG):
            return None
        try:
            self.enforce_csrf(request._request)  # Django's request: its CSRF check never parses a JSON body
        except exceptions.PermissionDenied as exc:
            raise refuse(f"the chat page's security token is missing or stale ({exc.detail}); reload the page",
                         "csrf_failed") from None
        return request._request.user, PageClient(session=session)


class HasClient(BasePermission):
    """The default permission: an authenticated client, or anyone when anonymous access is on; never a key that
    publishes a book (it publishes and does nothing else)."""

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, PublisherClient):
            raise refuse(f"this key publishes the book {request.auth.publishes!r} and can do nothing else; ask with "
                         "another key", "publishing_key")
        return isinstance(request.auth, Client) or anonymous_allowed()


def client_of(request) -> Client:
    """The request's ``Client`` (anonymous ones included)."""
    return request.auth if isinstance(request.auth, Client) else Client("api")
