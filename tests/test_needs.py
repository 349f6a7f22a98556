"""What the tests need besides pip (``NEEDS`` in tests/conftest.py): a missing piece stops the session at once with
one line naming it and how to install it; ``BOOKCHAT_TEST_SKIP`` turns that into skips; a typo in it is refused.
Each case runs pytest itself on the cached-Docusaurus-site tests (which need Node.js) with node off the PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import NEEDS, REPO

NODE_TESTS = "tests/test_docusaurus_site_fixture.py"
# A drill (make drills): each test runs a pytest session of its own.
pytestmark = pytest.mark.drill


def pytest_without_node(*args: str, **env: str) -> subprocess.CompletedProcess:
    path = os.path.dirname(sys.executable)  # the virtualenv's bin: no node, npm or npx there
    assert shutil.which("node", path=path) is None
    return subprocess.run([sys.executable, "-m", "pytest", NODE_TESTS, "-p", "no:cacheprovider", "-q", *args],
                          cwd=REPO, env=os.environ | {"PATH": path} | env, capture_output=True, text=True, timeout=300)


def test_without_node_the_session_stops_with_one_line_naming_it():
    run = pytest_without_node()
    assert run.returncode == 4, run.stdout + run.stderr
    lines = [line for line in (run.stdout + run.stderr).splitlines() if "not found on PATH" in line]
    assert len(lines) == 1, run.stdout + run.stderr
    assert "node, npm, npx not found on PATH" in lines[0] and "apt-get install -y nodejs npm" in lines[0]
    assert "BOOKCHAT_TEST_SKIP=node" in lines[0]
    assert " passed" not in run.stdout, "nothing ran"


def test_bookchat_test_skip_names_a_group_to_skip_instead():
    run = pytest_without_node("-rs", BOOKCHAT_TEST_SKIP="node")
    assert run.returncode == 0, run.stdout + run.stderr
    assert " skipped" in run.stdout and " passed" not in run.stdout and "failed" not in run.stdout
    assert "the Docusaurus test site needs Node.js 20+ with npm (BOOKCHAT_TEST_SKIP=node)" in run.stdout


def test_an_unknown_group_in_bookchat_test_skip_is_refused():
    run = pytest_without_node(BOOKCHAT_TEST_SKIP="nodes")
    output = run.stdout + run.stderr
    assert run.returncode == 4, output
    assert f"BOOKCHAT_TEST_SKIP names nodes: the groups are {', '.join(NEEDS)}" in output
