"""The REST API under ``/api/v1/``: ask, ask/stream (Server-Sent Events), search (and the sections opened from it),
feedback, books, health.

Views only translate: they read the body (``chat.channels.parsers``: strict JSON through DRF's
parser hook, so that a wrong content type is 415, a body over ``MAX_REQUEST_BYTES`` is 413, bad
UTF-8, bad or too deeply nested JSON and lone surrogate escapes are 400 with their own codes), hand it to
``chat.channels.asking`` (which validates it with ``chat.channels.serializers``) and render. Who may call is
decided by DRF's authentication and permission classes (``chat.channels.access``); every failure
becomes ``{"error": code, "message": …, "field": …}`` through ``chat.channels.error_responses``. The schema
(``/api/v1/schema``) is generated from the same serializers, finished by ``chat.channels.openapi``.
"""

from __future__ import annotations

import json
import logging
import re

from django.db import connection
from django.db.models import Count
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from bookchat.base.api import ERRORS
from bookchat.base.conf import setting
from bookchat.base.errors import NotFound
from chat.channels.access import ALLOWED_HEADERS, Client, client_of
from chat.channels.asking import ClientRequests
from chat.channels.books import book_list
from chat.channels.error_responses import error_reply
from chat.channels.feedback import record_feedback, record_opened
from chat.channels.openapi import STREAM_EVENT
from chat.channels.parsers import json_body, refuse_a_large_body
from chat.channels.responses import (
    AnswerSerializer,
    BookDetailSerializer,
    BooksSerializer,
    FeedbackSerializer,
    SearchResultSerializer,
    answer_data,
)
from chat.channels.serializers import (
    AskRequestSerializer,
    BookQuerySerializer,
    FeedbackRequestSerializer,
    OpenedSectionSerializer,
    SectionSearchSerializer,
    validate_feedback,
)
from chat.channels.throttling import limited
from chat.pipeline.announcements import health_requested
from chat.pipeline.editions import resolve_book
from chat.pipeline.generation import llm_configured
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, book_slug_validator
from ingestion.reading.outline import book_outline

logger = logging.getLogger(__name__)
BOOK_SLUG = re.compile(book_slug_validator.regex.pattern)


def exception_handler(exc, context):
    """DRF's exception hook: every failure becomes the one JSON error shape (``chat.channels.error_responses``)."""
    reply = error_reply(exc, context.get("request"))
    headers = dict(reply.headers)
    if isinstance(exc, exceptions.MethodNotAllowed):
        headers["Allow"] = ", ".join(context["view"].allowed_methods)
    return Response(reply.body, status=reply.status, headers=headers)


class ClientView(APIView):
    """An API view for clients: CORS preflights answered, and CORS headers for a key's allowed origin."""

    def options(self, request, *args, **kwargs):
        if "Access-Control-Request-Method" not in request.headers:
            return super().options(request, *args, **kwargs)
        response = HttpResponse(status=204)
        if client_of(request).cors_origin:
            response["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response["Access-Control-Max-Age"] = "600"
        return response

    def initial(self, request, *args, **kwargs):
        refuse_a_large_body(request)
        super().initial(request, *args, **kwargs)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        client = getattr(request, "_auth", None)  # None when authentication refused the request
        if isinstance(client, Client) and client.cors_origin:
            response["Access-Control-Allow-Origin"] = client.cors_origin
            response["Access-Control-Expose-Headers"] = "Retry-After"
        patch_vary_headers(response, ["Origin"])
        return response


class AskView(ClientView):

    @extend_schema(operation_id="ask", request=AskRequestSerializer, responses={200: AnswerSerializer, **ERRORS},
                   examples=[OpenApiExample("question", request_only=True, value={
                       "question": "How do I ingest a folder?", "book": "bookchat-manual"})])
    def post(self, request):
        client = client_of(request)
        asking = ClientRequests(client, request)
        ask = asking.validate(json_body(request))
        with limited(request, client, conversation=ask.session_id):
            return Response(answer_data(asking.answer(ask)))


def sse(event: str, payload: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


class AskStreamView(ClientView):

    @extend_schema(operation_id="ask_stream", request=AskRequestSerializer,
                   responses={(200, "text/event-stream"): OpenApiResponse(STREAM_EVENT, description=(
                       "Server-Sent Events, each described by the schema: `token` events (`{\"text\": …}`) as the "
                       "answer is written, then one `final` event with the whole response (its `answer` is "
                       "authoritative), or one `error` event.")), **ERRORS})
    def post(self, request):
        client = client_of(request)
        asking = ClientRequests(client, request)
        ask = asking.validate(json_body(request), streaming=True)
        with limited(request, client, conversation=ask.session_id):
            events = asking.stream(ask)  # prepared: an unknown book or one being indexed is refused here
        response = StreamingHttpResponse((sse(kind, payload) for kind, payload in events),
                                         content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


class SearchView(ClientView):

    @extend_schema(operation_id="search", parameters=[SectionSearchSerializer],
                   responses={200: SearchResultSerializer, **ERRORS}, description=(
                       "Sections of a book as a reader types: pages best first, each with its best sections, their "
                       "URLs with anchors and a snippet with the matched words marked. The last word of `q` may be "
                       "half-written (`ros2 lau`); when no word matches, the sections nearest in meaning come back "
                       "(`matched: meaning`)."))
    def get(self, request):
        client = client_of(request)
        asking = ClientRequests(client, request)
        params = {name: request.query_params[name] for name in request.query_params if name != "key"}
        ask = asking.validate_section_search(params)
        with limited(request, client, conversation=ask.session_id, searching=True):
            return Response(asking.find(ask))


class SearchOpenedView(ClientView):

    @extend_schema(operation_id="search_opened", parameters=[OpenedSectionSerializer], request=None,
                   responses={204: None, **ERRORS}, description=(
                       "The reader opened the `n`-th section of a search's result (1 for the first page's first "
                       "section, on through each page's sections, as shown). Sent as the widget opens a result "
                       "(no body, so a browser sends it without a preflight and while the page is left); a search "
                       "whose sections nobody opened shows in the coverage gaps."))
    def post(self, request, search_id):
        client = client_of(request)
        params = {name: request.query_params[name] for name in request.query_params if name != "key"}
        n = OpenedSectionSerializer(data=params).checked()["n"]
        with limited(request, client, searching=True):  # in the address's search ceiling: it has no conversation
            record_opened(search_id, n, book_slug=client.key_book())
        return Response(status=204)


class FeedbackView(ClientView):
    @extend_schema(operation_id="feedback", request=FeedbackRequestSerializer,
                   responses={200: FeedbackSerializer, 201: FeedbackSerializer, **ERRORS},
                   description="Thumbs up or down on an answer, from the session that got it. Voting again "
                               "replaces the earlier vote (200); the first vote answers 201.")
    def post(self, request, answer_id):
        client = client_of(request)
        rating, comment, session_id = validate_feedback(json_body(request))
        sessions = [session_id] if session_id else []
        feedback, created = record_feedback(answer_id, rating=rating, comment=comment,
                                            session_ids=sessions + client.conversations(), channel=client.channel,
                                            book_slug=client.key_book())
        return Response(FeedbackSerializer(feedback).data, status=201 if created else 200)


class BooksView(ClientView):
    @extend_schema(operation_id="books", responses={200: BooksSerializer, **ERRORS})
    def get(self, request):
        return Response(BooksSerializer({"books": book_list()}).data)


class BookView(ClientView):
    @extend_schema(operation_id="book", parameters=[BookQuerySerializer],
                   responses={200: BookDetailSerializer, **ERRORS})
    def get(self, request, slug):
        """A book with its outline: chapters and pages in the order of the site's sidebar."""
        query = BookQuerySerializer(data={k: request.query_params[k] for k in ("version", "locale")
                                          if k in request.query_params}).checked()
        slug = client_of(request).check_book(slug)
        if not BOOK_SLUG.fullmatch(slug):
            raise NotFound(f"there is no book {slug[:100]!r}; GET /api/v1/books lists them", code="unknown_book")
        edition = resolve_book(slug, version=query.get("version"), locale=query.get("locale"))
        entry = book_list(slug=edition.root.slug)[0]
        entry.update(version=edition.version, locale=edition.locale, outline=book_outline(edition))
        return Response(BookDetailSerializer(entry).data)


class HealthView(APIView):
    """Liveness: public, for load balancers and monitors."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(operation_id="health", responses={200: OpenApiTypes.OBJECT, 503: OpenApiTypes.OBJECT})
    def get(self, request):
        checks, healthy = {}, True
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            counts = Book.objects.annotate(n=Count("chunks")).values_list("slug", "n")
            checks["database"] = {"ok": True, "books": {slug: n for slug, n in counts}}
        except Exception as exc:  # the health check reports, it doesn't fail
            healthy = False
            checks["database"] = {"ok": False, "error": type(exc).__name__}
        try:
            embedder = get_embedder()
            checks["embedder"] = {"ok": True, "name": embedder.name, "dimensions": embedder.dimension}
        except Exception as exc:
            healthy = False
            checks["embedder"] = {"ok": False, "error": str(exc)[:200]}
        checks["llm"] = {"configured": llm_configured(), "model": setting("LLM_MODEL") or None}
        # Reported, not judged: failed audit writes never fail an answer, so they don't make this worker unhealthy.
        for receiver, report in health_requested.send_robust(sender=HealthView):
            if isinstance(report, Exception):
                logger.error("health report of %r failed: %s", receiver, report)
            else:
                checks.update(report)
        body = {"status": "ok" if healthy else "unavailable", **checks}
        return Response(body, status=200 if healthy else 503)
