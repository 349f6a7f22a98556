"""The served privacy page (``/privacy/``, made from the same declaration as the manual's page) and a student's "My
data" (``POST /api/v1/my-data``: download, ``POST /api/v1/my-data/erase``: delete), which take the conversation ids
and hand-off tokens the browser holds; the chat page's own conversations (its session's) count too.

Decisions where the issue is silent:
- "My data" needs no login: a conversation id or a hand-off token is what the browser holds and the proof that it is
  the student's, as it is to continue a conversation or read a reply. Nothing beyond what is named is reached (no
  pseudonym expansion: that is the staff's command). The ids are the student's own whichever site or book the
  widget sits on, so a key bound to a book doesn't narrow them.
- An erasure from "My data" leaves a tombstone like any other; it is not a staff action, so it is not in the admin
  log (the tombstone and the server's log say it happened).
- The LTI data-privacy launch (inside the LMS's frame) redirects here, so ``/privacy/`` may be framed by every
  registered platform's origins (``chat.lti.framing.framed_by_platforms``, the origins a launched page allows its own
  platform), and by nothing else when none is registered. Opening it in a new window instead would need a click on
  a page of its own (a pop-up without one is blocked); the page is public and holds no control a framing site could
  trick a reader into using, so framing it risks nothing a new window would avoid. A launch carries no session to
  this page, so it can't be told which platform framed it: all registered platforms may.
"""

from __future__ import annotations

import logging
import re

from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from audit.privacy import inventory, notices
from audit.privacy.erasure import erase_learner, export_learner
from audit.privacy.learners import MAX_BROWSER_IDS, TOKEN, browser_learner
from audit.privacy.manual import governed_by
from bookchat.base.api import ERRORS, StrictSerializer
from bookchat.base.errors import NotFound, RequestError
from chat.channels.access import PAGE_CONVERSATIONS
from chat.channels.api import ClientView
from chat.channels.parsers import json_body
from chat.lti.framing import framed_by_platforms

logger = logging.getLogger(__name__)
CODE = re.compile(r"`([^`]+)`")


def inline(text: str) -> str:
    """Plain text with `code` spans, as safe HTML."""
    return mark_safe(CODE.sub(r"<code>\1</code>", escape(text)))  # noqa: S308 - escaped first


@require_GET
def privacy_page(request):
    """The privacy page, which the registered LMS platforms may frame (the module's docstring)."""
    groups = [(heading, [{"where": inline(f"`{entry.model}`: " + ", ".join(f"`{f}`" for f in entry.fields)),
                          "what": inline(entry.what), "why": inline(entry.why), "kept": inline(governed_by(entry)),
                          "erased": entry.erased} for entry in inventory.HELD if entry.whose == whose])
              for whose, heading in (("learner", "About learners"), ("staff", "About staff"))]
    return framed_by_platforms(render(request, "bookchat/privacy.html", {
        "intro": inline(notices.INTRO), "groups": groups, "outbound": [inline(t) for t in notices.OUTBOUND],
        "browser": [inline(t) for t in notices.BROWSER], "finding": inline(notices.FINDING),
        "requests": [(inline(a), inline(b), inline(c)) for a, b, c in notices.REQUESTS],
        "erasure": [inline(t) for t in notices.ERASURE]}), request.path_info)


UUID_TEXT = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"  # as session_id gives it


class MyDataRequestSerializer(StrictSerializer):
    # Each id as the schema says it (a UUID; a token's characters): an id the browser never had finds nothing.
    session_ids = serializers.ListField(child=serializers.RegexField(UUID_TEXT), required=False, default=list,
                                        max_length=MAX_BROWSER_IDS,
                                        help_text="The browser's conversation ids (`session_id`).")
    handoff_tokens = serializers.ListField(child=serializers.RegexField(TOKEN.pattern, min_length=20, max_length=64),
                                           required=False, default=list, max_length=MAX_BROWSER_IDS,
                                           help_text="The tokens of the browser's hand-offs.")


def _learner(request):
    data = json_body(request) if request.stream is not None else {}
    if not isinstance(data, dict):
        raise RequestError("the body must be a JSON object: {\"session_ids\": […], \"handoff_tokens\": […]}",
                           code="invalid_body")
    body = MyDataRequestSerializer(data=data)
    if not body.is_valid():
        raise RequestError(f"invalid request: {body.errors}", code="bad_learner")
    session = getattr(request._request, "session", None)
    page_ids = list((session.get(PAGE_CONVERSATIONS) or {}).values()) if session is not None else []
    learner = browser_learner(session_ids=[*map(str, body.validated_data["session_ids"]), *page_ids],
                              tokens=body.validated_data["handoff_tokens"])
    if learner.empty:  # a valid request naming nothing (the schema can't say "one of the two, not empty")
        raise NotFound("this browser names no conversation or hand-off of its own (session_ids, handoff_tokens)",
                       code="nothing_named")
    return learner


class MyDataView(ClientView):
    @extend_schema(operation_id="my_data", request=MyDataRequestSerializer,
                   responses={200: OpenApiTypes.OBJECT, **ERRORS}, description=(
                       "Everything bookchat holds of the conversations and hand-offs this browser names (and the "
                       "chat page's session's): one JSON document. 400 `bad_learner`: a malformed id; 404 "
                       "`nothing_named`: no id named."))
    def post(self, request):
        response = Response(export_learner(learner=_learner(request)))
        response["Cache-Control"] = "private, no-store"
        return response


class MyDataEraseView(ClientView):
    @extend_schema(operation_id="my_data_erase", request=MyDataRequestSerializer,
                   responses={200: OpenApiTypes.OBJECT, **ERRORS}, description=(
                       "Erase the conversations and hand-offs this browser names (and the chat page's session's), "
                       "as `manage.py privacy erase` does: what was erased, counted."))
    def post(self, request):
        report = erase_learner(learner=_learner(request))
        logger.info("a student erased their data in the browser (erasure %s)", report.erasure)
        return Response(report.as_dict())
