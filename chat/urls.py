"""Routes of chat's REST API, mounted under /api/v1/ (the project routes the rest of it: ``bookchat.urls``)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from chat.channels import api

urlpatterns = [
    path("ask", api.AskView.as_view(), name="api-ask"),
    path("ask/stream", api.AskStreamView.as_view(), name="api-ask-stream"),
    path("search", api.SearchView.as_view(), name="api-search"),
    path("search/<uuid:search_id>/opened", api.SearchOpenedView.as_view(), name="api-search-opened"),
    path("answers/<uuid:answer_id>/feedback", api.FeedbackView.as_view(), name="api-feedback"),
    path("books", api.BooksView.as_view(), name="api-books"),
    path("books/<str:slug>", api.BookView.as_view(), name="api-book"),
    path("health", api.HealthView.as_view(), name="api-health"),
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as a file, so the docs page needs no inline script.
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
