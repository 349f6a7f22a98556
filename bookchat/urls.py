"""URL routes: the chat page, the REST API under /api/v1/ (each app's own routes: chat's, and ingestion's
publishing, to which the project gives chat's keys as its callers), the MCP server at /mcp, and the admin (with its
two-factor pages and login, ``bookchat.twofactor``)."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path, re_path, reverse_lazy
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import RedirectView

from audit.api.urls import api_routes as handoff_api_routes
from audit.api.urls import page_routes as handoff_page_routes
from audit.privacy.views import privacy_page
from bookchat.readiness import ReadyView
from bookchat.scraping import metrics_view
from bookchat.twofactor import setup_pages
from bookchat.twofactor.login import TwoFactorAuthenticationForm
from bookchat.views import api_not_found, interface_catalogue
from chat.channels import page
from chat.channels.access import SecretKeyAuthentication
from chat.channels.mcp_http import McpView
from chat.channels.throttling import PublishThrottle
from ingestion.api.urls import publishing_routes

admin.site.site_header = "bookchat"
admin.site.site_title = "bookchat admin"
admin.site.login_form = TwoFactorAuthenticationForm  # asks for the authenticator code too
admin.site.login_template = "admin/twofactor/login.html"
# "View site" is the chat page, with the trailing slash under a prefix (Django's default gives the bare prefix).
admin.site.site_url = reverse_lazy("chat")

urlpatterns = [
    path("", page.chat_page, name="chat"),
    path("new", page.new_conversation, name="chat-new"),
    path("answers/<uuid:answer_id>", page.answer_fragment, name="chat-answer"),
    path("answers/<uuid:answer_id>/feedback", page.feedback, name="chat-feedback"),
    path("", include(handoff_page_routes)),  # "Ask the course staff" without JavaScript (audit's)
    path("privacy/", privacy_page, name="privacy"),  # what bookchat keeps, from audit.privacy's inventory
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the page's language switch (a cookie)
    path("api/v1/ready", ReadyView.as_view(), name="api-ready"),  # the deployment's, not an app's
    path("api/v1/interface", interface_catalogue, name="api-interface"),  # the widget's strings, per language
    path("api/v1/", include("chat.urls")),
    path("api/v1/", include(handoff_api_routes)),  # hand-offs to the course staff (audit's)
    # Publishing is ingestion's; its callers are chat's keys: a secret key in a header (nothing else), publishes
    # limited per key.
    path("api/v1/", include(publishing_routes(authentication=SecretKeyAuthentication, throttle=PublishThrottle))),
    re_path(r"^api/", csrf_exempt(api_not_found)),  # a JSON 404 for any other path under /api/, any method
    path("lti/", include("chat.lti.urls")),  # launches from a course's LMS (LTI 1.3)
    path("mcp", McpView.as_view(), name="mcp"),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; off (404) unless BOOKCHAT_METRICS_TOKEN is set
    path("admin/twofactor/", include(setup_pages.urlpatterns)),  # before the admin's own catch-all
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages that name none (the admin's): point them at ours, not a 404.
    path("favicon.ico", RedirectView.as_view(url=static("bookchat/favicon.svg"), permanent=True)),
]

handler404 = "bookchat.views.not_found"
handler500 = "bookchat.views.server_error"
