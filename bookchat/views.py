"""Project-wide error pages: a JSON 404 under /api/, Django's own elsewhere."""

from django.http import JsonResponse
from django.views.defaults import page_not_found


def not_found(request, exception):
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not_found", "message": f"there is no API endpoint {request.path[:200]}",
                             "field": None}, status=404)
    return page_not_found(request, exception)
