"""The admin's pages of where students struggle, on rows made to order: the map (every section in the outline's order
with its counts, sections never asked about too), its filters and sorting, each count a link to exactly its
questions in the audit list, the exports (CSV of each table, the ranking as Markdown with readers' words escaped) to
the byte; the topics page (the newest computed run, examples only above the threshold, links to each topic's
questions, Recompute now behind CSRF); privacy (no question text on the map, a reviewer of another book gets a 404
for that book by any page, export, POST or filter); and bad query parameters answered 400/404 or with the default,
never 500."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditLog, TopicRun
from ingestion.models import Book, BookAccess, Chunk, Document

pytestmark = pytest.mark.django_db

SITE = "https://docs.example.org"
# path → its sections (anchor, heading path); intro.md's position puts it before the guide folder in the sidebar.
PAGES = {
    "intro.md": [("", "Introduction"), ("why", "Introduction > Why [read](javascript:alert(1)) *this*")],
    "guide/install.md": [("", "Install"), ("linux", "Install > On Linux")],
    "guide/use.md": [("", "Use"), ("ask", "Use > Asking @team")],
}
MAP = reverse("admin:audit_struggle")
CHANGELIST = reverse("admin:audit_auditlog_changelist")
SECRET = "How do I install the secret thing on Linux?"


def make_book(slug: str) -> Book:
    book = Book.objects.create(slug=slug, title=slug.title(), embedder_name="test", embedder_dimension=3)
    for path, sections in PAGES.items():
        document = Document.objects.create(book=book, path=path, title=sections[0][1], url=f"{SITE}/{slug}/{path}",
                                           front_matter={"sidebar_position": 1} if path == "intro.md" else {})
        for ordinal, (anchor, heading) in enumerate(sections):
            url = f"{SITE}/{slug}/{path[:-3]}" + (f"#{anchor}" if anchor else "")
            Chunk.objects.create(id=f"{slug}-{path}-{ordinal}", book=book, document=document, ordinal=ordinal,
                                 heading_path=heading, anchor=anchor, url=url, text="text", char_start=0, char_end=4,
                                 line_start=1, line_end=1, token_count=1, embedding_key=f"{slug}{path}{ordinal}",
                                 dimensions=3, embedding=[0.0, 0.0, 1.0])
    return book


def url_of(slug: str, path: str, anchor: str = "") -> str:
    return f"{SITE}/{slug}/{path[:-3]}" + (f"#{anchor}" if anchor else "")


def ask(url: str, *, slug="alpha", status="answered", level="high", session=None, question="q", **fields):
    sources = [{"n": 1, "url": f"{url}#:~:text=words", "cited": True, "heading_path": "h"}]
    return AuditLog.objects.create(answer_id=uuid.uuid4(), channel="page", book_slug=slug, question=question,
                                   status=status, confidence_level=level, session_id=session or uuid.uuid4(),
                                   sources=sources, **fields)


@pytest.fixture
def traffic():
    """Alpha: three questions on "On Linux" (two in one conversation; unsure, refused with a thumbs down, high),
    one on the introduction judged wrong, one of the month before on "Asking"; beta: one question."""
    alpha, beta = make_book("alpha"), make_book("beta")
    linux = url_of("alpha", "guide/install.md", "linux")
    student = uuid.uuid4()
    ask(linux, status="unsure", level="low", session=student, question=SECRET)
    ask(linux, status="not_covered", level="low", session=student, feedback_rating="down")
    ask(linux)
    ask(url_of("alpha", "intro.md"), level="medium", review_status="wrong")
    ask(url_of("alpha", "guide/use.md", "ask"), created_at=timezone.now() - timedelta(days=40))
    ask(url_of("alpha", "guide/install.md", "linux"), status="searched", level="")  # an assistant's search
    ask(url_of("beta", "intro.md"), slug="beta", question="beta's own question")
    return alpha, beta


def reviewer(client, name: str, books=None) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name="Reviewers"))
    if books is not None:
        BookAccess.objects.create(user=user).books.set(books)
    client.force_login(user)
    return user


def table(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))


def test_the_map_lists_every_section_in_the_outline_order_with_its_counts(admin_client, traffic):
    response = admin_client.get(MAP, {"book": "alpha"})
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(r["page"], r["section"]) for r in rows] == [
        ("Introduction", "Introduction"), ("Introduction", "Why [read](javascript:alert(1)) *this*"),
        ("Install", "Install"), ("Install", "On Linux"), ("Use", "Use"), ("Use", "Asking @team")]
    counts = {r["section"]: (r["questions"], r["sessions"], r["unsure"], r["refused"], r["thumbs_down"], r["wrong"],
                             r["previous"]) for r in rows}
    assert counts["On Linux"] == (3, 2, 1, 1, 1, 0, 0)
    assert counts["Introduction"] == (1, 1, 0, 0, 0, 1, 0)
    assert counts["Asking @team"] == (0, 0, 0, 0, 0, 0, 1)
    html = response.content.decode()
    assert html.count('class="never-asked"') == 4, "the sections nobody asked about are listed"
    assert SECRET not in html and "beta&#x27;s own question" not in html, "no question text on the map"
    assert "javascript:alert" not in html.split('id="struggle-sections"')[1].split("</table>")[0].replace(
        "Why [read](javascript:alert(1))", ""), "a heading's text is never a link"
    assert [(e["section"], e["score"]) for e in response.context["result"]["ranking"]] == [
        ("On Linux", 2.0), ("Introduction", 1.0)]
    assert 'role="group"' in html and "<title>Questions per chapter and week</title>" in html


def test_each_count_links_to_exactly_its_questions(admin_client, traffic):
    response = admin_client.get(MAP, {"book": "alpha"})
    linux = next(r for r in response.context["rows"] if r["section"] == "On Linux")
    for cell in linux["cells"]:
        if cell["link"]:
            listed = admin_client.get(cell["link"])
            assert listed.status_code == 200, cell
            assert listed.context["cl"].result_count == cell["value"], cell["label"]
    assert {c["label"] for c in linux["cells"] if c["link"]} == {"questions", "high", "unsure", "refused",
                                                                   "thumbs down"}
    asking = next(r for r in response.context["rows"] if r["section"] == "Asking @team")
    previous = next(c for c in asking["cells"] if c["label"] == "previous")
    assert admin_client.get(previous["link"]).context["cl"].result_count == 1
    heat = response.context["result"]["heat"]
    guide = next(c for c in heat["chapters"] if c["chapter"] == "guide")
    assert sum(guide["counts"]) == 3
    for (label, cells) in response.context["heat_chart_rows"]:
        for count, link in cells:
            assert admin_client.get(link).context["cl"].result_count == count, label
    ranked = response.context["result"]["ranking"][0]
    assert admin_client.get(ranked["evidence"]).context["cl"].result_count == 3


@pytest.mark.parametrize(("query", "sections"), [
    ({"chapter": "guide"}, ["Install", "On Linux", "Use", "Asking @team"]),
    ({"asked": "yes"}, ["Introduction", "On Linux"]),
    ({"asked": "no", "chapter": "guide"}, ["Install", "Use", "Asking @team"]),
    ({"sort": "questions"}, ["On Linux", "Introduction", "Why [read](javascript:alert(1)) *this*", "Install", "Use",
                             "Asking @team"]),
    ({"sort": "previous", "asked": "no"}, ["Asking @team", "Why [read](javascript:alert(1)) *this*", "Install",
                                           "Use"]),
    ({"sort": "'; DROP TABLE audit_auditlog; --"}, ["Introduction", "Why [read](javascript:alert(1)) *this*",
                                                    "Install", "On Linux", "Use", "Asking @team"]),
    ({"chapter": "no such chapter", "asked": "maybe"}, ["Introduction", "Why [read](javascript:alert(1)) *this*",
                                                        "Install", "On Linux", "Use", "Asking @team"]),
])
def test_filters_and_sorting(admin_client, traffic, query, sections):
    response = admin_client.get(MAP, {"book": "alpha", **query})
    assert response.status_code == 200
    assert [r["section"] for r in response.context["rows"]] == sections


def test_exports_are_exact(admin_client, traffic):
    export = {"book": "alpha", "days": 30, "export": "csv"}
    sections = table(admin_client.get(MAP, {**export, "table": "sections"}))
    assert sections[0] == ["chapter", "page", "section", "anchor", "url", "questions", "sessions", "high", "medium",
                           "unsure", "refused", "withheld", "staff", "thumbs_down", "wrong", "needs_doc_fix",
                           "previous", "change", "struggle", "score"]
    linux = url_of("alpha", "guide/install.md", "linux")
    assert sections[4] == ["guide", "Install", "On Linux", "linux", linux, "3", "2", "1", "0", "1", "1", "0", "0",
                           "1", "0", "0", "0", "3", "3", "2.0"]
    assert sections[6] == ["guide", "Use", "Asking @team", "ask", url_of("alpha", "guide/use.md", "ask"), "0", "0",
                           "0", "0", "0", "0", "0", "0", "0", "0", "0", "1", "'-1", "0", "0.0"], \
        "a formula never starts"
    assert len(sections) == 7
    ranking = table(admin_client.get(MAP, {**export, "table": "ranking"}))
    assert ranking == [["rank", "kind", "name", "chapter", "page", "url", "score", "struggle", "questions",
                        "sessions"],
                       ["1", "section", "On Linux", "guide", "Install", linux, "2.0", "3", "3", "2"],
                       ["2", "section", "Introduction", "Introduction", "Introduction", url_of("alpha", "intro.md"),
                        "1.0", "1", "1", "1"]]
    heat = table(admin_client.get(MAP, {**export, "table": "heat"}))
    assert [row[0] for row in heat] == ["chapter", "Introduction", "guide"]
    assert [sum(map(int, row[1:])) for row in heat[1:]] == [1, 3]
    markdown = admin_client.get(MAP, {"book": "alpha", "days": 30, "export": "markdown"})
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert markdown.content.decode() == (
        "## Where to revise first (the book `alpha`, last 30 days)\n\n"
        "bookchat's map of where students struggle: 4 questions in the period. 2 sections and topics had answers "
        "held back as unsure, refused or withheld, thumbs down or reviewers' verdicts; they are ranked by that "
        "trouble per question, weighted by how many students asked. The highest come first.\n\n"
        f"### 1. [On Linux]({linux})\n\n- in: guide › Install\n"
        "- score 2: 3 questions in 2 conversations (1 unsure, 1 refused, 1 thumbs down)\n\n"
        f"### 2. [Introduction]({url_of('alpha', 'intro.md')})\n\n- in: Introduction › Introduction\n"
        "- score 1: 1 question in 1 conversation (1 judged wrong)\n")


def test_the_markdown_escapes_headings(admin_client, traffic):
    why = url_of("alpha", "intro.md", "why")
    ask(why, status="unsure", level="low")
    ask(url_of("alpha", "guide/use.md", "ask"), status="withheld", level="low")
    markdown = admin_client.get(MAP, {"book": "alpha", "export": "markdown"}).content.decode()
    assert f"[Why \\[read\\]\\(javascript:alert\\(1\\)\\) \\*this\\*]({why})" in markdown
    assert "Asking @\u200bteam" in markdown and "@team" not in markdown, "no mention"


def test_a_reviewer_of_another_book_gets_nothing_of_this_one(client, traffic):
    alpha, beta = traffic
    reviewer(client, "rita", books=[alpha])
    page = client.get(MAP)
    assert page.status_code == 200 and page.context["book"] == alpha and page.context["books"] == ["alpha"]
    assert b"beta" not in page.content
    beta_intro = url_of("beta", "intro.md")
    for query in ({"book": "beta"}, {"book": "beta", "export": "markdown"},
                  {"book": "beta", "export": "csv", "table": "sections"}):
        assert client.get(MAP, query).status_code == 404, query
    for query in ({"section": beta_intro}, {"chapter": "beta/guide"}, {"chapter": "beta/Introduction"},
                  {"section": beta_intro, "book_slug__exact": "beta"}):
        response = client.get(CHANGELIST, query)
        assert response.status_code == 404, query
        assert b"beta&#x27;s own question" not in response.content
    alpha_intro = url_of("alpha", "intro.md")
    assert client.get(CHANGELIST, {"section": alpha_intro}).context["cl"].result_count == 1


def test_staff_without_the_dashboard_permission_get_403(client, traffic):
    client.force_login(User.objects.create_user("sam", password="x", is_staff=True))
    assert client.get(MAP, {"book": "alpha"}).status_code == 403
    assert client.get(MAP, {"book": "alpha", "export": "markdown"}).status_code == 403


@pytest.mark.parametrize(("url", "query", "status"), [
    (MAP, {"book": "no-such-book"}, 404),
    (MAP, {"book": "alpha'; DROP TABLE audit_auditlog; --"}, 404),
    (MAP, {"book": "alpha\x00"}, 404),
    (MAP, {"book": "alpha", "days": "abc"}, 200),
    (MAP, {"book": "alpha", "days": "-7"}, 200),
    (MAP, {"book": "alpha", "days": "99999999999999999999"}, 200),
    (MAP, {"book": "alpha", "export": "pdf"}, 400),
    (MAP, {"book": "alpha", "export": "csv", "table": "users"}, 400),
    (MAP, {"book": "alpha", "export": "csv"}, 400),
    (CHANGELIST, {"level": "'; DROP TABLE audit_auditlog; --"}, 404),
    (CHANGELIST, {"chapter": "alpha/no such chapter"}, 404),
    (CHANGELIST, {"chapter": "no-slash"}, 404),
    (CHANGELIST, {"section": "javascript:alert(1)"}, 404),
    (CHANGELIST, {"section": "https://docs.example.org/alpha/intro\x00"}, 404),
    (CHANGELIST, {"chapter": "alpha\x00/guide"}, 404),
    (CHANGELIST, {"created_at__gte": "yesterday", "section": url_of("alpha", "intro.md")}, 302),
])
def test_bad_query_parameters_are_answered_never_500(admin_client, traffic, url, query, status):
    response = admin_client.get(url, query)
    assert response.status_code == status, response.content[:300]
    if url == MAP and status == 200:
        assert response.context["days"] == 30
    assert AuditLog.objects.count() == 7


# -- the topics page ---------------------------------------------------------------------------------------------
TOPICS = reverse("admin:audit_topics")


def topic(n: int, ids: list[int], *, sessions: int, examples: list[str], terms=None, **counts) -> dict:
    values = {"high": 0, "medium": 0, "unsure": 0, "refused": 0, "withheld": 0, "thumbs_down": 0, "wrong": 0,
              "needs_doc_fix": 0} | counts
    questions = len(ids)
    struggle = sum(values[name] for name in ("unsure", "refused", "withheld", "thumbs_down", "wrong", "needs_doc_fix"))
    terms = terms or [f"term{n}a", f"term{n}b", f"term{n}c"]
    return {"n": n, "terms": terms, "label": " · ".join(terms), "questions": questions, "sessions": sessions,
            **values, "shares": {"unsure": values["unsure"] / questions, "refused": values["refused"] / questions},
            "struggle": struggle, "score": round(struggle * sessions / questions, 4), "examples": examples,
            "sections": [{"url": url_of("alpha", "guide/install.md", "linux"), "section": "Install > On Linux",
                          "count": questions}], "ids": ids}


@pytest.fixture
def topic_runs(traffic):
    """A done run of alpha's topics (one asked in enough conversations to show its examples, one not; a reader's
    question with Markdown and a mention in it), an older one, a queued one, and one of beta."""
    alpha_ids = list(AuditLog.objects.filter(book_slug="alpha").order_by("pk").values_list("pk", flat=True))
    now = timezone.now()
    run = {"since": now - timedelta(days=30), "until": now, "status": TopicRun.Status.DONE, "finished_at": now,
           "took_seconds": 2.5, "questions": 5, "unclustered": 1, "requested_by": "schedule"}
    TopicRun.objects.create(book_slug="alpha", **run | {"created_at": now - timedelta(days=1)}, topics=[])
    shown = TopicRun.objects.create(book_slug="alpha", **run, topics=[
        topic(1, alpha_ids[:3], sessions=5, examples=[SECRET, "Why [click](javascript:x) @team?"], unsure=1,
              refused=1, thumbs_down=1),
        topic(2, alpha_ids[3:4], sessions=1, examples=["a lonely question"], wrong=1,
              terms=["@team", "[x](javascript:y)", "<b>"])])
    TopicRun.objects.create(book_slug="alpha", since=now - timedelta(days=7), until=now, requested_by="rita")
    beta_ids = list(AuditLog.objects.filter(book_slug="beta").values_list("pk", flat=True))
    other = TopicRun.objects.create(book_slug="beta", **run, topics=[topic(1, beta_ids, sessions=9,
                                                                            examples=["beta's own question"])])
    return shown, other


def test_the_topics_page_shows_the_newest_run_with_examples_only_above_the_threshold(admin_client, topic_runs):
    shown, _ = topic_runs
    response = admin_client.get(TOPICS, {"book": "alpha"})
    assert response.status_code == 200 and response.context["run"] == shown
    html = response.content.decode()
    assert SECRET in html and "Why [click](javascript:x) @team?" in html, "5 conversations: examples shown"
    assert "a lonely question" not in html and "fewer than 5 conversations: examples hidden" in html
    assert "javascript:x" not in html.replace("Why [click](javascript:x) @team?", "")
    assert "2.5 s" in html and "term1a, term1b, term1c" in html and "queued" in html
    assert 'role="img"' in html and "<title>" in html
    questions = [t["evidence"] for t in response.context["topics"]]
    assert [admin_client.get(link).context["cl"].result_count for link in questions] == [3, 1]


def test_the_map_ranks_topics_with_sections_and_exports_them(admin_client, topic_runs):
    shown, _ = topic_runs
    response = admin_client.get(MAP, {"book": "alpha"})
    ranking = [(e.get("kind"), e.get("label") or e.get("section"), e["score"])
               for e in response.context["result"]["ranking"]]
    assert ranking == [("topic", "term1a · term1b · term1c", 5.0), ("section", "On Linux", 2.0),
                       ("section", "Introduction", 1.0), ("topic", "@team · [x](javascript:y) · <b>", 1.0)]
    topic_entry = response.context["result"]["ranking"][0]
    assert admin_client.get(topic_entry["evidence"]).context["cl"].result_count == 3
    markdown = admin_client.get(MAP, {"book": "alpha", "export": "markdown"}).content.decode()
    assert "### 1. Topic: term1a · term1b · term1c\n\n- terms: term1a, term1b, term1c\n" in markdown
    assert "(1 unsure, 1 refused, 1 thumbs down)" in markdown
    assert f"- sections its answers cite: [Install \\> On Linux]({url_of('alpha', 'guide/install.md', 'linux')})" \
        in markdown
    assert SECRET not in markdown, "no reader's question in the export"
    assert "### 4. Topic: @\u200bteam · \\[x\\]\\(javascript:y\\) · \\<b\\>\n" in markdown, "readers' words escaped"
    html = response.content.decode()
    assert "<b>" not in html and "@team · [x](javascript:y) · &lt;b&gt;" in html


def test_recompute_now_queues_a_run(admin_client, topic_runs):
    response = admin_client.post(TOPICS + "?book=alpha", {"days": "7"})
    assert response.status_code == 302 and response["Location"] == TOPICS + "?book=alpha"
    run = TopicRun.objects.filter(book_slug="alpha").order_by("-created_at", "-pk").first()
    assert (run.status, run.requested_by) == (TopicRun.Status.QUEUED, "admin")
    assert timedelta(days=7) - timedelta(seconds=2) <= run.until - run.since <= timedelta(days=7)


def test_recompute_needs_the_csrf_token(traffic):
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert client.post(TOPICS + "?book=alpha").status_code == 403
    assert not TopicRun.objects.exists()


def test_a_reviewer_of_another_book_gets_none_of_its_topics(client, topic_runs):
    shown, other = topic_runs
    alpha = Book.objects.get(slug="alpha")
    reviewer(client, "rita", books=[alpha])
    assert client.get(TOPICS, {"book": "beta"}).status_code == 404
    assert client.post(TOPICS + "?book=beta").status_code == 404
    assert not TopicRun.objects.filter(book_slug="beta", status=TopicRun.Status.QUEUED).exists()
    for value in (f"{other.pk}.1", f"{other.pk}.2", "abc", f"{shown.pk}.9", "99999999999999999999999.1",
                  f"{shown.pk}.1\x00"):
        response = client.get(CHANGELIST, {"topic": value})
        assert response.status_code == 404, value
        assert b"beta&#x27;s own question" not in response.content
    assert client.get(CHANGELIST, {"topic": f"{shown.pk}.1"}).context["cl"].result_count == 3
    markdown = client.get(MAP, {"book": "alpha", "export": "markdown"}).content.decode()
    assert "beta" not in markdown
