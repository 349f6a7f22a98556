"""Project-wide error pages: JSON under /api/, Django's own elsewhere, and a 503 for a database outage."""

import sys

from django.http import JsonResponse
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error

from bookchat.outage import DATABASE_ERRORS, outage_response


def not_found(request, exception):
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not_found", "message": f"there is no API endpoint {request.path[:200]}",
                             "field": None}, status=404)
    return page_not_found(request, exception)


def server_error(request):
    """Django calls this while handling the uncaught exception (outside DEBUG), so ``sys.exc_info`` holds it:
    a database outage outside the API views (in a page, in a middleware) is a 503 rather than a 500."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_ERRORS):
        return outage_response(request, exc)
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "internal_error", "message": "bookchat failed unexpectedly; the error was logged",
                             "field": None}, status=500)
    return django_server_error(request)
