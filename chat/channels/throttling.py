"""Rate limits on questions: per API key, per client IP, per chat-page session.

Counters live in Postgres (``RateCounter``), so every gunicorn worker and every machine
shares them; one statement counts the request in all of its buckets and returns the counts
(an upsert that restarts a bucket's count when its window has ended). A window opens with
the first request counted after the last one ended and lasts the rate's period: not the
wall clock's minute or day, so what a caller is allowed never depends on when in the minute
it starts. Fixed windows are simple and exact about ``Retry-After`` (the seconds until the
window ends); a client can burst up to twice the limit across two windows, which is fine.

Buckets by caller:

- publishable key (the widget): the key (``RATE_KEY``) and the visitor's IP on that key
  (``RATE_KEY_IP``), so one visitor can't use up a site's whole allowance;
- secret key: the key (``RATE_KEY``);
- the chat page: its session (``RATE_PAGE``);
- anonymous: the client IP (``RATE_ANONYMOUS``).

Questions are limited (``/ask``, ``/ask/stream`` and the page form), and searches
(``/search``, the page's search form) apart from them, one reader's bucket each
(``RATE_SEARCH``, sized for a search per keystroke), and publishes per publishing key
(``RATE_PUBLISH``); feedback, books and health are not. A rate of "" turns a limit off.
"""

from __future__ import annotations

import math
import time

from django.db import connection
from django.utils.crypto import salted_hmac
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

from bookchat.base.conf import Rate, parse_rate
from bookchat.base.security import client_ip
from chat.channels.access import Client, client_of
from chat.models import RateCounter


class RateLimited(Throttled):
    """Over a limit: DRF answers it 429 with ``Retry-After`` (``chat.channels.error_responses``), and so does the
    page form."""

    def __init__(self, wait: float, rate: Rate, what: str = "questions"):
        self.rate = rate
        retry = max(1, math.ceil(wait))
        super().__init__(detail=f"too many {what} (the limit is {rate.describe()}); try again in {retry} s",
                         code="rate_limited")
        self.wait = retry

    @property
    def retry_after(self) -> int:
        return self.wait


def _ip_tag(request) -> str:
    return salted_hmac("bookchat.rate.client-ip", client_ip(request)).hexdigest()[:20]


def buckets_for(client: Client, request, *, searching: bool = False) -> list[tuple[str, Rate]]:
    """The client's limits (``Client.rate_buckets``, or ``search_buckets`` for a search) that are set."""
    wanted = (client.search_buckets if searching else client.rate_buckets)(_ip_tag(request))
    return [(bucket, rate) for bucket, name in wanted if (rate := parse_rate(name)) is not None]


def count_request(buckets: list[tuple[str, Rate]], *, now: float | None = None, what: str = "questions") -> None:
    """Count one request in each bucket; raise ``RateLimited`` (with the longest wait) if any is over.

    A bucket's window opens with the first request counted in it and lasts the rate's seconds; the first
    request after it ends opens the next one. ``now`` (default: the time) is the only clock read."""
    if not buckets:
        return
    now = time.time() if now is None else now
    values = ", ".join(["(%s, %s, 1)"] * len(buckets))
    params = [p for bucket, rate in buckets for p in (bucket, now + rate.seconds)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO chat_ratecounter (bucket, window_ends, count) VALUES {values} "
            "ON CONFLICT (bucket) DO UPDATE SET "
            "count = CASE WHEN chat_ratecounter.window_ends > %s THEN chat_ratecounter.count + 1 ELSE 1 END, "
            "window_ends = CASE WHEN chat_ratecounter.window_ends > %s THEN chat_ratecounter.window_ends "
            "ELSE EXCLUDED.window_ends END "
            "RETURNING bucket, count, window_ends", [*params, now, now])
        counts = {bucket: (count, ends) for bucket, count, ends in cursor.fetchall()}
    over = [(counts[bucket][1] - now, rate) for bucket, rate in buckets if counts[bucket][0] > rate.limit]
    if over:
        raise RateLimited(*max(over, key=lambda item: item[0]), what)


def check_rate(request, client: Client, *, searching: bool = False) -> None:
    count_request(buckets_for(client, request, searching=searching), what="searches" if searching else "questions")


def purge_old_counters(*, older_than_seconds: int = 86400) -> int:
    deleted, _ = RateCounter.objects.filter(window_ends__lt=time.time() - older_than_seconds).delete()
    return deleted


class QuestionThrottle(BaseThrottle):
    """DRF's hook for the limits above: a question over a limit raises ``RateLimited`` (429). CORS preflights
    are not questions."""

    def allow_request(self, request, view) -> bool:
        if request.method != "OPTIONS":
            check_rate(request, client_of(request))
        return True


class PublishThrottle(BaseThrottle):
    """Publishes (dry runs included) per publishing key (``RATE_PUBLISH``)."""

    def allow_request(self, request, view) -> bool:
        client = client_of(request)
        rate = parse_rate("RATE_PUBLISH")
        if client.key is not None and rate is not None:
            count_request([(f"publish:key:{client.key.pk}", rate)], what="publishes")
        return True


class SearchThrottle(BaseThrottle):
    """A search's limit (``RATE_SEARCH``, one reader's): searches never use up a reader's questions."""

    def allow_request(self, request, view) -> bool:
        if request.method != "OPTIONS":
            check_rate(request, client_of(request), searching=True)
        return True
