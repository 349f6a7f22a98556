"""chat.pipeline.assistant_search: a passage as an assistant gets it (its section URL, a rounded score, the MCP
resource of its whole page) and the page resource's URI. The search itself, end to end, is in tests/test_mcp.py."""

from __future__ import annotations

from types import SimpleNamespace

from chat.pipeline.assistant_search import RESOURCE_SCHEME, page_uri, passage


def test_page_uri_quotes_the_path_but_keeps_its_folders():
    assert page_uri("guide", "getting started/install #1.md") == \
        f"{RESOURCE_SCHEME}://guide/getting%20started/install%20%231.md"


def test_a_passage_is_numbered_scored_to_four_places_and_names_its_page_resource():
    chunk = SimpleNamespace(id="c9", text="Run pip install.", heading_path="Guide > Install", document_title="Install",
                            chapter="Guide", section="Install", url="https://docs.example/install#pip",
                            score=0.876543, document_path="guide/install.md")
    book = SimpleNamespace(slug="guide-v2")
    assert passage(3, chunk, book) == {
        "n": 3, "text": "Run pip install.", "heading_path": "Guide > Install", "page_title": "Install",
        "chapter": "Guide", "section": "Install", "url": "https://docs.example/install#pip", "score": 0.8765,
        "chunk_id": "c9", "document": "guide/install.md", "page": "bookchat://guide-v2/guide/install.md"}
