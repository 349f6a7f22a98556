"""Where django-q2 queues tasks: ``BOOKCHAT_Q_BROKER`` is ``postgres`` (its ORM broker, the default: nothing
more to run) or a Redis URL (its Redis broker, for several worker nodes that shouldn't poll the database).

Decisions:
- Schedules (the upload sweep, the session purge, audit retention) and task results stay in Postgres whatever
  the broker. django-q2's scheduler takes due schedules with ``SELECT … FOR UPDATE`` and moves their next run
  in the same transaction, so each runs once however many worker nodes race for it.
- A task is delivered once. The ORM broker locks a taken task for ``retry`` seconds (3700, past the longest
  upload) and Redis pops it (``BLPOP``); either way a task whose worker is SIGKILLed is not run again by
  the broker (``max_attempts`` 1). The upload's heartbeat notices it instead: the sweep fails the job and
  staff use Retry (``ingestion.uploads.jobs``). One mechanism for both brokers.
- The URL is checked at start (``bookchat.checks``): settings fall back to Postgres on a bad value only so
  that the check, not an import error, names it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from bookchat.base.errors import ConfigurationError

POSTGRES = "postgres"
REDIS_SCHEMES = ("redis", "rediss", "unix")


def q_cluster_broker(value: str) -> dict:
    """The broker keys of ``Q_CLUSTER`` for a ``BOOKCHAT_Q_BROKER`` value, or ConfigurationError."""
    text = (value or "").strip()
    if text.lower() in ("", POSTGRES):
        return {"orm": "default"}
    problem = _url_problem(text)
    if problem:
        raise ConfigurationError(f"BOOKCHAT_Q_BROKER={text!r} {problem}", code="bad_setting")
    return {"redis": text}


def q_cluster_broker_or_default(value: str) -> dict:
    try:
        return q_cluster_broker(value)
    except ConfigurationError:
        return {"orm": "default"}


def broker_name(value: str) -> str:
    """``postgres`` or ``redis``, for reports (never the URL: it may hold a password)."""
    return "redis" if "redis" in q_cluster_broker_or_default(value) else POSTGRES


def _url_problem(text: str) -> str:
    wanted = "is neither `postgres` nor a Redis URL like redis://host:6379/0"
    try:
        url = urlsplit(text)
        port = url.port  # ValueError when it is not a number in range
    except ValueError:
        return f"{wanted} (its port is not a number from 1 to 65535)"
    if url.scheme not in REDIS_SCHEMES:
        return wanted
    if url.scheme == "unix":
        return "" if url.path else f"{wanted} (unix:// needs the socket's path)"
    if not url.hostname:
        return f"{wanted} (it names no host)"
    if port == 0:
        return f"{wanted} (its port is not a number from 1 to 65535)"
    database = url.path.strip("/")
    if database and not database.isdigit():
        return f"{wanted} (the path is the database number, e.g. /0)"
    return ""


def queue_in_database() -> bool:
    """True when tasks wait in Postgres (the ORM broker): enqueueing is then part of the caller's transaction."""
    from django.conf import settings

    return "orm" in settings.Q_CLUSTER
