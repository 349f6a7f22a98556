"""Publishing a book from its CI over the REST API: ``POST /books/{slug}/sources`` takes the site's root as one
``.tar.gz`` and answers 202 with the sync it queued; ``GET /books/{slug}/syncs/{id}`` says how that sync is doing.

Only a key that publishes the book may call them (``MayPublish``), and it may call nothing else (chat refuses it
everywhere else). The keys are chat's: the project (``bookchat.urls``) hands these views chat's authentication and
publish limit, and a view reads its caller through ``bookchat.base.api.ApiCaller``. The views only translate: the
URL's slug is checked once (``slug_refusal``), the archive checked and the sync queued by
``ingestion.uploads.publishing``. A refusal is answered by the project's exception handler (the one error body,
counted once in ``/metrics``), and one by a known key is then recorded from that reply (a refusal by a key nobody
knows is only logged, so that strangers can't fill the database).
"""

from __future__ import annotations

import logging
import time
from functools import cached_property

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from bookchat.base.api import ERROR, ERRORS, ApiCaller
from bookchat.base.errors import NotFound, RequestError
from ingestion.api.contract import (
    PublishQuerySerializer,
    SyncAcceptedSerializer,
    SyncQuerySerializer,
    SyncSerializer,
    checked_query,
)
from ingestion.api.text import outcome_status, sync_text
from ingestion.uploads.publishing import slug_refusal, sync_of, sync_publish, sync_refused, sync_summary

logger = logging.getLogger(__name__)

# The archive's media type; as bytes of no stated kind it is read the same (and must still be gzip).
GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/octet-stream")
PUBLISH_KEY_REQUIRED = ("publishing needs the book's publishing key in an Authorization: Bearer header (make one with "
                        "`manage.py apikey create --kind secret --publish SLUG`)")
WAIT_POLL_SECONDS = 1.0


def keyed(caller) -> ApiCaller | None:
    """``caller`` (a request's ``auth``) when it called with a key; None for anyone else."""
    return caller if isinstance(caller, ApiCaller) and caller.key_label is not None else None


class MayPublish(BasePermission):
    """A key that publishes the book named in the URL; nothing else, not even anonymous access under DEBUG."""

    def has_permission(self, request, view) -> bool:
        caller, slug = keyed(request.auth), view.kwargs.get("slug", "")
        if caller is None:
            raise exceptions.NotAuthenticated(PUBLISH_KEY_REQUIRED)
        if caller.publishes is None:
            raise exceptions.PermissionDenied(
                "this key can't publish: a book is published with its own publishing key (`manage.py apikey create "
                "--kind secret --publish SLUG`)", code="not_a_publishing_key")
        if caller.publishes != slug:
            raise exceptions.PermissionDenied(f"this key publishes the book {caller.publishes!r}, not {slug[:100]!r}",
                                              code="key_book")
        return True


class PublishingView(APIView):
    """Who may call is the project's to say (``ingestion.api.urls.publishing_routes``): how a caller is known
    (``authentication_classes``: chat's key in a header) and, for a publish, its limit (``throttle_classes``).
    Until it says, nobody is known, and so nobody may publish."""

    authentication_classes = []
    throttle_classes = []
    permission_classes = [MayPublish]
    parser_classes = []  # the body is read as a stream, never parsed


class PublishView(PublishingView):
    @extend_schema(
        operation_id="publish", parameters=[PublishQuerySerializer],
        request={"application/gzip": {"type": "string", "format": "binary"},
                 "application/octet-stream": {"type": "string", "format": "binary"}},
        responses={202: SyncAcceptedSerializer, 409: ERROR, **ERRORS},
        description=(
            "Publish a book: the site's root (the folder with `docusaurus.config.*`, `book.toml` or `mkdocs.yml`, or a "
            "plain folder of Markdown) as one `.tar.gz` (`tar czf book.tar.gz -C SITE .`), with the key that "
            "publishes this book. The book becomes exactly these sources: only pages whose content changed are "
            "embedded again, and pages the archive lacks are removed. Readers see the book as it was until the whole "
            "new version is stored, then the new one at once; a sync that fails leaves the previous one serving. The "
            "first publish of an unknown book creates it. 409 while another sync of the book is queued or running."))
    def post(self, request, slug):
        query = checked_query(PublishQuerySerializer, request.query_params)
        if self.slug_refused is not None:
            raise self.slug_refused
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if not _content_length(request):  # without a Content-Length, Django reads no body
            raise RequestError("the body is empty: send the book's sources as one .tar.gz (tar czf - -C SITE .) "
                               "with its Content-Length (curl --data-binary @book.tar.gz sends it)",
                               code="empty_body")
        if content_type not in GZIP_TYPES:
            raise RequestError(f"send the sources as one .tar.gz with Content-Type: application/gzip (got "
                               f"{content_type[:100] or 'none'})", code="unsupported_media_type", status=415)
        job = sync_publish(book_slug=slug, stream=request._request, content_length=_content_length(request),
                           dry_run=query["dry_run"], revision=query["revision"], source_dir=query["source_dir"],
                           published_by=request.auth.key_label, language=query["language"])
        url = request.build_absolute_uri(reverse("api-sync", args=[slug, job.pk]))
        body = {"sync": job.pk, "book": slug, "status": "queued", "dry_run": job.dry_run, "status_url": url}
        return Response(body, status=202, headers={"Location": url})

    @cached_property
    def slug_refused(self) -> RequestError | None:
        """The URL's slug checked, once per request: ``post`` refuses a bad one, and a refusal is recorded only
        under a real one."""
        return slug_refusal(self.kwargs.get("slug", ""))

    def handle_exception(self, exc):
        response = super().handle_exception(exc)  # the project's exception handler: the one error body, counted
        caller = keyed(getattr(self.request, "_auth", None))  # None too when authentication refused the request
        slug = self.kwargs.get("slug", "")
        if caller is not None and self.slug_refused is None and not isinstance(exc, exceptions.Throttled):
            params = self.request.query_params
            sync_refused(book_slug=slug, code=response.data["error"], message=response.data["message"],
                         dry_run=params.get("dry_run", "").lower() in ("1", "true", "yes", "on"),
                         revision=params.get("revision", ""), published_by=caller.key_label)
            logger.warning("publish of %s by %s refused: %s", slug, caller.key_label, response.data["error"])
        elif isinstance(exc, exceptions.PermissionDenied | exceptions.NotAuthenticated):
            logger.warning("publish of %s refused: %s", slug[:100], exc.get_codes())
        return response


class SyncView(PublishingView):
    @extend_schema(
        operation_id="sync", parameters=[SyncQuerySerializer],
        responses={200: SyncSerializer, (202, "text/plain"): OpenApiResponse(OpenApiTypes.STR),
                   (422, "text/plain"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
        description=(
            "A sync's status: queued, running (with progress), done or failed, and once it has ended the report: "
            "pages added, changed, unchanged and removed, passages embedded, and every page error with its file and "
            "line. `wait` long-polls until it ends. `output=text` or `github` answer plain text for a CI log, with "
            "an HTTP status that follows the sync (200 done, 202 not yet, 422 failed or page errors)."))
    def get(self, request, slug, sync_id):
        query = checked_query(SyncQuerySerializer, request.query_params)
        job = sync_of(slug, sync_id)
        if job is None:
            raise NotFound(f"book {slug[:100]!r} has no sync {sync_id}", code="unknown_sync")
        deadline = time.monotonic() + query["wait"]
        while job.is_active and time.monotonic() < deadline:
            time.sleep(min(WAIT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            job.refresh_from_db()
        sync = sync_summary(job)
        if query["output"] == "json":
            return Response(SyncSerializer(sync).data)
        text = sync_text(sync, github=query["output"] == "github", source_dir=job.source_dir)
        return HttpResponse(text, status=outcome_status(sync), content_type="text/plain; charset=utf-8")


def _content_length(request) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
