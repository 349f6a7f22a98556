"""The API's contract for responses: what an answer, a book, feedback and an error look like, as the schema states
them and as every channel sends them.

An answer's fields are listed once, by the pipeline's ``chat.pipeline.answers.Answer`` and the values inside it;
the serializers here restate them with what the schema says of each (help texts, enums, blank strings), and
``states`` checks each serializer against its value when the class is defined: the same fields in the same order,
nullable exactly where the value's type admits None. A field added on one side only fails the import of this
module, so the server doesn't start and no test runs until both say the same. (Why not derive the serializers
from the values: ``chat.pipeline.answers``.) ``answer_data`` makes an ``Answer``'s JSON, once, at a channel's edge.
"""

from __future__ import annotations

import dataclasses
import typing

from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers

from chat.pipeline.answerability import Answerability
from chat.pipeline.answers import Answer, RetrievalFigures, StaffAnswerRef
from chat.pipeline.generation import TokenUsage
from chat.pipeline.grounding import GroundingReport
from chat.pipeline.retrieval import Suggestion
from chat.pipeline.source_cards import Source


def states(value: type):
    """Class decorator: the serializer states exactly the fields of the dataclass ``value``, in their order, each
    nullable where its type admits None, or the class fails to be defined (``ImproperlyConfigured``)."""
    hints = typing.get_type_hints(value)
    fields = [(f.name, type(None) in typing.get_args(hints[f.name])) for f in dataclasses.fields(value)]

    def check(serializer: type[serializers.Serializer]) -> type[serializers.Serializer]:
        stated = [(name, field.allow_null) for name, field in serializer().fields.items()]
        if stated != fields:
            differ = sorted(set(stated) ^ set(fields)) or "the order"
            raise ImproperlyConfigured(f"{serializer.__name__} must state the fields of {value.__qualname__} "
                                       f"(name, nullable), in its order; they differ in {differ}")
        return serializer

    return check


@states(Source)
class SourceSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="The number the answer's `[n]` markers refer to.")
    chapter = serializers.CharField()
    section = serializers.CharField()
    heading_path = serializers.CharField()
    url = serializers.CharField(help_text="The section's URL, with a text fragment for the excerpt.")
    excerpt = serializers.CharField()
    score = serializers.FloatField()
    chunk_id = serializers.CharField()
    cited = serializers.BooleanField(help_text="Whether the answer cites this source.")
    document = serializers.CharField(help_text="The page's path in the book.")


@states(Suggestion)
class SuggestionSerializer(serializers.Serializer):
    title = serializers.CharField()
    heading_path = serializers.CharField()
    url = serializers.CharField()


@states(GroundingReport)
class GroundingSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)
    sentences = serializers.IntegerField()
    supported = serializers.IntegerField()
    unsupported_sentences = serializers.ListField(child=serializers.CharField())
    invalid_citations = serializers.ListField(child=serializers.IntegerField())
    foreign_links = serializers.ListField(child=serializers.CharField())
    cited_sources = serializers.ListField(child=serializers.IntegerField())


@states(Answerability)
class AnswerabilitySerializer(serializers.Serializer):
    answerable = serializers.BooleanField()
    specific_terms = serializers.ListField(child=serializers.CharField())
    missing_terms = serializers.ListField(child=serializers.CharField())


@states(RetrievalFigures)
class RetrievalSerializer(serializers.Serializer):
    best_cosine = serializers.FloatField()
    scope_score = serializers.FloatField()
    threshold = serializers.FloatField()
    lexical_coverage = serializers.FloatField()
    candidates = serializers.IntegerField()
    answerability = AnswerabilitySerializer(allow_null=True)
    confidence_features = serializers.DictField(child=serializers.FloatField(), help_text="What the confidence "
                                                "model read (`chat/pipeline/confidence.py`); empty for a refusal that "
                                                "drafted no answer.")


@states(TokenUsage)
class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(allow_null=True, help_text="The prompt's tokens, as the server counted "
                                             "them (null when it gave no count).")
    completion_tokens = serializers.IntegerField(help_text="The tokens the model wrote.")
    total_tokens = serializers.IntegerField(allow_null=True)
    counted_by = serializers.ChoiceField(["server", "bookchat"], help_text="`server`: the model server's own "
                                         "`usage`; `bookchat`: the server gave none, so the streamed pieces were "
                                         "counted, one token each.")


@states(StaffAnswerRef)
class StaffAnswerRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The staff answer's id.")
    answered_at = serializers.DateTimeField(help_text="When the course staff wrote it.")


@states(Answer)
class AnswerSerializer(serializers.Serializer):
    """The response to a question (ask, the stream's ``final`` event, ``ask --json``, the chat page)."""

    answer = serializers.CharField(help_text="Markdown with `[n]` citation markers.")
    answer_html = serializers.CharField(help_text="The answer rendered and sanitised, markers linked to sources.")
    sources = SourceSerializer(many=True)
    confidence = serializers.FloatField(help_text="The fitted probability that the answer is right (for a "
                                        "refusal: that the best answer found would have been; 0 when none was; "
                                        "for a staff answer: that its question asks what this one asks).")
    confidence_level = serializers.ChoiceField(["high", "medium", "unsure", "low", "staff"], help_text="`high`: "
                                               "≥ 90 % of such answers were right on held-out question sets; "
                                               "`medium`: ≥ 60 %; `unsure`: the closest passage, said plainly, and "
                                               "sent to the review queue; a refusal is `low`; `staff`: the course "
                                               "staff's answer to the same question (`staff_answer`), served "
                                               "instead of the book's own answer, which was not `high`.")
    confidence_note = serializers.CharField(allow_null=True, help_text="What the level means, in words to show "
                                            "a reader (null for a refusal); for a staff answer \"Answered by the "
                                            "course staff on DATE\".")
    generator = serializers.CharField()
    session_id = serializers.UUIDField()
    response_time_ms = serializers.IntegerField()
    answer_id = serializers.UUIDField()
    book = serializers.CharField(help_text="The book's slug, as clients name it.")
    version = serializers.CharField(allow_blank=True, help_text="The version that answered (\"\" for a book "
                                    "without versions).")
    locale = serializers.CharField(allow_blank=True, help_text="The locale that answered (\"\" when unknown).")
    refused = serializers.BooleanField()
    refusal_reason = serializers.ChoiceField(["not_covered", "unanswerable", "unsure"], allow_null=True,
                                             help_text="`not_covered`: off the book's topic; `unanswerable`: the "
                                             "book never names what the question asks about; `unsure`: the best "
                                             "answer found was below the confidence floor (or only links), so "
                                             "the closest sections are offered instead.")
    suggestions = SuggestionSerializer(many=True)
    disclaimer = serializers.CharField(allow_null=True)
    notice = serializers.CharField(allow_null=True)
    flagged_for_review = serializers.BooleanField()
    grounding = GroundingSerializer(allow_null=True)
    resolved_question = serializers.CharField()
    retrieval = RetrievalSerializer()
    timings_ms = serializers.DictField(child=serializers.FloatField())
    llm_usage = UsageSerializer(allow_null=True, help_text="The language model's tokens for this answer, also when "
                                "it failed and the extractive generator answered; null when no model was asked.")
    staff_answer = StaffAnswerRefSerializer(allow_null=True, help_text="The course staff's answer this is "
                                            "(`confidence_level` `staff`); null for the book's own answer.")
    language = serializers.CharField(default="en", help_text=(
        "The language the question was asked in, as a lower-case BCP 47 base tag (`es`, `ur`, `zh`…; the book's "
        "language when too short to tell): the refusals, notes and labels of this answer are written in it."))
    book_language = serializers.CharField(default="en", help_text=(
        "The book's language (a base tag): an extractive answer to a question in another language quotes the book "
        "in it, under a label in `language`."))


class FeedbackSerializer(serializers.Serializer):
    answer_id = serializers.UUIDField()
    rating = serializers.ChoiceField(["up", "down"])
    comment = serializers.CharField(allow_blank=True)


class EditionSerializer(serializers.Serializer):
    version = serializers.CharField(allow_blank=True, help_text="Name to send as `version` (\"\" without versions).")
    label = serializers.CharField(allow_blank=True)
    path = serializers.CharField(allow_blank=True, help_text="The version's URL segment (\"\" for the latest).")
    locale = serializers.CharField(allow_blank=True)
    latest = serializers.BooleanField(help_text="Answers when no `version` is sent.")
    base_url = serializers.CharField(allow_blank=True)
    pages = serializers.IntegerField()


class BookSerializer(serializers.Serializer):
    slug = serializers.CharField()
    title = serializers.CharField()
    base_url = serializers.CharField(allow_blank=True)
    pages = serializers.IntegerField()
    chunks = serializers.IntegerField()
    embedder = serializers.CharField(allow_blank=True)
    scope_threshold = serializers.FloatField()
    updated_at = serializers.DateTimeField()
    versions = serializers.ListField(child=serializers.CharField(), help_text="Version names, newest first "
                                     "(`current` is the unreleased \"Next\"); empty for a book without versions.")
    locales = serializers.ListField(child=serializers.CharField())
    editions = EditionSerializer(many=True, help_text="Every version in every locale, each with its URL.")
    chapters = serializers.ListField(child=serializers.CharField(allow_blank=True), help_text="Chapter labels of "
                                     "the latest version, in sidebar order (`GET /books/{slug}` has its pages).")


class BooksSerializer(serializers.Serializer):
    books = BookSerializer(many=True)


class OutlinePageSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="The page's sidebar label.")
    title = serializers.CharField()
    url = serializers.CharField(allow_blank=True)
    path = serializers.CharField(help_text="The page's source file in the book.")


class OutlineChapterSerializer(serializers.Serializer):
    chapter = serializers.CharField(allow_blank=True, help_text="The folder's sidebar label (\"\" for pages at "
                                    "the book's root); send it as `chapter` to ask about this chapter only.")
    folder = serializers.CharField(allow_blank=True)
    pages = OutlinePageSerializer(many=True)


class BookDetailSerializer(BookSerializer):
    version = serializers.CharField(allow_blank=True, help_text="The version shown.")
    locale = serializers.CharField(allow_blank=True, help_text="The locale shown.")
    outline = OutlineChapterSerializer(many=True, help_text="Chapters and pages in the site's sidebar order.")


class FoundSectionSerializer(serializers.Serializer):
    title = serializers.CharField(help_text="The section's heading.")
    heading_path = serializers.CharField()
    url = serializers.CharField(help_text="The section's URL, with its anchor.")
    snippet = serializers.CharField(help_text="Plain text around the words matched (… where cut).")
    snippet_html = serializers.CharField(help_text="The snippet escaped, each matched word in `<mark>`.")
    marks = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField(), min_length=2,
                                                              max_length=2),
                                  help_text="`[start, end)` offsets of the matched words in `snippet`.")
    score = serializers.FloatField()
    chunk_id = serializers.CharField()
    n = serializers.IntegerField(help_text="Its place in the result (1, 2, … through each page's sections): the `n` "
                                 "of `POST /search/{search_id}/opened`.")


class FoundPageSerializer(serializers.Serializer):
    title = serializers.CharField()
    chapter = serializers.CharField(allow_blank=True)
    document = serializers.CharField(help_text="The page's path in the book.")
    url = serializers.CharField(allow_blank=True, help_text="The page's URL.")
    sections = FoundSectionSerializer(many=True, help_text="Its best sections, best first.")


class SearchResultSerializer(serializers.Serializer):
    """What ``GET /search`` finds: pages, best first, each with its best sections."""

    book = serializers.CharField()
    version = serializers.CharField(allow_blank=True)
    locale = serializers.CharField(allow_blank=True)
    query = serializers.CharField(help_text="The query as searched (HTML removed).")
    matched = serializers.ChoiceField(["words", "meaning", "none"], help_text="`words`: sections hold the query's "
                                      "words (marked); `meaning`: none does, these are the nearest in meaning; "
                                      "`none`: nothing found.")
    covered = serializers.BooleanField(help_text="Whether the best match clears the book's scope threshold.")
    pages = FoundPageSerializer(many=True)
    search_id = serializers.UUIDField(help_text="This search, for `POST /search/{search_id}/opened` when the reader "
                                      "opens one of its sections.")


def answer_data(answer: Answer | dict) -> dict:
    """An answer as the contract shows it (each field as declared: the ids as text…); also the JSON a turn kept of
    one (``chat.channels.page``)."""
    return AnswerSerializer(answer).data


def search_data(result: dict) -> dict:
    """A search result as the contract shows it."""
    return SearchResultSerializer(result).data
