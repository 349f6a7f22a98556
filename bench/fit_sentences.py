"""Fit the sentence re-sort's weights (``chat/pipeline/sentences.py``) on development question sets and check them on
others.

    .venv/bin/python -m bench.fit_sentences --fit squad2-dev:../shared/data/squad2-dev/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions.jsonl \\
        --check docusaurus-docs:../shared/data/docusaurus-docs/questions-2.jsonl

Each ``BOOK:FILE`` names an indexed book (with its sentence vectors: ``ingest`` makes them) and a
question file. For every question with evidence, the best ``RESORT`` passages are retrieved with
the re-sort off (the re-ranker's order and probabilities), their units' similarities to the
question attached, and each passage labelled by whether it holds the evidence; kept in
``var/bench/sentences-*.pickle`` (delete it after re-indexing). A logistic regression over
``resort_features`` is fitted on the ``--fit`` sets (each weighing the same), and hit@1 within
those passages printed for the re-ranker's order, the fitted re-sort and, for each ``--fit``
set, the re-sort fitted on the other sets only. The weights to paste are printed last.
"""

from __future__ import annotations

import sys

import numpy as np

from bench.fit_reranker import _current, _setup, cached, fit_arguments, fit_sets, load_sets


def collect(book: str, path: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per question with evidence: (``resort_features`` of its best passages, labels); ``cached`` as
    ``sentences``."""
    return cached("sentences", book, path, lambda: _collect(book, path))


def _collect(book: str, path: str) -> list[tuple[np.ndarray, np.ndarray]]:
    from django.test.utils import override_settings

    from chat.pipeline.deadline import Deadline
    from chat.pipeline.retrieval import retrieve
    from chat.pipeline.sentences import RESORT, attach, resort_features
    from chat.quality.evaluation import SHOULD_REFUSE, _hit_rank, load_questions
    from ingestion.indexing.embedders import get_embedder
    from ingestion.models import Book

    target = Book.objects.get(slug=book)
    embedder = get_embedder()
    out = []
    for q in load_questions(path):
        if not q.evidence or q.kind in SHOULD_REFUSE:
            continue
        question = f"{q.question} ({q.previous})" if q.kind == "follow_up" and q.previous else q.question
        query = f"{question}\n\n{q.selected_text}" if q.selected_text else question
        vector = embedder.embed_query(query)
        with override_settings(BOOKCHAT={**_current(), "SENTENCE_VECTORS": "off"}):
            head = retrieve(book=target, question=question, selected_text=q.selected_text, top_k=RESORT,
                            query_vector=vector, deadline=Deadline(60.0), stage_seconds=60.0).chunks
        attach(head, vector, embedder_name=target.embedder_name)
        if not head or any(c.sentence_similarities is None for c in head):
            continue
        out.append((np.asarray(resort_features(head), dtype=np.float64),
                    np.asarray([1.0 if _hit_rank([c.text], q.evidence) else 0.0 for c in head])))
    return out


def hit_at_1(groups, weights=None, bias=0.0) -> float:
    """Share of the questions whose first passage holds the evidence: as retrieved, or re-sorted."""
    hits = 0
    for x, y in groups:
        first = 0 if weights is None else int(np.argmax(x @ weights + bias))
        hits += bool(y[first])
    return hits / len(groups) if groups else 0.0


def main(argv=None) -> int:
    args = fit_arguments(__doc__.split("\n")[0], argv)
    _setup()
    sets = load_sets(args, collect)
    weights, bias = fit_sets(sets, args.fit, l2=args.l2)
    print(f"{'set':70} {'re-ranked h@1':>14} {'re-sorted h@1':>14} {'left out h@1':>13}")
    for spec, groups in sets.items():
        left = ""
        if spec in args.fit and len(args.fit) > 1:
            left = f"{hit_at_1(groups, *fit_sets(sets, [o for o in args.fit if o != spec], l2=args.l2)):.3f}"
        print(f"{spec[-70:]:70} {hit_at_1(groups):>14.3f} {hit_at_1(groups, weights, bias):>14.3f} {left:>13}"
              f"  (n={len(groups)})")
    print("WEIGHTS = (" + ", ".join(f"{w:.4f}" for w in weights) + ")")
    print(f"BIAS = {bias:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
