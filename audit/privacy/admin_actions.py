"""The audit trail's admin actions on the learners of the selected answers: "Export the learner's data" (one JSON
document, downloaded) and "Erase the learner's data" (after a confirmation page), for staff with the permission
``audit.manage_learner_data``; each is written to the admin log (``LogEntry``) on the selected rows, an erasure
named by its tombstone.

The learners are those of the selected rows (their pseudonyms and conversations), expanded as the command expands
one (``audit.privacy.learners``). Rows of no conversation and no pseudonym (an API call without a ``session_id``)
belong to nobody that can be found.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from audit.privacy.erasure import erase_learner, export_learner
from audit.privacy.learners import Learner, expand

PERMISSION = "audit.manage_learner_data"


def learner_of(queryset) -> Learner:
    learner = Learner()
    for session, pseudonym in queryset.values_list("session_id", "learner"):
        if session:
            learner.sessions.add(session)
        if pseudonym:
            learner.pseudonyms.add(pseudonym)
    return expand(learner)


def export_action(modeladmin, request, queryset):
    learner = learner_of(queryset)
    if learner.empty:
        messages.warning(request, "The selected answers belong to no conversation or learner: nothing to export.")
        return None
    document = export_learner(learner=learner)
    LogEntry.objects.log_actions(request.user.pk, list(queryset), CHANGE, "Exported the learner's data.")
    response = HttpResponse(json.dumps(document, default=str, ensure_ascii=False, indent=2),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="bookchat-learner-{timezone.now():%Y%m%d-%H%M}.json"'
    response["Cache-Control"] = "private, no-store"
    return response


def erase_action(modeladmin, request, queryset):
    learner = learner_of(queryset)
    if learner.empty:
        messages.warning(request, "The selected answers belong to no conversation or learner: nothing to erase.")
        return None
    if request.POST.get("confirmed") != "yes":
        document = export_learner(learner=learner)
        return TemplateResponse(request, "admin/audit/privacy_erase.html", {
            **modeladmin.admin_site.each_context(request), "title": "Erase the learner's data?",
            "opts": modeladmin.model._meta, "queryset": queryset, "action": request.POST.get("action", ""),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "counts": {"conversations": len(document["conversations"]), "audit rows": len(document["audit_rows"]),
                       "archived audit rows": len(document["archived_audit_rows"]),
                       "hand-offs": len(document["handoffs"]), "feedback": len(document["feedback"])}})
    ids = list(queryset.values_list("pk", flat=True))
    report = erase_learner(learner=learner)
    rows = list(queryset.model.objects.filter(pk__in=ids))  # as erased: the log copies no question
    LogEntry.objects.log_actions(request.user.pk, rows, CHANGE,
                                 f"Erased the learner's data (erasure {report.erasure}).")
    messages.success(request, f"Erased the learner's data: {report.conversations} conversation(s), "
                              f"{report.audit_rows} audit row(s) (their counts and sections kept), "
                              f"{report.handoffs} hand-off(s). Tombstone {report.erasure}.")
    return None
