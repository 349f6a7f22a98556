"""The REST API under ``/api/v1/``: ask, ask/stream (Server-Sent Events), books, health.

Views only translate: they decode the body (our own strict JSON decoding, so that a wrong
content type is 415, a body over ``MAX_REQUEST_BYTES`` is 413, bad UTF-8, bad or too deeply
nested JSON and lone surrogate escapes are 400 with their own codes), call ``chat.validation``
and ``chat.answering``, and render.
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
from bookchat.outage import DATABASE_ERRORS, log_outage, outage_body
from chat.access import client_ip, client_of, page_conversation_id, page_conversation_ids, remember_page_conversation
from chat.answering import answer_events, answer_question, prepare, scope_threshold
from chat.conversations import parse_session_id
from chat.feedback import record_feedback, validate_feedback
from chat.generation import llm_configured
from chat.models import ScopeCalibration
from chat.signals import health_requested
from chat.throttling import QuestionThrottle
from chat.validation import has_lone_surrogate, validate_ask
from ingestion.models import Book

logger = logging.getLogger(__name__)


def error_body(code: str, message: str, field: str | None = None) -> dict:
    return {"error": code, "message": message, "field": field}


def exception_handler(exc, context):
    """DRF's exception hook: every failure becomes the one JSON error shape."""
    if isinstance(exc, RequestError):
        return Response(exc.as_response(), status=exc.status)
    if isinstance(exc, DATABASE_ERRORS):  # the database is down or unreachable: an outage, not a bug
        log_outage(context["request"], exc)
        return Response(outage_body(), status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, BookchatError):  # a server-side condition: embedder mismatch, bad configuration
        return Response(error_body(exc.code, exc.message), status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, exceptions.Throttled):
        limited = getattr(context.get("request"), "bookchat_rate_limited", None)
        retry = limited.retry_after if limited else max(1, int(exc.wait or 1))
        message = limited.message if limited else f"too many requests; try again in {retry} s"
        return Response(error_body("rate_limited", message), status=429, headers={"Retry-After": str(retry)})
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
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                           code="invalid_json") from None
    except RecursionError:
        raise RequestError("the request body is not valid JSON: nested too deeply", code="invalid_json") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise RequestError(f"the request body is not valid JSON: {str(exc)[:100]}", code="invalid_json") from None
    if has_lone_surrogate(data):  # JSON can spell "\ud800"; UTF-8, Postgres and the embedder can't hold it
        field = next((str(key) for key, value in data.items() if not has_lone_surrogate(key)
                      and has_lone_surrogate(value)), None) if isinstance(data, dict) else None
        raise RequestError("the request body contains an unpaired UTF-16 surrogate escape (\\ud800-\\udfff); "
                           "send valid Unicode", code="invalid_characters", field=field)
    return data


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
ERRORS = {400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 413: ERROR, 415: ERROR, 429: ERROR, 503: ERROR,
          504: ERROR}


def validated_ask(request, *, streaming: bool):
    """The request's question, checked, on the channel of its client, limited to the client's book."""
    client = client_of(request)
    channel = client.channel if client.channel != "api" else ("stream" if streaming else "api")
    ask = validate_ask(decode_json_body(request), channel=channel)
    ask.book = client.check_book(ask.book)
    ask.client_ip = client_ip(request)
    if client.key is not None:
        ask.api_key_id, ask.api_key_name = client.key.pk, client.key.name
    if client.channel == "page" and ask.session_id is None and ask.book:
        ask.session_id = parse_session_id(page_conversation_id(request, ask.book))
    return client, ask


class AskView(APIView):
    throttle_classes = [QuestionThrottle]

    @extend_schema(request=ASK_INPUT, responses={200: ASK_OUTPUT, **ERRORS}, examples=[
        OpenApiExample("question", value={"question": "How do I ingest a folder?", "book": "bookchat-manual"},
                       request_only=True)])
    def post(self, request):
        client, ask = validated_ask(request, streaming=False)
        response = answer_question(ask)
        if client.channel == "page":
            remember_page_conversation(request, response["book"], response["session_id"])
        return Response(response)


def sse(event: str, payload: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


class AskStreamView(APIView):
    throttle_classes = [QuestionThrottle]

    @extend_schema(request=ASK_INPUT, responses={(200, "text/event-stream"): OpenApiTypes.STR, **ERRORS},
                   description="Server-Sent Events: `token` events (`{\"text\": …}`) as the answer is written, then "
                               "one `final` event with the whole response (its `answer` is authoritative), or one "
                               "`error` event.")
    def post(self, request):
        client, ask = validated_ask(request, streaming=True)
        prepared = prepare(ask)  # errors up to here are real HTTP statuses
        if client.channel == "page":
            remember_page_conversation(request, prepared.book.slug, str(prepared.conversation.id))

        def events():
            try:
                for kind, payload in answer_events(prepared):
                    yield sse(kind, payload)
            except RequestError as exc:
                yield sse("error", exc.as_response())
            except DATABASE_ERRORS as exc:
                log_outage(request, exc)
                yield sse("error", outage_body())
            except Exception:
                logger.exception("streaming an answer failed")
                yield sse("error", error_body("internal_error", "bookchat failed while answering"))

        response = StreamingHttpResponse(events(), content_type="text/event-stream; charset=utf-8")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


FEEDBACK_INPUT = inline_serializer("FeedbackInput", {
    "rating": serializers.ChoiceField(["up", "down"]),
    "comment": serializers.CharField(required=False, max_length=2000),
    "session_id": serializers.UUIDField(required=False, help_text="The session_id the answer came with (the chat "
                                        "page's own session needs none)."),
})
FEEDBACK_OUTPUT = inline_serializer("Feedback", {
    "answer_id": serializers.UUIDField(), "rating": serializers.CharField(), "comment": serializers.CharField()})


class FeedbackView(APIView):
    @extend_schema(request=FEEDBACK_INPUT, responses={200: FEEDBACK_OUTPUT, 201: FEEDBACK_OUTPUT, **ERRORS},
                   description="Thumbs up or down on an answer, from the session that got it. Voting again "
                               "replaces the earlier vote (200); the first vote answers 201.")
    def post(self, request, answer_id):
        client = client_of(request)
        rating, comment, session_id = validate_feedback(decode_json_body(request))
        sessions = [session_id] if session_id else []
        if client.channel == "page":
            sessions += page_conversation_ids(request)
        book = client.key.book.slug if client.key is not None and client.key.book_id else None
        feedback, created = record_feedback(answer_id, rating=rating, comment=comment, session_ids=sessions,
                                            channel=client.channel, book_slug=book)
        return Response({"answer_id": str(feedback.answer_id), "rating": feedback.rating,
                         "comment": feedback.comment}, status=201 if created else 200)


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
        # Reported, not judged: failed audit writes never fail an answer, so they don't make this worker unhealthy.
        for receiver, report in health_requested.send_robust(sender=HealthView):
            if isinstance(report, Exception):
                logger.error("health report of %r failed: %s", receiver, report)
            else:
                checks.update(report)
        body = {"status": "ok" if healthy else "unavailable", **checks}
        return Response(body, status=200 if healthy else 503)
