"""``ingestion.uploads.tarball``: a published ``.tar.gz`` checked as it streams, called directly — refused with its
code and nothing left in the staging area (a file that is also a folder, a link out of the root, a length over the
limit before a byte is read), or stored with one top folder as the root, links as copies and non-sources left out.
tests/test_publishing.py sends the same kinds of archive through the publishing API."""

from __future__ import annotations

import io
import tarfile

import pytest

from ingestion.uploads.tarball import ArchiveError, _link_target, _member_path, receive_tarball


def _tarball(files: dict[str, str | bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


@pytest.fixture
def uploads(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path / "uploads"


class Unreadable:
    def read(self, size=-1):
        raise AssertionError("the body was read")


def test_one_top_folder_is_the_root_links_are_copies_and_non_sources_are_left_out(uploads):
    body = _tarball({"site/docs/intro.md": "# Intro\n", "site/node_modules/x/README.md": "# Dep\n",
                     "site/docs/logo.png": b"\x89PNG\x00\x00", "site/sidebars.js": "module.exports = {};\n"},
                    links={"site/docs/again.md": "intro.md", "site/docs/folder-link.md": "../docs"})
    intake = receive_tarball(io.BytesIO(body))
    try:
        assert intake.top_folder == "site" and intake.root.parent == uploads
        assert sorted(intake.pages) == ["docs/again.md", "docs/intro.md"]
        assert (intake.root / "docs" / "again.md").read_text() == "# Intro\n"
        assert not (intake.root / "docs" / "again.md").is_symlink()
        assert (intake.root / "sidebars.js").is_file()
        assert sorted(intake.ignored) == ["docs/folder-link.md", "docs/logo.png", "node_modules/x/README.md"]
        assert intake.ignored_count == 3
    finally:
        intake.discard()


@pytest.mark.parametrize(("files", "links", "code"), [
    ({"docs/a.md": "# A\n", "docs/a.md/b.md": "# B\n"}, {}, "duplicate_member"),  # a file that is also a folder
    ({"docs/a.md": "# A\n"}, {"docs/up.md": "../../outside.md"}, "unsafe_link"),
    ({"docs/notes.txt": "no page"}, {}, "no_pages"),
])
def test_a_refused_archive_leaves_nothing_behind(uploads, files, links, code):
    with pytest.raises(ArchiveError) as refused:
        receive_tarball(io.BytesIO(_tarball(files, links)))
    assert refused.value.code == code
    assert not [path for path in uploads.iterdir() if path.name.startswith("incoming-")]


def test_a_declared_length_over_the_limit_is_refused_before_reading(uploads, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "PUBLISH_MAX_BYTES": 100}
    with pytest.raises(ArchiveError) as refused:
        receive_tarball(Unreadable(), content_length=101)
    assert (refused.value.code, refused.value.status) == ("too_large", 413)


def test_member_paths_are_made_relative_or_refused():
    assert _member_path("./docs//a.md") == "docs/a.md" and _member_path("docs\\b.md") == "docs/b.md"
    assert _member_path("./") == ""
    for name in ("/etc/passwd", "C:/x.md", "docs/../../x.md", "docs/\x1bx.md"):
        with pytest.raises(ArchiveError):
            _member_path(name)


def test_a_symbolic_link_is_relative_to_its_folder_and_a_hard_link_to_the_root():
    symbolic, hard = tarfile.TarInfo("docs/a.md"), tarfile.TarInfo("docs/b.md")
    symbolic.type, symbolic.linkname = tarfile.SYMTYPE, "../intro.md"
    hard.type, hard.linkname = tarfile.LNKTYPE, "docs/intro.md"
    assert _link_target(symbolic, "docs/a.md") == "intro.md"
    assert _link_target(hard, "docs/b.md") == "docs/intro.md"
    hard.linkname = "../intro.md"
    with pytest.raises(ArchiveError, match="hard link"):
        _link_target(hard, "docs/b.md")
