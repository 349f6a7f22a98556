"""Accessibility in a real browser: WCAG 2.1 A and AA, held by axe-core, and what axe can't see, by hand.

- axe-core (the copy axe-playwright-python ships in its wheel: nothing is fetched at run time) runs in Chromium
  with the rules tagged wcag2a, wcag2aa, wcag21a and wcag21aa against every state a reader or a reviewer meets:
  the chat page empty, answering, answered (a code block, a refusal, a low-confidence answer), light and dark; the
  widget closed, open, searching, with "Ask about this" on a selection, and answered, light and dark, on a page of
  another origin (axe reads the widget's open shadow root; the host page is the site's, not ours); "Ask the course
  staff" on the page and in the widget (the form, a hand-off sent, the staff's reply under its answer and in "Your
  questions to the course staff") and the status page (a reply, and a wrong link), light and dark; the admin
  pages reviewers and staff use, the course staff's inbox, hand-offs and staff answers among them (the section
  search open, a preview, a refused reply), light and dark. Any violation fails the test with its rule, impact,
  element and summary; no rule is disabled.
- What axe can't judge: the answer is announced once, when it is final, not token by token (a recorder on the
  live regions while an LLM streams); focus moves in document order and every stop shows a ring; 320 px and
  200 % zoom show everything without sideways scrolling; prefers-reduced-motion stops every animation.

The fixtures and helpers are test_browser.py's (one live server, one Chromium per module).
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import uuid

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.conftest import committed
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    CODE_QUESTION,
    QUESTION,
    admin_user,
    ask_widget,
    browser,
    browser_settings,
    contrast,
    database_open,
    log_in,
    open_docs,
    open_page,
    servers,
    widget_key,
)
from tests.test_handoffs_browser import handoffs_removed, reply_to  # noqa: F401 (a fixture, and the staff's reply)

# axe in Chromium over every page state (~85 s): `make drills`, which CI runs after `make test`, so that make test
# stays under 10 minutes on 2 cores.
pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.drill]

WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE = Axe()
NOT_COVERED = "What is the best recipe for chocolate chip cookies?"  # the manual refuses it, with related sections
# Thresholds no answer reaches, and unsure answers shown: the manual's answer comes back low-confidence, with a
# disclaimer (as tests/test_confidence.py makes one).
LOW_CONFIDENCE = {"CONFIDENCE_HIGH": 0.9999, "CONFIDENCE_MEDIUM": 0.999, "CONFIDENCE_FLOOR": 0.9985,
                  "UNSURE_ANSWERS": "answer"}  # shown, unsure, below the floor


def wcag_violations(page, context: str | None = None) -> list[str]:
    """axe-core's WCAG 2.1 A/AA violations on ``page`` (within the ``context`` selector), one line per element:
    rule, impact, the element (a shadow root's inside after ``>>``) and what to fix."""
    results = AXE.run(page, context=context,
                      options={"runOnly": {"type": "tag", "values": WCAG_21_AA}, "resultTypes": ["violations"]})
    return [f"{rule['id']} ({rule['impact']}) {element(node['target'])}: {' '.join(node['failureSummary'].split())}"
            for rule in results.response["violations"] for node in rule["nodes"]]


def element(target: list) -> str:
    """axe's target of a node: a selector, or (in a shadow root) the host's selector and the one inside."""
    return " >> ".join(part if isinstance(part, str) else " >> ".join(part) for part in target)


def assert_accessible(page, state: str, context: str | None = None) -> None:
    found = wcag_violations(page, context)
    assert not found, f"{state}: {len(found)} WCAG 2.1 A/AA violation(s):\n" + "\n".join(found)


def assert_none_found(found: dict[str, list[str]]) -> None:
    """For a walk through several pages: every page's violations, under the page's name, in one failure."""
    found = {state: lines for state, lines in found.items() if lines}
    assert not found, "WCAG 2.1 A/AA violations:\n" + "\n".join(
        f"{state}:\n  " + "\n  ".join(lines) for state, lines in found.items())


# -- the chat page -------------------------------------------------------------------------------------------
def ask_on_page(page, question: str) -> None:
    answered = page.locator("article.turn:not(.pending)").count()
    page.fill("#question", question)
    page.press("#question", "Enter")
    page.wait_for_function("n => document.querySelectorAll('article.turn:not(.pending)').length > n", arg=answered)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_chat_page_meets_wcag_21_aa_empty_answering_and_answered(servers, open_page, settings, theme):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", color_scheme=theme)
    assert_accessible(page, f"the empty page ({theme})")

    held = []
    page.route("**/api/v1/ask/stream", lambda route: held.append(route))  # the answer waits while axe looks
    page.fill("#question", CODE_QUESTION)
    page.press("#question", "Enter")
    page.locator("article.turn.pending .answer-text.streaming").wait_for()
    page.wait_for_function("() => document.getElementById('live').textContent")
    assert_accessible(page, f"the page answering ({theme})")
    held[0].continue_()
    page.unroute("**/api/v1/ask/stream")
    page.locator("article.turn:not(.pending) .bookchat-code").wait_for()
    assert_accessible(page, f"an answer with a code block ({theme})")

    ask_on_page(page, NOT_COVERED)
    assert page.locator("article.turn").last.locator(".suggestions").count() == 1, "a refusal with related sections"
    assert_accessible(page, f"a refusal ({theme})")

    settings.BOOKCHAT = {**settings.BOOKCHAT, **LOW_CONFIDENCE}
    ask_on_page(page, QUESTION)
    last = page.locator("article.turn").last
    assert last.locator(".badge.level-unsure").count() == 1 and last.locator(".disclaimer").count() == 1
    assert_accessible(page, f"an unsure answer ({theme})")
    assert errors == []


# -- the widget on another origin ----------------------------------------------------------------------------
WIDGET = "#bookchat-widget"  # the host page is the site's (the test site's styles are hostile on purpose)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_widget_meets_wcag_21_aa_closed_open_searching_selecting_and_answered(servers, open_page, widget_key,
                                                                            theme):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin), color_scheme=theme)
    page.evaluate("(theme) => document.documentElement.setAttribute('data-theme', theme)", theme)
    assert_accessible(page, f"the widget closed ({theme})", WIDGET)
    page.locator(".bc-launcher").click()
    assert_accessible(page, f"the widget open ({theme})", WIDGET)

    page.locator(".bc-mode-search").click()
    page.locator(".bc-search-input").fill("publishable wid")
    page.wait_for_function("() => document.getElementById('bookchat-widget').shadowRoot"
                           ".querySelectorAll('.bc-result').length > 0")
    page.keyboard.press("ArrowDown")
    assert_accessible(page, f"the widget's search results ({theme})", WIDGET)
    page.locator(".bc-mode-ask").click()

    page.evaluate("""() => { const p = document.getElementById('ingest-folder-text');
                             const range = document.createRange(); range.selectNodeContents(p);
                             const selection = getSelection(); selection.removeAllRanges(); selection.addRange(range);
                             p.dispatchEvent(new MouseEvent('mouseup', {bubbles: true})); }""")
    bubble = page.locator(".bc-ask-selection")
    bubble.wait_for(state="visible")
    assert_accessible(page, f"the widget's 'Ask about this' ({theme})", WIDGET)
    bubble.click()
    page.locator(".bc-selection").wait_for(state="visible")
    assert_accessible(page, f"the widget with a selection to ask about ({theme})", WIDGET)

    ask_widget(page, CODE_QUESTION)
    page.locator(".bc-answer[data-state=done] .bookchat-code").first.wait_for()  # the answer shows code
    ask_widget(page, NOT_COVERED)
    page.locator(".bc-answer[data-state=done][data-refused=true]").wait_for()
    assert_accessible(page, f"the widget answered: code, a refusal ({theme})", WIDGET)
    assert errors == []


# -- "Ask the course staff": the form, a hand-off sent, the reply; the status page ----------------------------------
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_ask_the_course_staff_meets_wcag_21_aa_on_the_page_the_status_page_and_the_widget(
        servers, open_page, widget_key, handoffs_removed, theme):
    bookchat, docs = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", color_scheme=theme)
    ask_on_page(page, NOT_COVERED)
    turn = page.locator("article.turn").last
    answer_id = turn.get_attribute("data-answer-id")
    turn.locator("details.handoff summary").click()
    turn.locator("textarea[name=note]").fill("For week 3")
    found = {"the page's hand-off form": wcag_violations(page)}
    turn.locator(".handoff-form button[type=submit]").click()
    turn.locator(".handoff-status[data-status=open]").wait_for()
    found["a hand-off sent, on the page"] = wcag_violations(page)
    reply_to(answer_id)
    page.reload()
    page.locator(".handoff-status[data-status=answered]").wait_for()
    found["the staff's reply under its answer"] = wcag_violations(page)
    status_url = page.locator(".handoff-status .handoff-link a").get_attribute("href")
    page.click(".new-conversation button")
    page.locator("#staff-questions .handoff-status").wait_for()
    found["your questions to the course staff"] = wcag_violations(page)
    page.goto(f"{bookchat.url}{status_url}")
    found["the status page"] = wcag_violations(page)
    page.goto(f"{bookchat.url}/api/v1/handoffs/not-a-token")
    found["the status page of a wrong link"] = wcag_violations(page)

    widget, more_errors = open_docs(open_page, docs, widget_key(docs.origin), color_scheme=theme)
    widget.evaluate("(theme) => document.documentElement.setAttribute('data-theme', theme)", theme)
    widget.locator(".bc-launcher").click()
    ask_widget(widget, NOT_COVERED)
    answer = widget.locator(".bc-answer[data-state=done][data-refused=true]").last
    answer.wait_for()
    answer.locator(".bc-handoff-open").click()
    answer.locator(".bc-handoff-note").fill("For week 3")
    found["the widget's hand-off form"] = wcag_violations(widget, WIDGET)
    answer.locator(".bc-handoff-send").click()
    answer.locator(".bc-handoff-status[data-status=open]").wait_for()
    found["a hand-off sent, in the widget"] = wcag_violations(widget, WIDGET)
    reply_to(answer.get_attribute("data-answer-id"))
    widget.reload()
    widget.locator(".bc-launcher").click()
    widget.locator(".bc-staff .bc-handoff-status[data-status=answered]").wait_for()
    found["the staff's replies in the widget"] = wcag_violations(widget, WIDGET)
    assert_none_found({f"{state} ({theme})": lines for state, lines in found.items()})
    assert all("404" in error for error in errors) and more_errors == [], (errors, more_errors)


# -- the admin: what reviewers and staff use -----------------------------------------------------------------
def audit_rows() -> list[int]:
    """An answer, a low-confidence one (in the review queue), a refusal and a failure (no level), as the lists,
    the filters, the dashboard and the gaps show them."""
    from audit.models import AuditLog

    source = {"n": 1, "heading_path": "Ingest a book > Ingest a folder", "url": "https://docs.example.org/ingest",
              "score": 0.7, "cited": True}
    rows = [AuditLog.objects.create(answer_id=uuid.uuid4(), channel="page", book_slug=BOOK, question=question,
                                    answer=answer, confidence=confidence, confidence_level=level, status=status,
                                    refused=status == "not_covered", sources=[source] if level else [])
            for question, answer, confidence, level, status in (
                ("How do I ingest a folder?", "Run `manage.py ingest PATH` [1].", 0.9, "high", "answered"),
                ("How do I delete a book?", "Run `manage.py ingest --prune` [1].", 0.05, "low", "answered"),
                ("Which pizza is best?", "The book doesn't cover this.", 0.01, "low", "not_covered"),
                ("Why did this fail?", "", None, "", "error"))]
    return [row.pk for row in rows]


@pytest.mark.parametrize("theme", ["light", "dark"])  # Django's admin follows prefers-color-scheme
def test_admin_pages_reviewers_and_staff_use_meet_wcag_21_aa(servers, open_page, admin_user, theme):
    from audit.models import AuditLog
    from ingestion.models import IngestionJob

    bookchat, _ = servers
    base = f"{bookchat.url}/admin"
    rows = committed(audit_rows)
    job = committed(lambda: IngestionJob.objects.create(
        book_slug="a11y-upload", book_title="Upload", files=["docs.zip"], status="done", files_done=2, files_total=2,
        ignored=["docs/img/logo.png"], report={"files_indexed": 2, "chunks_added": 4, "errors": [],
                                               "warnings": ["docs/intro.md: a heading level skipped"]}).pk)
    try:
        admin_user("ruth", groups=["Reviewers"])
        admin_user("stan", perms=["ingestion.add_ingestionjob", "ingestion.view_ingestionjob"])
        page, errors = open_page(f"{base}/login/", color_scheme=theme)
        found = {"the admin's login": wcag_violations(page)}
        log_in(page, bookchat.url, "ruth")
        for path, state in (("/", "the admin's index (a reviewer)"),
                            ("/audit/auditlog/", "the audit list"),
                            (f"/audit/auditlog/{rows[1]}/change/", "an audit row"),
                            ("/audit/reviewqueueitem/", "the review queue"),
                            (f"/audit/reviewqueueitem/{rows[1]}/change/", "a review"),
                            ("/audit/auditlog/dashboard/", "the dashboard"),
                            ("/audit/auditlog/gaps/", "the coverage gaps")):
            page.goto(base + path)
            found[state] = wcag_violations(page)
        page.context.clear_cookies()
        log_in(page, bookchat.url, "stan")
        for path, state in (("/ingestion/ingestionjob/add/", "the upload form"),
                            ("/ingestion/ingestionjob/", "the upload list"),
                            (f"/ingestion/ingestionjob/{job}/change/", "an upload's job page")):
            page.goto(base + path)
            found[state] = wcag_violations(page)
        assert_none_found(found)
        assert errors == []
    finally:
        committed(lambda: (AuditLog.objects.filter(pk__in=rows).delete(),
                           IngestionJob.objects.filter(pk=job).delete()))


def staff_rows() -> tuple[int, int, int]:
    """An open hand-off with its conversation, an answered one citing a section of the manual, and a staff answer
    waiting for review: what the course staff's inbox, pages and forms show."""
    from audit.models import Handoff
    from chat.models import StaffAnswer
    from chat.pipeline.staff_answers import cite
    from ingestion.models import Book, Chunk

    book = Book.objects.get(slug=BOOK)
    cited = cite(book, [Chunk.objects.filter(book=book, document__path="using/01-ingest.md", anchor__gt="")
                        .order_by("ordinal").first().id])
    conversation = [{"question": "How do I ingest a folder?", "selected_text": "Point ingest at the folder.",
                     "answer": "Run `manage.py ingest PATH` [1].", "confidence_level": "high", "status": "answered",
                     "sources": [{"n": 1, "heading_path": "Ingest a book > Ingest a folder", "cited": True,
                                  "url": "https://docs.example.org/ingest"}]},
                    {"question": "Can I import pages from Notion?", "answer": "The book doesn't mention Notion.",
                     "confidence_level": "low", "status": "not_covered", "sources": []}]
    waiting = Handoff.objects.create(answer_id=uuid.uuid4(), book_slug=BOOK, channel="widget", note="I tried twice.",
                                     contact_email="student@example.edu", conversation=conversation)
    answered = Handoff.objects.create(answer_id=uuid.uuid4(), book_slug=BOOK, channel="page", status="answered",
                                      conversation=conversation, reply="Export them as **Markdown** first [1].",
                                      citations=cited)
    kept = StaffAnswer.objects.create(book=book, question="Can I import pages from Notion?", citations=cited,
                                      answer="Export them as Markdown first [1].", status="needs_review",
                                      review_reason="the section “Ingest a folder” changed", served=3)
    return waiting.pk, answered.pk, kept.pk


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_course_staffs_pages_meet_wcag_21_aa(servers, open_page, admin_user, theme):
    """The inbox, a hand-off (open, answered), the section search open on its results, a preview, a refused reply,
    and the staff answers' list and page."""
    from audit.models import Handoff
    from chat.models import StaffAnswer

    bookchat, _ = servers
    base = f"{bookchat.url}/admin"
    waiting, answered, kept = committed(staff_rows)
    try:
        admin_user("ruth", groups=["Reviewers"])
        page, errors = open_page(f"{base}/login/", color_scheme=theme)
        log_in(page, bookchat.url, "ruth")
        found = {}
        for path, state in (("/audit/handoff/", "the inbox"), (f"/audit/handoff/{answered}/change/", "a reply"),
                            ("/chat/staffanswer/", "the staff answers"),
                            (f"/chat/staffanswer/{kept}/change/", "a staff answer waiting for review"),
                            (f"/audit/handoff/{waiting}/change/", "an open hand-off")):
            page.goto(base + path)
            found[state] = wcag_violations(page)
        page.fill("#id_citations_search", "ingest fol")
        page.locator("#id_citations_results [role=option]").first.wait_for()
        page.keyboard.press("ArrowDown")
        found["the section search's results"] = wcag_violations(page)
        page.keyboard.press("Enter")
        assert page.input_value("#id_citations").strip(), "the section chosen is cited"
        assert "Cited as [1]" in page.text_content(".bookchat-picker-status")
        page.fill("#id_answer", "Export them as **Markdown** first [1].")
        page.click(".bookchat-preview-button")
        page.locator(".bookchat-preview-body strong").wait_for()
        found["a preview"] = wcag_violations(page)
        page.fill("#id_citations", "https://elsewhere.example/not-the-book")
        page.click("button[value=reply]")
        page.locator(".errorlist").first.wait_for()
        found["a refused reply"] = wcag_violations(page)
        assert_none_found(found)
        assert errors == []
    finally:
        committed(lambda: (Handoff.objects.filter(pk__in=[waiting, answered]).delete(),
                           StaffAnswer.objects.filter(pk=kept).delete()))


# -- what axe can't see: the answer announced once, when it is final ---------------------------------------------
# Records, in ``window.announced``, each text a shown live region of ``root`` (the document, or the widget's shadow
# root) comes to hold: a screen reader reads a live region when its text changes.
RECORD_LIVE_REGIONS = """root => {
  const LIVE = '[aria-live]:not([aria-live=off]), [role=status], [role=log], [role=alert]';
  const last = new Map();
  window.announced = [];
  const record = () => root.querySelectorAll(LIVE).forEach(region => {
    const text = region.textContent.trim();
    if (text && last.get(region) !== text && region.checkVisibility()) window.announced.push(text);
    last.set(region, text);
  });
  root.querySelectorAll(LIVE).forEach(region => last.set(region, region.textContent.trim()));  // already there
  new MutationObserver(record).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def live_texts(page) -> list[str]:
    """The text of each live region in Chromium's accessibility tree (a node whose ``live`` property is set and
    not "off", and the text below it): what a screen reader reads out when it changes."""
    nodes = {node["nodeId"]: node for node in
             page.context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]}

    def text(node) -> str:
        if node.get("role", {}).get("value") == "StaticText":
            return node.get("name", {}).get("value", "")
        return "".join(text(nodes[child]) for child in node.get("childIds", []) if child in nodes)

    return [text(node) for node in nodes.values()
            if any(prop["name"] == "live" and prop["value"].get("value") not in (None, "off")
                   for prop in node.get("properties", []))]


@pytest.mark.parametrize("where", ["page", "widget"])
def test_the_streamed_answer_is_announced_once_when_it_is_final(servers, open_page, widget_key, settings,
                                                                openai_server, where):
    bookchat, docs = servers
    openai_server.reset()
    openai_server.token_delay = 0.05  # the answer arrives word by word
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": openai_server.base_url, "LLM_API_KEY": "test",
                         "LLM_MODEL": "test-model"}
    if where == "page":
        page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
        page.evaluate(f"({RECORD_LIVE_REGIONS})(document)")
        page.fill("#question", QUESTION)
        page.press("#question", "Enter")
        streaming, done = "article.turn.pending .answer-text", "article.turn:not(.pending) .answer-text"
        in_root = "document"
    else:
        page, errors = open_docs(open_page, docs, widget_key(docs.origin))
        page.locator(".bc-launcher").click()
        page.evaluate(f"({RECORD_LIVE_REGIONS})(document.getElementById('bookchat-widget').shadowRoot)")
        ask_widget(page, QUESTION)
        streaming, done = (".bc-answer[data-state=streaming] .bc-answer-text",
                           ".bc-answer[data-state=done] .bc-answer-text")
        in_root = "document.getElementById('bookchat-widget').shadowRoot"

    lengths = set()
    for _ in range(3):  # three moments of the stream, each with more text than the last
        page.wait_for_function(f"n => {{ const el = {in_root}.querySelector({streaming!r});"
                               " return el && !el.querySelector('.bc-typing') && el.textContent.trim().length > n; }",
                               arg=max(lengths, default=3))  # (the widget's typing dots go with the first token)
        partial = page.locator(streaming).text_content().strip()
        lengths.add(len(partial))
        assert not any(partial[-20:] in spoken for spoken in live_texts(page)), \
            f"the streamed text is in a live region of the accessibility tree: {partial!r}"
    page.locator(done).wait_for()
    final = page.locator(done).text_content().strip()
    assert len(final) > max(lengths), "the answer was seen streaming before it was final"
    page.wait_for_function("t => window.announced.some(a => a.includes(t.slice(0, 40)))", arg=final)
    announced = page.evaluate("window.announced")
    answers = [text for text in announced if text[:40] in final or final[:40] in text]
    assert len(answers) == 1, f"the answer is announced once, not token by token: {announced}"
    assert announced.index(answers[0]) == len(announced) - 1, f"the answer is the last thing announced: {announced}"
    assert set(announced[:-1]) <= {"Answering…", "Looking in the book…"}, announced
    spoken = live_texts(page)
    assert any(final[:40] in text for text in spoken), f"the final answer is in a live region: {spoken}"
    assert errors == []


# -- what axe can't see: focus order and a visible ring ------------------------------------------------------------
# What the focused element (in ``root``) looks like: its place in the document and its focus ring, with the colour
# behind it (the first opaque background up the tree, across the shadow boundary).
FOCUSED = """root => {
  const el = root.activeElement;
  if (!el || el === document.body) return null;
  if (el === window.firstFocused) return 'round';
  window.firstFocused = window.firstFocused || el;
  const style = getComputedStyle(el);
  const outside = el.parentElement || el.getRootNode().host;  // the ring is drawn around the element
  let behind = parseFloat(style.outlineOffset) >= 0 ? outside : el, background = 'rgba(0, 0, 0, 0)';
  while (behind && behind.nodeType === 1) {
    background = getComputedStyle(behind).backgroundColor;
    if (!/rgba\\(.*, 0\\)$/.test(background) && background !== 'transparent') break;
    background = 'rgb(255, 255, 255)';
    behind = behind.parentElement || (behind.getRootNode().host || null);
  }
  const previous = window.lastFocused;
  window.lastFocused = el;
  return {
    name: el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : ''),
    after: !previous || previous === el ? true
      : !!(previous.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING),
    ring: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2 ? style.outlineColor : null,
    background: background,
    shadow: root !== document && !!el.getRootNode().host,
  };
}"""


def tab_through(page, root: str, stops: int) -> list[dict]:
    """Press Tab up to ``stops`` times (or until focus comes round to the first stop again) and describe each element
    that gets focus in ``root`` (a script's expression)."""
    seen = []
    for _ in range(stops):
        page.keyboard.press("Tab")
        focused = page.evaluate(f"({FOCUSED})({root})")
        if focused == "round":  # back to the first stop
            break
        if focused:
            seen.append(focused)
    return seen


def check_focus(stops: list[dict]) -> None:
    assert len(stops) >= 8, stops
    out_of_order = [stop["name"] for stop in stops if not stop["after"]]
    assert not out_of_order, f"focus jumps back in the document at {out_of_order}"
    unseen = [stop["name"] for stop in stops if not stop["ring"] or contrast(stop["ring"], stop["background"]) < 3]
    assert not unseen, f"no focus ring of 2 px or more at 3:1 against what is behind it: {unseen}"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_page_focus_follows_the_document_and_every_stop_shows_a_ring(servers, open_page, theme):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", color_scheme=theme)
    ask_on_page(page, CODE_QUESTION)
    page.reload()  # the conversation stays; focus starts at the top
    page.locator("article.turn .bookchat-code .code-copy").wait_for()
    check_focus(tab_through(page, "document", 40))
    assert errors == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_widget_focus_follows_the_panel_and_every_stop_shows_a_ring(servers, open_page, widget_key, theme):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin), color_scheme=theme)
    page.evaluate("(theme) => document.documentElement.setAttribute('data-theme', theme)", theme)
    page.locator(".bc-launcher").click()
    ask_widget(page, CODE_QUESTION)
    page.locator(".bc-answer[data-state=done] .bc-copy").wait_for()
    page.locator(".bc-title").click()  # focus starts at the panel's top
    stops = tab_through(page, "document.getElementById('bookchat-widget').shadowRoot", 30)
    assert all(stop["shadow"] for stop in stops)
    names = [stop["name"] for stop in stops]
    assert names[:4] == ["button.bc-mode.bc-mode-ask", "button.bc-mode.bc-mode-search", "button.bc-new",
                         "button.bc-close"], names
    assert "pre" in names and "button.bc-copy" in names and "textarea.bc-input" in names, names
    check_focus(stops[:names.index("textarea.bc-input") + 1])  # from the header, through the answer, to the box
    assert errors == []


# -- what axe can't see: 320 px and 200 % zoom; reduced motion ----------------------------------------------------
# 200 % zoom of a 1280 × 800 window is a 640 × 400 CSS-pixel viewport at twice the device pixels; 320 px is WCAG
# 1.4.10's reflow width (1280 px at 400 %).
ZOOMS = {"320px": {"viewport": {"width": 320, "height": 640}},
         "200%": {"viewport": {"width": 640, "height": 400}, "device_scale_factor": 2}}


# The elements that reach past ``width`` (the deepest ones: what makes the page scroll sideways).
WIDER = """width => [...document.querySelectorAll('body *')]
  .filter(el => el.getBoundingClientRect().right > width + 0.5 && el.checkVisibility())
  .filter(el => ![...el.children].some(child => child.getBoundingClientRect().right > width + 0.5))
  .map(el => el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : '')
             + ' ' + Math.round(el.getBoundingClientRect().right))"""


def fits(page, selector: str, width: int) -> bool:
    box = page.locator(selector).last.bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5 and box["width"] > 0


@pytest.mark.parametrize("zoom", ZOOMS)
def test_page_and_widget_reflow_without_sideways_scrolling(servers, open_page, widget_key, zoom):
    bookchat, docs = servers
    width = ZOOMS[zoom]["viewport"]["width"]
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", **ZOOMS[zoom])
    ask_on_page(page, CODE_QUESTION)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, \
        f"sideways scrolling; wider than {width} px: {page.evaluate(WIDER, width)}"
    for selector in ("#question", "#ask-button", ".source .open-in-book", ".thumb.up", ".bookchat-code",
                     "#search-box"):
        page.locator(selector).last.scroll_into_view_if_needed()
        assert fits(page, selector, width), f"{selector} is cut off at {zoom}"

    page, more_errors = open_docs(open_page, docs, widget_key(docs.origin), **ZOOMS[zoom])
    page.locator(".bc-launcher").click()
    ask_widget(page, CODE_QUESTION)
    page.locator(".bc-answer[data-state=done]").wait_for()
    for selector in (".bc-panel", ".bc-input", ".bc-send", ".bc-close", ".bc-answer .bc-source", ".bc-copy"):
        assert fits(page, selector, width), f"the widget's {selector} is cut off at {zoom}"
    log = page.locator(".bc-log").bounding_box()
    assert log["height"] >= 100, f"the conversation keeps room to read at {zoom}: {log}"
    assert errors == more_errors == []


# Every animated or transitioning element of ``root``, as "element: animation/transition".
MOVING = """root => [...root.querySelectorAll('*')].flatMap(el => {
  const s = getComputedStyle(el);
  const moves = [];
  if (s.animationName !== 'none' && parseFloat(s.animationDuration) > 0) moves.push('animation ' + s.animationName);
  if (s.transitionDuration.split(',').some(d => parseFloat(d) > 0)) moves.push('transition ' + s.transitionProperty);
  return moves.map(m => el.tagName.toLowerCase() + '.' + String(el.className).split(' ').join('.') + ': ' + m);
})"""


def test_reduced_motion_stops_every_animation(servers, open_page, widget_key):
    bookchat, docs = servers
    widget_root = "document.getElementById('bookchat-widget').shadowRoot"
    moving, held = {}, []
    for motion in ("no-preference", "reduce"):
        page, errors = open_docs(open_page, docs, widget_key(docs.origin), reduced_motion=motion)
        page.route("**/api/v1/ask/stream*", lambda route: held.append(route))  # the answer waits: the dots stay
        page.locator(".bc-launcher").click()
        ask_widget(page, QUESTION)
        page.locator(".bc-typing").wait_for()
        for _ in range(100):  # the question is sent once the page's version is known
            if held:
                break
            page.wait_for_timeout(50)
        moving[motion] = page.evaluate(f"({MOVING})({widget_root})")
        held.pop().continue_()
        page.unroute("**/api/v1/ask/stream*")
        page.locator(".bc-answer[data-state=done]").wait_for()
        assert errors == []
    assert any("bc-blink" in m for m in moving["no-preference"]), "the check sees the widget's animations"
    assert moving["reduce"] == [], f"still moving with prefers-reduced-motion: {moving['reduce']}"

    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", reduced_motion="reduce")
    ask_on_page(page, CODE_QUESTION)
    assert page.evaluate(f"({MOVING})(document)") == []
    assert errors == []
