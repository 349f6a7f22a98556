"""The API's contract for responses: what an answer, a book, feedback and an error look like, as the schema states
them and as every channel sends them (``answer_data``: only the keys the contract names, each as declared).
"""

from __future__ import annotations

from rest_framework import serializers


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


class SuggestionSerializer(serializers.Serializer):
    title = serializers.CharField()
    heading_path = serializers.CharField()
    url = serializers.CharField()


class GroundingSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)
    sentences = serializers.IntegerField()
    supported = serializers.IntegerField()
    unsupported_sentences = serializers.ListField(child=serializers.CharField())
    invalid_citations = serializers.ListField(child=serializers.IntegerField())
    foreign_links = serializers.ListField(child=serializers.CharField())
    cited_sources = serializers.ListField(child=serializers.IntegerField())


class AnswerabilitySerializer(serializers.Serializer):
    answerable = serializers.BooleanField()
    specific_terms = serializers.ListField(child=serializers.CharField())
    missing_terms = serializers.ListField(child=serializers.CharField())


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


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(allow_null=True, help_text="The prompt's tokens, as the server counted "
                                             "them (null when it gave no count).")
    completion_tokens = serializers.IntegerField(help_text="The tokens the model wrote.")
    total_tokens = serializers.IntegerField(allow_null=True)
    counted_by = serializers.ChoiceField(["server", "bookchat"], help_text="`server`: the model server's own "
                                         "`usage`; `bookchat`: the server gave none, so the streamed pieces were "
                                         "counted, one token each.")


class AnswerSerializer(serializers.Serializer):
    """The response to a question (ask, the stream's ``final`` event, ``ask --json``, the chat page)."""

    answer = serializers.CharField(help_text="Markdown with `[n]` citation markers.")
    answer_html = serializers.CharField(help_text="The answer rendered and sanitised, markers linked to sources.")
    sources = SourceSerializer(many=True)
    confidence = serializers.FloatField(help_text="The fitted probability that the answer is right (for a "
                                        "refusal: that the best answer found would have been; 0 when none was).")
    confidence_level = serializers.ChoiceField(["high", "medium", "unsure", "low"], help_text="`high`: ≥ 90 % "
                                               "of such answers were right on held-out question sets; `medium`: "
                                               "≥ 60 %; `unsure`: the closest passage, said plainly, and sent to "
                                               "the review queue; a refusal is `low`.")
    confidence_note = serializers.CharField(allow_null=True, help_text="What the level means, in words to show "
                                            "a reader (null for a refusal).")
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


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code (the manual's REST API page lists them).")
    message = serializers.CharField()
    field = serializers.CharField(allow_null=True)


def answer_data(response: dict) -> dict:
    """A response as the contract shows it (only the keys it names, each as declared)."""
    return AnswerSerializer(response).data


def search_data(result: dict) -> dict:
    """A search result as the contract shows it."""
    return SearchResultSerializer(result).data
