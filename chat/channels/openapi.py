"""What the schema says beyond what drf-spectacular reads off the serializers.

- every error status an operation can answer, with the one error shape (``bookchat.base.api.ERRORS``, which every
  app's API shares);
- the event stream, event by event: on OpenAPI 3.0/3.1 the schema of ``text/event-stream``
  is read as the schema of one event (3.2 calls it ``itemSchema``), an object with ``event``
  (``token``, ``final`` or ``error``) and ``data``, a JSON string whose ``contentSchema``
  depends on the event;
- request bodies refuse unknown keys (``additionalProperties: false``), as the code does;
- a link from an answer to its feedback call, carrying ``answer_id`` and ``session_id``;
- the three ways to call (``chat.channels.access``) as security schemes;
- the books there are: ``book`` is one of the slugs the caller may name (a key bound to a book: that book and its
  editions), and required when more than one book is reachable and no default book is set, as
  the code answers 400 ``book_required`` then. The schema is built per request, so it is current (one built
  without a request, ``manage.py spectacular`` or the MCP tools' inputs, states no books).

``finish_schema`` is a drf-spectacular post-processing hook (``SPECTACULAR_SETTINGS``).
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from bookchat.base.conf import setting
from bookchat.base.errors import DATABASE_ERRORS
from chat.channels.access import bound_book
from ingestion.models import Book, DefaultBook

STRICT_COMPONENTS = ("AskRequest", "FeedbackRequest")


def _event(name: str, content: dict) -> dict:
    return {"type": "object", "required": ["event", "data"], "properties": {
        "event": {"type": "string", "const": name},
        "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": content}}}


STREAM_EVENT = {"oneOf": [
    _event("token", {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
    _event("final", {"$ref": "#/components/schemas/Answer"}),
    _event("error", {"$ref": "#/components/schemas/Error"}),
]}


def finish_schema(result: dict, generator, request, public) -> dict:
    schemas = result.get("components", {}).get("schemas", {})
    for name in STRICT_COMPONENTS:
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    ask = schemas.get("AskRequest")
    # Built for no request (a file, the MCP tools), the schema lists no books.
    if (ask is not None and request is not None and _state_the_books(ask["properties"]["book"], request)
            and "book" not in ask["required"]):
        ask["required"].append("book")
    for path_item in result.get("paths", {}).values():
        search = path_item.get("get", {})
        if search.get("operationId") == "search" and request is not None:
            book = next((p for p in search.get("parameters", ()) if p["name"] == "book"), None)
            if book is not None and _state_the_books(book["schema"], request):
                book["required"] = True
        if search.get("operationId") == "search" and "200" in search.get("responses", {}):
            search["responses"]["200"]["links"] = {"Opened": {
                "operationId": "search_opened", "parameters": {"search_id": "$response.body#/search_id", "n": "1"},
                "description": "Report that the reader opened this result's first section."}}
        ask = path_item.get("post", {})
        if ask.get("operationId") == "ask" and "200" in ask.get("responses", {}):
            ask["responses"]["200"]["links"] = {"Feedback": {
                "operationId": "feedback",
                "parameters": {"answer_id": "$response.body#/answer_id"},
                "requestBody": {"rating": "up", "session_id": "$response.body#/session_id"},
                "description": "Vote on this answer from the conversation that got it."}}
    return result


def books_a_client_may_name(request) -> tuple[list[str], bool]:
    """The slugs ``book`` may take for the caller of ``request`` (roots first, then editions), and whether it
    must name one."""
    bound = bound_book(request)
    roots = Book.objects.roots() if bound is None else Book.objects.filter(pk=bound.root.pk)
    root_slugs = list(roots.order_by("slug").values_list("slug", flat=True))
    editions = Book.objects.filter(edition_of__slug__in=root_slugs).order_by("slug").values_list("slug", flat=True)
    has_default = bool(setting("DEFAULT_BOOK")) or DefaultBook.stored() in root_slugs  # as resolve_book reads it
    required = bound is None and len(root_slugs) > 1 and not has_default
    return root_slugs + list(editions), required


def _state_the_books(book: dict, request) -> bool:
    """List the books ``request``'s caller may name in ``book`` (a schema); whether it must name one."""
    try:
        slugs, required = books_a_client_may_name(request)
    except DATABASE_ERRORS:  # the schema is still served while the database is down: without the books
        return False
    if slugs:
        book["enum"] = slugs
    return required


class SecretKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.channels.access.SecretKeyAuthentication"
    name = "secretKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A secret key (`sk_…`), from servers only."}


class PublishableKeyScheme(OpenApiAuthenticationExtension):
    target_class = "chat.channels.access.PublishableKeyAuthentication"
    name = "publishableKey"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "query", "name": "key",
                "description": "A publishable key (`pk_…`), from a web page on one of the key's allowed origins."}


class PageSessionScheme(OpenApiAuthenticationExtension):
    target_class = "chat.channels.access.PageSessionAuthentication"
    name = "pageSession"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid",
                "description": "The chat page's own session, with its CSRF token on POST."}
