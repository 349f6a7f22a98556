"""The learner's launch in Chromium as a student meets it: the platform's course page (``lti1p3platform`` on
``127.0.0.1``) frames bookchat (on ``localhost``, another site) with third-party cookies blocked, as Chromium's
"Block third-party cookies" setting does (the profile's preference, set before the browser starts). The launch
carries no cookie (its state is in the database) and the session after it lives in partitioned cookies
(``chat.lti.framing``): the student asks a question inside the frame and reads the answer."""

from __future__ import annotations

import json

import pytest

from tests.conftest import committed
from tests.support.browser import CHROMIUM_ARGS, LiveServer, chromium
from tests.support.lti_platform import Launch
from tests.support.lti_platform import LtiPlatform as Platform

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.drill]  # seconds long: for make test's time
BOOK = "bookchat-manual"
TIMEOUT = 30_000


@pytest.fixture
def course(manual_book, django_db_blocker, settings, tmp_path):
    """bookchat on ``localhost``, a platform on ``127.0.0.1`` registered with it (committed: the live server's
    threads see it), and what they stored removed afterwards."""
    from lti_tool.models import LtiRegistration

    from audit.models import AuditLog
    from chat.lti import registry
    from chat.models import Conversation

    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0, "GENERATION_SECONDS": 30.0}
    with django_db_blocker.unblock(), LiveServer() as server:
        tool = server.url.replace("127.0.0.1", "localhost")
        with Platform(tool) as platform:
            committed(lambda: registry.add(**platform.registration_args(), book=BOOK))
            yield platform
            committed(lambda: LtiRegistration.objects.all().delete())
            committed(lambda: (AuditLog.objects.exclude(learner="").delete(),
                               Conversation.objects.exclude(learner="").delete()))


def blocking_third_party_cookies(folder) -> str:
    """A Chromium profile whose cookie setting is "Block third-party cookies"."""
    (folder / "Default").mkdir(parents=True)
    (folder / "Default" / "Preferences").write_text(json.dumps(
        {"profile": {"cookie_controls_mode": 1, "block_third_party_cookies": True}}))
    return str(folder)


def test_a_learner_launched_in_the_platforms_frame_asks_and_reads_the_answer(course, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    course.launches["week-1"] = Launch(user="student-42")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            blocking_third_party_cookies(tmp_path / "profile"), executable_path=chromium(), args=CHROMIUM_ARGS,
            headless=True)
        try:
            context.set_default_timeout(TIMEOUT)
            page = context.new_page()
            page.goto(f"{course.url}/course/week-1")
            frame = page.frame_locator("#tool")
            frame.locator("#question").fill("How do I ingest a folder?")
            frame.locator("#ask-button").click()
            answer = frame.locator("article.turn .answer-text").last
            expect(answer).to_contain_text("ingest", ignore_case=True, timeout=TIMEOUT)  # the stream's final text
            expect(frame.locator("article.turn .source").first).to_be_visible()
            # the third-party cookie that is not partitioned was blocked: a plain cookie never reached the tool
            cookies = context.cookies(course.tool_url)
            assert cookies and all(cookie.get("partitionKey") or cookie["sameSite"] == "None" for cookie in cookies)
        finally:
            context.close()
    from audit.models import AuditLog

    row = committed(lambda: AuditLog.objects.exclude(learner="").order_by("-created_at").first())
    assert row is not None and row.book_slug.startswith(BOOK)
