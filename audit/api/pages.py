"""The hand-off as a reader's browser sees it: the chat page's form without JavaScript, and the status URL read as a
page.

- The chat page (chat's template) shows "Ask the course staff" under every answer, posting here
  (``answers/<id>/handoff``, by its URL name ``chat-handoff``); the hand-off is made as the API makes it
  (``limits``), and the browser is sent to its status URL. With JavaScript the page calls the API instead and
  shows the same status in place (``static/bookchat/chat.js``).
- The status URL is the API's (``GET /api/v1/handoffs/{token}``): a browser asks for HTML (``Accept: text/html``)
  and gets a readable page (``StatusPageRenderer``), every other client the JSON; the page's script reads the
  page's ``.handoff-status`` block to show a reply under its answer. An error is a page too, saying what to do.
- The form's facts (the note's limit, whether an e-mail address is asked for) reach chat's templates through a
  context processor (``handoff_form_context``), so the number is written once and chat imports nothing of audit.
- A status URL's token is its secret: the page is never cached, never indexed, and sends no referrer.
"""

from __future__ import annotations

from django.http import HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from audit.api.contract import HandoffRequestSerializer, form_facts
from audit.api.limits import hand_off_within_limit
from bookchat.base.errors import BookchatError
from chat.channels.access import PageClient
from chat.channels.error_responses import error_reply
from chat.channels.throttling import RateLimited

PRIVATE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Robots-Tag": "noindex"}


def keep_private(response):
    """A response about a hand-off: its URL's token is a secret (no cache, no referrer, no index)."""
    for header, value in PRIVATE_HEADERS.items():
        response[header] = value
    return response


def handoff_form_context(request) -> dict:
    """Template context processor (``TEMPLATES``): what the chat page's hand-off form asks for."""
    return {"handoff_form": form_facts()}


def _dated(data: dict) -> dict:
    """A hand-off's status JSON with its times as datetimes, for the template."""
    shown = {**data, "asked_at": parse_datetime(data["asked_at"] or ""),
             "closed_at": parse_datetime(data["closed_at"] or "") if data.get("closed_at") else None}
    if data.get("reply"):
        shown["reply"] = {**data["reply"], "answered_at": parse_datetime(data["reply"]["answered_at"] or "")}
    return shown


def status_page_html(request, data: dict, *, status: int = 200) -> str:
    """The status URL as a page: the hand-off's status JSON (``contract.HandoffStatusSerializer``), or the error
    body that answered instead (``status`` ≥ 400)."""
    chat = reverse("chat")
    if status >= 400:
        context = {"error": data.get("message", ""), "status": status, "chat_url": chat}
    else:
        context = {"handoff": _dated(data), "status_path": request.path,
                   "chat_url": f"{chat}?{urlencode({'book': data['book']})}",
                   "answer_url": f"{chat}?{urlencode({'book': data['book']})}#answer-{data['answer_id']}"}
    return render_to_string("bookchat/handoff.html", context, request=request)


class StatusPageRenderer:
    """DRF's renderer of the status URL for a browser (``Accept: text/html``): the page, or the error page.

    It has no ``format``: the representation is chosen by the Accept header alone (``views.ByAcceptHeader``), so
    ``?format=`` is no parameter of the URL, and the schema (drf-spectacular adds the parameter for renderers with
    a format) states none."""

    media_type = "text/html"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> str:
        context = renderer_context or {}
        response = context.get("response")
        return status_page_html(context.get("request"), data or {},
                                status=response.status_code if response is not None else 200)


@require_POST
def hand_off_from_the_page(request, answer_id):
    """The chat page's "Ask the course staff" without JavaScript: hand the answer off, then show its status page
    (post/redirect/get: reloading it never hands off again); an error is a page that says what to do."""
    fields = {"note": request.POST.get("note", "").replace("\r\n", "\n")}  # a textarea sends CRLF; counted as one
    email = request.POST.get("contact_email", "").strip()
    if email:
        fields["contact_email"] = email
    try:
        arguments = HandoffRequestSerializer(data=fields).hand_off_arguments()
        handoff, _ = hand_off_within_limit(answer_id, client=PageClient(session=request.session), **arguments)
    except (BookchatError, RateLimited) as exc:
        reply = error_reply(exc, request)
        page = HttpResponse(status_page_html(request, reply.body, status=reply.status), status=reply.status)
        for header, value in reply.headers.items():
            page[header] = value
        return keep_private(page)
    return HttpResponseRedirect(reverse("api-handoff-status", args=[handoff.token]))
