"""Rate limits on questions and searches: each student's own, and ceilings against abuse.

A lecture hall asks together: hundreds of students behind one campus address, through one publishable key. So a
question counts first in the student's own bucket — the conversation it continues (the API's and the widget's
``session_id``, ``RATE_CONVERSATION``) or the chat page's session (``RATE_PAGE``) — and then in ceilings sized for
a class, not for one reader: the key (``RATE_KEY``), the address on a publishable key (``RATE_KEY_IP``) or on the
page (``RATE_ADDRESS``). A first question (no conversation yet) counts only in the ceilings, and so does a client
that opens a new conversation per question: the ceilings bound it. API calls without a key count per address
(``RATE_ANONYMOUS``). Buckets by caller: ``chat.channels.access`` (``Client.rate_buckets``).

Searches as a reader types count apart from questions: in the reader's search bucket (their conversation — the
widget sends its id with its searches — or the page session; ``RATE_SEARCH``) and in a ceiling per address (per
key for a secret key, ``RATE_SEARCH_ADDRESS``). Publishes count per publishing key (``RATE_PUBLISH``); feedback,
books and health are not limited. A rate of "" turns a limit off.

Counters live in Postgres (``RateCounter``), so every gunicorn worker and every machine shares them; one statement
counts the request in all of its buckets and returns the counts (an upsert that restarts a bucket's count when its
window has ended). A window opens with the first request counted after the last one ended and lasts the rate's
period: not the wall clock's minute or day, so what a caller is allowed never depends on when in the minute it
starts. Fixed windows are simple and exact about ``Retry-After`` (the seconds until the window ends); a client can
burst up to twice the limit across two windows, which is fine.

Only requests that do work count (``limited``):
- a request is counted after it is validated: a malformed body or a bad field is refused before anything counts;
- a refused request gives its count back: over a limit (429: so a client retrying while limited never lengthens
  its own wait, nor uses up the ceilings its classmates share), or refused before any work by the pipeline — a book
  still being indexed (503 ``book_indexing``), an unknown book or chapter, a key's other book (4xx);
- a request that did its work and then failed (a deadline, 504; an error after the stream began) stays counted.
The give-back lowers exactly the windows the request counted in, so a window that ended meanwhile is left alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection
from django.utils.crypto import salted_hmac
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

from bookchat.base.conf import Rate, parse_rate
from bookchat.base.errors import RequestError
from bookchat.base.security import client_ip
from chat.channels.access import Client, client_of
from chat.models import RateCounter
from chat.pipeline.editions import BookIndexing


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


@dataclass(frozen=True)
class Counted:
    """The windows one request was counted in: (bucket, when its window ends), to give the count back."""

    windows: tuple[tuple[str, float], ...] = ()

    def give_back(self) -> None:
        if not self.windows:
            return
        values = ", ".join(["(%s, %s)"] * len(self.windows))
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE chat_ratecounter SET count = GREATEST(chat_ratecounter.count - 1, 0) "
                f"FROM (VALUES {values}) AS counted (bucket, window_ends) "
                "WHERE chat_ratecounter.bucket = counted.bucket AND chat_ratecounter.window_ends = counted.window_ends",
                [value for window in self.windows for value in window])


def _ip_tag(request) -> str:
    return salted_hmac("bookchat.rate.client-ip", client_ip(request)).hexdigest()[:20]


def buckets_for(client: Client, request, *, conversation: object = None,
                searching: bool = False) -> list[tuple[str, Rate]]:
    """The client's limits that are set (``Client.rate_buckets``, or ``search_buckets`` for a search), for a request
    in ``conversation`` (``None``: none yet)."""
    wanted = (client.search_buckets if searching else client.rate_buckets)(
        _ip_tag(request), str(conversation) if conversation else None)
    return [(bucket, rate) for bucket, name in wanted if (rate := parse_rate(name)) is not None]


def count_request(buckets: list[tuple[str, Rate]], *, now: float | None = None, what: str = "questions") -> Counted:
    """Count one request in each bucket: what was counted, or ``RateLimited`` (with the longest wait) when any is
    over — and then the request counts nowhere.

    A bucket's window opens with the first request counted in it and lasts the rate's seconds; the first
    request after it ends opens the next one. ``now`` (default: the time) is the only clock read."""
    if not buckets:
        return Counted()
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
    counted = Counted(tuple((bucket, counts[bucket][1]) for bucket, _ in buckets))
    over = [(counts[bucket][1] - now, rate) for bucket, rate in buckets if counts[bucket][0] > rate.limit]
    if over:
        counted.give_back()
        raise RateLimited(*max(over, key=lambda item: item[0]), what)
    return counted


def did_no_work(exc: BaseException) -> bool:
    """A refusal before the pipeline did any work: a request error (4xx) or a book still being indexed (503)."""
    return isinstance(exc, BookIndexing) or (isinstance(exc, RequestError) and exc.status < 500)


@contextmanager
def limited(request, client: Client, *, conversation: object = None, searching: bool = False) -> Iterator[Counted]:
    """Count a validated question (a search with ``searching``) against the client's limits, raising ``RateLimited``
    over one; a refusal of the body (``did_no_work``) gives the count back."""
    counted = count_request(buckets_for(client, request, conversation=conversation, searching=searching),
                            what="searches" if searching else "questions")
    try:
        yield counted
    except Exception as exc:
        if did_no_work(exc):
            counted.give_back()
        raise


def check_rate(request, client: Client, *, searching: bool = False) -> None:
    """Count a request that carries no conversation (an assistant's tool call over MCP) against the client's
    limits."""
    count_request(buckets_for(client, request, searching=searching), what="searches" if searching else "questions")


def purge_old_counters(*, older_than_seconds: int = 86400) -> int:
    deleted, _ = RateCounter.objects.filter(window_ends__lt=time.time() - older_than_seconds).delete()
    return deleted


class PublishThrottle(BaseThrottle):
    """Publishes (dry runs included) per publishing key (``RATE_PUBLISH``)."""

    def allow_request(self, request, view) -> bool:
        client = client_of(request)
        rate = parse_rate("RATE_PUBLISH")
        if client.key is not None and rate is not None:
            count_request([(f"publish:key:{client.key.pk}", rate)], what="publishes")
        return True
