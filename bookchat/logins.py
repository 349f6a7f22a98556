"""Admin logins that resist guessing: failed logins are counted per user name and, apart from it, per client
address; after ``LOGIN_FAILURES`` of either, that name or address is locked out for ``LOGIN_LOCKOUT_MINUTES``.

django-axes does the counting: it is the maintained choice, and it counts inside Django's authentication
backend, so every login form that calls ``authenticate(request=…)`` is covered (the admin's, with or without the
authenticator code) and nothing can log in around it. What we decided on top of it:

- The address is ``bookchat.base.security.client_ip``, the one rate limits use: behind ``TRUSTED_PROXIES`` proxies the
  address the nearest trusted proxy saw, never a header value the client could have written itself.
- Name and address are counted apart. Thirty guesses at ``admin`` from thirty addresses stop after five, and so
  do thirty names tried from one address. The price: anyone who knows a staff user name can lock that name out
  for a while; ``manage.py lockouts --lift NAME`` ends it, and the user's other sessions are not touched.
- A lockout lasts from the last failed attempt (failures while locked out extend it); a successful login
  resets the name's and the address's counts. A locked name's correct password is refused like a wrong one.
- The locked-out page says plainly what happened and for how long, with status 429 and ``Retry-After``.
- What an operator reads: every failure is a row of "Access failures" in the admin (name, address, browser,
  time, whether it was locked out), every success one of "Access logs", and each failure a WARNING line of
  the ``axes`` logger; ``manage.py lockouts`` lists who is locked out now.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from bookchat.base.conf import setting


def axes_settings(bookchat: dict) -> dict:
    """django-axes' settings from ours (``settings.py`` adds them to its globals)."""
    return {
        "AXES_FAILURE_LIMIT": bookchat["LOGIN_FAILURES"],
        "AXES_COOLOFF_TIME": timedelta(minutes=bookchat["LOGIN_LOCKOUT_MINUTES"]),
        "AXES_LOCKOUT_PARAMETERS": ["username", "ip_address"],  # each on its own, not the pair
        "AXES_RESET_ON_SUCCESS": True,
        "AXES_CLIENT_IP_CALLABLE": "bookchat.base.security.client_ip",
        "AXES_LOCKOUT_CALLABLE": "bookchat.logins.locked_out",
        "AXES_ENABLE_ACCESS_FAILURE_LOG": True,
        "AXES_SENSITIVE_PARAMETERS": ["password", "otp_token"],  # never copied into the failure records
    }


def lockout_minutes() -> int:
    return setting("LOGIN_LOCKOUT_MINUTES")


def locked_out(request, original_response=None, credentials=None):
    """The page a locked-out login gets instead of the login form's answer (``AXES_LOCKOUT_CALLABLE``)."""
    from django.contrib import admin
    from django.template.response import TemplateResponse

    minutes = lockout_minutes()
    context = {**admin.site.each_context(request), "title": "Too many failed logins", "minutes": minutes,
               "failures": setting("LOGIN_FAILURES")}
    response = TemplateResponse(request, "admin/locked_out.html", context, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response.render()


@dataclass
class Lockout:
    """Failed logins counted against one user name or one address within the lockout period."""

    kind: str  # "user" or "address"
    value: str
    failures: int
    last_failure: datetime
    locked: bool
    until: datetime | None

    def as_dict(self) -> dict:
        return {**asdict(self), "last_failure": self.last_failure.isoformat(),
                "until": self.until.isoformat() if self.until else None}


def current_lockouts(*, include_unlocked: bool = False) -> list[Lockout]:
    """The names and addresses locked out now (with ``include_unlocked``, also those with failures short of it)."""
    from axes.models import AccessAttempt
    from django.db.models import Max, Sum

    period = timedelta(minutes=lockout_minutes())
    limit = setting("LOGIN_FAILURES")
    recent = AccessAttempt.objects.filter(attempt_time__gte=timezone.now() - period)
    found = []
    for kind, field in (("user", "username"), ("address", "ip_address")):
        rows = recent.exclude(**{f"{field}__isnull": True}).values(field).annotate(
            failures=Sum("failures_since_start"), last=Max("attempt_time")).order_by("-last")
        for row in rows:
            locked = row["failures"] >= limit
            if locked or include_unlocked:
                found.append(Lockout(kind, row[field], row["failures"], row["last"], locked,
                                     row["last"] + period if locked else None))
    return found


def lift(*, username: str | None = None, address: str | None = None) -> int:
    """Forget the failed logins of a user name, of an address, or (neither given) all of them; how many records."""
    from axes.utils import reset

    if username is None and address is None:
        return reset()
    return reset(username=username) if username is not None else reset(ip=address)
