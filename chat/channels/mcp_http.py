"""``/mcp``: the MCP server (``mcp_server``) over Streamable HTTP, for hosted assistants, with a secret API key.

A Django view, behind the same middleware as every other route (security headers, CSP, host checks), that
authenticates the key with DRF as the API does (``chat.channels.access``) and then lets the official SDK's
``StreamableHTTPSessionManager`` answer the JSON-RPC message, stateless and with JSON responses.

Decisions:
- **Stateless + JSON responses.** Each POST is one complete exchange: no ``Mcp-Session-Id`` to pin a client to the
  gunicorn worker that holds its session, no SSE stream holding a thread (the tools neither stream nor ask the
  client anything), so any worker of any machine answers any message, as for the REST API. The SDK serves both
  the initialize handshake and the stateless 2026-07-28 protocol (``server/discover``) this way.
- **A view and ``async_to_sync``, not ``a2wsgi``.** The SDK's transport is ASGI and we serve WSGI (gunicorn
  gthread). ``a2wsgi.ASGIMiddleware`` would run it on one event-loop thread per worker, in front of Django: the
  route would skip Django's middleware and DRF's authentication, and every tool would have to hop from that loop
  to some other thread for the ORM, away from the request's own thread, database connection and request-end audit
  writes. Here the view calls the SDK's manager through ``async_to_sync`` (one short-lived loop per request, as
  Django runs async code in a sync view), and the tools come back to this very thread through
  ``sync_to_async(thread_sensitive=True)``. A manager is made per request: a stateless one keeps nothing between
  requests, and its ``run()`` may be entered only once.
- **401 for a missing, unknown or revoked key** (an MCP client then knows to ask for credentials), with
  ``WWW-Authenticate: Bearer``; 403 for a key that may not be used here (a publishable key, a secret key sent
  from a browser). Rate limits count tool calls that ask or search (``mcp_server``), not protocol messages.
"""

from __future__ import annotations

import anyio
from asgiref.sync import async_to_sync
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, JsonResponse
from django.utils.encoding import escape_uri_path
from drf_spectacular.utils import extend_schema
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from chat.channels.access import AssistantClient, Client, HasClient, SecretKeyAuthentication
from chat.channels.mcp_server import book_server
from chat.models import ApiKey

MAX_BODY_BYTES = 1_000_000  # a tool call's arguments are checked by the tools, which say what is too long
_DROPPED_HEADERS = {"authorization", "x-bookchat-key", "cookie"}  # the SDK has no use for credentials
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection"}


class AssistantKeyAuthentication(SecretKeyAuthentication):
    """A secret key in ``Authorization: Bearer`` (or ``X-Bookchat-Key``); an unknown or revoked one is 401."""

    def authenticate(self, request):
        try:
            return super().authenticate(request)
        except exceptions.PermissionDenied as exc:
            if exc.get_codes() == "invalid_key":
                raise exceptions.AuthenticationFailed(exc.detail, code="invalid_key") from None
            raise


class HasSecretKey(BasePermission):
    message = "MCP over HTTP needs a secret key (sk_…) in an Authorization: Bearer header"

    def has_permission(self, request, view) -> bool:
        client = request.auth
        if not isinstance(client, Client):
            return False  # no key: DRF answers 401 (NotAuthenticated)
        if client.key is None or client.key.kind != ApiKey.SECRET:
            raise exceptions.PermissionDenied(self.message, code="secret_key_required")
        return HasClient().has_permission(request, view)  # a key that publishes a book does nothing else


@extend_schema(exclude=True)  # JSON-RPC, described by MCP's own tools/list, not by the REST API's schema
class McpView(APIView):
    authentication_classes = [AssistantKeyAuthentication]
    permission_classes = [HasSecretKey]
    throttle_classes = []  # tool calls that ask or search are counted by the tools

    @property
    def default_response_headers(self) -> dict:
        return {**super().default_response_headers, "Allow": "POST"}  # GET and DELETE are 405, below

    def post(self, request):
        return serve_mcp(request._request, AssistantClient(key=request.auth.key))

    def get(self, request):
        # Stateless: no server-to-client stream to open (the SDK would hold the request open waiting for one).
        return _not_allowed("this server sends no messages of its own: POST each message")

    def delete(self, request):
        return _not_allowed("there are no sessions to end: every POST stands alone")


def _not_allowed(message: str) -> JsonResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}, status=405)


def serve_mcp(request, client: AssistantClient) -> HttpResponse:
    """Answer one Streamable HTTP request with the SDK, in this thread's Django request."""
    try:
        body = request.body
    except RequestDataTooBig:
        body = None
    if body is None or len(body) > MAX_BODY_BYTES:
        return JsonResponse({"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": f"the request body is larger than {MAX_BODY_BYTES} bytes"}}, status=413)
    status, headers, content = async_to_sync(_exchange)(_scope(request), body, client, request)
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() not in _HOP_BY_HOP:
            response[name] = value
    return response


def _scope(request) -> dict:
    """The request as ASGI's HTTP scope. Under ``BOOKCHAT_URL_PREFIX`` the prefix is the mount point: ``root_path``
    is it (WSGI's ``SCRIPT_NAME``) and ``path`` is the whole path, prefix included, as the spec has them."""
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
               for name, value in request.headers.items() if name.lower() not in _DROPPED_HEADERS]
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": request.method, "scheme": request.scheme, "path": request.path,
            # Django keeps the path decoded only: escaped again, it is what a client sends for it.
            "raw_path": escape_uri_path(request.path).encode("ascii"),
            "root_path": request.META.get("SCRIPT_NAME", "").rstrip("/"),
            "query_string": request.META.get("QUERY_STRING", "").encode("latin-1", "replace"), "headers": headers,
            "client": (request.META.get("REMOTE_ADDR", ""), 0), "server": (request.get_host(), 0)}


async def _exchange(scope: dict, body: bytes, client: AssistantClient, request) -> tuple[int, list, bytes]:
    manager = StreamableHTTPSessionManager(app=book_server(client, request), json_response=True, stateless=True,
                                           max_request_body_size=MAX_BODY_BYTES)
    answered = anyio.Event()
    sent_body = False
    start: dict = {}
    chunks: list[bytes] = []

    async def receive() -> dict:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client is there until the answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    answered.set()
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]
    return start.get("status", 500), headers, b"".join(chunks)
