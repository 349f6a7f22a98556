"""``manage.py bench`` (``bookchat/management/commands/bench.py``) run by name: without the shared corpora it stops
before measuring anything, saying where it looked and how to point it elsewhere (exit 2), and writes nothing. The
benchmarks themselves are run by `make bench`; their report: tests/test_bench_report.py."""

from __future__ import annotations

from tests.conftest import run_command


def test_without_the_shared_corpora_bench_stops_saying_where_it_looked(tmp_path):
    output, results = tmp_path / "BENCHMARKS.md", tmp_path / "results.json"
    code, out, err = run_command("bench", "--quick", "--data", str(tmp_path / "no-corpora"), "--output", str(output),
                                 "--json", str(results))
    assert code == 2 and out == ""
    assert err.strip() == f"bench: no shared corpora at {tmp_path / 'no-corpora'} (set --data or SHARED_DATA)"
    assert not output.exists() and not results.exists()
