"""chat.channels.responses: an answer and a search result as the contract shows them on every channel: only the
keys the schema names, each in its declared type."""

from __future__ import annotations

import uuid

from chat.channels.responses import AnswerSerializer, answer_data, search_data

ANSWER_ID, SESSION_ID, SEARCH_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


def source(n: int) -> dict:
    return {"n": n, "chapter": "Guide", "section": "Install", "heading_path": "Guide > Install",
            "url": "https://docs.example/install#:~:text=pip", "excerpt": "pip install", "score": 0.8123,
            "chunk_id": "c1", "cited": True, "document": "guide/install.md", "text": "the whole passage"}


def pipeline_response(**changes) -> dict:
    """A response as the pipeline returns it: the contract's keys and some it keeps for itself."""
    response = {
        "answer": "Run `pip install` [1].", "answer_html": "<p>Run …</p>", "sources": [source(1)],
        "confidence": 0.93, "confidence_level": "high", "confidence_note": "Most such answers were right.",
        "generator": "extractive", "session_id": SESSION_ID, "response_time_ms": 41, "answer_id": ANSWER_ID,
        "book": "guide", "version": "", "locale": "en", "refused": False, "refusal_reason": None,
        "suggestions": [], "disclaimer": None, "notice": None, "flagged_for_review": False,
        "grounding": {"passed": True, "reason": None, "sentences": 1, "supported": 1, "unsupported_sentences": [],
                      "invalid_citations": [], "foreign_links": [], "cited_sources": [1]},
        "resolved_question": "How do I install it?",
        "retrieval": {"best_cosine": 0.9, "scope_score": 0.7, "threshold": 0.5, "lexical_coverage": 1.0,
                      "candidates": 12, "answerability": None, "confidence_features": {"gap": 0.2}},
        "timings_ms": {"retrieval": 12.5}, "llm_usage": None,
        "prepared": object(), "audit_status": "answered",  # the pipeline's own, never sent
    }
    return response | changes


def test_answer_keeps_only_the_contract_keys_in_declared_types():
    data = answer_data(pipeline_response())
    assert set(data) == set(AnswerSerializer().fields)
    assert data["answer_id"] == str(ANSWER_ID) and data["session_id"] == str(SESSION_ID)
    assert "text" not in data["sources"][0] and data["sources"][0]["n"] == 1


def test_answer_of_a_refusal_keeps_its_nulls():
    data = answer_data(pipeline_response(refused=True, refusal_reason="not_covered", confidence_level="low",
                                         confidence_note=None, grounding=None, sources=[]))
    assert data["refused"] is True and data["grounding"] is None and data["confidence_note"] is None


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
