"""The forms of the course staff's admin pages (``audit.handoff_admin``, ``audit.staff_answer_admin``): a reply to
a hand-off, a decline, a staff answer; and the preview of an answer as the student will read it.

The forms check the shape of what was typed (required, at most so many characters); the services check the rest
(``audit.handoffs``, ``audit.staff_answer_actions``: each citation a section of the book, each ``[n]`` one of
them) and their refusals are put on the form's field they name (``refusal_on``), so one page says everything that
is wrong and nothing is saved. Citations are typed one a line: a section's URL as the book's site shows it, or a
passage id (what the section search puts there).
"""

from __future__ import annotations

from django import forms

from audit.handoffs import MAX_REASON_CHARS
from bookchat.base.conf import setting
from bookchat.base.errors import RequestError
from chat.pipeline import staff_answers
from chat.pipeline.rendering import render_answer
from ingestion.models import Book

CITATIONS_HELP = ("One a line: a section's URL as the book's site shows it (or a passage id). The first line is "
                  "[1] in the answer, the second [2]…")
ANSWER_HELP = "Markdown. [1] cites the first section below, [2] the second… HTML is shown as text."


class CitationsField(forms.CharField):
    """Sections, one a line, as a list of references (blank lines dropped)."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 80, "spellcheck": "false"})

    def to_python(self, value) -> list[str]:
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

    def validate(self, value) -> None:
        if len(value) > staff_answers.MAX_CITATIONS:
            raise forms.ValidationError(f"Cite at most {staff_answers.MAX_CITATIONS} sections.")

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list | tuple) else value


def _answer_field() -> forms.CharField:
    return forms.CharField(label="Answer", help_text=ANSWER_HELP, max_length=staff_answers.MAX_ANSWER_CHARS,
                           strip=True, widget=forms.Textarea(attrs={"rows": 12, "cols": 80}))


class ReplyForm(forms.Form):
    answer = _answer_field()
    citations = CitationsField(label="Sections cited", help_text=CITATIONS_HELP, required=False)
    keep = forms.BooleanField(label="Keep as a staff answer", required=False,
                              help_text="Serve this reply to later students who ask the same thing.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["keep"].initial = setting("STAFF_ANSWERS")


class DeclineForm(forms.Form):
    reason = forms.CharField(label="Reason", max_length=MAX_REASON_CHARS,
                             help_text="The student reads it instead of an answer.",
                             widget=forms.Textarea(attrs={"rows": 3, "cols": 80}))


class StaffAnswerForm(forms.Form):
    question = forms.CharField()  # made in __init__: its limit is a setting's (``MAX_QUESTION_CHARS``)
    answer = _answer_field()
    citations = CitationsField(label="Sections cited", help_text=CITATIONS_HELP, required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["question"] = forms.CharField(
            label="Question", max_length=setting("MAX_QUESTION_CHARS"),
            help_text="Later questions that ask the same thing get this answer.",
            widget=forms.Textarea(attrs={"rows": 2, "cols": 80}))


def refusal_on(form: forms.Form, exc: RequestError) -> None:
    """A service's refusal on the form: on the field it names, else above the form."""
    form.add_error(exc.field if exc.field in form.fields else None, exc.message)


def preview(book: Book, answer: str, refs: list[str]) -> dict:
    """``answer`` as the student will read it: rendered through the answers' sanitiser with its citations linked;
    with what is wrong with the citations, if anything (``error``)."""
    try:
        cited, error = staff_answers.cite(book, refs), ""
    except RequestError as exc:
        cited, error = [], exc.message
    text = (answer or "")[:staff_answers.MAX_ANSWER_CHARS]
    return {"html": render_answer(text, staff_answers.cards(cited)), "error": error,
            "citations": [{"n": c["n"], "heading_path": c["heading_path"], "url": c["url"]} for c in cited]}
