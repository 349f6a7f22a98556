"""``manage.py bench [--quick] [--output FILE] [--json FILE]``: run every benchmark and rewrite the measured
part of BENCHMARKS.md (see the ``bench`` package). ``make bench`` runs it; ``make bench QUICK=1`` runs
a ~2-minute subset; ``--soak`` runs only the measured soak (``bench/soak.py``), ``--search`` only the
search-as-typed replay (``bench/typing.py``), ``--publishing`` only publishing from CI
(``bench/publishing_bench.py``) and
``--first-start`` only ``make run`` from a clean data folder (``bench/first_start.py``), ``--lecture-hall`` only the
lecture-hall drill (``bench/lecture_hall.py``), ``--profile`` where an
answer's time goes (``bench/profile.py``) and ``--struggle`` only the pages of where students struggle with 200,000
audit rows of one book (``bench/struggle_bench.py``), each printed, nothing written.
Works on the development database: books ``bench-*`` are made and deleted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from bench import first_start, lecture_hall, profile, publishing_bench, report, runner, soak, struggle_bench, typing


class Command(BaseCommand):
    help = "Measure ingestion, latency, load, scale and quality; rewrite BENCHMARKS.md's measured section."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="A ~2-minute subset.")
        parser.add_argument("--data", default=str(Path(settings.BASE_DIR).parent / "shared" / "data"),
                            help="The shared corpora (default ../shared/data).")
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "BENCHMARKS.md"),
                            help="The Markdown file whose measured section is rewritten.")
        parser.add_argument("--json", dest="json_path", default=str(Path(settings.DATA_DIR) / "bench" /
                                                                     "results.json"), help="Raw results.")
        parser.add_argument("--soak", action="store_true", help="Only the soak: 8 clients for 60 s with an ingest "
                            "running, against the idle p95 (squad2-dev must be indexed); printed, nothing written.")
        parser.add_argument("--search", action="store_true", help="Only search as typed: the keystroke replay "
                            "over HTTP on docusaurus-docs (which must be indexed), then in-process on synthetic "
                            "books of 1,000 and 50,000 passages (~6 min); printed, nothing written.")
        parser.add_argument("--first-start", action="store_true", help="Only `make run` from a clean data folder: "
                            "seconds to the page, and to the first answer about the manual (~2 min); printed, "
                            "nothing written.")
        parser.add_argument("--publishing", action="store_true", help="Only publishing from CI: docusaurus-docs "
                            "published, then one page edited and published three times, POST to done, with a web "
                            "server and a task worker (~2 min); printed, nothing written.")
        parser.add_argument("--publishing-behind-background", action="store_true", help="Only one edited page of "
                            "a small book published right after docusaurus-docs' first publish as another book, "
                            "POST to done, with a web server and a task worker (~3 min); printed, nothing written.")
        parser.add_argument("--lecture-hall", action="store_true", help="Only the lecture hall: 300 students "
                            "behind one address and one publishable key for 5 minutes while one edited page is "
                            "published, with a web server and a task worker (~6 min); printed as Markdown, nothing "
                            "written.")
        parser.add_argument("--profile", action="store_true", help="Only where an answer's time goes: CPU by "
                            "process and sampled stacks (py-spy, if installed) under 8 clients, cProfile and SQL "
                            "per answer in-process (squad2-dev and docusaurus-docs must be indexed; ~2 min); "
                            "printed, nothing written.")
        parser.add_argument("--struggle", action="store_true", help="Only where students struggle: 200,000 audit "
                            "rows of docusaurus-docs (which must be indexed) written, the map, topics page, exports "
                            "and struggle_map timed, the rows deleted (~5 min); printed as Markdown, nothing written.")

    def handle(self, *args, **options) -> None:
        data = Path(options["data"])
        if not (data / "squad2-dev" / "questions.jsonl").is_file():
            self.stderr.write(f"bench: no shared corpora at {data} (set --data or SHARED_DATA)")
            sys.exit(2)
        started = time.monotonic()

        def log(message: str) -> None:
            self.stderr.write(f"[{time.monotonic() - started:6.0f} s] {message}")

        log("== database: applying migrations (a fresh clone has none yet)")
        call_command("migrate", interactive=False, verbosity=0)
        only = self._only(options, data, log)
        if only is not None:
            self.stdout.write(only)
            return

        results = runner.run(data=data, quick=options["quick"], log=log, save_to=Path(options["json_path"]))
        command = "make bench QUICK=1" if options["quick"] else "make bench"
        report.write(Path(options["output"]), report.render(results, command=command))
        for target, measured, holds in report.targets(results):
            mark = "ok  " if holds else ("-   " if holds is None else "MISS")
            self.stdout.write(f"{mark} {target}: {measured}")
        self.stdout.write(f"Wrote {options['output']} and {options['json_path']}.")
        if results["failures"]:
            self.stderr.write("bench: these benchmarks failed: " + "; ".join(f"{k}: {v}" for k, v in
                                                                             results["failures"].items()))
            sys.exit(1)

    def _only(self, options: dict, data: Path, log) -> str | None:
        """What the one benchmark an option chooses measured, to print; ``None`` for the whole run."""
        if options["soak"]:
            full = runner.plan(quick=False)  # the full run's soak: its first book, its length
            figures = soak.measured_soak(data, full["books"][0], seconds=full["soak_seconds"])
            return (soak.describe(figures) + f"; p95 ratio {figures['p95_ratio']:.2f}, "
                    f"{len(figures['errors'])} errors, worker RSS growth {figures['rss_growth']:.1%}")

        if options["first_start"]:
            return first_start.describe(first_start.first_start(log=log))

        if options["publishing"]:
            figures = publishing_bench.publishing(data, repeats=runner.plan(quick=False)["publish_repeats"], log=log)
            return publishing_bench.describe(figures)

        if options["publishing_behind_background"]:
            figures = publishing_bench.behind_background(data, log=log)
            return publishing_bench.describe_behind_background(figures)

        if options["lecture_hall"]:
            return lecture_hall.printed(lecture_hall.measure(data, log=log))

        if options["profile"]:
            questions = runner.mixed_questions(data, list(runner.ANSWERED_BOOKS), 300)
            return profile.describe(profile.profile(questions, log=log))

        if options["struggle"]:
            figures = struggle_bench.struggle(log=log)
            return struggle_bench.describe(figures) + "\n\n" + "\n".join(struggle_bench.table(figures))

        if options["search"]:
            lines = [typing.describe(typing.over_http(data, runner.SEARCH_BOOK, log=log))]
            lines += [f"search as typed in-process on a {figures['size']:,}-passage book: p50 {figures['p50']:.1f} / "
                      f"p95 {figures['p95']:.1f} ms ({figures['n']} queries)"
                      for figures in typing.scaled(data, log=log)]
            return "\n".join(lines)
        return None
