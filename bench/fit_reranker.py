"""Fit the re-ranker's weights (``chat/pipeline/reranking.py``) on development question sets and check them on others.

    .venv/bin/python -m bench.fit_reranker --l2 3 --fit squad2-dev:../shared/data/squad2-dev/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions-2.jsonl \\
        --fit mdbook-guide:bench/questions/mdbook-guide.jsonl \\
        --fit mkdocs-material:bench/questions/mkdocs-material.jsonl

Each ``BOOK:FILE`` names an indexed book and a question file. For every question with evidence
(answerable, selected text, follow-up), the fused pool is retrieved with the re-ranker off, the
features of its best ``POOL`` candidates computed, and each labelled by whether it holds the
evidence. The weights are fitted on the ``--fit`` sets (L2, Newton's method) to put a passage that
holds the evidence first (``fit_listwise``: each question's candidates compete in a softmax), then
scaled and offset so that the logistic of a candidate's score is its probability of holding the
evidence (``calibrate``, one scale and one offset over every candidate). ``--loss pointwise`` fits
a logistic regression on every candidate instead. hit@1 and
hit@5 of the fused order and of the re-ranked order are printed for every set, with each ``--fit``
set's book also left out in turn (fit on the other books, measure on it: cross-book validation;
both docusaurus-docs files are one book). The weights to paste into ``chat/pipeline/reranking.py``
are printed last.

Decided: the listwise fit, because what the answer needs is the right passage first, and a
pointwise fit spends its weights on telling the thirty candidates' easy negatives apart (held out,
the listwise fit gained hit@1 on every book; BENCHMARKS.md has the figures).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from chat.pipeline.scoring import logistic_array


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    import django

    django.setup()


def cached(prefix: str, book: str, path: str, make):
    """``make()``, kept in ``var/bench/<prefix>-*.pickle`` per book and question file, so that refitting doesn't
    retrieve again (delete it after re-indexing)."""
    import hashlib
    import pickle
    from pathlib import Path

    from django.conf import settings

    cache = Path(settings.DATA_DIR) / "bench" / (
        f"{prefix}-" + hashlib.sha256(f"{book}:{Path(path).resolve()}".encode()).hexdigest()[:12] + ".pickle")
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    out = make()
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(out))
    return out


def retrieve_pools(book: str, path: str) -> list[tuple]:
    """Per question with evidence: (question, the fused pool's best POOL candidates, the lexical result, labels);
    ``cached`` as ``pools``."""
    return cached("pools", book, path, lambda: _retrieve_pools(book, path))


def _retrieve_pools(book: str, path: str) -> list[tuple]:
    from django.test.utils import override_settings

    from bookchat.base.conf import setting
    from chat.pipeline.deadline import Deadline
    from chat.pipeline.reranking import POOL
    from chat.pipeline.retrieval import retrieve
    from chat.quality.evaluation import _hit_rank, load_questions
    from ingestion.models import Book

    target = Book.objects.get(slug=book)
    out = []
    # The fused order, as the re-ranker sees it: no re-ranker, and no sentence re-sort after it.
    with override_settings(BOOKCHAT={**_current(), "RERANKER": "off", "SENTENCE_VECTORS": "off"}):
        assert setting("RERANKER") == "off"
        for q in load_questions(path):
            if not q.evidence or q.kind in ("unanswerable", "out_of_scope"):
                continue
            question = f"{q.question} ({q.previous})" if q.kind == "follow_up" and q.previous else q.question
            retrieval = retrieve(book=target, question=question, selected_text=q.selected_text,
                                 deadline=Deadline(60.0), stage_seconds=60.0)
            head = retrieval.pool[:POOL]
            labels = [1.0 if _hit_rank([c.text], q.evidence) else 0.0 for c in head]
            out.append((question, head, retrieval.lexical, labels))
    return out


def collect(book: str, path: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per question: (features of the pool's best POOL candidates in fused order, labels)."""
    from chat.pipeline.reranking import candidate_features

    return [(np.asarray(candidate_features(head, lexical, question=question), dtype=np.float64).reshape(len(head), -1),
             np.asarray(labels)) for question, head, lexical, labels in retrieve_pools(book, path)]


def _current() -> dict:
    from django.conf import settings

    return dict(settings.BOOKCHAT)


def fit(groups, l2: float = 1.0, weights: list[float] | None = None) -> tuple[np.ndarray, float]:
    """Logistic regression; ``weights``: one per group (question), so that each set can weigh the same."""
    kept = [(g, w) for g, w in zip(groups, weights or [1.0] * len(groups), strict=True) if len(g[0])]
    x = np.vstack([g[0] for g, _ in kept])
    y = np.concatenate([g[1] for g, _ in kept])
    sample = np.concatenate([np.full(len(g[1]), w) for g, w in kept])
    x1 = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x1.shape[1])
    penalty = np.eye(x1.shape[1]) * l2
    penalty[-1, -1] = 0.0
    for _ in range(50):
        p = logistic_array(x1 @ w)
        gradient = x1.T @ (sample * (p - y)) + penalty @ w
        hessian = (x1 * (sample * p * (1 - p))[:, None]).T @ x1 + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def fit_listwise(groups, l2: float = 1.0, weights: list[float] | None = None) -> np.ndarray:
    """Weights that rank a candidate holding the evidence first: for each question (``weights``: one per
    question) the softmax of its candidates' scores, and the loss the log of the share that falls on the
    candidates holding the evidence (questions whose pool holds none teach nothing and are left out). L2, Newton's
    method with a halving step. Only the order the weights give means anything: :func:`calibrate` makes them a
    probability."""
    kept = [(x, y > 0, w) for (x, y), w in zip(groups, weights or [1.0] * len(groups), strict=True)
            if len(x) and y.any()]
    size = kept[0][0].shape[1]

    def loss_gradient_hessian(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        loss, gradient, hessian = 0.5 * l2 * theta @ theta, l2 * theta, l2 * np.eye(size)
        for x, holds, w in kept:
            z = x @ theta
            p = np.exp(z - z.max())
            p /= p.sum()
            q = p[holds] / p[holds].sum()  # the softmax among the candidates holding the evidence
            mean, mean_holding = p @ x, q @ x[holds]
            loss -= w * np.log(p[holds].sum())
            gradient = gradient + w * (mean - mean_holding)
            hessian = hessian + w * (((x * p[:, None]).T @ x - np.outer(mean, mean))
                                     - ((x[holds] * q[:, None]).T @ x[holds] - np.outer(mean_holding, mean_holding)))
        return loss, gradient, hessian

    theta = np.zeros(size)
    for _ in range(50):
        loss, gradient, hessian = loss_gradient_hessian(theta)
        step, shrink = np.linalg.solve(hessian, gradient), 1.0
        while loss_gradient_hessian(theta - shrink * step)[0] > loss and shrink > 1e-4:
            shrink /= 2
        theta = theta - shrink * step
        if np.abs(shrink * step).max() < 1e-8:
            break
    return theta


def calibrate(groups, theta: np.ndarray, weights: list[float] | None = None) -> tuple[np.ndarray, float]:
    """``theta`` scaled and offset (Platt scaling, over every candidate) so that the logistic of a candidate's
    score is its probability of holding the evidence: the same order, and a probability that the answer's
    composer and confidence can read."""
    scored = [(g[0] @ theta[:, None], g[1]) for g in groups if len(g[0])]
    shares = [w for g, w in zip(groups, weights or [1.0] * len(groups), strict=True) if len(g[0])]
    (scale,), bias = fit(scored, l2=1e-6, weights=shares)
    return theta * scale, bias


def hits(groups, weights=None, bias=0.0) -> tuple[float, float, int]:
    """hit@1 and hit@5 of the questions whose evidence is in the pool at all, over all questions."""
    h1 = h5 = 0
    for x, y in groups:
        if not len(x):
            continue
        order = np.arange(len(x)) if weights is None else np.argsort(-(x @ weights + bias), kind="stable")
        ranked = y[order]
        h1 += bool(ranked[:1].any())
        h5 += bool(ranked[:5].any())
    n = len(groups)
    return h1 / n, h5 / n, n


def fit_arguments(description: str, argv=None, *, losses: bool = False, pools: bool = False) -> argparse.Namespace:
    """``--fit`` and ``--check`` (``BOOK:FILE``, repeated) and ``--l2``: the arguments of every fitting script;
    ``losses``: ``--loss`` too; ``pools``: ``--pool`` too."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fit", action="append", default=[], help="BOOK:FILE to fit on (repeat)")
    parser.add_argument("--check", action="append", default=[], help="BOOK:FILE to check on (repeat)")
    parser.add_argument("--l2", type=float, default=1.0)
    if losses:
        parser.add_argument("--loss", choices=("listwise", "pointwise"), default="listwise",
                            help="the questions' candidates compete (listwise, default) or each stands alone")
    if pools:
        parser.add_argument("--pool", action="append", default=[], metavar="BOOK",
                            help="also report these books' held-out answers together (repeat)")
    return parser.parse_args(argv)


def book_of(spec: str) -> str:
    """The book of a ``BOOK:FILE`` spec."""
    return spec.split(":", 1)[0]


def load_sets(args: argparse.Namespace, collect) -> dict[str, list]:
    """``collect(book, file)`` for every ``--fit`` and ``--check`` spec, each counted on stderr."""
    sets = {}
    for spec in args.fit + args.check:
        sets[spec] = collect(*spec.split(":", 1))
        print(f"{spec}: {len(sets[spec])} questions", file=sys.stderr)
    return sets


def fit_sets(sets: dict[str, list], specs: list[str], *, l2: float,
             loss: str = "pointwise") -> tuple[np.ndarray, float]:
    """:func:`fit` (or, ``loss="listwise"``, :func:`fit_listwise` then :func:`calibrate`) on the groups of ``specs``,
    every set weighing the same however many questions it has."""
    groups = [g for spec in specs for g in sets[spec]]
    share = [len(groups) / (len(specs) * len(sets[spec])) for spec in specs for _ in sets[spec]]
    if loss == "listwise":
        return calibrate(groups, fit_listwise(groups, l2=l2, weights=share), share)
    return fit(groups, l2=l2, weights=share)


def main(argv=None) -> int:
    args = fit_arguments(__doc__.split("\n")[0], argv, losses=True)
    _setup()
    from chat.pipeline.reranking import FEATURES

    sets = load_sets(args, collect)
    weights, bias = fit_sets(sets, args.fit, l2=args.l2, loss=args.loss)
    print(f"{'set':70} {'fused h@1/h@5':>16} {'reranked h@1/h@5':>18} {'left out h@1/h@5':>18}")
    for spec, groups in sets.items():
        f1, f5, n = hits(groups)
        r1, r5, _ = hits(groups, weights, bias)
        left = ""
        others = [o for o in args.fit if book_of(o) != book_of(spec)]  # the spec's book left out
        if spec in args.fit and others:
            l1, l5, _ = hits(groups, *fit_sets(sets, others, l2=args.l2, loss=args.loss))
            left = f"{l1:.3f}/{l5:.3f}"
        print(f"{spec[:70]:70} {f1:.3f}/{f5:.3f} {r1:>10.3f}/{r5:.3f} {left:>18}  (n={n})")
    print("WEIGHTS = (" + ", ".join(f"{w:.4f}" for w in weights) + ")")
    print(f"BIAS = {bias:.4f}")
    print("# " + ", ".join(FEATURES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
