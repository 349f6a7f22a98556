"""The routes of ingestion's REST API, for the project to mount under ``/api/v1/`` (``bookchat.urls``) with who may
call them: API keys are chat's, so the project names the authentication that knows them and the limit on
publishes, and ingestion imports neither."""

from __future__ import annotations

from django.urls import URLPattern, path
from rest_framework.authentication import BaseAuthentication
from rest_framework.throttling import BaseThrottle

from ingestion.api.views import PublishView, SyncView


def publishing_routes(*, authentication: type[BaseAuthentication], throttle: type[BaseThrottle]) -> list[URLPattern]:
    """Publishing a book from CI (``api-publish``) and its syncs' status (``api-sync``), their callers known by
    ``authentication`` (its ``request.auth`` a ``bookchat.base.api.ApiCaller``) and publishes limited by
    ``throttle``."""
    return [
        path("books/<str:slug>/sources", PublishView.as_view(authentication_classes=[authentication],
                                                             throttle_classes=[throttle]), name="api-publish"),
        path("books/<str:slug>/syncs/<int:sync_id>", SyncView.as_view(authentication_classes=[authentication]),
             name="api-sync"),
    ]
