"""``ingestion.reading.site_config_node``: how a run of the node helper is read — the last stdout line as JSON,
errors in a few words, a config that gives no object, no node, a deadline — and the environment and folder node
runs in. A stand-in ``node`` (a shell script) plays node's part; tests/test_site_config.py runs the real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.reading.site_config_node import HELPER, run_config


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "site" / "docusaurus.config.js"
    path.parent.mkdir()
    path.write_text("export default {};\n")
    return path


def _node(tmp_path: Path, script: str) -> str:
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\n" + script)
    node.chmod(0o755)
    return str(node)


def test_the_last_line_of_stdout_is_the_config(tmp_path, config_file):
    node = _node(tmp_path, """echo 'config says hello'\necho '{"ok": true, "config": {"title": "T"}}'\n""")
    assert run_config(node, config_file, timeout=10).config == {"title": "T"}


def test_node_runs_the_helper_in_the_sites_folder_with_a_minimal_environment(tmp_path, config_file, monkeypatch):
    monkeypatch.setenv("BOOKCHAT_SECRET_FOR_TEST", "s3cret")
    node = _node(tmp_path, """printf '{"ok": true, "config": {"args": "%s %s", "cwd": "%s", "env": "%s"}}\\n' \
"$1" "$2" "$(pwd)" "$(env | cut -d= -f1 | sort | tr '\\n' ' ')"\n""")
    config = run_config(node, config_file, timeout=10).config
    assert config["args"] == f"{HELPER} {config_file}" and config["cwd"] == str(config_file.parent)
    names = set(config["env"].split())
    assert {"NODE_ENV", "BABEL_ENV", "NO_COLOR"} <= names and "BOOKCHAT_SECRET_FOR_TEST" not in names


@pytest.mark.parametrize(("stdout", "expected"), [
    ('{"ok": false, "stage": "shape", "error": "it exports a function"}', ("it exports a function", True)),
    ('{"ok": false, "stage": "load", "error": "Cannot find package x"}',
     ("node could not load it: Cannot find package x", False)),
    ("not json", ("node could not load it: first line of stderr", False)),
])
def test_what_went_wrong_is_said_in_a_few_words(tmp_path, config_file, stdout, expected):
    node = _node(tmp_path, f"echo '{stdout}'\necho '\n  first line of stderr\nsecond' >&2\n")
    run = run_config(node, config_file, timeout=10)
    assert run.config is None and (run.error, run.not_a_config) == expected


def test_no_node_and_a_node_past_its_deadline(tmp_path, config_file):
    missing = run_config(str(tmp_path / "no-such-node"), config_file, timeout=10)
    assert missing.no_node and missing.error == f"node was not found at {tmp_path / 'no-such-node'}"
    slow = run_config(_node(tmp_path, "sleep 5\n" + "echo " + json.dumps('{"ok": true, "config": {}}') + "\n"),
                      config_file, timeout=0.2)
    assert slow.config is None and slow.error == "node did not finish loading it in 0.2 s"
