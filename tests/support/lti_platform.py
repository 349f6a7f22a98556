"""A real LTI 1.3 platform that is not ours: ``lti1p3platform`` (its OIDC login, message launch and deep-linking
validation) served by a small HTTP server on a thread, with RSA keys of its own and a JWKS it serves itself (the
library's JWKS holds one key; ours holds every key not yet retired, so keys can rotate).

Routes: ``/auth`` (the OIDC authorization endpoint: the id_token posted to the tool by a self-submitting form),
``/jwks``, ``/course/<name>`` (a course page that frames the launch: the browser test), ``/deep-link-return`` (the
tool's deep-linking response, validated against the tool's JWKS). A launch is a ``Launch`` named by its
``lti_message_hint``; ``tamper`` changes the id_token's claims or signature before it is signed, for the bad-input
table."""

from __future__ import annotations

import html
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
import requests
from jwcrypto.jwk import JWK
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def new_key() -> str:
    return JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None).decode()


@dataclass
class Launch:
    """One launch the platform makes: who, with which roles, of what message type, with which custom parameters."""

    user: str = "student-1"
    roles: list[str] = field(default_factory=lambda: [LEARNER])
    custom: dict = field(default_factory=dict)
    deep_link: bool = False
    context: str = "course-1"
    name: str = "Ada Student"
    email: str = "ada@example.edu"
    locale: str = ""  # the launch_presentation claim's locale (the LMS's language for this user), if any
    tamper: Callable[[dict], dict] | None = None  # the claims, changed before signing
    sign_with: str | None = None  # another private key (a bad signature)


class _Request(Request):
    def build_metadata(self, request: dict) -> dict:
        return {"method": "GET", "form_data": {}, "get_data": request, "headers": {}, "content_type": None,
                "path": "/auth", "json": None}


class _Config(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs) -> None:
        self.platform = kwargs["platform"]

    def get_registration_by_params(self, **kwargs) -> Registration:
        return self.platform.registration()


class _OIDCLogin(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class _MessageLaunch(LTIAdvantageMessageLaunchAbstract):
    launch: Launch | None = None
    platform: LtiPlatform | None = None

    def render_launch_form(self, launch_data: dict, **kwargs) -> dict:
        return launch_data

    def generate_launch_request(self) -> dict:
        """The library's request, with ``tamper`` and ``sign_with`` applied to the token it signed."""
        data = super().generate_launch_request()
        if self.launch.tamper is None and self.launch.sign_with is None:
            return data
        claims = jwt.decode(data["id_token"], options={"verify_signature": False})
        claims = self.launch.tamper(claims) if self.launch.tamper else claims
        key = self.launch.sign_with or self.platform.keys[-1]
        data["id_token"] = jwt.encode(claims, key, algorithm="RS256",
                                      headers={"kid": Registration.get_jwk(self.platform.keys[-1])["kid"]})
        return data


class LtiPlatform:
    """The platform: its issuer is its own URL; ``client_id`` and ``deployment_id`` are what it gave bookchat."""

    def __init__(self, tool_url: str, *, client_id: str = "bookchat-client", deployment_id: str = "dep-1",
                 host: str = "127.0.0.1") -> None:
        self.tool_url = tool_url.rstrip("/")
        self.client_id, self.deployment_id = client_id, deployment_id
        self.keys = [new_key()]  # the last one signs; all are in the JWKS
        self.launches: dict[str, Launch] = {}
        self.deep_links: list[list[dict]] = []
        self.jwks_broken = False
        self.hide_newest = False  # the JWKS lacks the key that signs (a key set that is not the signer's)
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                platform.handle(self, "GET", b"")

            def do_POST(self) -> None:  # noqa: N802
                platform.handle(self, "POST", self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_port}"

    def __enter__(self) -> LtiPlatform:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- what the tool is told ------------------------------------------------------------------------------------
    def registration_args(self) -> dict:
        """``manage.py lti platform add``'s arguments for this platform."""
        return {"issuer": self.url, "client_id": self.client_id, "deployment_id": self.deployment_id,
                "auth_url": f"{self.url}/auth", "token_url": f"{self.url}/token", "keyset_url": f"{self.url}/jwks"}

    def registration(self) -> Registration:
        key = self.keys[-1]
        return (Registration().set_iss(self.url).set_client_id(self.client_id).set_deployment_id(self.deployment_id)
                .set_oidc_login_url(f"{self.tool_url}/lti/login").set_launch_url(f"{self.tool_url}/lti/launch")
                .set_deeplink_launch_url(f"{self.tool_url}/lti/deep-link").set_platform_private_key(key)
                .set_platform_public_key(JWK.from_pem(key.encode()).export_to_pem().decode())
                .set_tool_key_set_url(f"{self.tool_url}/lti/jwks"))

    def rotate(self, *, retire_old: bool = False) -> None:
        """A new signing key; the old ones stay in the JWKS unless ``retire_old``."""
        self.keys = ([] if retire_old else self.keys) + [new_key()]

    def jwks(self) -> dict:
        keys = self.keys[:-1] if self.hide_newest else self.keys
        return {"keys": [Registration.get_jwk(key) for key in keys]}

    # -- a launch -------------------------------------------------------------------------------------------------
    def login_url(self, launch: Launch) -> str:
        """The OIDC login initiation URL the platform sends the browser to (third-party initiated login)."""
        hint = uuid.uuid4().hex
        self.launches[hint] = launch
        login = _OIDCLogin(None, _Config(platform=self))
        login.set_lti_message_hint(hint=hint)
        if launch.deep_link:
            login.set_deeplinking_launch_url()
        return login.initiate_login(launch.user)

    def authorize(self, params: dict) -> dict:
        """The authorization endpoint: ``{"launch_url", "id_token", "state"}`` for the tool, as the library makes it."""
        launch = self.launches[params["lti_message_hint"]]
        message = _MessageLaunch(_Request(params), _Config(platform=self))
        message.launch, message.platform = launch, self
        message.set_user_data(launch.user, launch.roles, full_name=launch.name, email_address=launch.email)
        message.set_launch_context_claim(launch.context, context_title=f"Course {launch.context}")
        message.set_resource_link_claim(f"link-{launch.context}", title="Ask the book")
        if launch.custom:
            message.set_custom_parameters_claim(launch.custom)
        if launch.locale:  # the library's setter knows document_target and return_url only
            message.set_launch_presentation_claim(document_target="iframe")
            next(iter(message.lti_claim_launch_presentation.values()))["locale"] = launch.locale
        if launch.deep_link:
            message.set_dl(f"{self.url}/deep-link-return", title="bookchat")
        return message.lti_launch()

    def deep_link_response(self, token: str, tool_jwks: dict | None = None) -> list[dict]:
        """The tool's ``LtiDeepLinkingResponse``, verified with the tool's JWKS (fetched from its URL, or
        ``tool_jwks`` as a test client fetched it): its content items."""
        config = _Config(platform=self)
        registration = config.get_registration()
        if tool_jwks is not None:
            registration.set_tool_key_set(tool_jwks)
        items = config.validate_deeplinking_resp({"JWT": token})
        self.deep_links.append(items)
        return items

    # -- the HTTP server ------------------------------------------------------------------------------------------
    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: bytes) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/jwks":
            if self.jwks_broken:
                return self._send(handler, b"<html>not a key set</html>", "text/html")
            return self._send(handler, json.dumps(self.jwks()).encode(), "application/json")
        if parts.path == "/auth":
            data = self.authorize(query)
            return self._send(handler, auto_post(data["launch_url"], {"id_token": data["id_token"],
                                                                      "state": data["state"]}), "text/html")
        if parts.path.startswith("/course/"):
            launch = self.launches[parts.path.rsplit("/", 1)[1]]
            page = (f'<!doctype html><title>Course</title><h1>Course page</h1><iframe id="tool" title="bookchat" '
                    f'width="900" height="700" src="{html.escape(self.login_url(launch))}"></iframe>')
            return self._send(handler, page.encode(), "text/html")
        if parts.path == "/deep-link-return" and method == "POST":
            token = parse_qs(body.decode())["JWT"][0]
            items = self.deep_link_response(token)
            return self._send(handler, json.dumps(items).encode(), "application/json")
        handler.send_error(404)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, body: bytes, content_type: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def auto_post(url: str, fields: dict) -> bytes:
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in
                     fields.items())
    return (f'<!doctype html><title>Launching</title><form id="f" method="post" action="{html.escape(url)}">{inputs}'
            '</form><script>document.getElementById("f").submit()</script>').encode()


def form_fields(page: str) -> tuple[str, dict]:
    """A self-posting form's action and fields (the tool's deep-linking response, the platform's launch)."""
    action = html.unescape(re.search(r'<form[^>]*action="([^"]*)"', page).group(1))
    fields = {html.unescape(name): html.unescape(value) for name, value in
              re.findall(r'<input[^>]*name="([^"]*)"[^>]*value="([^"]*)"', page)}
    return action, fields


def get(url: str) -> requests.Response:
    return requests.get(url, timeout=10, allow_redirects=False)


def now() -> int:
    return int(time.time())
