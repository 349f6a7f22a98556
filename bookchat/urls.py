"""URL routes: the landing page, the REST API under /api/v1/, and the admin."""

from django.contrib import admin
from django.urls import include, path

from bookchat import views

admin.site.site_header = "bookchat"
admin.site.site_title = "bookchat admin"

urlpatterns = [
    path("", views.home, name="home"),
    path("api/v1/", include("chat.urls")),
    path("admin/", admin.site.urls),
]
