"""ingestion.api.views and ingestion.api.urls: who may publish a book (only the key that publishes that very book;
no key is 401, any other key 403 with a code saying why; the keys are chat's, which the project's routes name), a
body's stated length, and how a publisher is named in the record. Publishing end to end: tests/test_publishing.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import RequestFactory
from django.urls import resolve
from rest_framework import exceptions

from chat.channels.access import Client, PublisherClient, SecretKeyAuthentication
from chat.channels.throttling import PublishThrottle
from chat.models import ApiKey
from ingestion.api.urls import publishing_routes
from ingestion.api.views import MayPublish, PublishView, SyncView, _content_length


def allowed(client, slug: str = "guide") -> bool:
    return MayPublish().has_permission(SimpleNamespace(auth=client), SimpleNamespace(kwargs={"slug": slug}))


def publisher(book: str) -> PublisherClient:
    return PublisherClient(key=ApiKey(name="ci", kind=ApiKey.SECRET, publish_book=book))


def test_the_key_that_publishes_the_book_may_publish_it():
    assert allowed(publisher("guide")) is True


@pytest.mark.parametrize("client", [None, Client("api")])
def test_no_key_is_401_even_where_anonymous_asking_is_allowed(client):
    with pytest.raises(exceptions.NotAuthenticated):
        allowed(client)


@pytest.mark.parametrize(("client", "code"), [
    (Client("api", ApiKey(kind=ApiKey.SECRET)), "not_a_publishing_key"),
    (publisher("another-book"), "key_book"),
])
def test_another_key_is_refused_saying_why(client, code):
    with pytest.raises(exceptions.PermissionDenied) as refused:
        allowed(client)
    assert refused.value.get_codes() == code


@pytest.mark.parametrize(("stated", "length"), [("2048", 2048), ("", None), ("lots", None), (None, None)])
def test_content_length_is_the_stated_number_or_none(stated, length):
    request = RequestFactory().post("/api/v1/books/guide/sources")
    request.META.pop("CONTENT_LENGTH", None)
    if stated is not None:
        request.META["CONTENT_LENGTH"] = stated
    assert _content_length(request) == length


def test_a_publisher_is_recorded_by_its_prefix_and_name_never_its_value():
    key = ApiKey(name="docs CI", kind=ApiKey.SECRET, publish_book="guide")
    raw = key.issue()
    described = PublisherClient(key=key).key_label
    assert described == f"{key.prefix}… (docs CI)" and raw not in described


def test_the_project_says_who_may_call_and_until_it_does_nobody_may():
    assert (PublishView.authentication_classes, PublishView.throttle_classes) == ([], [])
    publish, sync = publishing_routes(authentication=SecretKeyAuthentication, throttle=PublishThrottle)
    assert (publish.name, sync.name) == ("api-publish", "api-sync")
    assert publish.callback.initkwargs == {"authentication_classes": [SecretKeyAuthentication],
                                           "throttle_classes": [PublishThrottle]}
    assert sync.callback.initkwargs == {"authentication_classes": [SecretKeyAuthentication]}
    mounted = resolve("/api/v1/books/guide/sources").func
    assert mounted.cls is PublishView and mounted.initkwargs == publish.callback.initkwargs
    assert resolve("/api/v1/books/guide/syncs/7").func.cls is SyncView
