"""``bookchat.base.files``: a private file replaced whole, or left as it was."""

from __future__ import annotations

import stat

import pytest

from bookchat.base.files import replacing_privately


def test_the_file_is_replaced_whole_and_private(tmp_path):
    target = tmp_path / "key"
    target.write_text("old")
    with replacing_privately(target) as file:
        file.write(b"new")
        assert target.read_text() == "old", "not replaced before the block ends"
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["key"], "no partial file left"


def test_a_failure_leaves_the_file_as_it_was_and_nothing_beside_it(tmp_path):
    target = tmp_path / "archive.tar.gz"
    target.write_bytes(b"whole")
    with pytest.raises(RuntimeError), replacing_privately(target) as file:
        file.write(b"half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"whole"
    assert [p.name for p in tmp_path.iterdir()] == ["archive.tar.gz"]
