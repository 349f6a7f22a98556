"""Publishing from CI's own decisions (``bookchat.push``, and ``manage.py push`` run by name): what is packed (never
version control, dependencies or caches, and the generator's output folder only at a root whose config makes it), the
refusals before anything is sent (no key, no folder), a server that can't be reached or refuses, and how a refusal is
worded. Publishing to a served bookchat: tests/test_publishing.py."""

from __future__ import annotations

import json
import tarfile

import httpx
import pytest

from bookchat.push import KEY_VARIABLE, _refusal, git_prefix, pack
from tests.conftest import run_command


def test_pack_leaves_out_what_is_never_a_source(tmp_path):
    root = tmp_path / "site"
    for name in ("docusaurus.config.js", "docs/intro.md", "docs/build/kept.md", "build/index.html",
                 ".git/HEAD", "docs/node_modules/x/index.js", ".docusaurus/cache.json", "docs/__pycache__/a.pyc"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    count = pack(root, tmp_path / "book.tar.gz")
    with tarfile.open(tmp_path / "book.tar.gz") as tar:
        names = sorted(tar.getnames())
    assert names == ["docs/build/kept.md", "docs/intro.md", "docusaurus.config.js"] and count == 3


def test_without_a_generator_config_a_build_folder_is_a_source(tmp_path):
    (tmp_path / "site" / "build").mkdir(parents=True)
    (tmp_path / "site" / "build" / "page.md").write_text("# Page")
    assert pack(tmp_path / "site", tmp_path / "book.tar.gz") == 1


def test_a_folder_outside_git_has_no_prefix(tmp_path):
    assert git_prefix(tmp_path) is None


def test_a_refusal_names_the_status_and_the_servers_error():
    refused = httpx.Response(403, json={"error": "forbidden", "message": "this key may not publish guide"})
    assert _refusal(refused) == "the server refused (403 forbidden): this key may not publish guide"
    assert _refusal(httpx.Response(502, text="<html>Bad gateway</html>")) == \
        "the server answered 502: <html>Bad gateway</html>"


@pytest.fixture
def site(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "intro.md").write_text("# Intro")
    monkeypatch.setenv(KEY_VARIABLE, "sk_test")
    return tmp_path / "docs"


def test_the_command_refuses_without_a_key_or_a_folder(site, monkeypatch):
    monkeypatch.delenv(KEY_VARIABLE)
    code, _, err = run_command("push", str(site), "--server", "http://127.0.0.1:9", "--book", "guide")
    assert code == 2 and f"push: set {KEY_VARIABLE} to the book's publishing key" in err
    monkeypatch.setenv(KEY_VARIABLE, "sk_test")
    code, out, _ = run_command("push", str(site / "missing"), "--server", "http://127.0.0.1:9", "--book", "guide",
                               "--json")
    assert code == 2 and json.loads(out) == {"error": "push_failed", "message": f"{site / 'missing'} is not a folder"}


def test_a_server_that_cannot_be_reached_is_named(site):
    code, _, err = run_command("push", str(site), "--server", "http://127.0.0.1:9/", "--book", "guide")
    assert code == 2 and "push: cannot reach http://127.0.0.1:9/api/v1/books/guide/sources" in err
    assert "packed 1 files" in err
