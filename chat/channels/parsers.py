"""The API's one way to read a request body: strict JSON, through DRF's parser hook.

``JSONBodyParser`` is DRF's only parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``), so the schema
says bodies are ``application/json`` and a view reads ``request.data``. It is stricter than DRF's
own: a body over ``MAX_REQUEST_BYTES`` is 413 (read no further than the limit), bad UTF-8 is
``invalid_encoding``, bad or too deeply nested JSON is ``invalid_json``, and lone surrogate escapes
(JSON can spell ``"\\ud800"``; UTF-8, Postgres and the embedder can't hold one) are
``invalid_characters``, each a 400 with its own code.

DRF hands a body to no parser when it is empty or has no content type (``request.data`` is then
``{}``), and refuses a wrong content type with its own wording; ``json_body`` answers those the
API's way: 415 ``unsupported_media_type`` naming what was sent, 400 ``invalid_body`` for nothing sent.
"""

from __future__ import annotations

import json

from rest_framework.parsers import BaseParser

from bookchat.base.conf import setting
from bookchat.base.errors import RequestError
from chat.channels.serializers import has_lone_surrogate

JSON = "application/json"


def too_large(declared: int | None = None) -> RequestError:
    limit = setting("MAX_REQUEST_BYTES")
    size = f"is {declared} bytes" if declared is not None else "is larger than that"
    return RequestError(f"the request body {size}; the limit is {limit} bytes", code="too_large", status=413)


def unsupported(content_type: str) -> RequestError:
    return RequestError(f"send JSON with Content-Type: {JSON} (got {content_type or 'none'})",
                        code="unsupported_media_type", status=415)


def empty_body() -> RequestError:
    return RequestError("the request body is empty; send a JSON object with a question", code="invalid_body")


class JSONBodyParser(BaseParser):
    media_type = JSON

    def parse(self, stream, media_type=None, parser_context=None) -> object:
        limit = setting("MAX_REQUEST_BYTES")
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise too_large()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(f"the request body is not valid UTF-8 (byte {exc.start})",
                               code="invalid_encoding") from None
        if not text.strip():
            raise empty_body()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RequestError(f"the request body is not valid JSON: {exc.msg} (line {exc.lineno}, column "
                               f"{exc.colno})", code="invalid_json") from None
        except RecursionError:
            raise RequestError("the request body is not valid JSON: nested too deeply", code="invalid_json") \
                from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise RequestError(f"the request body is not valid JSON: {str(exc)[:100]}", code="invalid_json") \
                from None
        if has_lone_surrogate(data):
            field = next((str(key) for key, value in data.items() if not has_lone_surrogate(key)
                          and has_lone_surrogate(value)), None) if isinstance(data, dict) else None
            raise RequestError("the request body contains an unpaired UTF-16 surrogate escape (\\ud800-\\udfff); "
                               "send valid Unicode", code="invalid_characters", field=field)
        return data


def refuse_a_large_body(request) -> None:
    """A body declared larger than ``MAX_REQUEST_BYTES`` is refused before anything reads it: an API view calls
    this before authentication, whose CSRF check for the page reads a form body."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > setting("MAX_REQUEST_BYTES"):
        raise too_large(declared)


def json_body(request) -> object:
    """``request.data`` as ``JSONBodyParser`` read it, or the API's error for a body DRF passes no parser."""
    content_type = (request.content_type or "").split(";")[0].strip()
    if content_type.lower() != JSON:
        raise unsupported(content_type)
    if request.stream is None:
        raise empty_body()
    return request.data
