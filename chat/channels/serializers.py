"""The API's contract for requests: serializers that validate them and feed the schema (``responses``
describes what comes back).

The request serializers *are* the validation (``validate_ask`` and ``validate_feedback`` are
thin wrappers for the CLI and the page form), and their fields are built from the settings
each time a serializer is made, so ``/api/v1/schema`` states the limits the code enforces:
lengths, ranges, "no NUL", "some visible text", no unknown keys (``chat.channels.openapi`` adds
``additionalProperties: false``). A string's length limit applies to the string as sent.

What the schema can't say is in each field's description: the word limit (which the
default character limit already implies: 501 words need 1001 characters), and that HTML
tags are removed from a question, which is refused (``empty``) when nothing is left.

Every failure is one ``RequestError`` with a stable code (the manual, "REST API"): the first
failing field in the order of ``ASK_FIELDS``.
"""

from __future__ import annotations

import html
import re
import uuid

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import empty

from bookchat.base.api import StrictSerializer
from bookchat.base.conf import setting
from chat.pipeline.questions import AskRequest

# What counts as text: not whitespace (ECMAScript's \s, spelled out so that the schema's pattern and Python read
# it alike), not a control character, not NUL.
VISIBLE = r"[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\u0000-\u001f\u007f-\u009f]"
NO_NUL = r"^[^\u0000]*$"
HAS_TEXT = rf"^[^\u0000]*{VISIBLE}[^\u0000]*$"
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

_VISIBLE = re.compile(VISIBLE)
_UUID = re.compile(UUID_PATTERN)
_TAG = re.compile(r"<!--.*?-->|<(?:script|style)\b[^>]*>.*?</(?:script|style)\s*>|</?[A-Za-z][^<>]*>",
                  re.IGNORECASE | re.DOTALL)
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

ASK_FIELDS = ("question", "selected_text", "max_results", "session_id", "book", "version", "locale", "chapter")
SEARCH_FIELDS = ("query", "limit", "book", "version", "locale")
SECTION_SEARCH_FIELDS = ("q", "limit", "book", "version", "locale", "chapter", "report_opens", "session_id")
FEEDBACK_FIELDS = ("rating", "comment", "session_id")
OPENED_FIELDS = ("n",)
# The sections a search shows at most: 10 pages of 3 (``chat.pipeline.typeahead``).
MAX_SECTIONS_SHOWN = 30


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


def strip_markup(text: str) -> str:
    """A question or comment as plain text: tags (and entities that spell tags) and control characters removed,
    runs of spaces joined. It is text, never markup: every page escapes it anyway."""
    text = _TAG.sub(" ", text)
    if "&" in text:
        text = _TAG.sub(" ", html.unescape(text))
    text = _CONTROL.sub("", text).strip()
    return re.sub(r"[ \t]+", " ", text)


def invalid(message: str, code: str) -> serializers.ValidationError:
    return serializers.ValidationError(message, code=code)


class TextField(serializers.CharField):
    """A string as bookchat takes it: of type string (a number is not text), no NUL, at most ``max_length``
    characters as sent; ``markup=True`` strips HTML (see ``strip_markup``) and ``text=True`` requires visible
    text to be left. ``None`` means "not given" unless the field is required."""

    def __init__(self, *, markup: bool = False, text: bool = False, **kwargs):
        self.markup, self.text = markup, text
        pattern = HAS_TEXT if text else NO_NUL
        kwargs.setdefault("validators", []).append(RegexValidator(pattern))  # for the schema; checked below
        kwargs.setdefault("allow_null", not text)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def run_validation(self, data=empty):
        if data is empty:
            if self.required:
                raise invalid(f"{self.field_name} is required", "required")
            raise serializers.SkipField()
        if data is None:
            if self.text:
                raise invalid(f"{self.field_name} is empty: ask a question in words", "empty")
            return None
        if not isinstance(data, str):
            raise invalid(f"{self.field_name} must be a string", "invalid_type")
        if "\x00" in data:
            raise invalid(f"{self.field_name} contains a NUL character", "invalid_characters")
        if _SURROGATE.search(data):
            raise invalid(f"{self.field_name} contains an unpaired UTF-16 surrogate, which is not text",
                          "invalid_characters")
        self.check_size(data)
        value = strip_markup(data) if self.markup else data.strip()
        if self.text and not _VISIBLE.search(value):
            raise invalid(f"{self.field_name} is empty: ask a question in words", "empty")
        return value

    def check_size(self, data: str) -> None:
        if len(data) > self.max_length:
            raise invalid(f"{self.field_name} is {len(data)} characters long; the limit is {self.max_length}",
                          "too_long")


class QuestionField(TextField):
    def __init__(self, **kwargs):
        self.max_words = setting("MAX_QUESTION_WORDS")
        super().__init__(markup=True, text=True, max_length=setting("MAX_QUESTION_CHARS"), min_length=1,
                         help_text=f"1–{setting('MAX_QUESTION_CHARS')} characters and at most {self.max_words} "
                                   "words. HTML tags are removed: a question with no text left is refused "
                                   "(`empty`).", **kwargs)

    def check_size(self, data: str) -> None:
        words = len(data.split())
        if words > self.max_words:
            raise invalid(f"{self.field_name} has {words} words; the limit is {self.max_words}", "too_many_words")
        super().check_size(data)


class SessionIdField(serializers.UUIDField):
    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "The `session_id` of an earlier answer, to ask a follow-up in its "
                                       "conversation.")
        super().__init__(required=False, allow_null=True, **kwargs)

    def run_validation(self, data=empty):
        if data is empty:
            raise serializers.SkipField()
        if data is None:
            return None
        if not isinstance(data, str):
            raise invalid("session_id must be a string", "invalid_type")
        if not _UUID.match(data):
            raise invalid("session_id must be a session id returned by an earlier answer", "invalid_session")
        return uuid.UUID(data)


class MaxResultsField(serializers.IntegerField):
    def __init__(self, **kwargs):
        super().__init__(required=False, allow_null=True, min_value=1, max_value=10,
                         help_text="Sources to return, 1–10 (default `BOOKCHAT_TOP_K`).", **kwargs)

    def run_validation(self, data=empty):
        if data is empty:
            raise serializers.SkipField()
        if data is None:
            return None
        # JSON has one kind of number: 5.0 is the integer 5, as JSON Schema reads it; 5.5 and "5" are not.
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            raise invalid(f"{self.field_name} must be a whole number from 1 to 10", "invalid_type")
        if not 1 <= data <= 10:
            raise invalid(f"{self.field_name} must be from 1 to 10, not {data}", "out_of_range")
        return data


class RatingField(serializers.ChoiceField):
    def __init__(self, **kwargs):
        super().__init__(["up", "down"], help_text="`up` or `down`.", **kwargs)

    def run_validation(self, data=empty):
        if data not in ("up", "down"):  # missing, another word or another type: all the same mistake
            raise invalid('rating must be "up" or "down"', "invalid_rating")
        return data


class AskRequestSerializer(StrictSerializer):
    """``{"question", "selected_text"?, "session_id"?, "book"?, "version"?, "locale"?, "chapter"?,
    "max_results"?}``."""

    order = ASK_FIELDS

    def get_fields(self):
        return {
            "question": QuestionField(),
            "selected_text": TextField(markup=True, required=False, max_length=setting("MAX_SELECTED_CHARS"),
                                       help_text="Text the reader selected on the page, to ask about it."),
            "session_id": SessionIdField(),
            "book": TextField(required=False, max_length=64, help_text="Book slug; optional when only one book is "
                              "indexed or a default book is set."),
            "version": TextField(required=False, max_length=100, help_text="A version of a versioned book: its "
                                 "name, label or URL path (`GET /books` lists them); default: the latest."),
            "locale": TextField(required=False, max_length=35, help_text="The reader's language (`fr`, `pt-BR`): "
                                "the book's translation when it has one, else its default locale."),
            "chapter": TextField(required=False, max_length=300, help_text="Limit the search to a chapter: its "
                                 "category label, folder, page path or page slug."),
            "max_results": MaxResultsField(),
        }

    def ask(self, *, channel: str) -> AskRequest:
        data = self.checked()
        return AskRequest(question=data["question"], selected_text=data.get("selected_text") or "",
                          session_id=data.get("session_id"), book=data.get("book") or None,
                          version=data.get("version") or None, locale=data.get("locale") or None,
                          chapter=data.get("chapter") or None, max_results=data.get("max_results"), channel=channel)


class SearchRequestSerializer(StrictSerializer):
    """``{"query", "book"?, "version"?, "locale"?, "limit"?}``: a search for passages (the MCP tool ``search_book``),
    checked as a question is."""

    order = SEARCH_FIELDS

    def get_fields(self):
        ask = AskRequestSerializer().get_fields()
        return {"query": QuestionField(), "limit": MaxResultsField(), "book": ask["book"], "version": ask["version"],
                "locale": ask["locale"]}

    def search(self, *, channel: str) -> AskRequest:
        data = self.checked()
        return AskRequest(question=data["query"], book=data.get("book") or None, version=data.get("version") or None,
                          locale=data.get("locale") or None, max_results=data.get("limit"), channel=channel)


class PagesField(MaxResultsField):
    """``limit`` of ``GET /search``: a query string's whole number of pages, 1–10."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.help_text = "Pages to return, 1–10 (default 5); each with up to 3 of its sections."

    def run_validation(self, data=empty):
        if isinstance(data, str) and data.strip().isascii() and data.strip().isdigit():
            data = int(data.strip())  # a query string's number is text
        return super().run_validation(data)


class SectionSearchSerializer(StrictSerializer):
    """The query of ``GET /search``: ``?q=&book=&version=&locale=&chapter=&limit=``, checked as a question is
    (``key``, a publishable key's, is read elsewhere)."""

    order = SECTION_SEARCH_FIELDS

    def get_fields(self):
        ask = AskRequestSerializer().get_fields()
        query = QuestionField()
        query.help_text = ("What the reader has typed so far; its last word may be half-written (" +
                           query.help_text + ")")
        return {"q": query, "limit": PagesField(), **{name: ask[name] for name in ("book", "version", "locale",
                                                                                   "chapter", "session_id")},
                "report_opens": serializers.BooleanField(required=False, help_text=(
                    "`true` when the caller will report the section the reader opens (`POST /search/{search_id}/"
                    "opened`), as the widget does: a search of such a caller from which nothing is opened shows in "
                    "the coverage gaps."))}

    def search(self, *, channel: str) -> AskRequest:
        data = self.checked()
        return AskRequest(question=data["q"], book=data.get("book") or None, version=data.get("version") or None,
                          locale=data.get("locale") or None, chapter=data.get("chapter") or None,
                          max_results=data.get("limit"), channel=channel,
                          report_opens=bool(data.get("report_opens")))


class SectionNumberField(serializers.IntegerField):
    """``n`` of ``POST /search/{search_id}/opened``: which section was opened, a query string's whole number."""

    def __init__(self, **kwargs):
        super().__init__(min_value=1, max_value=MAX_SECTIONS_SHOWN, help_text="The section opened: its place in the "
                         "search's result, 1 for the first page's first section, counting on through each page's "
                         "sections.", **kwargs)

    def run_validation(self, data=empty):
        if data is empty:
            raise invalid("n is required: the place of the section opened, from 1", "required")
        text = data.strip() if isinstance(data, str) else ""
        if not (text.isascii() and text.isdigit()):
            raise invalid(f"n must be a whole number from 1 to {MAX_SECTIONS_SHOWN}", "invalid_type")
        if not 1 <= int(text) <= MAX_SECTIONS_SHOWN:
            raise invalid(f"n must be from 1 to {MAX_SECTIONS_SHOWN}, not {int(text)}", "out_of_range")
        return int(text)


class OpenedSectionSerializer(StrictSerializer):
    """The query of ``POST /search/{search_id}/opened``: ``?n=`` (``key``, a publishable key's, is read
    elsewhere)."""

    order = OPENED_FIELDS

    def get_fields(self):
        return {"n": SectionNumberField()}


class FeedbackRequestSerializer(StrictSerializer):
    """``{"rating": "up"|"down", "comment"?, "session_id"?}``."""

    order = FEEDBACK_FIELDS

    def get_fields(self):
        return {
            "rating": RatingField(),
            "comment": TextField(markup=True, required=False, max_length=setting("MAX_SELECTED_CHARS")),
            "session_id": SessionIdField(help_text="The `session_id` the answer came with (the chat page's own "
                                                   "session needs none)."),
        }


class BookQuerySerializer(StrictSerializer):
    """``?version=&locale=`` of ``GET /books/{slug}`` (``key`` is the publishable key's, read elsewhere)."""

    order = ("version", "locale")

    def get_fields(self):
        return {"version": TextField(required=False, max_length=100, help_text="A version (name, label or URL "
                                     "path); default: the latest."),
                "locale": TextField(required=False, max_length=35, help_text="A locale; default (or without a "
                                    "translation): the book's.")}


def validate_ask(data: object, *, channel: str = "api") -> AskRequest:
    """Check a decoded request against every rule; the clean ``AskRequest`` or a ``RequestError``."""
    return AskRequestSerializer(data=data).ask(channel=channel)


def validate_search(data: object, *, channel: str = "mcp") -> AskRequest:
    """A decoded search (``SearchRequestSerializer``) as the ``AskRequest`` retrieval takes, or a ``RequestError``."""
    return SearchRequestSerializer(data=data).search(channel=channel)


def validate_section_search(params: dict, *, channel: str = "api") -> AskRequest:
    """A search query string (one value per name) as the ``AskRequest`` finding takes, or a ``RequestError``."""
    return SectionSearchSerializer(data=params).search(channel=channel)


def validate_feedback(data: object) -> tuple[str, str, uuid.UUID | None]:
    """(rating, comment, session id) of a decoded feedback request, or a ``RequestError``."""
    data = FeedbackRequestSerializer(data=data).checked()
    return data["rating"], data.get("comment") or "", data.get("session_id")
