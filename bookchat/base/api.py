"""What every app's REST API shares, below the apps: a request's strict contract (``StrictSerializer``), the one
error body as the schema states it (``ErrorSerializer``, ``ERROR``, ``ERRORS``), and the caller as an app that owns
no API keys may ask about it (``ApiCaller``).

Decisions:
- API keys are chat's (its models, who may ask or publish what, the limits' counters), so only chat can say who is
  calling. An app whose endpoints need to know (ingestion's publishing API) asks ``request.auth`` through
  ``ApiCaller``, which chat's ``Client`` implements; the project (``bookchat.urls``) hands chat's authentication
  and limits to that app's views. No app imports another for it.
- The error body itself is ``bookchat.base.errors.error_body``; ``ErrorSerializer`` is its schema (the
  ``Error`` component), so that every app's operations name the same one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from bookchat.base.errors import RequestError


class StrictSerializer(serializers.Serializer):
    """A request body or query: a JSON object with no keys but the serializer's fields; the first failing field (in
    ``order``) becomes the ``RequestError``."""

    order: tuple[str, ...] = ()

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise RequestError("the request body must be a JSON object", code="invalid_body")
        fields = tuple(self.fields)
        unknown = [key for key in data if key not in fields]
        if unknown:
            raise RequestError(f"unknown field {str(unknown[0])[:100]!r}; the fields are: {', '.join(fields)}",
                               code="unknown_field", field=str(unknown[0])[:100])
        return super().to_internal_value(data)

    def checked(self) -> dict:
        """The validated data, or the ``RequestError`` of the first failing field."""
        if self.is_valid():
            return self.validated_data
        for name in (*self.order, *self.errors):
            if name in self.errors:
                detail = self.errors[name][0]
                raise RequestError(str(detail), code=detail.code, field=None if name == "non_field_errors" else name)
        raise AssertionError("unreachable")  # is_valid() was False, so some field failed


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code (the manual's REST API page lists them).")
    message = serializers.CharField()
    field = serializers.CharField(allow_null=True)


ERROR = OpenApiResponse(ErrorSerializer, description="`{\"error\": code, \"message\": …, \"field\": …}` (the codes: "
                                                     "the manual's \"REST API\" page).")
# Every error status an operation can answer, each with the one error body.
ERRORS = {status: ERROR for status in (400, 401, 403, 404, 405, 406, 413, 415, 429, 500, 503, 504)}


class ApiCaller(ABC):
    """Who made an API request (DRF's ``request.auth``), as an app that doesn't own API keys sees it."""

    @property
    @abstractmethod
    def key_label(self) -> str | None:
        """The caller's key as a record names it (its prefix and name, never its value); None without a key."""

    @property
    @abstractmethod
    def publishes(self) -> str | None:
        """The slug of the one book the caller's key publishes; None for any other caller."""
