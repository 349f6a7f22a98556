"""The lecture hall's book (``bench.lecture_hall``): five pages of docusaurus-docs published through the publishing
API, the keys of the drill (one that publishes the book, one publishable key for the students' site), the held-back
questions the students ask, and the edit published while they ask.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from pathlib import Path

import httpx

ORIGIN = "https://lecture-hall.example.edu"
QUESTIONS = Path(__file__).resolve().parent / "questions" / "hall-docusaurus-docs.jsonl"
# The pages of docusaurus-docs the book is made of (~45 passages: a few seconds to embed); the edited one.
PAGES = ("browser-support.mdx", "typescript-support.mdx", "static-assets.mdx", "seo.mdx", "playground.mdx")
EDITED = "browser-support.mdx"
NEW_SENTENCE = ("In the Thursday lecture hall, the teaching assistant Philippa Quenneville tests every build on "
                "a 2011 netbook named Marrowbone.")
LIVE_QUERY = "Philippa Quenneville Marrowbone netbook"


def make_site(data: Path, root: Path) -> Path:
    """A folder with ``PAGES`` of docusaurus-docs (``data``: the shared corpora) under ``docs/``."""
    site = root / "site"
    (site / "docs").mkdir(parents=True)
    for page in PAGES:
        shutil.copy(data / "docusaurus-docs" / "docs" / page, site / "docs" / page)
    return site


def edit_site(site: Path) -> None:
    page = site / "docs" / EDITED
    page.write_text(page.read_text() + f"\n## Testing in class\n\n{NEW_SENTENCE}\n")


def archive(site: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(site, arcname=".")
    return buffer.getvalue()


def publish(url: str, slug: str, site: Path, key: str) -> dict:
    """Publish ``site`` as ``slug`` and wait for the sync to end; its last status."""
    headers = {"Authorization": f"Bearer {key}"}
    response = httpx.post(f"{url}/api/v1/books/{slug}/sources", content=archive(site), timeout=120,
                          headers=headers | {"Content-Type": "application/gzip"})
    response.raise_for_status()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = httpx.get(response.json()["status_url"], params={"wait": 20}, headers=headers, timeout=60).json()
        if status["status"] in ("done", "failed"):
            return status
    raise RuntimeError(f"the sync of {slug} did not end")


def hall_keys(slug: str) -> tuple[str, str]:
    """(the secret key that publishes ``slug``, a publishable key for ``ORIGIN``): raw values."""
    from chat.channels.keys import api_key_create
    from chat.models import ApiKey

    _, publishing = api_key_create(kind=ApiKey.SECRET, publish_book=slug)
    widget = ApiKey(name=f"lecture hall ({slug})", kind=ApiKey.PUBLISHABLE, allowed_origins=ORIGIN)
    raw = widget.issue()
    widget.save()
    return publishing, raw


def forget_hall(slug: str) -> None:
    """The book, its syncs and the drill's keys."""
    from chat.models import ApiKey
    from ingestion.models import Book, IngestionJob

    IngestionJob.objects.filter(book_slug=slug).delete()
    ApiKey.objects.filter(publish_book=slug).delete()
    ApiKey.objects.filter(name=f"lecture hall ({slug})").delete()
    Book.objects.filter(slug=slug).delete()


def held_back_questions() -> list[str]:
    from chat.quality.evaluation import load_questions

    return [q.question for q in load_questions(QUESTIONS)]
