"""LTI 1.3 launches (chat.lti) driven by a real platform that is not ours: ``lti1p3platform`` served by
``tests/support/lti_platform.py`` with its own keys and JWKS. bookchat answers through Django's test client (the
platform reaches the tool's JWKS through it too); the tool fetches the platform's JWKS over HTTP. A learner launch,
an instructor launch, deep linking both ways, key rotation on both sides, the bad-input table (each row refused with a
page that says why, and nothing stored), the pseudonym on the conversation, the audit row and the hand-off, a launched
session bound to its course's book, the pages in the launch's language (its locale, after the reader's switch, before
the browser's), and ``manage.py lti``."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client, RequestFactory
from django.utils import timezone
from django_otp.oath import totp
from lti_tool.models import Key, LtiDeployment, LtiRegistration, LtiUser

from audit.models import AuditLog, Handoff
from audit.privacy import notices
from bookchat.twofactor.devices import twofactor_confirm, twofactor_start
from chat.lti import identity, registry, storage, views
from chat.lti import launch as launching
from chat.lti.admin import LtiPlatformAdmin
from chat.lti.apps import LtiConfig
from chat.lti.framing import LAUNCH_SESSION
from chat.lti.models import DeploymentBook, LaunchRecord, LearnerKey, LtiPlatform
from chat.models import Conversation
from ingestion.models import Book, BookAccess
from ingestion.roles import allowed_slugs
from tests.support.lti_platform import INSTRUCTOR, Launch, form_fields, get, new_key, now
from tests.support.lti_platform import LtiPlatform as Platform

BOOK = "lti-course-book"  # a book row of the test's own: launches need no index, only the questions asked do
MANUAL = "bookchat-manual"
TOOL = "http://testserver"


@pytest.fixture
def platform(db):
    """A running platform registered with bookchat (``registry.add``, what ``lti platform add`` calls), its
    launches opening the course's book."""
    Book.objects.create(slug=BOOK, title="Course book one", embedder_name="none", embedder_dimension=1)
    with Platform(TOOL) as running:
        registry.add(**running.registration_args(), book=BOOK)
        yield running


@pytest.fixture
def on_the_manual(platform, manual_book) -> str:
    """The platform's launches open the bundled manual, which answers questions."""
    LtiPlatform.objects.update(book=Book.objects.get(slug=MANUAL))
    DeploymentBook.objects.update(book=Book.objects.get(slug=MANUAL))
    return MANUAL


def unbind() -> None:
    """No book for the platform nor its deployments: a deep link picks it."""
    LtiPlatform.objects.update(book=None)
    DeploymentBook.objects.all().delete()


def launch_form(client, platform: Platform, launch: Launch) -> tuple[str, dict]:
    """The browser's way to the launch: the platform's login initiation, bookchat's redirect to the platform's
    authorization endpoint (over HTTP), whose self-posting form is returned as (action, fields)."""
    login = client.get(platform.login_url(launch))
    assert login.status_code == 302, login.content[:300]
    assert login["Location"].startswith(f"{platform.url}/auth?")
    assert not login.cookies, "the login sets no cookie: its state is in the database"
    return form_fields(get(login["Location"]).text)


def launched(client, platform: Platform, launch: Launch):
    action, fields = launch_form(client, platform, launch)
    return client.post(action, fields)


def stored() -> dict:
    """What a launch could have written (a login's state, which the launch takes, aside)."""
    return {"lti users": LtiUser.objects.count(), "users": get_user_model().objects.count(),
            "deployments": LtiDeployment.objects.count(), "conversations": Conversation.objects.count(),
            "audit rows": AuditLog.objects.count(),
            "launch data": LaunchRecord.objects.exclude(key__startswith="state-").count()}


def test_a_learner_lands_on_the_course_book_framed_by_the_platform_with_partitioned_cookies(client, platform):
    response = launched(client, platform, Launch())
    assert response.status_code == 302
    assert response["Location"] == f"/?book={BOOK}"
    session_cookie = response.cookies["sessionid"].OutputString()
    assert "Partitioned" in session_cookie and "SameSite=None" in session_cookie and "Secure" in session_cookie
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert f"frame-ancestors {platform.url}" in page["Content-Security-Policy"]
    assert "X-Frame-Options" not in page
    assert "Partitioned" in page.cookies["csrftoken"].OutputString()
    assert client.session[LAUNCH_SESSION]["role"] == "learner"
    # nothing of who the student is: no LTI user with a name, e-mail or picture, no Django user
    assert not LtiUser.objects.exclude(name="", email="").exists()
    assert not get_user_model().objects.filter(username__startswith="lti-").exists()


def test_pages_outside_a_launch_stay_unframeable(client, platform):
    page = client.get("/")
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    assert page["X-Frame-Options"] == "DENY"


def test_the_pseudonym_is_keyed_by_its_own_key_and_follows_the_learner(client, platform, no_llm):
    launched(client, platform, Launch(user="student-7"))
    learner = client.session["bookchat_learner"]
    assert learner == identity.pseudonym(platform.url, "student-7") != identity.pseudonym(platform.url, "student-8")
    assert "student-7" not in learner and len(learner) == 32
    # a second device: the same student, the same pseudonym
    other = Client()
    launched(other, platform, Launch(user="student-7"))
    assert other.session["bookchat_learner"] == learner
    # the key is the database's own, not SECRET_KEY's
    with pytest.MonkeyPatch.context() as patch:
        from django.conf import settings

        patch.setattr(settings, "SECRET_KEY", "another secret key, rotated")
        assert identity.pseudonym(platform.url, "student-7") == learner
    LearnerKey.objects.all().delete()
    assert identity.pseudonym(platform.url, "student-7") != learner


def test_the_pseudonym_is_on_the_conversation_the_audit_row_and_the_hand_off(client, platform, on_the_manual,
                                                                             no_llm):
    launched(client, platform, Launch(user="student-9"))
    learner = client.session["bookchat_learner"]
    asked = client.post("/", {"question": "How do I install bookchat?", "book": MANUAL})
    assert asked.status_code == 302
    row = AuditLog.objects.filter(learner=learner).get()
    assert row.book_slug.startswith(MANUAL)
    assert Conversation.objects.get(id=row.session_id).learner == learner
    handed = client.post(f"/answers/{row.answer_id}/handoff", {"note": "I still don't get it"})
    assert handed.status_code in (200, 302)
    assert Handoff.objects.get(answer_id=row.answer_id).learner == learner


def test_a_learner_of_one_course_cannot_read_another_courses_book(client, platform, no_llm):
    Book.objects.create(slug="other-course", title="Another course's book", embedder_name="x", embedder_dimension=1)
    launched(client, platform, Launch())
    assert b"Course book one" in client.get("/").content
    page = client.get("/?book=other-course")
    assert b"Another course" not in page.content
    refused = client.post("/api/v1/ask", {"question": "What is in this book?", "book": "other-course"},
                          content_type="application/json", HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert refused.status_code == 403
    assert refused.json()["error"] == "key_book"
    searched = client.get("/api/v1/search", {"q": "install", "book": "other-course"})
    assert searched.status_code == 403


def test_an_instructor_lands_on_the_books_hand_offs_as_staff_limited_to_that_book(client, platform):
    response = launched(client, platform, Launch(user="teacher-1", roles=[INSTRUCTOR], name="Prof. X"))
    assert response.status_code == 302
    assert response["Location"] == "/admin/audit/handoff/"
    inbox = client.get(response["Location"])
    assert inbox.status_code == 200
    user = get_user_model().objects.get(lti_users__sub="teacher-1")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert user.groups.filter(name="Reviewers").exists()
    assert allowed_slugs(user) == [BOOK] or set(allowed_slugs(user)) >= {BOOK}
    assert list(BookAccess.objects.get(user=user).books.values_list("slug", flat=True)) == [BOOK]
    assert LtiUser.objects.get(sub="teacher-1").name == ""  # no name kept
    # the second launch links the same user
    launched(client, platform, Launch(user="teacher-1", roles=[INSTRUCTOR]))
    assert get_user_model().objects.filter(lti_users__sub="teacher-1").count() == 1


def test_an_instructor_with_an_app_is_asked_for_the_code_alone_not_a_password(client, platform, settings):
    """An LTI-made staff user has no password: once they have an app, an untrusted launch asks for its code (here one
    of the recovery codes their setup gave) and goes on to the inbox, instead of a login form they can't use."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_2FA": "required"}
    launched(client, platform, Launch(user="teacher-3", roles=[INSTRUCTOR]))
    user = get_user_model().objects.get(lti_users__sub="teacher-3")
    device = twofactor_start(user=user)
    codes = twofactor_confirm(device=device, code=f"{totp(device.bin_key):06d}")
    response = launched(client, platform, Launch(user="teacher-3", roles=[INSTRUCTOR]))
    inbox = client.get(response["Location"])
    assert inbox.status_code == 302 and inbox["Location"].startswith("/admin/twofactor/verify?next=")
    form = client.get(inbox["Location"])
    assert form.status_code == 200 and "Enter your authenticator code" in form.content.decode()
    not_now = f"{(totp(device.bin_key) + 1) % 1_000_000:06d}"  # an app code that is wrong (throttling the app's)
    wrong = client.post("/admin/twofactor/verify", {"code": not_now, "next": response["Location"]})
    assert wrong.status_code == 200 and "not right" in wrong.content.decode()
    right = client.post("/admin/twofactor/verify", {"code": codes[0], "next": response["Location"]})
    assert right.status_code == 302 and right["Location"] == response["Location"]
    assert client.get(response["Location"]).status_code == 200
    away = client.post("/admin/twofactor/verify", {"code": codes[1], "next": "https://elsewhere.example/"})
    assert away["Location"] == "/admin/", "a verified session is sent to the admin, never off the site"


def test_an_instructor_launch_asks_for_the_second_factor_unless_the_platform_is_trusted(client, platform, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ADMIN_2FA": "required"}
    response = launched(client, platform, Launch(user="teacher-2", roles=[INSTRUCTOR]))
    inbox = client.get(response["Location"])
    assert inbox.status_code == 302 and "twofactor" in inbox["Location"]
    LtiPlatform.objects.update(trusted=True)
    response = launched(client, platform, Launch(user="teacher-2", roles=[INSTRUCTOR]))
    assert client.get(response["Location"]).status_code == 200


def test_a_platform_may_keep_names_only_when_turned_on(client, platform):
    LtiPlatform.objects.update(keep_identity=True)
    launched(client, platform, Launch(user="student-3", name="Ada Student", email="ada@example.edu"))
    kept = LtiUser.objects.get(sub="student-3")
    assert (kept.name, kept.email) == ("Ada Student", "ada@example.edu")


def deep_link(client, platform: Platform, book: str, chapter: str = "") -> tuple[dict, str]:
    """An instructor's deep-linking launch and pick: (the content item the platform accepted, the pick's form)."""
    picker = launched(client, platform, Launch(user="teacher-3", roles=[INSTRUCTOR], deep_link=True))
    assert picker.status_code == 200, picker.content[:400]
    assert f'value="{book}"' in picker.content.decode()
    _, fields = form_fields(picker.content.decode())
    pick = {"launch": fields["launch"], "book": book, "chapter": chapter}
    answer = client.post("/lti/deep-link/pick", pick)
    assert answer.status_code == 200, answer.content[:400]
    action, response = form_fields(answer.content.decode())
    assert action == f"{platform.url}/deep-link-return"
    items = platform.deep_link_response(response["JWT"], tool_jwks=client.get("/lti/jwks").json())
    return items[0], fields["launch"]


def test_deep_linking_round_trip_opens_the_picked_book_and_chapter(client, platform):
    unbind()
    item, launch_id = deep_link(client, platform, BOOK, chapter="Getting started")
    assert item["type"] == "ltiResourceLink" and item["url"] == f"{TOOL}/lti/launch"
    assert item["custom"] == {"book": BOOK, "chapter": "Getting started"}
    again = client.post("/lti/deep-link/pick", {"launch": launch_id, "book": BOOK})
    assert again.status_code == 400  # the pick is used once
    response = launched(client, platform, Launch(custom=item["custom"]))
    assert response["Location"] == f"/?book={BOOK}&q=Getting+started"


def test_each_deployment_opens_its_own_courses_book(client, platform):
    """One platform, a deployment per course (``lti platform add`` again with another deployment id and book): each
    launch opens its deployment's book, and may not ask for the other course's."""
    Book.objects.create(slug="lti-course-two", title="Course book two", embedder_name="none", embedder_dimension=1)
    summary, created = registry.add(**platform.registration_args() | {"deployment_id": "dep-2"}, book="lti-course-two")
    assert not created and summary["deployment_books"] == {"dep-1": BOOK, "dep-2": "lti-course-two"}
    assert summary["book"] == BOOK, "the platform's own book is the first registration's"
    assert launched(client, platform, Launch())["Location"] == f"/?book={BOOK}"
    platform.deployment_id = "dep-2"
    assert launched(client, platform, Launch())["Location"] == "/?book=lti-course-two"
    refused = launched(client, platform, Launch(custom={"book": BOOK}))
    assert refused.status_code == 403 and "opens the book “lti-course-two” only" in refused.content.decode()


def test_a_learner_cannot_deep_link(client, platform):
    response = launched(client, platform, Launch(deep_link=True))
    assert response.status_code == 403


def test_keys_rotate_on_both_sides(client, platform):
    assert launched(client, platform, Launch()).status_code == 302
    platform.rotate()  # signs with a new key, the old one still published
    assert launched(client, platform, Launch()).status_code == 302
    platform.rotate(retire_old=True)  # only the newest is published: bookchat fetched the JWKS again
    assert launched(client, platform, Launch()).status_code == 302
    # the tool's side: django-lti's rotate_keys; the platform verifies the deep link signed with the new key
    unbind()
    first = Key.objects.active().get()
    Key.objects.filter(pk=first.pk).update(datetime_created=timezone.now() - timedelta(days=8))
    call_command("rotate_keys", stdout=StringIO())
    assert Key.objects.active().count() == 1 and not Key.objects.get(pk=first.pk).is_active
    published = client.get("/lti/jwks").json()["keys"]
    assert [key["kid"] for key in published] == [str(Key.objects.active().get())]
    item, _ = deep_link(client, platform, BOOK)
    assert item["custom"]["book"] == BOOK


def _tamper(**claims):
    def change(body: dict) -> dict:
        return {**body, **claims}
    return change


ROLES = "https://purl.imsglobal.org/spec/lti/claim/roles"
BAD = [
    # (id, launch, before (platform → None), fields changed, status, the page says)
    ("expired token", Launch(tamper=_tamper(iat=now() - 900, exp=now() - 600)), None, {}, 400, "expired"),
    ("future token", Launch(tamper=_tamper(iat=now() + 600, exp=now() + 900)), None, {}, 400, "not yet valid"),
    ("wrong audience", Launch(tamper=_tamper(aud="another-tool", azp="another-tool")), None, {}, 400,
     "Registration not found"),
    ("wrong issuer", Launch(tamper=_tamper(iss="https://lms.example.org")), None, {}, 400, "Registration not found"),
    ("unknown deployment", Launch(tamper=_tamper(**{"https://purl.imsglobal.org/spec/lti/claim/deployment_id":
                                                     "dep-unknown"})), None, {}, 400, "Unable to find deployment"),
    ("bad signature", Launch(sign_with=new_key()), None, {}, 400, "Signature verification failed"),
    ("unreachable JWKS", Launch(), lambda p: LtiRegistration.objects.update(keyset_url="http://127.0.0.1:9/jwks"),
     {}, 400, "Error during fetch URL"),
    ("wrong JWKS", Launch(), lambda p: setattr(p, "jwks_broken", True), {}, 400, "Must be JSON"),
    ("JWKS without the key", Launch(), lambda p: (p.rotate(), setattr(p, "hide_newest", True)), {}, 400,
     "Unable to find public key"),
    ("missing state", Launch(), None, {"state": None}, 400, "no OIDC state"),
    ("mismatched state", Launch(), None, {"state": "state-not-ours"}, 400, "unknown, expired or was already used"),
    ("mismatched nonce", Launch(tamper=_tamper(nonce="a-nonce-bookchat-never-sent")), None, {}, 400,
     "nonce does not match"),
    ("message type", Launch(tamper=_tamper(**{"https://purl.imsglobal.org/spec/lti/claim/message_type":
                                               "LtiSubmissionReviewRequest"})), None, {}, 400,
     "does not handle the message type"),
    ("version", Launch(tamper=_tamper(**{"https://purl.imsglobal.org/spec/lti/claim/version": "1.1"})), None, {},
     400, "LTI 1.3.0 launches"),
    ("no roles", Launch(roles=[]), None, {}, 403, "names no role"),
    ("book that doesn't exist", Launch(custom={"book": "no-such-book"}),
     lambda p: unbind(), {}, 404, "There is no book"),
    ("another course's book", Launch(custom={"book": "no-such-book"}), None, {}, 403, "opens the book"),
]


@pytest.mark.parametrize(("launch", "before", "changed", "status", "says"), [row[1:] for row in BAD],
                         ids=[row[0] for row in BAD])
def test_a_bad_launch_gets_a_clear_page_and_stores_nothing(client, platform, launch, before, changed, status, says):
    if before is not None:
        before(platform)
    action, fields = launch_form(client, platform, launch)
    fields.update(changed)
    fields = {k: v for k, v in fields.items() if v is not None}
    before_counts = stored()
    response = client.post(action, fields)
    assert response.status_code == status, response.content[:500]
    page = response.content.decode()
    assert says in page, page[:800]
    assert "Nothing was stored" in page
    assert stored() == before_counts
    assert LAUNCH_SESSION not in client.session


def test_a_replayed_launch_is_refused(client, platform):
    action, fields = launch_form(client, platform, Launch())
    assert client.post(action, fields).status_code == 302
    replayed = client.post(action, fields)
    assert replayed.status_code == 400
    assert "already used" in replayed.content.decode()


def test_a_login_from_an_unknown_platform_is_refused(client, platform):
    platform.client_id = "unknown-client"
    response = client.get(platform.login_url(Launch()))
    assert response.status_code == 400
    assert "not registered" in response.content.decode()


def html_tag(page) -> str:
    return re.search(r"<html[^>]*>", page.content.decode()).group(0)


def test_a_launch_in_spanish_opens_the_chat_page_in_spanish_over_the_browsers_language(client, platform):
    response = launched(client, platform, Launch(locale="es-ES"))
    page = client.get(response["Location"], headers={"Accept-Language": "fr-FR,fr"})
    assert html_tag(page) == '<html lang="es" dir="ltr">' and page["Content-Language"] == "es"
    assert '<label for="question">Tu pregunta</label>' in page.content.decode()
    chinese = Client()
    page = chinese.get(launched(chinese, platform, Launch(locale="zh-CN"))["Location"])
    assert html_tag(page) == '<html lang="zh-hans" dir="ltr">', "the LMS's regional tag, as bookchat names it"


def test_a_launch_in_a_language_without_a_catalogue_leaves_the_browsers(client, platform):
    response = launched(client, platform, Launch(locale="xx-YY"))
    assert html_tag(client.get(response["Location"], headers={"Accept-Language": "fr"})) == \
        '<html lang="fr" dir="ltr">'
    assert html_tag(client.get(response["Location"])) == '<html lang="en" dir="ltr">'


def test_the_switch_wins_over_the_launchs_language_and_keeps_its_cookie_in_the_frame(client, platform):
    response = launched(client, platform, Launch(locale="es-ES"))
    switched = client.post("/i18n/setlang/", {"language": "ur", "next": response["Location"]})
    assert switched.status_code == 302
    assert "Partitioned" in switched.cookies["django_language"].OutputString(), "kept by a browser in the LMS's frame"
    page = client.get(response["Location"])
    assert html_tag(page) == '<html lang="ur" dir="rtl">' and "آپ کا سوال" in page.content.decode()
    again = launched(client, platform, Launch(locale="es-ES"))  # the next launch: the reader's choice still holds
    assert html_tag(client.get(again["Location"])) == '<html lang="ur" dir="rtl">'


def test_the_deep_link_pick_speaks_the_instructors_language_and_titles_the_link_in_it(client, platform):
    unbind()
    picker = launched(client, platform, Launch(user="teacher-4", roles=[INSTRUCTOR], deep_link=True, locale="es-419"))
    page = picker.content.decode()
    assert html_tag(picker) == '<html lang="es" dir="ltr">'
    assert "<h1>Añade bookchat a tu curso</h1>" in page and '<option value="">Todo el libro</option>' in page
    _, fields = form_fields(page)
    answer = client.post("/lti/deep-link/pick", {"launch": fields["launch"], "book": BOOK})
    _, response = form_fields(answer.content.decode())
    items = platform.deep_link_response(response["JWT"], tool_jwks=client.get("/lti/jwks").json())
    assert items[0]["title"] == "Pregunta a Course book one"


def test_a_refused_launch_speaks_the_launchs_language_once_verified_else_the_browsers(client, platform):
    unbind()
    refused = launched(client, platform, Launch(custom={"book": "no-such-book"}, locale="ur-PK"))
    page = refused.content.decode()
    assert refused.status_code == 404 and html_tag(refused) == '<html lang="ur" dir="rtl">'
    assert "یہاں “no-such-book” نام کی کوئی کتاب نہیں" in page and "کچھ بھی محفوظ نہیں کیا گیا" in page
    assert LAUNCH_SESSION not in client.session
    # a state bookchat never sent: the token's claims are not the platform's word, the browser's language is
    action, fields = launch_form(client, platform, Launch(locale="ur-PK"))
    refused = client.post(action, {**fields, "state": "state-not-ours"}, headers={"Accept-Language": "es"})
    assert html_tag(refused) == '<html lang="es" dir="ltr">'
    assert "Este acceso es desconocido, ha caducado o ya se usó" in refused.content.decode()


def _privacy(body: dict) -> dict:
    """The launch as a data-privacy message: no resource link or context, the user it is for."""
    claims = "https://purl.imsglobal.org/spec/lti/claim/"
    body = {k: v for k, v in body.items() if k not in (claims + "resource_link", claims + "context")}
    return {**body, claims + "message_type": "DataPrivacyLaunchRequest", claims + "for_user": {"user_id": body["sub"]}}


def test_the_data_privacy_launch_leads_to_the_privacy_page_which_the_platform_may_frame(client, platform):
    launch = launched(client, platform, Launch(tamper=_privacy))
    assert launch.status_code == 302 and launch["Location"] == "/privacy/"
    page = client.get(launch["Location"])
    assert page.status_code == 200
    assert "pseudonym" in page.content.decode() and "What leaves the server" in page.content.decode()
    assert f"frame-ancestors {platform.url}" in page["Content-Security-Policy"], "shown inside the LMS's frame"
    assert "X-Frame-Options" not in page
    assert LAUNCH_SESSION not in client.session, "a data-privacy launch starts no session"
    assert client.get("/")["X-Frame-Options"] == "DENY", "the other pages stay unframeable"


def test_require_launch_turns_the_public_page_away(client, platform, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LTI_REQUIRE_LAUNCH": True}
    assert client.get("/").status_code == 403
    launched(client, platform, Launch())
    assert client.get(f"/?book={BOOK}").status_code == 200


def run(*args: str) -> tuple[int, dict | str]:
    """``manage.py lti …`` by name: (exit status, its JSON or text)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("lti", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exc:
        status = exc.code
    text = out.getvalue() or err.getvalue()
    return status, (json.loads(text) if "--json" in args and text.strip().startswith("{") else text)


PLATFORM_ARGS = ["--issuer", "https://lms.example.edu", "--client-id", "10000000000001", "--deployment-id",
                 "1:abc", "--auth-url", "https://lms.example.edu/api/lti/authorize_redirect", "--token-url",
                 "https://lms.example.edu/login/oauth2/token", "--keyset-url", "https://lms.example.edu/api/lti/jwks"]


def test_lti_platform_add_list_remove(db):
    Book.objects.create(slug=BOOK, title="Course book one", embedder_name="none", embedder_dimension=1)
    status, added = run("platform", "add", *PLATFORM_ARGS, "--book", BOOK, "--json")
    assert status == 0 and added["deployments"] == ["1:abc"] and added["book"] == BOOK
    assert added["frame_origins"] == ["https://lms.example.edu"] and added["trusted"] is False
    status, again = run("platform", "add", *PLATFORM_ARGS, "--json")
    assert status == 2 and again["error"] == "already_registered"
    status, _ = run("platform", "add", *PLATFORM_ARGS[:5], "2:def", *PLATFORM_ARGS[6:], "--json")
    assert status == 0
    status, listed = run("platform", "list", "--json")
    assert [p["deployments"] for p in listed["platforms"]] == [["1:abc", "2:def"]]
    status, text = run("platform", "list")
    assert "https://lms.example.edu" in text and BOOK in text
    status, removed = run("platform", "remove", "--issuer", "https://lms.example.edu", "--client-id",
                          "10000000000001", "--deployment-id", "2:def", "--json")
    assert status == 0 and "2:def" in removed["removed"]
    status, _ = run("platform", "remove", "--issuer", "https://lms.example.edu", "--client-id", "10000000000001")
    assert status == 0 and not LtiRegistration.objects.exists()
    status, gone = run("platform", "remove", "--issuer", "https://lms.example.edu", "--client-id", "x", "--json")
    assert status == 2 and gone["error"] == "unknown_platform"


@pytest.mark.parametrize(("change", "error"), [
    (("--auth-url", "not a url"), "bad_url"),
    (("--keyset-url", "ftp://lms.example.edu/jwks"), "bad_url"),
    (("--issuer", ""), "missing_value"),
    (("--book", "no-such-book"), "unknown_book"),
])
def test_lti_platform_add_refuses_wrong_input(db, change, error):
    args = list(PLATFORM_ARGS)
    if change[0] in args:
        args[args.index(change[0]) + 1] = change[1]
    else:
        args += list(change)
    status, said = run("platform", "add", *args, "--json")
    assert status == 2 and said["error"] == error
    assert not LtiRegistration.objects.exists()


@pytest.mark.parametrize("args", [["platform", "add", "--issuer", "https://lms.example.edu"],  # missing flags
                                  ["platform", "add", *PLATFORM_ARGS, "--colour", "blue"],  # an unknown one
                                  ["platform", "frobnicate"]])
def test_lti_platform_refuses_missing_and_unknown_flags(db, args):
    with pytest.raises(CommandError):
        call_command("lti", *args)


def test_lti_tool_config_json_keys(db):
    status, config = run("tool-config", "--base-url", "https://chat.example.org", "--json")
    assert status == 0
    assert config["login_url"] == "https://chat.example.org/lti/login"
    assert config["launch_url"] == "https://chat.example.org/lti/launch"
    assert config["jwks_url"] == "https://chat.example.org/lti/jwks"
    assert config["deep_link_url"] == "https://chat.example.org/lti/deep-link"
    assert config["canvas"]["oidc_initiation_url"] == config["login_url"]
    assert config["canvas"]["public_jwk_url"] == config["jwks_url"]
    status, said = run("tool-config", "--json")
    assert status == 2 and said["error"] == "no_base_url"
    status, text = run("tool-config", "--base-url", "https://chat.example.org")
    assert "Canvas developer key" in text


def test_the_admin_shows_platforms_and_the_app_has_its_own_label(admin_client, platform):
    assert LtiConfig.label == "bookchat_lti"
    page = admin_client.get(f"/admin/bookchat_lti/ltiplatform/{LtiPlatform.objects.get().pk}/change/")
    assert page.status_code == 200 and b"Trusted" in page.content
    assert LtiPlatformAdmin.fields[:2] == ["registration", "book"]


def test_a_login_clears_the_logins_abandoned_before_it(client, platform):
    storage.put("state-abandoned", {"nonce": "n"}, 1)
    LaunchRecord.objects.filter(key="state-abandoned").update(expires_at=timezone.now() - timedelta(seconds=1))
    storage.put("state-in-flight", {"nonce": "m"}, 600)
    assert client.get(platform.login_url(Launch())).status_code == 302
    keys = set(LaunchRecord.objects.values_list("key", flat=True))
    assert "state-abandoned" not in keys and "state-in-flight" in keys and len(keys) == 2  # and the new login's


def test_expired_launch_records_are_swept_and_a_refusal_says_why(db):
    storage.put("state-old", {"nonce": "n"}, 1)
    LaunchRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert storage.take("state-old") is None  # expired: not taken, and gone
    storage.put("state-old", {"nonce": "n"}, 1)
    LaunchRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert storage.sweep() == 1
    refusal = launching.LaunchRefused("no", status=403)
    assert (refusal.message, refusal.status) == ("no", 403)
    assert views.privacy_page(RequestFactory().get("/lti/privacy"))["Location"] == "/privacy/"
    assert "pseudonym" in notices.INTRO, "the privacy page the data-privacy launch leads to names the pseudonym"
