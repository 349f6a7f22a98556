"""Who may call the REST API, and the CORS headers it sends.

Every request under ``/api/v1/`` (but the public health check, schema and docs) is one of:

- **a publishable key** (``pk_…``) from a web page: accepted only with an ``Origin`` header
  on the key's allow-list, and only then do responses carry CORS headers for that origin.
  Browsers send the key in the query string (``?key=pk_…``), so that the CORS preflight,
  which carries no custom headers, can be checked against the key too;
- **a secret key** (``sk_…``) from a server, in ``Authorization: Bearer`` or ``X-Bookchat-Key``:
  refused when the request comes from a browser origin or carries the key in its URL;
- **the chat page**: a session that rendered ``/``, with Django's CSRF token, and no key;
- **anonymous**, when ``BOOKCHAT_ANONYMOUS_API`` allows it (by default only under DEBUG).

A refused request gets 401 or 403 with the usual JSON error and no CORS headers, so a
page on a foreign origin cannot read anything, not even why.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.cache import patch_vary_headers

from bookchat.conf import setting
from bookchat.errors import RequestError
from chat.models import ApiKey

API_PREFIX = "/api/v1/"
PUBLIC_PATHS = ("health", "schema", "docs")
PAGE_SESSION_FLAG = "bookchat_page"
ALLOWED_HEADERS = "Content-Type, Authorization, X-Bookchat-Key, X-CSRFToken"


@dataclass
class Client:
    """The caller of one API request."""

    channel: str  # "widget" (publishable key), "api" (secret key or anonymous), "page" (the chat page)
    key: ApiKey | None = None
    cors_origin: str | None = None

    def check_book(self, slug: str | None) -> str | None:
        """The book to answer from: a key limited to one book answers only from that one."""
        if self.key is None or self.key.book_id is None:
            return slug
        if slug not in (None, self.key.book.slug):
            raise RequestError(f"this key is for the book {self.key.book.slug!r}, not {slug!r}", code="key_book",
                               field="book", status=403)
        return self.key.book.slug


def client_ip(request) -> str:
    """The client's IP: the socket's peer, or with ``TRUSTED_PROXIES`` = n the address the n-th proxy from the
    right of ``X-Forwarded-For`` saw (addresses further left can be forged by the client)."""
    proxies = setting("TRUSTED_PROXIES")
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [part for part in forwarded if part]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]


def anonymous_allowed() -> bool:
    value = str(setting("ANONYMOUS_API")).strip().lower()
    if value in ("", "auto"):
        return bool(settings.DEBUG)
    return value in ("1", "true", "yes", "on")


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason


def _csrf_failure(request) -> str | None:
    check = _CsrfCheck(lambda r: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def _raw_key(request) -> tuple[str | None, bool]:
    """(the key the request carries, whether it came in the URL)."""
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), False
    if request.headers.get("X-Bookchat-Key"):
        return request.headers["X-Bookchat-Key"].strip(), False
    if request.GET.get("key"):
        return request.GET["key"].strip(), True
    return None, False


def forbidden(message: str, code: str) -> RequestError:
    return RequestError(message, code=code, status=403)


def authorize(request) -> Client:
    """The request's ``Client``, or a RequestError (401/403) saying why it is refused."""
    raw, in_url = _raw_key(request)
    origin = request.headers.get("Origin")
    if raw:
        if raw.startswith("sk_") and in_url:
            raise forbidden("secret keys must not appear in URLs: send them in an Authorization: Bearer header",
                            "secret_key_in_url")
        key = ApiKey.find(raw) if len(raw) < 200 else None
        if key is None or not key.active:
            raise forbidden("this API key is unknown or has been revoked", "invalid_key")
        if key.kind == ApiKey.SECRET:
            if origin:
                raise forbidden("secret keys are for servers and are never accepted from a web page; use a "
                                "publishable key in the page", "secret_key_in_browser")
            key.touch()
            return Client("api", key)
        if not key.origins():
            raise forbidden("this publishable key has no allowed origins; add the site's origin to it in the admin",
                            "no_allowed_origins")
        if not origin:
            raise forbidden("publishable keys work only from web pages on their allowed origins, and this request "
                            "has no Origin header", "origin_required")
        if not key.allows_origin(origin):
            raise forbidden(f"the origin {origin[:200]} is not allowed for this key", "origin_not_allowed")
        key.touch()
        return Client("widget", key, cors_origin=origin)
    if request.session.get(PAGE_SESSION_FLAG):
        if request.method not in ("GET", "HEAD", "OPTIONS", "TRACE"):
            reason = _csrf_failure(request)
            if reason:
                raise forbidden(f"the chat page's security token is missing or stale ({reason}); reload the page",
                                "csrf_failed")
        return Client("page")
    if anonymous_allowed():
        return Client("api")
    raise RequestError("an API key is required: send a secret key in an Authorization: Bearer header, or use a "
                       "publishable key from an allowed web page", code="key_required", status=401)


def client_of(request) -> Client:
    """The client the middleware found (requests that bypass it, e.g. in unit tests, are authorised here)."""
    client = getattr(request, "bookchat_client", None)
    return client if client is not None else authorize(request)


class ApiAccessMiddleware:
    """Authorise API requests, answer CORS preflights, and add CORS headers for allowed origins."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(API_PREFIX) or request.path[len(API_PREFIX):].startswith(PUBLIC_PATHS):
            return self.get_response(request)
        try:
            client = authorize(request)
        except RequestError as exc:
            response = JsonResponse(exc.as_response(), status=exc.status)
            if exc.status == 401:
                response["WWW-Authenticate"] = 'Bearer realm="bookchat"'
            return response
        preflight = request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers
        if preflight:
            response = HttpResponse(status=204)
            if client.cors_origin:
                response["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
                response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
                response["Access-Control-Max-Age"] = "600"
        else:
            request.bookchat_client = client
            response = self.get_response(request)
        if client.cors_origin:
            response["Access-Control-Allow-Origin"] = client.cors_origin
            response["Access-Control-Expose-Headers"] = "Retry-After"
        patch_vary_headers(response, ["Origin"])
        return response


# -- the chat page's conversations, kept in its Django session (one per book) ------------------------------
PAGE_CONVERSATIONS = "bookchat_conversations"


def page_conversation_id(request, book_slug: str) -> str | None:
    return request.session.get(PAGE_CONVERSATIONS, {}).get(book_slug)


def page_conversation_ids(request) -> list[uuid.UUID]:
    """The ids of the page session's conversations (one per book), as UUIDs."""
    ids = []
    for value in request.session.get(PAGE_CONVERSATIONS, {}).values():
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:  # the session only holds ids we stored, but it is not worth a 500
            continue
    return ids


def remember_page_conversation(request, book_slug: str, session_id: str | None) -> None:
    conversations = dict(request.session.get(PAGE_CONVERSATIONS, {}))
    if session_id:
        conversations[book_slug] = session_id
    else:
        conversations.pop(book_slug, None)
    request.session[PAGE_CONVERSATIONS] = conversations
