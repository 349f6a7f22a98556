"""No command loses data by surprise: `make clean` removes what a build makes and leaves the data folder;
`bookchat data erase` (`make erase-data`) deletes it only when told to; the Makefile picks a Python 3.11 or newer,
or stops naming ``PYTHON=``, and makes a half-made virtualenv again."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def stub(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def make(folder: Path, *args: str, path_first: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ}
    if path_first:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    env.pop("PYTHON", None)
    return subprocess.run(["make", "--no-print-directory", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)


def checkout(tmp_path: Path) -> Path:
    folder = tmp_path / "checkout"
    folder.mkdir()
    shutil.copy(REPO / "Makefile", folder)
    shutil.copy(REPO / "pyproject.toml", folder)
    return folder


def test_make_clean_removes_the_build_and_leaves_the_data(tmp_path):
    folder = checkout(tmp_path)
    calls = tmp_path / "calls"
    stub(folder / ".venv/bin/python", f'echo "$@" >> {calls}')
    for name in ("var/pgdata/PG_VERSION", "var/archive/audit-2026-01.jsonl.gz", "var/secret_key"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("keep me")
    (folder / "bookchat/__pycache__").mkdir(parents=True)
    (folder / "bookchat/__pycache__/x.pyc").write_bytes(b"")
    (folder / "bookchat/cli.py").write_text("")
    (folder / "bookchat.egg-info").mkdir()

    result = make(folder, "clean")
    assert result.returncode == 0, result.stderr
    assert calls.read_text().split() == ["-m", "bookchat.cli", "db", "stop"], "the embedded database stopped first"
    assert not (folder / ".venv").exists() and not (folder / "bookchat.egg-info").exists()
    assert not (folder / "bookchat/__pycache__").exists() and (folder / "bookchat/cli.py").exists()
    for name in ("var/pgdata/PG_VERSION", "var/archive/audit-2026-01.jsonl.gz", "var/secret_key"):
        assert (folder / name).read_text() == "keep me", name


def erase(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "BOOKCHAT_DATA_DIR": str(data)}
    env.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "bookchat.cli", "data", "erase", *args], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_erasing_the_data_refuses_without_confirmation_and_says_what_it_deletes(tmp_path):
    data = tmp_path / "data"
    (data / "archive").mkdir(parents=True)
    (data / "archive/audit.jsonl.gz").write_bytes(b"x" * 2000)
    (data / "secret_key").write_text("k")

    refused = erase(data)
    assert refused.returncode == 2
    assert "--yes" in refused.stderr and "archived audit records" in refused.stdout
    assert (data / "secret_key").exists(), "nothing deleted without confirmation"
    assert erase(data, "--force").returncode == 2, "an unknown option deletes nothing"
    assert (data / "secret_key").exists()

    done = erase(data, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["erased"] and {e["name"] for e in report["entries"]} == {"archive", "secret_key"}
    assert not data.exists()
    assert "Nothing to erase" in erase(data, "--yes").stdout


def test_erasing_refuses_a_folder_that_holds_the_checkout(tmp_path):
    refused = erase(REPO.parent)
    assert refused.returncode == 2 and "holds more than bookchat's data" in refused.stderr
    assert (REPO / "Makefile").exists()


def test_the_makefile_picks_the_newest_python_from_3_11_and_rebuilds_a_half_made_venv(tmp_path):
    folder = checkout(tmp_path)
    bin_dir = tmp_path / "bin"
    stub(bin_dir / "python3.13", "exit 1")  # present, but not a working 3.11+
    stub(bin_dir / "python3.12", "exit 0")
    (folder / ".venv/bin").mkdir(parents=True)  # left by an interrupted run: no .venv/.created
    dry = make(folder, "-n", ".venv/.created", path_first=bin_dir)
    assert dry.returncode == 0, dry.stderr
    assert "rm -rf .venv" in dry.stdout and "python3.12 -m venv .venv" in dry.stdout


def test_the_makefile_stops_naming_python_when_it_is_too_old(tmp_path):
    folder = checkout(tmp_path)
    old = stub(tmp_path / "bin/python3", "exit 1")  # sys.version_info < (3, 11)
    result = make(folder, "run", f"PYTHON={old}")
    assert result.returncode != 0
    assert "needs Python 3.11 or newer" in result.stderr and "PYTHON=/path/to/python3.11" in result.stderr
    assert not (folder / ".venv").exists()


def test_the_commands_page_names_every_make_target():
    text = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*?)(?<!\\)\n", text, re.S | re.M).group(1).replace("\\", " ").split()
    page = (REPO / "docs/operating/commands.md").read_text()
    assert phony and [t for t in phony if f"`make {t}" not in page] == []
