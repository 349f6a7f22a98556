"""bookchat behind nginx and Caddy, configured as the manual says (``docs/operating/deployment.md``, "Behind a
proxy"; the configurations are read from there, ``tests.support.proxies``): gunicorn started as `make run` starts it,
nginx or Caddy from Debian's packages in front terminating TLS with a certificate made for the test.

- at the root, behind each: an answer streams through the proxy token by token (the reader has its first token while the
  model is still writing); bookchat sees the client's address, not the proxy's nor one the client forged; plain
  HTTP is redirected to HTTPS, cookies are ``Secure`` and HSTS is sent, and bookchat itself trusts the proxy's
  ``X-Forwarded-Proto``;
- under ``/chat/`` (``BOOKCHAT_URL_PREFIX``): the chat page answers with working citations and thumbs, the widget on
  another site finds the API beside its script, and a staff member logs into the admin and opens its pages, all in
  Chromium behind nginx, with every static file and cookie under the prefix and no console error; behind Caddy,
  the page, its files, a streamed answer and the admin's login answer under the prefix;
- and, without servers, what ``BOOKCHAT_URL_PREFIX`` accepts, what Django is told, and the admin's "View site"
  link (the chat page, its trailing slash included).
"""

from __future__ import annotations

import re
import ssl

import httpx
import pytest

from tests import test_browser
from tests.conftest import committed
from tests.support.browser import ConsoleErrors, DocsSite
from tests.support.proxies import Caddy, Nginx, Proxy, code_blocks
from tests.support.served import forget_answers_since, written_row

BOOK = "bookchat-manual"
QUESTION = "How do I ingest a folder?"
TIMEOUT = 30_000  # ms, for the browser
REAL_CLIENT = "127.0.0.2"  # the tests' client connects from this loopback address; nginx from 127.0.0.1

browser = test_browser.browser  # Chromium, as the real-browser tests launch it (a fixture of this module's too)


# -- the prefix, without servers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, prefix", [("", ""), ("/", ""), ("chat", "/chat"), ("/chat/", "/chat"),
                                         (" /docs/chat ", "/docs/chat"), ("/a-b.c~d_e", "/a-b.c~d_e")])
def test_the_url_prefix_is_a_path_with_one_leading_slash(raw, prefix):
    from bookchat.base.subpath import subpath_settings, url_prefix

    assert url_prefix(raw) == prefix
    django = subpath_settings({"URL_PREFIX": raw})
    if prefix:
        assert django == {"FORCE_SCRIPT_NAME": prefix, "STATIC_URL": f"{prefix}/static/",
                          "SESSION_COOKIE_PATH": f"{prefix}/", "CSRF_COOKIE_PATH": f"{prefix}/",
                          "LANGUAGE_COOKIE_PATH": f"{prefix}/"}
    else:
        assert django == {"FORCE_SCRIPT_NAME": None, "STATIC_URL": "static/"}


@pytest.mark.parametrize("bad", ["chat?x=1", "/chat#top", "https://example.org/chat", "/chat space", "/a/../b",
                                 "/chat%2F", "\\chat", "/chät"])
def test_a_bad_url_prefix_stops_the_start_naming_it(settings, bad):
    from bookchat.base.subpath import subpath_settings
    from bookchat.checks import check_settings

    settings.BOOKCHAT = {**settings.BOOKCHAT, "URL_PREFIX": bad}
    errors = [e for e in check_settings() if e.id == "bookchat.E008"]
    assert len(errors) == 1 and "BOOKCHAT_URL_PREFIX" in errors[0].msg and repr(bad) in errors[0].msg, errors
    assert subpath_settings({"URL_PREFIX": bad})["FORCE_SCRIPT_NAME"] is None, "until then, the root"


def test_the_probes_stay_exempt_from_the_https_redirect_under_a_prefix():
    from bookchat.base.conf import from_environment
    from bookchat.base.security import https_settings

    exempt = https_settings({**from_environment({}), "HTTPS": True, "URL_PREFIX": "/chat"})["SECURE_REDIRECT_EXEMPT"]
    # Django matches them against the path with the script name in front, without its leading slash.
    assert any(re.search(pattern, "chat/api/v1/ready") for pattern in exempt)
    assert not any(re.search(pattern, "chat/admin/") for pattern in exempt)


@pytest.mark.django_db
@pytest.mark.parametrize("prefix", ["", "/chat"])
def test_the_admins_view_site_link_is_the_chat_page_with_its_slash(admin_client, prefix):
    from django.test import override_settings
    from django.test.utils import override_script_prefix

    # What gunicorn's handler does with the setting: Django's test client leaves the script prefix alone.
    with override_settings(FORCE_SCRIPT_NAME=prefix or None), override_script_prefix(f"{prefix}/"):
        response = admin_client.get("/admin/")
        assert response.status_code == 200 and response.context["site_url"] == f"{prefix}/"
    assert f'<a href="{prefix}/">View site</a>' in response.content.decode()


# -- the servers ----------------------------------------------------------------------------------------------------
def manual_settings() -> dict[str, str]:
    """The ``export BOOKCHAT_…`` lines of the manual's "Behind a proxy", with this machine's host name."""
    lines = [line for block in code_blocks("proxy", "bash") for line in block.splitlines()]
    found = dict(re.match(r"export (BOOKCHAT_\w+)=(\S+)", line).groups() for line in lines
                 if line.startswith("export BOOKCHAT_"))
    assert {"BOOKCHAT_HTTPS", "BOOKCHAT_PROXY_SSL_HEADER", "BOOKCHAT_TRUSTED_PROXIES"} <= set(found)
    return found | {"BOOKCHAT_ALLOWED_HOSTS": "127.0.0.1"}


class Site:
    """A proxy in front of gunicorn; ``url`` is the proxy's HTTPS address with the prefix."""

    def __init__(self, gunicorn, proxy: Proxy, prefix: str):
        self.gunicorn, self.proxy, self.prefix = gunicorn, proxy, prefix
        self.url = proxy.https_url + prefix
        self.tls = ssl.create_default_context(cafile=str(proxy.cert))

    def client(self, **options) -> httpx.Client:
        return httpx.Client(verify=self.tls, timeout=60, **options)


def start_gunicorn(openai_server, prefix: str = ""):
    from bench.latency import Gunicorn

    env = manual_settings() | {
        "BOOKCHAT_LLM_BASE_URL": openai_server.base_url, "BOOKCHAT_LLM_API_KEY": "test",
        "BOOKCHAT_LLM_MODEL": "test-model", "BOOKCHAT_DEADLINE_SECONDS": "60", "BOOKCHAT_RETRIEVAL_SECONDS": "30",
        "BOOKCHAT_GENERATION_SECONDS": "30", "BOOKCHAT_URL_PREFIX": prefix}
    return Gunicorn(workers=1, env=env)


@pytest.fixture(scope="module")
def forget_answers(django_db_blocker):
    """What the servers answered was committed: forget it when the module ends."""
    from django.utils import timezone

    since = timezone.now()
    yield
    with django_db_blocker.unblock():
        forget_answers_since(since)


@pytest.fixture(scope="module")
def root_gunicorn(manual_book, openai_server, forget_answers):
    with start_gunicorn(openai_server) as gunicorn:
        yield gunicorn


@pytest.fixture(scope="module")
def chat_gunicorn(manual_book, openai_server, forget_answers):
    with start_gunicorn(openai_server, "/chat") as gunicorn:
        yield gunicorn


PROXIES = {"nginx": Nginx, "caddy": Caddy}


@pytest.fixture(scope="module", params=[pytest.param(name, marks=pytest.mark.needs(name)) for name in PROXIES])
def root_site(request, root_gunicorn, tmp_path_factory):
    """The manual's nginx, then its Caddy, in front of bookchat at the root."""
    with PROXIES[request.param](tmp_path_factory.mktemp(request.param), upstream=root_gunicorn.port) as proxy:
        yield Site(root_gunicorn, proxy, "")


@pytest.fixture(scope="module")
def chat_site(chat_gunicorn, tmp_path_factory):
    """The manual's nginx with its sub-path locations, in front of bookchat under /chat."""
    with Nginx(tmp_path_factory.mktemp("nginx-chat"), upstream=chat_gunicorn.port, sub_path=True) as nginx:
        yield Site(chat_gunicorn, nginx, "/chat")


@pytest.fixture(autouse=True)
def database_open(django_db_blocker):
    """The servers' answers and the test's own rows are committed (through ``committed``), outside any test
    transaction: the servers must see the users and keys made here, and the test what the servers wrote."""
    with django_db_blocker.unblock():
        yield


# -- at the root ----------------------------------------------------------------------------------------------------
@pytest.mark.drill
def test_an_answer_streams_through_the_proxy_token_by_token(root_site, openai_server):
    openai_server.reset()
    openai_server.token_delay = 0.1  # the model writes a word every 0.1 s
    events, finished_at_first_token = [], None
    try:
        with root_site.client() as client, client.stream("POST", f"{root_site.url}/api/v1/ask/stream",
                                                         json={"question": QUESTION, "book": BOOK}) as stream:
            assert stream.status_code == 200, stream.read()
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    events.append(line.removeprefix("event: "))
                    if events[-1] == "token" and finished_at_first_token is None:
                        finished_at_first_token = openai_server.streams_finished
        finished = openai_server.streams_finished
    finally:
        openai_server.reset()
    assert events[-1] == "final" and events.count("token") >= 3, events
    assert finished == 1, "the model wrote the whole answer"
    assert finished_at_first_token == 0, "the first token reached the reader while the model was still writing"


@pytest.mark.drill
def test_bookchat_sees_the_clients_address_not_the_proxys_nor_a_forged_one(root_site):
    from audit.recording import hash_ip

    transport = httpx.HTTPTransport(local_address=REAL_CLIENT, verify=root_site.tls)
    with httpx.Client(transport=transport, timeout=60) as client:
        response = client.post(f"{root_site.url}/api/v1/ask", json={"question": QUESTION, "book": BOOK},
                               headers={"X-Forwarded-For": "203.0.113.9"})
    assert response.status_code == 200, response.text
    row = written_row(response.json()["answer_id"])
    assert row.client_ip_hash == hash_ip(REAL_CLIENT)
    assert row.client_ip_hash not in (hash_ip("127.0.0.1"), hash_ip("203.0.113.9"))


@pytest.mark.drill
def test_plain_http_is_redirected_and_cookies_are_secure_behind_tls(root_site):
    plain = httpx.get(f"{root_site.proxy.http_url}/?book={BOOK}")
    assert plain.status_code in (301, 308) and plain.headers["location"] == f"https://127.0.0.1/?book={BOOK}"

    with root_site.client() as client:
        page = client.get(f"{root_site.url}/?book={BOOK}")
    assert page.status_code == 200 and "Ask “" in page.text
    cookies = {cookie.split("=", 1)[0]: cookie for cookie in page.headers.get_list("set-cookie")}
    assert {"csrftoken", "sessionid"} <= set(cookies), cookies
    for name in ("csrftoken", "sessionid"):
        assert "; Secure" in cookies[name] and re.search(r"; Path=/(;|$)", cookies[name]), cookies[name]
    assert page.headers["strict-transport-security"].startswith("max-age=")
    assert 'href="/static/bookchat/chat.css"' in page.text

    # bookchat itself trusts the header nginx sets: a request that says it came by plain HTTP is redirected.
    direct = root_site.gunicorn.url
    told_http = httpx.get(f"{direct}/?book={BOOK}", headers={"X-Forwarded-Proto": "http"})
    assert told_http.status_code == 301 and told_http.headers["location"].startswith("https://127.0.0.1:")
    assert httpx.get(f"{direct}/?book={BOOK}", headers={"X-Forwarded-Proto": "https"}).status_code == 200


# -- under /chat/ ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def caddy_chat_site(chat_gunicorn, tmp_path_factory):
    """The manual's Caddy sub-path site, in front of bookchat under /chat."""
    with Caddy(tmp_path_factory.mktemp("caddy-chat"), upstream=chat_gunicorn.port, sub_path=True) as caddy:
        yield Site(chat_gunicorn, caddy, "/chat")


@pytest.mark.drill
@pytest.mark.needs("caddy")
def test_caddy_serves_the_page_its_files_the_api_and_the_admin_under_a_sub_path(caddy_chat_site):
    site = caddy_chat_site
    with site.client() as client:
        assert client.get(f"{site.proxy.https_url}/chat").headers["location"] == "/chat/"
        page = client.get(f"{site.url}/?book={BOOK}")
        assert page.status_code == 200 and 'data-root="/chat/"' in page.text
        assert 'href="/chat/static/bookchat/chat.css"' in page.text and 'action="/chat/"' in page.text
        css = client.get(f"{site.url}/static/bookchat/chat.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        client.cookies.clear()  # the API, asked without the page's session (which would need its CSRF token)
        with client.stream("POST", f"{site.url}/api/v1/ask/stream",
                           json={"question": QUESTION, "book": BOOK}) as stream:
            assert stream.status_code == 200, (stream.status_code, stream.headers, stream.read()[:500])
            events = [line.removeprefix("event: ") for line in stream.iter_lines() if line.startswith("event: ")]
        assert events.count("token") >= 1 and events[-1] == "final", events
        admin = client.get(f"{site.url}/admin/")
        assert admin.status_code == 302 and admin.headers["location"] == "/chat/admin/login/?next=/chat/admin/"


@pytest.fixture
def open_page(browser):
    """``open_page(url, **context_options)`` → (page, console errors, static responses), over HTTPS to the test's
    certificate; contexts close after the test."""
    contexts = []

    def open_(url: str, **options):
        context = browser.new_context(ignore_https_errors=True, **options)
        context.set_default_timeout(TIMEOUT)
        contexts.append(context)
        page = context.new_page()
        errors, statics = ConsoleErrors(), []
        errors.watch(page)
        page.on("response", lambda r: "/static/" in r.url and statics.append((r.url, r.status)))
        page.goto(url)
        return page, errors, statics

    yield open_
    for context in contexts:
        context.close()


def assert_statics_under(statics, base: str) -> None:
    assert statics, "the page loaded its static files"
    assert all(url.startswith(f"{base}/static/") and status == 200 for url, status in statics), statics


@pytest.mark.drill
@pytest.mark.needs("nginx")
@pytest.mark.needs("browser")
def test_the_chat_page_answers_under_a_sub_path(chat_site, open_page):
    from chat.models import Feedback

    with chat_site.client() as client:
        bare = client.get(f"{chat_site.proxy.https_url}/chat")
        assert bare.status_code == 301 and bare.headers["location"].endswith("/chat/")
        assert client.get(f"{chat_site.url}/api/v1/ready").json()["status"] == "ready"
    assert httpx.get(f"{chat_site.gunicorn.url}/api/v1/ready").status_code == 200, "probed directly, at the root"
    page, errors, statics = open_page(f"{chat_site.url}/?book={BOOK}")
    assert page.evaluate("document.body.dataset.root") == "/chat/"
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")  # chat.js: the stream, then the server-rendered answer, under /chat/
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".sources").wait_for()
    assert "folder" in turn.locator(".answer-text").text_content().lower()
    citation = turn.locator(".answer-text a.bookchat-cite").first
    n = citation.get_attribute("data-n")
    citation.click()
    answer_id = turn.get_attribute("data-answer-id")
    assert page.url.startswith(f"{chat_site.url}/?book={BOOK}#answer-{answer_id}-source-{n}")
    assert page.locator(f"#answer-{answer_id}-source-{n}").evaluate("el => el.matches(':target')")
    turn.locator("button.thumb.up").click()
    page.wait_for_function("(id) => document.querySelector(`#answer-${id} .feedback-status`).textContent"
                           ".includes('Thanks')", arg=answer_id)
    assert committed(lambda: Feedback.objects.filter(answer_id=answer_id).values_list("rating", flat=True)
                     .first()) == "up"
    assert_statics_under(statics, chat_site.url)
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert all(cookies[name]["path"] == "/chat/" and cookies[name]["secure"] for name in ("csrftoken", "sessionid"))
    assert errors == []


@pytest.mark.drill
@pytest.mark.needs("nginx")
@pytest.mark.needs("browser")
def test_the_widget_finds_the_api_beside_its_script_under_a_sub_path(chat_site, open_page):
    from chat.models import ApiKey

    with DocsSite(f"{chat_site.url}/static/bookchat/widget.js") as docs:
        def create() -> tuple[int, str]:
            key = ApiKey(name="proxy test", kind=ApiKey.PUBLISHABLE, allowed_origins=docs.origin)
            raw = key.issue()
            key.save()
            return key.pk, raw

        key_id, docs.key = committed(create)
        docs.book = BOOK
        try:
            page, errors, _ = open_page(docs.page_url())
            page.locator(".bc-launcher").click()
            with page.expect_request(lambda r: "/api/v1/ask/stream" in r.url) as request:
                page.locator(".bc-input").fill(QUESTION)
                page.locator(".bc-input").press("Enter")
            assert request.value.url.startswith(f"{chat_site.url}/api/v1/ask/stream?key=pk_")
            answer = page.locator(".bc-answer[data-state=done]").last
            answer.wait_for()
            assert "folder" in answer.locator(".bc-answer-text").text_content().lower()
            citation = answer.locator(".bc-answer-text a.bookchat-cite").first
            href = citation.evaluate("a => a.href")
            assert href.startswith(docs.origin + "/"), "citations open pages of the docs site"
            citation.click()
            page.wait_for_url(href.split(":~:")[0])
            assert errors == []
        finally:
            committed(lambda: ApiKey.objects.filter(pk=key_id).delete())


@pytest.mark.drill
@pytest.mark.needs("nginx")
@pytest.mark.needs("browser")
def test_staff_log_into_the_admin_under_a_sub_path(chat_site, open_page):
    from django.contrib.auth.hashers import PBKDF2PasswordHasher
    from django.contrib.auth.models import Group, User

    def create():
        # Hashed as the server checks it (this session's own hasher is a fast one the server doesn't have).
        hasher = PBKDF2PasswordHasher()
        user = User.objects.create(username="paula", password=hasher.encode("pw-paula", hasher.salt()), is_staff=True)
        user.groups.set(Group.objects.filter(name="Reviewers"))
        return user.pk

    user_id = committed(create)
    try:
        page, errors, statics = open_page(f"{chat_site.url}/admin/")
        page.wait_for_url(f"{chat_site.url}/admin/login/?next=/chat/admin/")
        page.fill("#id_username", "paula")
        page.fill("#id_password", "pw-paula")
        page.click("input[type=submit]")
        page.wait_for_url(f"{chat_site.url}/admin/")
        response = page.goto(f"{chat_site.url}/admin/audit/auditlog/")
        assert response.status == 200
        links = page.eval_on_selector_all("a[href^='/']", "links => links.map(a => a.getAttribute('href'))")
        assert links and all(link.startswith("/chat/") for link in links), links
        response = page.goto(f"{chat_site.url}/admin/audit/auditlog/dashboard/")
        assert response.status == 200
        page.wait_for_selector(".bookchat-dashboard svg")
        assert_statics_under(statics, chat_site.url)
        assert any(url.endswith(".css") for url, _ in statics), "the admin's styles came"
        session = next(c for c in page.context.cookies() if c["name"] == "sessionid")
        assert session["path"] == "/chat/" and session["secure"] and session["httpOnly"]
        assert errors == [], "the admin's inline styles are allowed under the prefix too"
    finally:
        committed(lambda: User.objects.filter(pk=user_id).delete())
