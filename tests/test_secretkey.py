"""`manage.py secretkey` and the key files it keeps (``bookchat.base.secret_keys``): `rotate` writes a new generated key
and keeps the old one first in the fallbacks file (both mode 600), so what the old key signed (a session) still
loads, in this process with the settings it would read and (a drill) in a new process; it is refused, with nothing
changed, when BOOKCHAT_SECRET_KEY is set; `drop-fallbacks` ends the overlap; `status` counts the fallbacks by where
they come from and never prints a key; a wrong or missing subcommand exits 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.sessions.backends.db import SessionStore

from bookchat.base import secret_keys
from bookchat.management.commands.secretkey import Command
from tests.conftest import REPO, run_command
from tests.test_backup import environment

OPERATOR_KEY = "an operator's key from the environment"


@pytest.fixture
def data_dir(tmp_path, settings) -> Path:
    """A data folder of its own with a generated key, and no key from the environment."""
    folder = tmp_path / "data"
    settings.DATA_DIR = str(folder)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DATA_DIR": str(folder), "SECRET_KEY": "", "SECRET_KEY_FALLBACKS": ""}
    secret_keys.generated_key(folder)
    return folder


def keys_of(folder: Path) -> tuple[str, list[str]]:
    return (folder / "secret_key").read_text(), secret_keys.file_fallbacks(folder)


def test_rotate_writes_a_new_key_and_keeps_the_old_ones_first_in_the_fallbacks(data_dir):
    first, _ = keys_of(data_dir)
    code, out, err = run_command("secretkey", "rotate")
    assert code == 0, err
    second, kept = keys_of(data_dir)
    assert second != first and kept == [first] and len(second) >= 50
    assert "restart all of this install's bookchat processes" in out and "manage.py serve" in out
    assert "drop-fallbacks" in out
    assert first not in out and second not in out
    code, out, _ = run_command("secretkey", "rotate", "--json")
    third, kept = keys_of(data_dir)
    assert code == 0 and kept == [second, first] and third not in (first, second)
    assert json.loads(out) | {"restart": ""} == {"action": "rotated", "key_file": str(data_dir / "secret_key"),
                                                 "fallbacks_file": str(data_dir / "secret_key_fallbacks"),
                                                 "fallbacks_in_file": 2, "restart": ""}
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in data_dir.iterdir() if not p.name.startswith(".")} == {
        "secret_key": "0o600", "secret_key_fallbacks": "0o600"}
    assert not list(data_dir.glob("*.partial")), "no half-written file is left"


def test_a_session_signed_with_the_old_key_still_loads_with_the_settings_read_after_a_rotation(data_dir, settings):
    old, _ = keys_of(data_dir)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, []
    signed = SessionStore().encode({"conversation": 42})
    assert run_command("secretkey", "rotate")[0] == 0
    settings.SECRET_KEY = keys_of(data_dir)[0]
    read = secret_keys.fallbacks(data_dir, "from-the-environment")
    assert read == ["from-the-environment", old]
    settings.SECRET_KEY_FALLBACKS = read
    assert SessionStore().decode(signed) == {"conversation": 42}
    assert run_command("secretkey", "drop-fallbacks")[0] == 0
    settings.SECRET_KEY_FALLBACKS = secret_keys.fallbacks(data_dir, "")
    assert SessionStore().decode(signed) == {}, "after the overlap the old key's session is not read"


@pytest.mark.drill
def test_a_process_started_after_a_rotation_reads_the_old_keys_session(data_dir, settings):
    assert run_command("secretkey", "rotate")[0] == 0
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = keys_of(data_dir)[1][0], []
    signed = SessionStore().encode({"conversation": 43})
    read = subprocess.run([sys.executable, "manage.py", "shell", "-c",
                           "from django.contrib.sessions.backends.db import SessionStore\n"
                           f"print(SessionStore().decode({signed!r}))"],
                          cwd=REPO, env=environment(data_dir), capture_output=True, text=True, timeout=120)
    assert read.returncode == 0 and read.stdout.strip().splitlines()[-1] == "{'conversation': 43}", read.stderr[-2000:]


def test_rotate_is_refused_when_the_operator_sets_the_key(data_dir, settings):
    before = keys_of(data_dir)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SECRET_KEY": OPERATOR_KEY}
    code, out, err = run_command("secretkey", "rotate")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert "BOOKCHAT_SECRET_KEY is set" in err and "Rotate the secret key" in err and OPERATOR_KEY not in err
    code, out, _ = run_command("secretkey", "rotate", "--json")
    assert code == 2 and json.loads(out)["error"] == "operator_key"
    assert keys_of(data_dir) == before and not (data_dir / "secret_key_fallbacks").exists()


def test_status_counts_the_fallbacks_by_source_and_never_prints_a_key(data_dir, settings):
    assert run_command("secretkey", "rotate")[0] == 0
    env_fallbacks = "an old operator key,another old one"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SECRET_KEY_FALLBACKS": env_fallbacks}
    (data_dir / "secret_key_fallbacks").chmod(0o644)
    code, text, _ = run_command("secretkey", "status")
    _, json_out, _ = run_command("secretkey", "status", "--json")
    report = json.loads(json_out)
    assert code == 0 and report["key_source"] == "data folder"
    assert report["fallbacks"] == {"BOOKCHAT_SECRET_KEY_FALLBACKS": 2, "data folder": 1}
    assert report["readable_by_others"] == [str(data_dir / "secret_key_fallbacks")]
    assert "the generated file" in text and "2 from BOOKCHAT_SECRET_KEY_FALLBACKS, 1 from" in text
    assert "chmod 600" in text
    key, kept = keys_of(data_dir)
    for secret in (key, *kept, *env_fallbacks.split(",")):
        assert secret not in text and secret not in json_out
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SECRET_KEY": OPERATOR_KEY}
    code, text, _ = run_command("secretkey", "status")
    assert code == 0 and "BOOKCHAT_SECRET_KEY" in text and OPERATOR_KEY not in text


def test_drop_fallbacks_ends_the_overlap_and_says_when_there_is_none(data_dir):
    code, out, _ = run_command("secretkey", "drop-fallbacks")
    assert code == 0 and "No fallbacks to drop" in out
    run_command("secretkey", "rotate")
    run_command("secretkey", "rotate")
    key = keys_of(data_dir)[0]
    code, out, _ = run_command("secretkey", "drop-fallbacks", "--json")
    assert code == 0 and json.loads(out)["action"] == "dropped" and json.loads(out)["fallbacks_in_file"] == 2
    assert not (data_dir / "secret_key_fallbacks").exists() and keys_of(data_dir)[0] == key


@pytest.mark.parametrize("args", [["frobnicate"], [], ["rotate", "--everything"]])
def test_a_wrong_or_missing_subcommand_exits_2(args, capsys):
    with pytest.raises(SystemExit) as ended:
        Command().run_from_argv(["manage.py", "secretkey", *args])
    assert ended.value.code == 2 and "usage:" in capsys.readouterr().err


def test_the_fallbacks_file_is_one_key_a_line_and_a_missing_one_is_no_fallback(tmp_path):
    assert secret_keys.file_fallbacks(tmp_path) == []
    (tmp_path / "secret_key_fallbacks").write_text("b\n\n  a  \nb\r\n")
    assert secret_keys.file_fallbacks(tmp_path) == ["b", "a"]
    assert secret_keys.fallbacks(tmp_path, " c , ,a") == ["c", "a", "b"]
