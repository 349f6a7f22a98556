"""``manage.py ask "question"``: ask a book from the shell, through the same pipeline as the API.

Prints the answer, its sources and confidence, or with ``--json`` the API's response object.
Exit status: 0 answered (a "not covered" answer included), 1 the answer was withheld by the
grounding check, 2 the question or the options are wrong, or the book is unknown/unavailable.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from bookchat.base.errors import BookchatError
from chat.channels.error_responses import error_reply
from chat.channels.responses import answer_data
from chat.channels.serializers import validate_ask
from chat.pipeline.answering import answer_question
from chat.pipeline.answers import Answer


class Command(BaseCommand):
    help = "Ask a book a question and print the cited answer."
    requires_system_checks = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the book's version here, not Django's.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="The question, in quotes.")
        parser.add_argument("--selected-text", dest="selected_text", default="",
                            help="A passage of the book the question is about.")
        parser.add_argument("--book", help="Book slug (needed when several books are indexed).")
        parser.add_argument("--version", help="A version of a versioned book (name, label or URL path; default: "
                                               "the latest).")
        parser.add_argument("--locale", help="Ask the book's translation in this locale (default: its default locale).")
        parser.add_argument("--chapter", help="Only search this chapter (category label, folder, page path or slug).")
        parser.add_argument("--session", dest="session_id", help="Continue the conversation with this session id.")
        parser.add_argument("--max-results", dest="max_results", type=int, help="Sources to retrieve (1–10).")
        parser.add_argument("--json", action="store_true", help="Print the response as one JSON object.")

    def handle(self, *args, **options) -> None:
        data = {key: options[key] for key in ("selected_text", "book", "version", "locale", "chapter", "session_id",
                                                   "max_results")
                if options.get(key) not in (None, "")}
        data["question"] = options["question"]
        try:
            answer = answer_question(validate_ask(data, channel="cli"))
        except BookchatError as exc:
            if options["json"]:
                self.stdout.write(json.dumps(error_reply(exc).body, ensure_ascii=False))
            else:
                self.stderr.write(f"ask: {exc.message}")
            sys.exit(2)
        if options["json"]:
            self.stdout.write(json.dumps(answer_data(answer), ensure_ascii=False))
        else:
            self.stdout.write(render_answer(answer))
        if answer.flagged_for_review:
            sys.exit(1)


def render_answer(a: Answer) -> str:
    lines = [a.answer, ""]
    if a.notice:
        lines += [f"Note: {a.notice}", ""]
    if a.disclaimer:
        lines += [a.disclaimer, ""]
    if a.refused or a.flagged_for_review:
        lines.append("Closest sections:")
        lines += [f"  - {s.heading_path}  {s.url}" for s in a.suggestions]
    else:
        lines.append("Sources:")
        for s in a.sources:
            mark = "*" if s.cited else " "
            lines.append(f" {mark}[{s.n}] {s.heading_path} (score {s.score:.2f})\n       {s.url}")
    if a.confidence_note:
        lines += ["", a.confidence_note]
    lines += ["", f"Confidence: {a.confidence:.2f} ({a.confidence_level}) · generator: {a.generator} · "
              f"{a.response_time_ms} ms · session {a.session_id}"]
    return "\n".join(lines)
