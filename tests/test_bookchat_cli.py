"""The ``bookchat`` command's own decisions (``bookchat.cli``), called in-process: what ``data erase`` lists and when it
refuses (an unknown option, a folder that holds more than bookchat's data, no terminal and no ``--yes``), ``db`` on a
data folder with no server and under ``DATABASE_URL``, and ``push`` routed to the publishing command. The whole
``data erase`` as run from a shell: tests/test_make_clean.py."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from bookchat import cli


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    """A data folder of its own: an archive file and a secret key."""
    folder = tmp_path / "var"
    (folder / "archive").mkdir(parents=True)
    (folder / "archive" / "audit-1.jsonl.gz").write_bytes(b"x" * 300)
    (folder / "secret_key").write_text("k" * 50)
    monkeypatch.setenv("BOOKCHAT_DATA_DIR", str(folder))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal to ask on
    return folder


def test_the_summary_lists_each_entry_with_its_size(data):
    summary = cli.data_summary(data)
    assert summary["exists"] and summary["bytes"] == 350
    assert summary["entries"] == [{"name": "archive", "bytes": 300}, {"name": "secret_key", "bytes": 50}]
    assert cli.data_summary(data / "missing") == {"folder": str(data / "missing"), "exists": False, "bytes": 0,
                                                  "entries": []}


def test_erase_refuses_without_a_terminal_or_yes_and_an_unknown_option(data, capsys):
    assert cli.main(["data", "erase"]) == 2
    assert "Not erased: run again with --yes" in capsys.readouterr().err
    assert cli.main(["data", "erase", "--force"]) == 2
    assert "data erase takes --yes and --json, not --force" in capsys.readouterr().err
    assert (data / "secret_key").exists()


def test_erase_refuses_a_folder_that_holds_the_code(data, monkeypatch, capsys):
    monkeypatch.setenv("BOOKCHAT_DATA_DIR", str(cli.BASE_DIR.parent))
    assert cli.main(["data", "erase"]) == 2  # no --yes: were the check broken, the missing terminal still refuses
    assert "holds more than bookchat's data" in capsys.readouterr().err


def test_erase_with_yes_deletes_the_folder_and_says_what_was_there(data, capsys):
    assert cli.main(["data", "erase", "--yes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["erased"] and not report["stopped_database"] and report["bytes"] == 350
    assert not data.exists()
    assert cli.main(["data", "erase", "--yes"]) == 0
    assert "Nothing to erase" in capsys.readouterr().out


def test_db_status_and_stop_on_a_folder_with_no_server(data, capsys):
    assert cli.main(["db", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"running": False, "pgdata": str(data / "pgdata")}
    assert cli.main(["db", "stop"]) == 0
    assert capsys.readouterr().out.strip() == "The embedded PostgreSQL was not running."
    assert cli.main(["db", "restart"]) == 2
    assert "unknown db action 'restart'" in capsys.readouterr().err


def test_db_leaves_an_external_server_alone(data, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", "postgres://db.example.org/bookchat")
    assert cli.main(["db", "stop"]) == 2
    assert "bookchat does not manage that server" in capsys.readouterr().err


def test_push_is_routed_to_the_publishing_command(data, capsys):
    assert cli.main(["push"]) == 2  # its own usage error: ROOT, --server and --book are required
    assert "the following arguments are required: ROOT, --server, --book" in capsys.readouterr().err
