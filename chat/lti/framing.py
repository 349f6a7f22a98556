"""A launched session inside its LMS's frame.

Every page of bookchat sends ``frame-ancestors 'none'`` and ``X-Frame-Options: DENY`` (``bookchat.base.security``).
A session that an LTI launch started (``LAUNCH_SESSION``: its platform's origins) gets, on every response, a
``frame-ancestors`` naming exactly those origins and no ``X-Frame-Options``; everything else stays unframeable.

Its cookies (the session's, the CSRF token's and the language switch's) are sent ``SameSite=None; Secure;
Partitioned`` (CHIPS): a browser that blocks third-party cookies still keeps a partitioned one, in a jar of the LMS's
site only. Python 3.11's cookies know no ``Partitioned`` attribute: ``PartitionedMorsel`` adds it. The launch POST
itself carries no cookie (its state is in the database), so the first cookie is the one this middleware partitions.

One page outside a launched session may be framed too: the privacy page (``/privacy/``), which the data-privacy
launch leads to inside the LMS's frame, by every registered platform's origins (``framed_by_platforms``; see
``audit.privacy.views``).
"""

from __future__ import annotations

from http.cookies import Morsel

from django.conf import settings

from bookchat.base.security import content_security_policy

LAUNCH_SESSION = "bookchat_lti"  # {"platform": pk, "origins": [...], "role": "learner"|"staff"}


class PartitionedMorsel(Morsel):
    def OutputString(self, attrs=None) -> str:  # noqa: N802 (Morsel's name)
        return super().OutputString(attrs) + "; Partitioned"


def partition(response, name: str) -> None:
    morsel = response.cookies.get(name)
    if morsel is None or isinstance(morsel, PartitionedMorsel):
        return
    cookie = PartitionedMorsel()
    cookie.set(morsel.key, morsel.value, morsel.coded_value)
    cookie.update({key: value for key, value in morsel.items() if value})
    cookie["secure"], cookie["samesite"] = True, "None"
    dict.__setitem__(response.cookies, name, cookie)


def frame_policy(path: str, origins: list[str]) -> str:
    return content_security_policy(path).replace("frame-ancestors 'none'", "frame-ancestors " + " ".join(origins))


def registered_origins() -> list[str]:
    """The origins of every active registered platform (as ``LtiPlatform.origins`` finds a platform's)."""
    from lti_tool.models import LtiRegistration

    from chat.lti.models import LtiPlatform

    found = []
    for registration in LtiRegistration.objects.active().select_related("bookchat"):
        platform = getattr(registration, "bookchat", None) or LtiPlatform(registration=registration)
        found += [origin for origin in platform.origins() if origin not in found]
    return found


def framed_by_platforms(response, path: str):
    """``response`` framed by the registered platforms' origins (none registered: left unframeable)."""
    origins = registered_origins()
    if origins:
        response["Content-Security-Policy"] = frame_policy(path, origins)
        response.xframe_options_exempt = True  # Django's X-Frame-Options middleware then adds no DENY
    return response


class LaunchedFramingMiddleware:
    """For a launched session: framed by its platform, cookies partitioned (the module's docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        session = getattr(request, "session", None)
        launched = session.get(LAUNCH_SESSION) if session is not None else None
        if not launched:
            return response
        origins = launched.get("origins") or []
        if origins:
            response["Content-Security-Policy"] = frame_policy(request.path_info, origins)
            if "X-Frame-Options" in response:
                del response["X-Frame-Options"]
        for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME, settings.LANGUAGE_COOKIE_NAME):
            partition(response, name)
        return response
