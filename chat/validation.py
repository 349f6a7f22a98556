"""The rules a question must meet, shared by the API, the chat page and the CLI.

``validate_ask(data)`` takes the decoded request (a dict) and returns an ``AskRequest`` or
raises ``RequestError`` (HTTP 400) naming the field. HTML tags are stripped (the question is
text, never markup); other control characters than newline and tab are dropped, but a NUL
byte or a lone UTF-16 surrogate (JSON's ``"\ud800"``, or a command-line argument that was not
UTF-8) is refused, since it only comes from a broken or hostile client and can be neither
stored nor embedded. Unknown keys are refused too, so a misspelt ``max_result`` is reported
instead of silently ignored.
"""

from __future__ import annotations

import html
import re

from bookchat.conf import setting
from bookchat.errors import RequestError
from chat.answering import AskRequest
from chat.conversations import parse_session_id

FIELDS = ("question", "selected_text", "session_id", "book", "chapter", "max_results")
_TAG = re.compile(r"<!--.*?-->|<(?:script|style)\b[^>]*>.*?</(?:script|style)\s*>|</?[A-Za-z][^<>]*>",
                  re.IGNORECASE | re.DOTALL)
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def has_lone_surrogate(value: object) -> bool:
    """Whether decoded JSON holds a UTF-16 surrogate, in a key or a value at any depth. ``json.loads`` joins a
    valid pair into one character, so any surrogate left is a lone one, which UTF-8 can't encode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def clean_text(value: object, *, field: str, max_chars: int, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise RequestError(f"{field} must be a string", code="invalid_type", field=field)
    _check_characters(value, field)
    text = _TAG.sub(" ", value)
    text = html.unescape(text) if "&" in text else text
    text = _TAG.sub(" ", text)  # entities that spelled out a tag
    text = _CONTROL.sub("", text).strip()
    text = re.sub(r"[ \t]+", " ", text)
    if required and not text:
        raise RequestError(f"{field} is empty: ask a question in words", code="empty", field=field)
    if len(text) > max_chars:
        raise RequestError(f"{field} is {len(text)} characters long; the limit is {max_chars}", code="too_long",
                           field=field)
    return text


def _check_characters(value: str, field: str) -> None:
    if "\x00" in value:
        raise RequestError(f"{field} contains a NUL character", code="invalid_characters", field=field)
    if _SURROGATE.search(value):
        raise RequestError(f"{field} contains an unpaired UTF-16 surrogate, which is not text",
                           code="invalid_characters", field=field)


def _optional_string(data: dict, field: str, max_chars: int) -> str | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RequestError(f"{field} must be a string", code="invalid_type", field=field)
    _check_characters(value, field)
    value = value.strip()
    if len(value) > max_chars:
        raise RequestError(f"{field} is too long", code="too_long", field=field)
    return value or None


def check_fields(data: object, fields: tuple[str, ...]) -> dict:
    """``data`` if it is a JSON object with no keys but ``fields``; else the RequestError saying what's wrong."""
    if not isinstance(data, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_body")
    unknown = [key for key in data if key not in fields]
    if unknown:
        raise RequestError(f"unknown field {str(unknown[0])[:100]!r}; the fields are: {', '.join(fields)}",
                           code="unknown_field", field=str(unknown[0])[:100])
    return data


def validate_ask(data: object, *, channel: str = "api") -> AskRequest:
    """Check a decoded request against every rule; return the clean ``AskRequest``."""
    data = check_fields(data, FIELDS)
    if "question" not in data:
        raise RequestError("question is required", code="required", field="question")
    raw = data["question"]
    if isinstance(raw, str) and len(raw.split()) > setting("MAX_QUESTION_WORDS"):
        raise RequestError(f"question has {len(raw.split())} words; the limit is {setting('MAX_QUESTION_WORDS')}",
                           code="too_many_words", field="question")
    question = clean_text(raw, field="question", max_chars=setting("MAX_QUESTION_CHARS"), required=True)
    selected = clean_text(data.get("selected_text"), field="selected_text",
                          max_chars=setting("MAX_SELECTED_CHARS"), required=False)
    max_results = data.get("max_results")
    if max_results is not None:
        if isinstance(max_results, bool) or not isinstance(max_results, int):
            raise RequestError("max_results must be a whole number from 1 to 10", code="invalid_type",
                               field="max_results")
        if not 1 <= max_results <= 10:
            raise RequestError(f"max_results must be from 1 to 10, not {max_results}", code="out_of_range",
                               field="max_results")
    session = data.get("session_id")
    if session is not None and not isinstance(session, str):
        raise RequestError("session_id must be a string", code="invalid_type", field="session_id")
    return AskRequest(
        question=question, selected_text=selected, session_id=parse_session_id(session),
        book=_optional_string(data, "book", 64), chapter=_optional_string(data, "chapter", 300),
        max_results=max_results, channel=channel,
    )
