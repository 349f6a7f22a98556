"""chat.channels.responses: an answer and a search result as the contract shows them on every channel, each field in
its declared type; a turn's stored answer shows as the answer did; and a serializer that doesn't state exactly the
fields of the pipeline's value it documents fails where it is defined."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers

from chat.channels.responses import AnswerSerializer, answer_data, search_data, states
from chat.pipeline.answers import Answer, RetrievalFigures
from chat.pipeline.generation import TokenUsage
from chat.pipeline.grounding import GroundingReport
from chat.pipeline.source_cards import Source

ANSWER_ID, SESSION_ID, SEARCH_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def source(n: int) -> Source:
    return Source(n=n, chapter="Guide", section="Install", heading_path="Guide > Install",
                  url="https://docs.example/install#:~:text=pip", excerpt="pip install", score=0.8123, chunk_id="c1",
                  cited=True, document="guide/install.md")


def an_answer(**changes) -> Answer:
    """An answer as the pipeline makes it."""
    answer = Answer(
        answer="Run `pip install` [1].", answer_html="<p>Run …</p>", sources=[source(1)], confidence=0.93,
        confidence_level="high", confidence_note="Most such answers were right.", generator="extractive",
        session_id=str(SESSION_ID), response_time_ms=41, answer_id=str(ANSWER_ID), book="guide", version="",
        locale="en", refused=False, refusal_reason=None, suggestions=[], disclaimer=None, notice=None,
        flagged_for_review=False, grounding=GroundingReport(sentences=1, supported=1, cited_sources=[1]),
        resolved_question="How do I install it?",
        retrieval=RetrievalFigures(best_cosine=0.9, scope_score=0.7, threshold=0.5, lexical_coverage=1.0,
                                   candidates=12, answerability=None, confidence_features={"gap": 0.2}),
        timings_ms={"retrieval": 12.5}, llm_usage=TokenUsage(prompt_tokens=None, completion_tokens=7,
                                                             total_tokens=None, counted_by="bookchat"))
    return dataclasses.replace(answer, **changes)


def test_an_answer_shows_every_field_in_its_declared_type():
    data = answer_data(an_answer())
    assert list(data) == list(AnswerSerializer().fields) == [f.name for f in dataclasses.fields(Answer)]
    assert data["answer_id"] == str(ANSWER_ID) and data["session_id"] == str(SESSION_ID)
    assert data["sources"] == [dataclasses.asdict(source(1))]
    assert data["grounding"]["reason"] == "" and data["grounding"]["cited_sources"] == [1]
    assert data["llm_usage"] == {"prompt_tokens": None, "completion_tokens": 7, "total_tokens": None,
                                 "counted_by": "bookchat"}


def test_an_answer_a_turn_kept_shows_as_it_was_sent():
    answer = an_answer(suggestions=[], sources=[source(1), source(2)])
    assert answer_data(dataclasses.asdict(answer)) == answer_data(answer)


def test_answer_of_a_refusal_keeps_its_nulls():
    data = answer_data(an_answer(refused=True, refusal_reason="not_covered", confidence_level="low",
                                 confidence_note=None, grounding=None, sources=[], llm_usage=None))
    assert data["refused"] is True and data["grounding"] is None and data["confidence_note"] is None
    assert data["llm_usage"] is None


def test_a_serializer_must_state_the_fields_of_its_value():
    with pytest.raises(ImproperlyConfigured, match="total_tokens"):
        @states(TokenUsage)
        class Missing(serializers.Serializer):
            prompt_tokens = serializers.IntegerField(allow_null=True)
            completion_tokens = serializers.IntegerField()
            counted_by = serializers.CharField()

    with pytest.raises(ImproperlyConfigured, match="counted_by"):
        @states(TokenUsage)
        class Nullable(serializers.Serializer):
            prompt_tokens = serializers.IntegerField(allow_null=True)
            completion_tokens = serializers.IntegerField()
            total_tokens = serializers.IntegerField(allow_null=True)
            counted_by = serializers.CharField(allow_null=True)  # never None in the pipeline

    with pytest.raises(ImproperlyConfigured, match="the order"):
        @states(TokenUsage)
        class Reordered(serializers.Serializer):
            completion_tokens = serializers.IntegerField()
            prompt_tokens = serializers.IntegerField(allow_null=True)
            total_tokens = serializers.IntegerField(allow_null=True)
            counted_by = serializers.CharField()


def test_search_result_marks_stay_pairs_and_the_search_id_is_a_string():
    section = {"title": "Install", "heading_path": "Guide > Install", "url": "/install#linux", "snippet": "pip …",
               "snippet_html": "<mark>pip</mark> …", "marks": [[0, 3]], "score": 0.5, "chunk_id": "c1", "n": 1,
               "vector": [0.1]}
    result = {"book": "guide", "version": "", "locale": "", "query": "pip", "matched": "words", "covered": True,
              "pages": [{"title": "Install", "chapter": "Guide", "document": "install.md", "url": "/install",
                         "sections": [section]}], "search_id": SEARCH_ID}
    data = search_data(result)
    assert data["search_id"] == str(SEARCH_ID)
    assert data["pages"][0]["sections"][0]["marks"] == [[0, 3]]
    assert "vector" not in data["pages"][0]["sections"][0]
