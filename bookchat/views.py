"""Project-wide error pages: JSON under /api/, Django's own elsewhere, and a 503 for a database outage; and the
interface's strings for the widget (``interface_catalogue``), which runs on other sites' pages."""

import sys

from django.http import JsonResponse
from django.views.decorators.http import require_GET
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error

from bookchat.base.errors import DATABASE_ERRORS, INTERNAL_ERROR, error_body
from bookchat.base.languages import interface_catalogue as catalogue_for
from bookchat.base.outage import outage_response


def api_not_found(request, *args, **kwargs) -> JsonResponse:
    """Every path under /api/ that no endpoint matches, whatever the method, DEBUG or not (routed last in
    ``bookchat.urls``, so Django's HTML 404 page never answers an API client)."""
    return JsonResponse(error_body("not_found", f"there is no API endpoint {request.path[:200]}"), status=404)


def not_found(request, exception):
    if request.path_info.startswith("/api/"):
        return api_not_found(request)
    return page_not_found(request, exception)


def server_error(request):
    """Django calls this while handling the uncaught exception (outside DEBUG), so ``sys.exc_info`` holds it:
    a database outage outside the API views (in a page, in a middleware) is a 503 rather than a 500."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_ERRORS):
        return outage_response(request, exc)
    if request.path_info.startswith("/api/"):
        return JsonResponse(error_body("internal_error", INTERNAL_ERROR), status=500)
    return django_server_error(request)


@require_GET
def interface_catalogue(request) -> JsonResponse:
    """``GET /api/v1/interface?lang=es``: the widget's strings in the reader's language (English for a language
    without a catalogue). Public and the same for everyone, so readable from any origin without a key or cookies."""
    response = JsonResponse(catalogue_for(request.GET.get("lang", "")), json_dumps_params={"ensure_ascii": False})
    response["Access-Control-Allow-Origin"] = "*"
    response["Cache-Control"] = "public, max-age=3600"
    return response
