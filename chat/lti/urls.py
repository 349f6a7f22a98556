"""The LTI routes, mounted under ``/lti/`` by the project."""

from django.urls import path

from chat.lti import views

urlpatterns = [
    path("login", views.oidc_login, name="lti-login"),
    path("launch", views.launch, name="lti-launch"),
    path("deep-link", views.launch, name="lti-deep-link"),
    path("deep-link/pick", views.deep_link_pick, name="lti-deep-link-pick"),
    path("jwks", views.jwks, name="lti-jwks"),
    path("privacy", views.privacy_page, name="lti-privacy"),
]
