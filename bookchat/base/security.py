"""Transport and browser security: the HTTPS settings derived from ``BOOKCHAT_HTTPS`` and friends, and a
Content-Security-Policy on every response (Django 5.2 has no CSP of its own; ``SecurityMiddleware`` already
sends nosniff, Referrer-Policy and Cross-Origin-Opener-Policy, and HSTS once HTTPS is on).

Our own pages use no inline script or style, so they get a strict policy. Django's admin and the Swagger
UI at ``/api/v1/docs`` are templates we don't own that put ``style`` attributes and ``<style>`` blocks in
their pages, so they may use inline *styles*; scripts stay ``'self'`` everywhere (the Swagger UI's start-up
script is served as a file by ``SpectacularSwaggerSplitView``). The widget runs on other sites: what it may
do there is the site's own policy (the manual, "Deploying and running"); our responses to it are JSON and event streams.
"""

from __future__ import annotations

import re

from bookchat.base.conf import setting
from bookchat.base.subpath import configured_prefix

# The probes a load balancer or an orchestrator sends, and Prometheus' scrape (``bookchat.scraping``, which needs
# its token): exempt from the HTTPS redirect, and answered whatever the Host header (``ProbesByAddressMiddleware``).
PROBE_PATHS = ("/api/v1/health", "/api/v1/ready", "/metrics")

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
INLINE_STYLES_POLICY = CONTENT_SECURITY_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
INLINE_STYLE_PATHS = ("/admin/", "/api/v1/docs")
# A staff session that an LMS launched from a platform registered as trusted (chat.lti): the admin's second factor is
# the LMS's (bookchat.twofactor.login reads it).
LTI_VERIFIED_SESSION = "bookchat_lti_verified"


def content_security_policy(path: str) -> str:
    return INLINE_STYLES_POLICY if path.startswith(INLINE_STYLE_PATHS) else CONTENT_SECURITY_POLICY


class ContentSecurityPolicyMiddleware:
    """Send the policy for the request's path, unless the view set one of its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", content_security_policy(request.path_info))
        return response


def https_settings(bookchat: dict) -> dict:
    """Django's ``SECURE_*`` and cookie settings for the ``BOOKCHAT`` namespace.

    ``HTTPS`` off (``make run`` on http://127.0.0.1): none of them. On: plain HTTP is redirected (but the
    health and readiness checks, which load balancers probe inside the network), cookies are secure-only and
    HSTS is sent.
    Behind a TLS-terminating proxy, ``PROXY_SSL_HEADER`` names the header the proxy sets to ``https`` (only
    trust one that the proxy always overwrites: a client could send it too).
    """
    https = bool(bookchat["HTTPS"])
    prefix = configured_prefix(bookchat)  # Django matches the exemptions against the path with the sub-path in front
    values = {
        "SECURE_SSL_REDIRECT": https,
        "SECURE_REDIRECT_EXEMPT": [rf"^{re.escape((prefix + path).lstrip('/'))}$" for path in PROBE_PATHS],
        "SESSION_COOKIE_SECURE": https,
        "CSRF_COOKIE_SECURE": https,
        "LANGUAGE_COOKIE_SECURE": https,
        "SECURE_HSTS_SECONDS": bookchat["HSTS_SECONDS"] if https else 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": bool(bookchat["HSTS_INCLUDE_SUBDOMAINS"]),
        "SECURE_HSTS_PRELOAD": bool(bookchat["HSTS_PRELOAD"]),
        "SECURE_PROXY_SSL_HEADER": None,
        # Preloading is a commitment the domain's owner makes by submitting it to the browsers' list; sending
        # the directive without that decision would let anyone submit the domain. So it is opt-in, and the
        # deployment check's reminder about it (W021) is silenced until it is chosen.
        "SILENCED_SYSTEM_CHECKS": [] if bookchat["HSTS_PRELOAD"] else ["security.W021"],
    }
    header = str(bookchat["PROXY_SSL_HEADER"]).strip()
    if header:
        values["SECURE_PROXY_SSL_HEADER"] = ("HTTP_" + header.upper().replace("-", "_"), "https")
    return values


class ProbesByAddressMiddleware:
    """Load balancers and orchestrators probe a node by its address (``Host: 10.0.0.5:8000``), which
    ``ALLOWED_HOSTS`` rightly refuses everywhere else with a 400. The two probes (GET or HEAD) answer whatever
    the Host: their responses name no host (no link, no redirect, no cookie). Placed before the middleware that
    reads the host (sessions, ``CommonMiddleware``, CSRF), after the ones that only add headers, so a probe's
    response keeps the security headers and its policy; every other request still has its host checked."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info in PROBE_PATHS and request.method in ("GET", "HEAD"):
            from django.urls import resolve

            match = resolve(request.path_info)
            response = match.func(request, *match.args, **match.kwargs)
            return response.render() if hasattr(response, "render") else response
        return self.get_response(request)


class WithoutTraceback:
    """A logging filter: the record keeps its message but not its traceback. Django logs a request whose Host header
    is not in ALLOWED_HOSTS at ERROR with the full traceback; the message already says which host and what to add,
    and scanners that probe a public server by its address would fill the log with tracebacks."""

    def filter(self, record) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


def client_ip(request) -> str:
    """The client's IP for rate limits, the audit trail's hashed address and login lockouts: the socket's peer,
    or with ``TRUSTED_PROXIES`` = n the address the n-th proxy from the right of ``X-Forwarded-For`` saw
    (addresses further left can be forged by the client)."""
    proxies = setting("TRUSTED_PROXIES")
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [part for part in forwarded if part]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]
