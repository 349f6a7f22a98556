"""URL routes: the admin for now; the chat page and the API join as they land."""

from django.contrib import admin
from django.urls import path

from bookchat import views

admin.site.site_header = "bookchat"
admin.site.site_title = "bookchat admin"

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
]
