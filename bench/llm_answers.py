"""What the configured language model makes of a book's questions: how many of its answers reach the reader.

    BOOKCHAT_LLM_BASE_URL=… BOOKCHAT_LLM_API_KEY=… BOOKCHAT_LLM_MODEL=… BOOKCHAT_GENERATION_SECONDS=20 \\
    BOOKCHAT_DEADLINE_SECONDS=25 .venv/bin/python -m bench.llm_answers --book bookchat-manual \\
        --questions bench/questions/kinds-bookchat-manual.jsonl

Each question is asked through the whole pipeline, streamed as the API's stream asks it, one after another (the
model server's own queue is not measured), and not written to the audit trail. Each answer counts as one of:
``grounded`` (the model's text, supported by the passages it cites), ``withheld`` (the grounding check stopped it),
``replaced: <why>`` (the model failed and the book's own sentences answered), ``refused`` (not covered,
unanswerable or unsure: the model may not have been asked). Printed: those counts, and over the answers the model
was asked for, the time to the first streamed word, the whole answer's time and the tokens it wrote
(``llm_usage``). Point it at any OpenAI-compatible server to see what a model will do for your readers before you
switch it on.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter

from bench.fit_reranker import _setup


def outcome(final) -> str:
    """What became of one answer (a ``chat.pipeline.answers.Answer``)."""
    if final.refused:
        return f"refused ({final.refusal_reason})"
    if final.generator == "extractive":
        reason = re.sub(r"^The language model could not answer \((.*?)\), so.*$", r"\1", final.notice or "")
        return f"replaced: {re.sub(r'[0-9.]+ s', 'N s', reason)}"
    return "withheld" if final.flagged_for_review else "grounded"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--book", required=True)
    parser.add_argument("--questions", required=True, help="a question file, as evaluate reads it")
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args(argv)
    _setup()
    from bookchat.base.conf import setting
    from chat.pipeline.answering import answer_events, prepare
    from chat.pipeline.generation import llm_configured
    from chat.pipeline.questions import AskRequest
    from chat.quality.evaluation import load_questions

    if not llm_configured():
        print("no language model is configured: set BOOKCHAT_LLM_BASE_URL, _API_KEY and _MODEL", file=sys.stderr)
        return 2
    questions = [q for q in load_questions(args.questions) if q.kind not in ("follow_up",)]
    questions = questions[:args.limit] if args.limit else questions
    counts, first, total, tokens = Counter(), [], [], []
    for q in questions:
        started, first_at, streamed, final = time.monotonic(), None, 0, None
        for kind, payload in answer_events(prepare(AskRequest(question=q.question, book=args.book,
                                                              selected_text=q.selected_text, channel="evaluate"))):
            if kind == "token":
                streamed += 1
                first_at = first_at or time.monotonic() - started
            elif kind == "final":
                final = payload
        counts[outcome(final)] += 1
        if final.llm_usage:
            total.append(time.monotonic() - started)
            tokens.append(final.llm_usage.completion_tokens)
            if streamed > 1:  # the model's words streamed (the book's sentences come in one piece)
                first.append(first_at)
    print(f"{len(questions)} questions, model {setting('LLM_MODEL')}, "
          f"generation share {setting('GENERATION_SECONDS')} s, at most {setting('LLM_MAX_TOKENS')} tokens")
    for name, n in counts.most_common():
        print(f"  {name:60} {n:>4}")
    if total:
        print(f"asked the model {len(total)} times: first word after {statistics.median(first or [0]):.2f} s "
              f"(median), whole answer {statistics.median(total):.2f} s (median), "
              f"{statistics.median(tokens):.0f} tokens written (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
