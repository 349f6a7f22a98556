"""The REST API under ``/api/v1/``: ask, ask/stream (Server-Sent Events), books, health.

Views only translate: they decode the body (our own strict JSON decoding, so that a wrong
content type is 415, a body over ``MAX_REQUEST_BYTES`` is 413, bad UTF-8 and bad JSON are
400 with their own codes), call ``chat.validation`` and ``chat.answering``, and render.
Every error is ``{"error": code, "message": …, "field": …}``.
"""

from __future__ import annotations

import json
import logging

from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.db.models import Count
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from bookchat.conf import setting
from bookchat.errors import BookchatError, RequestError
from chat.answering import answer_events, answer_question, prepare, scope_threshold
from chat.generation import llm_configured
from chat.models import ScopeCalibration
from chat.validation import validate_ask
from ingestion.models import Book

logger = logging.getLogger(__name__)


def error_body(code: str, message: str, field: str | None = None) -> dict:
    return {"error": code, "message": message, "field": field}


def exception_handler(exc, context):
    """DRF's exception hook: every failure becomes the one JSON error shape."""
    if isinstance(exc, RequestError):
        return Response(exc.as_response(), status=exc.status)
    if isinstance(exc, BookchatError):  # a server-side condition: embedder mismatch, bad configuration
        return Response(error_body(exc.code, exc.message), status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        headers = {"Allow": ", ".join(context["view"].allowed_methods)} \
            if isinstance(exc, exceptions.MethodNotAllowed) else None
        return Response(error_body(exc.default_code, str(detail)), status=exc.status_code, headers=headers)
    logger.exception("unexpected error in %s", context.get("view"))
    return Response(error_body("internal_error", "bookchat failed unexpectedly; the error was logged"),
                    status=status.HTTP_500_INTERNAL_SERVER_ERROR)


def decode_json_body(request) -> object:
    """The request body as JSON, or the right RequestError (413, 415, 400)."""
    limit = setting("MAX_REQUEST_BYTES")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise RequestError(f"the request body is {declared} bytes; the limit is {limit}", code="too_large",
                           status=413)
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise RequestError(f"send JSON with Content-Type: application/json (got {content_type or 'none'})",
                           code="unsupported_media_type", status=415)
    try:
        raw = request.body
    except RequestDataTooBig:
        raise RequestError(f"the request body is larger than {limit} bytes", code="too_large", status=413) from None
    if len(raw) > limit:
        raise RequestError(f"the request body is {len(raw)} bytes; the limit is {limit}", code="too_large",
                           status=413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not valid UTF-8 (byte {exc.start})", code="invalid_encoding") \
            from None
    if not text.strip():
        raise RequestError("the request body is empty; send a JSON object with a question", code="invalid_body")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                           code="invalid_json") from None


_SOURCE = inline_serializer("Source", {
    "n": serializers.IntegerField(), "chapter": serializers.CharField(), "section": serializers.CharField(),
    "heading_path": serializers.CharField(), "url": serializers.CharField(), "excerpt": serializers.CharField(),
    "score": serializers.FloatField(), "chunk_id": serializers.CharField(), "cited": serializers.BooleanField(),
})
ASK_INPUT = inline_serializer("AskInput", {
    "question": serializers.CharField(max_length=1000, help_text="1–1000 characters, at most 500 words."),
    "selected_text": serializers.CharField(required=False, max_length=2000),
    "session_id": serializers.UUIDField(required=False),
    "book": serializers.CharField(required=False, help_text="Book slug; optional when only one book is indexed."),
    "chapter": serializers.CharField(required=False, help_text="Category label, folder, page path or page slug."),
    "max_results": serializers.IntegerField(required=False, min_value=1, max_value=10),
})
ASK_OUTPUT = inline_serializer("Answer", {
    "answer": serializers.CharField(), "sources": _SOURCE.__class__(many=True),
    "confidence": serializers.FloatField(), "confidence_level": serializers.ChoiceField(["high", "medium", "low"]),
    "generator": serializers.CharField(), "session_id": serializers.UUIDField(),
    "response_time_ms": serializers.IntegerField(), "answer_id": serializers.UUIDField(),
    "refused": serializers.BooleanField(), "suggestions": serializers.ListField(child=serializers.DictField()),
    "disclaimer": serializers.CharField(allow_null=True), "notice": serializers.CharField(allow_null=True),
    "flagged_for_review": serializers.BooleanField(),
})
ERROR = inline_serializer("Error", {"error": serializers.CharField(), "message": serializers.CharField(),
                                    "field": serializers.CharField(allow_null=True)})
ERRORS = {400: ERROR, 404: ERROR, 413: ERROR, 415: ERROR, 504: ERROR}


class AskView(APIView):
    @extend_schema(request=ASK_INPUT, responses={200: ASK_OUTPUT, **ERRORS}, examples=[
        OpenApiExample("question", value={"question": "How do I ingest a folder?", "book": "bookchat-manual"},
                       request_only=True)])
    def post(self, request):
        ask = validate_ask(decode_json_body(request), channel="api")
        return Response(answer_question(ask))


def sse(event: str, payload: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


class AskStreamView(APIView):
    @extend_schema(request=ASK_INPUT, responses={(200, "text/event-stream"): OpenApiTypes.STR, **ERRORS},
                   description="Server-Sent Events: `token` events (`{\"text\": …}`) as the answer is written, then "
                               "one `final` event with the whole response (its `answer` is authoritative), or one "
                               "`error` event.")
    def post(self, request):
        ask = validate_ask(decode_json_body(request), channel="stream")
        prepared = prepare(ask)  # errors up to here are real HTTP statuses

        def events():
            try:
                for kind, payload in answer_events(prepared):
                    yield sse(kind, payload)
            except RequestError as exc:
                yield sse("error", exc.as_response())
            except Exception:
                logger.exception("streaming an answer failed")
                yield sse("error", error_body("internal_error", "bookchat failed while answering"))

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


class BooksView(APIView):
    @extend_schema(responses={200: inline_serializer("Books", {"books": serializers.ListField(
        child=serializers.DictField())})})
    def get(self, request):
        books = Book.objects.order_by("slug").with_counts()
        thresholds = dict(ScopeCalibration.objects.values_list("book_id", "threshold"))
        return Response({"books": [
            {"slug": b.slug, "title": b.title, "base_url": b.base_url, "pages": b.document_count,
             "chunks": b.chunk_count, "embedder": b.embedder_name,
             "scope_threshold": round(scope_threshold(b, {"threshold": thresholds.get(b.pk)}), 4),
             "updated_at": b.updated_at}
            for b in books
        ]})


class HealthView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 503: OpenApiTypes.OBJECT})
    def get(self, request):
        from ingestion.embedders import get_embedder

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
        body = {"status": "ok" if healthy else "unavailable", **checks}
        return Response(body, status=200 if healthy else 503)
