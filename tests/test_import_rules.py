"""The import rules `make lint` checks (``[tool.importlinter]`` in pyproject.toml) hold on the code, and a
reversed import breaks them: the check is not a formality that passes whatever the code does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("bookchat", "chat", "ingestion", "audit")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The packages and pyproject.toml, copied so that a test can break them."""
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_code_keeps_every_import_rule(checkout):
    result = lint_imports(checkout)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "12 kept, 0 broken" in result.stdout


def test_a_module_of_bookchat_must_stand_in_the_project_or_the_base(checkout):
    (checkout / "bookchat" / "helpers.py").write_text('"""Neither the project nor the base."""\n')
    result = lint_imports(checkout)
    assert result.returncode != 0
    assert "bookchat.helpers" in result.stdout[result.stdout.index("Broken contracts"):], result.stdout[-3000:]


@pytest.mark.parametrize(("module", "reversed_import", "contract"), [
    ("chat/pipeline/retrieval.py", "from chat.channels.api import AskView", "chat: its entry points"),
    ("chat/pipeline/answering.py", "from chat.channels.error_responses import error_reply",
     "The pipeline knows nothing"),
    ("chat/pipeline/terms.py", "from chat.pipeline.retrieval import retrieve", "chat.pipeline: its entry points"),
    ("chat/channels/access.py", "from chat.channels.api import AskView", "chat.channels: the REST API"),
    ("ingestion/models.py", "from chat.models import Conversation", "The project on top"),
    # the base stands under the apps and under the project, which routes readiness
    ("bookchat/base/conf.py", "from bookchat.settings import DATA_DIR", "bookchat: the project, then its base"),
    ("bookchat/base/errors.py", "from chat.models import Conversation", "The project on top"),
    ("chat/urls.py", "from bookchat.readiness import ReadyView", "The project on top"),
    ("ingestion/reading/documents.py", "from ingestion.reading.mdx import clean_mdx", "ingestion.reading: a site"),
    ("ingestion/reading/parsing.py", "from ingestion.indexing.chunking import chunk", "ingestion: its entry points"),
    ("ingestion/indexing/indexer.py", "from ingestion.indexing.ingesting import BookLock",
     "ingestion.indexing: ingesting"),
    # ingestion's API knows no chat: who may call reaches it through the project's wiring
    ("ingestion/api/views.py", "from chat.channels.access import Client", "The project on top"),
    ("ingestion/api/contract.py", "from ingestion.api.views import PublishView", "ingestion.api: its routes"),
    ("ingestion/uploads/sources.py", "from ingestion.uploads.jobs import job_folder", "ingestion.uploads: the admin"),
])
def test_a_reversed_import_breaks_its_rule(checkout, module, reversed_import, contract):
    path = checkout / module
    path.write_text(path.read_text() + f"\n{reversed_import}  # noqa\n")
    result = lint_imports(checkout)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts"):]
    assert contract in broken and module.removesuffix(".py").replace("/", ".") in broken, result.stdout[-3000:]
