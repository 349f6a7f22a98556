"""``manage.py struggle --book SLUG [--since YYYY-MM-DD] [--until YYYY-MM-DD] [--json]``: where students struggle in
a book (``audit.struggle``): every section in the outline's order with the questions that landed on it in the period
and how they were answered, then the sections ranked by struggle, where to revise first.

The period runs from the start of ``--since`` to the end of ``--until`` (both days included, in the server's time
zone); default: the last 30 days up to now (``--since`` alone: up to now; ``--until`` alone: the 30 days before
it). Human text by default; ``--json`` one object: ``book``, ``since``, ``until``, ``totals``, ``sections``,
``ranking``, ``heat``, ``topics`` and ``topics_computed`` (the newest computation of the book's topics, whose period
is its own; ``topics`` only show example questions asked in enough conversations, ``STRUGGLE_MIN_SESSIONS``).
Exit status: 0 done (with or without questions), 2 bad options (an unknown book, a date that isn't
one, ``--until`` before ``--since``).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time, timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from audit.struggle import DEFAULT_DAYS, struggle_map
from bookchat.base.errors import BookchatError, exit_command
from ingestion.models import Book, book_slug_validator

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
SHOWN = 60  # characters of a bad option's value repeated in its message
RANKED = 10  # sections of the ranking in the human text


class Command(BaseCommand):
    help = "Where students struggle in a book: its sections, the questions that landed on each, ranked by struggle."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--book", required=True, help="The book's slug.")
        parser.add_argument("--since", help=f"First day of the period, YYYY-MM-DD (default: {DEFAULT_DAYS} days "
                                            "before --until).")
        parser.add_argument("--until", help="Last day of the period, YYYY-MM-DD, included (default: up to now).")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        as_json = options["json"]
        try:
            book = _book(options["book"])
            since = _day(options["since"], "--since")
            until = _day(options["until"], "--until", end=True)
            if since and until and until <= since:
                raise BookchatError(f"--until ({options['until']}) is before --since ({options['since']})",
                                    code="bad_period")
            result = struggle_map(book, since=since, until=until)
        except BookchatError as exc:  # the period's own checks (``StruggleError``) included
            exit_command(self, exc, as_json=as_json, status=2)
        if as_json:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(table(result))


def _shown(value: str) -> str:
    return repr(value if len(value) <= SHOWN else value[:SHOWN] + "…")


def _book(slug: str) -> Book:
    try:
        book_slug_validator(slug)
    except ValidationError:
        raise BookchatError(f"unknown book {_shown(slug)}: a book slug is 1–64 lowercase letters, digits and inner "
                            "hyphens", code="unknown_book") from None
    book = Book.objects.filter(slug=slug).first()
    if book is None:
        raise BookchatError(f"unknown book {_shown(slug)}: no book is indexed under this slug", code="unknown_book")
    return book


def _day(value: str | None, option: str, *, end: bool = False) -> datetime | None:
    """The start of day ``value`` in the current time zone (``end``: the start of the day after)."""
    if value is None:
        return None
    try:
        if not _DATE.fullmatch(value):
            raise ValueError
        day = date.fromisoformat(value)
    except ValueError:
        raise BookchatError(f"bad {option} {_shown(value)}: expected a date as YYYY-MM-DD",
                            code="bad_date") from None
    try:
        return timezone.make_aware(datetime.combine(day + timedelta(days=1 if end else 0), time.min))
    except OverflowError:
        raise BookchatError(f"bad {option} {value}: past the last day that can be counted",
                            code="bad_date") from None


def _when(moment: str) -> str:
    return moment[:16].replace("T", " ")


def _place(section: dict) -> str:
    place = f"{section['chapter']} › {section['page']}" if section["chapter"] != section["page"] else section["page"]
    return f"{place} › {section['section']}" if section["anchor"] else place


def table(result: dict) -> str:
    """The figures as people read them: a line of totals, a row per section, then where to revise first."""
    totals = result["totals"]
    lines = [f"Book {result['book']!r}, {_when(result['since'])} to {_when(result['until'])}: {totals['questions']} "
             f"questions ({totals['previous']} in the period before), {totals['unplaced']} on no section of the "
             "book.", "",
             f"{'asked':>5} {'sess':>4} {'high':>4} {'med':>4} {'unsure':>6} {'refused':>7} {'withheld':>8} "
             f"{'down':>4} {'wrong':>5} {'fix':>3} {'change':>6}  section"]
    for s in result["sections"]:
        lines.append(f"{s['questions']:>5} {s['sessions']:>4} {s['high']:>4} {s['medium']:>4} {s['unsure']:>6} "
                     f"{s['refused']:>7} {s['withheld']:>8} {s['thumbs_down']:>4} {s['wrong']:>5} "
                     f"{s['needs_doc_fix']:>3} {s['change']:>+6}  {_place(s)}")
    lines += ["", *_topic_lines(result), "", "Where to revise first (score: struggle ÷ questions × sessions):"]
    by_url = {s["url"]: s for s in result["sections"]}
    for entry in result["ranking"][:RANKED]:
        where = _place(by_url[entry["url"]]) if entry["kind"] == "section" else \
            f"topic {entry['n']}: {entry['label']}"
        lines.append(f"{entry['rank']:>3}. {entry['score']:>7.2f}  {where} "
                     f"({entry['struggle']} in {entry['questions']} questions, {entry['sessions']} sessions)")
    if not result["ranking"]:
        lines.append("  nothing: no question of the period was answered badly.")
    elif len(result["ranking"]) > RANKED:
        lines.append(f"  … and {len(result['ranking']) - RANKED} more (--json lists them all).")
    return "\n".join(lines)


def _topic_lines(result: dict) -> list[str]:
    computed = result["topics_computed"]
    if computed is None:
        return ["Topics: not computed yet (they are, daily and on demand in the admin)."]
    lines = [f"Topics of {computed['questions']} questions from {_when(computed['since'])} to "
             f"{_when(computed['until'])} (computed {_when(computed['at'])}; {computed['unclustered']} in no topic):"]
    for topic in result["topics"]:
        lines.append(f"{topic['n']:>3}. {topic['questions']:>5} questions, {topic['sessions']} sessions, "
                     f"{topic['unsure']} unsure, {topic['refused']} refused  {topic['label']}")
    return lines
