"""The development sets of staff-answer matching (``bench/questions/staff-*.jsonl``) and how
``bench.fit_staff_matching`` chooses its threshold, without a database: the figures in BENCHMARKS.md come from
running it on the indexed books."""

from __future__ import annotations


def test_the_development_sets_hold_enough_paraphrases_and_near_misses_over_two_books():
    from pathlib import Path

    from bench.fit_staff_matching import load

    sets = sorted(Path(__file__).resolve().parent.parent.glob("bench/questions/staff-*.jsonl"))
    rows = {path.name: load(str(path)) for path in sets}
    assert len(rows) >= 2 and not any("physical-ai" in name for name in rows)
    kinds = [row["kind"] for questions in rows.values() for row in questions]
    assert kinds.count("paraphrase") >= 60 and kinds.count("near_miss") >= 60
    for questions in rows.values():
        staff = {row["id"] for row in questions if row["kind"] == "staff"}
        assert len({row["id"] for row in questions}) == len(questions), "ids are unique"
        assert all(row["staff"] in staff for row in questions if row["kind"] != "staff")
        assert all(row["question"].strip() and row.get("answer", "x").strip() for row in questions)


def test_the_fitting_chooses_the_lowest_threshold_that_keeps_near_misses_out():
    from bench.fit_staff_matching import choose, decide, figures

    def question(kind: str, staff: str, own: float, other: float, case: str) -> dict:
        features = {"cosine": 0.9, "overlap": 0.2, "unshared": 0.5}
        candidates = {staff: {**features, "answer": own}, "elsewhere": {**features, "answer": other}}
        if other > own:
            candidates = dict(reversed(list(candidates.items())))
        return {"id": case, "kind": kind, "staff": staff, "case": f"book:{case}", "candidates": candidates}

    questions = [question("paraphrase", f"s{n}", 0.95, 0.5, f"p{n}") for n in range(20)]
    questions += [question("near_miss", f"s{n}", 0.8, 0.5, f"n{n}") for n in range(20)]
    weights, bias, threshold = choose(questions, 1, 0.01)
    outcome = figures(decide(questions, weights, bias, threshold))
    assert outcome["near_misses_served"][1] == 0 and outcome["paraphrases_served"][1] == 20
    assert outcome["paraphrases_served_another"][1] == 0
