"""The admin shows what indexing stored, read-only, with search and filters."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.conftest import run_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def indexed(book_dir):
    book_dir.write("intro.md", "# Intro\n\nThe admin lists books, pages, passages and index runs for reviewers.\n")
    code, _, _ = run_command("ingest", str(book_dir.root), "--book", "admin-book", "--json")
    assert code == 0


@pytest.mark.parametrize("model", ["book", "document", "chunk", "indexrun"])
def test_changelist_search_and_filters_render(admin_client, indexed, model):
    url = reverse(f"admin:ingestion_{model}_changelist")
    response = admin_client.get(url)
    assert response.status_code == 200
    assert response.context["cl"].result_count >= 1
    assert admin_client.get(url, {"q": "admin"}).status_code == 200
    assert reverse(f"admin:ingestion_{model}_add").encode() not in response.content


@pytest.mark.parametrize("model", ["book", "document", "chunk", "indexrun"])
def test_nothing_can_be_added_or_edited(admin_client, indexed, model):
    from django.apps import apps

    obj = apps.get_model("ingestion", model).objects.first()
    assert admin_client.get(reverse(f"admin:ingestion_{model}_add")).status_code == 403
    change = reverse(f"admin:ingestion_{model}_change", args=[obj.pk])
    response = admin_client.get(change)
    assert response.status_code == 200
    assert b'name="_save"' not in response.content
    assert admin_client.post(change, {}).status_code == 403


def test_admin_requires_login(client):
    response = client.get(reverse("admin:ingestion_book_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_home_page_lists_indexed_books(client, indexed):
    response = client.get("/")
    assert response.status_code == 200
    assert b"admin-book" in response.content
