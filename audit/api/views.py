"""The hand-off API under ``/api/v1/``: ``POST /answers/{answer_id}/handoff`` hands an answer to the course staff,
``GET /handoffs/{token}`` reads what they did with it, ``GET /handoff-form`` says what the form asks for.

The views only translate: who is calling is chat's to say (``chat.channels.access``, through chat's ``ClientView``,
which also answers CORS preflights and gives an allowed origin its CORS headers, so the widget on a docs site calls
these as it calls ``/ask``); the body is read as every API body is (``chat.channels.parsers``), checked by the
contract, and the hand-off made within its conversation's limit (``limits``). A failure is the one error body
(the project's exception handler).

Decisions:
- The answer id in the URL is checked here, so that a malformed one is "not on record" (404 ``unknown_answer``)
  like one never given, rather than a missing endpoint.
- The body may be empty (``{}`` is the same): the note is optional. When there is one, it must be a JSON object.
- A first hand-off answers 201; the same answer handed off again answers 200 with the first hand-off: nothing new
  was made, and the status URL is the one the student may already keep.
- The status URL holds the token and needs nothing else: no key, no session, no login (whoever holds it is the
  student). A key bound to a book reads only that book's hand-offs. A browser gets a page
  (``pages.StatusPageRenderer``); the schema states both.
"""

from __future__ import annotations

import re
import uuid
from types import SimpleNamespace

from django.urls import reverse
from django.utils.cache import patch_vary_headers
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from audit.api.contract import (
    HandoffCreatedSerializer,
    HandoffFormSerializer,
    HandoffRequestSerializer,
    HandoffStatusSerializer,
    form_facts,
)
from audit.api.limits import hand_off_within_limit
from audit.api.pages import StatusPageRenderer, keep_private
from audit.handoffs import by_token, status
from bookchat.base.api import ERROR, ERRORS
from bookchat.base.errors import NotFound, RequestError
from chat.channels.access import HasClient, client_of
from chat.channels.api import ClientView
from chat.channels.parsers import json_body

ANSWER_ID = OpenApiParameter("answer_id", OpenApiTypes.UUID, OpenApiParameter.PATH,
                             description="The `answer_id` of the answer to hand off, as the answer gave it.")
TOKEN = OpenApiParameter("token", OpenApiTypes.STR, OpenApiParameter.PATH,
                         description="The token of the hand-off's status URL (as `status_url` gave it).")
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{1,64}")
PAGE = OpenApiResponse(OpenApiTypes.STR, description="For a browser (`Accept: text/html`): the same as a readable "
                                                     "page.")


def answer_uuid(value: str) -> uuid.UUID:
    """The answer id of the URL, or 404 ``unknown_answer`` for one that can't be an answer's."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound("the URL names no answer id: send the `answer_id` an answer came with (a UUID)",
                       code="unknown_answer") from None


def handoff_token(value: str) -> str:
    """The token of the URL, or 404 ``unknown_handoff`` for one no hand-off can have (``handoff_token`` makes
    them of URL-safe characters)."""
    if not TOKEN_SHAPE.fullmatch(str(value)):
        raise NotFound("there is no hand-off with this token", code="unknown_handoff")
    return value


def handoff_request(request) -> dict:
    """The request's body as ``hand_off`` takes it: nothing sent is ``{}``; anything sent must be an object."""
    data = json_body(request) if request.stream is not None else {}
    if not isinstance(data, dict):
        raise RequestError("the request body must be a JSON object, such as {\"note\": \"…\"}", code="invalid_body")
    return HandoffRequestSerializer(data=data).hand_off_arguments()


class HandoffView(ClientView):
    @extend_schema(
        operation_id="handoff", parameters=[ANSWER_ID], request=HandoffRequestSerializer,
        responses={201: HandoffCreatedSerializer,
                   200: OpenApiResponse(HandoffCreatedSerializer, description="This answer was handed off already: "
                                        "the first hand-off, unchanged."),
                   **ERRORS},
        description=(
            "Hand an answer to the course staff, with an optional note (at most 2,000 characters, plain text). The "
            "staff get the question, the answer and the conversation before it (a copy: conversations expire); no "
            "identity beyond it. Answers `status_url`, the student's way back to the reply. The same answer handed "
            "off again answers 200 with the first hand-off. 404 `unknown_answer`: an answer never given, removed "
            "by retention, or (for a key bound to a book) another book's. 429: too many hand-offs from one "
            "conversation (`BOOKCHAT_RATE_HANDOFF`)."))
    def post(self, request, answer_id):
        answer = answer_uuid(answer_id)
        handoff, created = hand_off_within_limit(answer, client=client_of(request), **handoff_request(request))
        url = request.build_absolute_uri(reverse("api-handoff-status", args=[handoff.token]))
        body = HandoffCreatedSerializer({"handoff": handoff.pk, "status_url": url}).data
        return keep_private(Response(body, status=201 if created else 200, headers={"Location": url}))


class HoldsTheToken(HasClient):
    """Whoever holds a status URL's token may read it: no key, session or login needed (never a key that
    publishes a book, which does nothing else)."""

    def has_permission(self, request, view) -> bool:
        super().has_permission(request, view)  # refuses a publishing key
        return True


class ByAcceptHeader(DefaultContentNegotiation):
    """The status URL's representation by the Accept header alone: DRF's ``?format=`` override is off (it would
    answer an unknown format with a bare ``Http404``, which the project's exception handler reads as a bug)."""

    settings = SimpleNamespace(URL_FORMAT_OVERRIDE=None)


class HandoffStatusView(ClientView):
    permission_classes = [HoldsTheToken]
    renderer_classes = [JSONRenderer, StatusPageRenderer]
    content_negotiation_class = ByAcceptHeader

    @extend_schema(
        operation_id="handoff_status", parameters=[TOKEN],
        responses={(200, "application/json"): HandoffStatusSerializer, (200, "text/html"): PAGE,
                   **{(code, "application/json"): ERROR for code in ERRORS},
                   **{(code, "text/html"): PAGE for code in ERRORS}},
        description=(
            "A hand-off's status: `open` while the course staff haven't answered; `answered` with the staff's "
            "`reply` (Markdown, its HTML, and the sections of the book it cites); `declined` with the reason; "
            "`coverage` when the staff noted that the book should cover it. The token is the only credential: no "
            "key is needed (a widget sends its key, for CORS). A browser gets a readable page. 404 "
            "`unknown_handoff` for any other token."))
    def get(self, request, token):
        handoff = by_token(handoff_token(token))
        bound = client_of(request).key_book()
        if bound is not None and handoff.book_slug != bound:  # as for one never made
            raise NotFound("there is no hand-off with this token", code="unknown_handoff")
        return Response(HandoffStatusSerializer(status(handoff)).data)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        patch_vary_headers(response, ["Accept"])
        return keep_private(response)


class HandoffFormView(ClientView):
    @extend_schema(operation_id="handoff_form", responses={200: HandoffFormSerializer, **ERRORS}, description=(
        "What the hand-off form asks for: the note's longest length, and whether it asks for an e-mail address "
        "(`BOOKCHAT_HANDOFF_CONTACT_EMAIL`). The widget reads it before it shows the form."))
    def get(self, request):
        return Response(HandoffFormSerializer(form_facts()).data)
