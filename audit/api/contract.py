"""The contract of a hand-off: the request (``HandoffRequestSerializer``: an optional note, and an e-mail address only
where the deployment asks for one), what a hand-off answers (``HandoffCreatedSerializer``), what its status URL
reads (``HandoffStatusSerializer``, as ``audit.handoffs.status`` makes it) and what the form asks for
(``form_facts``: the page renders it, the widget reads it from ``GET /handoff-form``).

Decisions:
- The note is the student's text, kept as sent (stripped): markup in it is text, which every page escapes; it is
  never rendered as HTML. Its limit is the model's (``Handoff.NOTE_MAX``), refused as ``note_too_long`` whichever
  way it comes (the API, the page's form, the service).
- ``contact_email`` is a field only while ``BOOKCHAT_HANDOFF_CONTACT_EMAIL`` is on; otherwise it is an unknown
  key like any other. The schema is built per request, so it states which.
- Request bodies refuse unknown keys, and the schema says so (``finish_schema``, a drf-spectacular hook).
"""

from __future__ import annotations

import re

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.fields import empty

from audit.models import Handoff
from bookchat.base.api import StrictSerializer
from bookchat.base.conf import setting
from chat.channels.responses import SourceSerializer
from chat.channels.serializers import TextField, invalid

# An address the staff could write to, as the schema states it (the same pattern checks it).
EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
EMAIL_MAX = 254
_EMAIL = re.compile(EMAIL)
STRICT_COMPONENTS = ("HandoffRequest", "MyDataRequest")  # audit.privacy.views's too


def form_facts() -> dict:
    """What the hand-off form asks for: the note's limit, and whether it asks for an e-mail address."""
    return {"note_max_chars": Handoff.NOTE_MAX, "contact_email": bool(setting("HANDOFF_CONTACT_EMAIL"))}


class NoteField(TextField):
    """The student's note: text (markup kept as text), at most ``Handoff.NOTE_MAX`` characters as sent."""

    def __init__(self, **kwargs):
        super().__init__(required=False, max_length=Handoff.NOTE_MAX, help_text=(
            f"What the student adds for the course staff (optional), at most {Handoff.NOTE_MAX:,} characters. "
            "Plain text: markup in it is kept as text and shown escaped."), **kwargs)

    def check_size(self, data: str) -> None:
        if len(data) > self.max_length:
            raise invalid(f"the note is {len(data):,} characters; at most {self.max_length:,}", "note_too_long")


class ContactEmailField(serializers.CharField):
    """An e-mail address the staff may write to (only while ``BOOKCHAT_HANDOFF_CONTACT_EMAIL`` is on)."""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_null=True, max_length=EMAIL_MAX, trim_whitespace=False,
                         validators=[RegexValidator(EMAIL)], help_text=(
                             "An e-mail address the course staff may write to (optional; asked only where the "
                             "deployment turns it on). Null: none."), **kwargs)

    def run_validation(self, data=empty):
        if data is empty:
            raise serializers.SkipField()
        if data is None:
            return ""
        if not isinstance(data, str):
            raise invalid("contact_email must be a string", "invalid_type")
        if len(data) > EMAIL_MAX:
            raise invalid(f"contact_email is {len(data)} characters long; the limit is {EMAIL_MAX}", "too_long")
        if not _EMAIL.match(data):
            raise invalid("contact_email must be an e-mail address, such as ada@example.org", "invalid_email")
        return data


class HandoffRequestSerializer(StrictSerializer):
    """``{"note"?, "contact_email"?}``: every field optional, so an empty body hands the answer off as it is."""

    order = ("note", "contact_email")

    def get_fields(self):
        fields = {"note": NoteField()}
        if setting("HANDOFF_CONTACT_EMAIL"):
            fields["contact_email"] = ContactEmailField()
        return fields

    def hand_off_arguments(self) -> dict:
        """The checked request as ``audit.handoffs.hand_off`` takes it."""
        data = self.checked()
        return {"note": data.get("note") or "", "contact_email": data.get("contact_email") or ""}


class HandoffCreatedSerializer(serializers.Serializer):
    handoff = serializers.IntegerField(help_text="The hand-off's id.")
    status_url = serializers.CharField(help_text="Where the hand-off's status is, and the staff's reply once they "
                                       "answer (also the `Location` header). It holds an unguessable token: it is "
                                       "the student's way back without a login; keep it.")


class StaffReplySerializer(serializers.Serializer):
    answer = serializers.CharField(help_text="The staff's answer in Markdown, with `[n]` citation markers.")
    answer_html = serializers.CharField(help_text="The answer rendered and sanitised, markers linked to the "
                                        "sections cited.")
    citations = SourceSerializer(many=True, help_text="The sections of the book the reply cites, as source cards.")
    answered_at = serializers.DateTimeField()


class HandoffStatusSerializer(serializers.Serializer):
    """What a hand-off's status URL reads: where it stands, and the course staff's reply or reason."""

    handoff = serializers.IntegerField()
    book = serializers.CharField(help_text="The book's slug.")
    status = serializers.ChoiceField([choice for choice, _ in Handoff.Status.choices], help_text=(
        "`open`: waiting for the course staff; `answered`: see `reply`; `declined`: see `declined_reason`; "
        "`coverage`: the staff noted that the book should cover this, and its authors were told."))
    question = serializers.CharField(help_text="The question whose answer was handed off.")
    note = serializers.CharField(allow_blank=True, help_text="The student's note, as text.")
    asked_at = serializers.DateTimeField(help_text="When it was handed off.")
    answer_id = serializers.UUIDField(help_text="The answer handed off.")
    reply = StaffReplySerializer(allow_null=True, help_text="The staff's answer (null until they answer).")
    declined_reason = serializers.CharField(allow_null=True, help_text="Why the staff declined, for the student.")
    closed_at = serializers.DateTimeField(allow_null=True, help_text="When the staff answered, declined or noted it.")


class HandoffFormSerializer(serializers.Serializer):
    note_max_chars = serializers.IntegerField(help_text="The longest note, in characters.")
    contact_email = serializers.BooleanField(help_text="Whether the form asks for an e-mail address "
                                             "(`contact_email`); when false, sending one is refused as an unknown "
                                             "field.")


def finish_schema(result: dict, generator, request, public) -> dict:
    """drf-spectacular's post-processing hook (``SPECTACULAR_SETTINGS``): the bodies of a hand-off and of "My data"
    refuse unknown keys, as the code does."""
    schemas = result.get("components", {}).get("schemas", {})
    for name in STRICT_COMPONENTS:
        if name in schemas:
            schemas[name]["additionalProperties"] = False
    return result
