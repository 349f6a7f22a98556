"""URL routes: the chat page, the REST API under /api/v1/, and the admin."""

from django.contrib import admin
from django.urls import include, path

from chat import views

admin.site.site_header = "bookchat"
admin.site.site_title = "bookchat admin"

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("new", views.new_conversation, name="chat-new"),
    path("answers/<uuid:answer_id>", views.answer_fragment, name="chat-answer"),
    path("answers/<uuid:answer_id>/feedback", views.feedback, name="chat-feedback"),
    path("api/v1/", include("chat.urls")),
    path("admin/", admin.site.urls),
]

handler404 = "bookchat.views.not_found"
