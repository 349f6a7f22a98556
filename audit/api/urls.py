"""The routes of the hand-off API and of the page's hand-off form, for the project to mount (``bookchat.urls``):
``api_routes`` under ``/api/v1/`` beside chat's (with a student's "My data"),
``page_routes`` beside the chat page (its form posts there)."""

from __future__ import annotations

from django.urls import path

from audit.api.pages import hand_off_from_the_page
from audit.api.views import HandoffFormView, HandoffStatusView, HandoffView
from audit.privacy.views import MyDataEraseView, MyDataView

api_routes = [
    # <str:…>: a malformed answer id is "not on record" (the view's 404 unknown_answer), not a missing endpoint
    path("answers/<str:answer_id>/handoff", HandoffView.as_view(), name="api-handoff"),
    path("handoffs/<str:token>", HandoffStatusView.as_view(), name="api-handoff-status"),
    path("handoff-form", HandoffFormView.as_view(), name="api-handoff-form"),
    path("my-data", MyDataView.as_view(), name="api-my-data"),  # a student's own data (audit.privacy)
    path("my-data/erase", MyDataEraseView.as_view(), name="api-my-data-erase"),
]

page_routes = [
    path("answers/<uuid:answer_id>/handoff", hand_off_from_the_page, name="chat-handoff"),
]
