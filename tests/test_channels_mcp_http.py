"""chat.channels.mcp_http: who may use ``/mcp`` (a secret key: an unknown one is 401 so that the assistant asks for
credentials, a key of the wrong kind 403), what of the request reaches the MCP SDK (never credentials), and the
refusals made before it is called. The protocol end to end over HTTP: tests/test_mcp.py."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from rest_framework import exceptions
from rest_framework.request import Request

from chat.channels.access import AssistantClient, Client, PublisherClient
from chat.channels.mcp_http import (
    MAX_BODY_BYTES,
    AssistantKeyAuthentication,
    HasSecretKey,
    McpView,
    _scope,
    serve_mcp,
)
from chat.models import ApiKey


def sent(**headers) -> Request:
    """A POST to /mcp with ``headers``, as DRF's authentication sees it (after Django's, which set no user)."""
    request = RequestFactory().post("/mcp", **headers)
    request.user = AnonymousUser()
    return Request(request)


def with_auth(client) -> Request:
    request = Request(RequestFactory().post("/mcp"))
    request._authenticator, request._user, request._auth = None, None, client
    return request


def test_no_key_is_not_permitted_so_that_drf_answers_401():
    assert HasSecretKey().has_permission(with_auth(None), None) is False


@pytest.mark.parametrize("client", [Client("api"), Client("widget", ApiKey(kind=ApiKey.PUBLISHABLE))])
def test_anything_but_a_secret_key_is_refused_with_its_own_code(client):
    with pytest.raises(exceptions.PermissionDenied) as refused:
        HasSecretKey().has_permission(with_auth(client), None)
    assert refused.value.get_codes() == "secret_key_required"


def test_a_secret_key_may_and_a_publishing_key_may_not():
    assert HasSecretKey().has_permission(with_auth(Client("api", ApiKey(kind=ApiKey.SECRET))), None) is True
    publisher = PublisherClient(key=ApiKey(kind=ApiKey.SECRET, publish_book="guide"))
    with pytest.raises(exceptions.PermissionDenied) as refused:
        HasSecretKey().has_permission(with_auth(publisher), None)
    assert refused.value.get_codes() == "publishing_key"


@pytest.mark.django_db
def test_an_unknown_key_is_401_a_secret_key_from_a_browser_stays_403_and_a_good_one_is_its_client():
    with pytest.raises(exceptions.AuthenticationFailed) as failed:
        AssistantKeyAuthentication().authenticate(sent(HTTP_AUTHORIZATION="Bearer sk_nobody"))
    assert failed.value.get_codes() == "invalid_key"
    key = ApiKey(name="assistant", kind=ApiKey.SECRET)
    raw = key.issue()
    key.save()
    with pytest.raises(exceptions.PermissionDenied) as refused:
        AssistantKeyAuthentication().authenticate(sent(HTTP_AUTHORIZATION=f"Bearer {raw}",
                                                       HTTP_ORIGIN="https://docs.example"))
    assert refused.value.get_codes() == "secret_key_in_browser"
    _, client = AssistantKeyAuthentication().authenticate(sent(HTTP_AUTHORIZATION=f"Bearer {raw}"))
    assert client.key == key


def test_the_sdk_gets_the_request_without_its_credentials():
    request = RequestFactory().post("/mcp?trace=1", HTTP_AUTHORIZATION="Bearer sk_secret", HTTP_X_BOOKCHAT_KEY="sk_x",
                                    HTTP_COOKIE="sessionid=abc", HTTP_ACCEPT="application/json, text/event-stream",
                                    REMOTE_ADDR="203.0.113.5")
    scope = _scope(request)
    headers = dict(scope["headers"])
    assert b"authorization" not in headers and b"x-bookchat-key" not in headers and b"cookie" not in headers
    assert headers[b"accept"] == b"application/json, text/event-stream"
    assert (scope["method"], scope["path"], scope["query_string"], scope["client"]) == ("POST", "/mcp", b"trace=1",
                                                                                       ("203.0.113.5", 0))


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


@pytest.mark.parametrize("prefix", ["/chat", "/docs/chat"])
def test_under_a_url_prefix_the_sdk_gets_the_prefix_as_root_path_and_the_whole_path(settings, prefix):
    settings.FORCE_SCRIPT_NAME = prefix  # what BOOKCHAT_URL_PREFIX sets
    request = RequestFactory().post("/mcp?trace=1")
    scope = _scope(request)
    assert (scope["root_path"], scope["path"], scope["raw_path"]) == (prefix, f"{prefix}/mcp", f"{prefix}/mcp".encode())
    assert scope["query_string"] == b"trace=1"


def test_at_the_root_the_root_path_is_empty_and_the_raw_path_escaped():
    scope = _scope(RequestFactory().post("/mcp%C3%A9%20x"))
    assert (scope["root_path"], scope["path"], scope["raw_path"]) == ("", "/mcpé x", b"/mcp%C3%A9%20x")


@pytest.mark.django_db
def test_mcp_answers_under_a_url_prefix(settings):
    settings.FORCE_SCRIPT_NAME = "/chat"
    request = RequestFactory().post("/mcp", data=json.dumps(INITIALIZE), content_type="application/json",
                                    HTTP_ACCEPT="application/json, text/event-stream")
    assert request.path == "/chat/mcp"
    response = serve_mcp(request, AssistantClient())
    assert response.status_code == 200, response.content
    answer = json.loads(response.content)
    assert answer["id"] == 1 and "tools" in answer["result"]["capabilities"], answer


def test_a_body_over_the_limit_is_refused_before_the_sdk_sees_it():
    request = RequestFactory().post("/mcp", data=b"x" * (MAX_BODY_BYTES + 1), content_type="application/json")
    response = serve_mcp(request, AssistantClient())
    assert response.status_code == 413
    assert json.loads(response.content)["error"]["code"] == -32600


def test_get_and_delete_are_405_stateless_has_no_stream_and_no_session():
    view = McpView()
    for method in (view.get, view.delete):
        response = method(None)
        assert response.status_code == 405 and json.loads(response.content)["jsonrpc"] == "2.0"
