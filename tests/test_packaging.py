"""The wheel is the app: built from the checkout, installed with its dependencies into a fresh virtualenv, it
holds every template, static file, data file and migration, and passes `check` outside the checkout.

Slow (~30 s here, most of it pip installing the dependencies from its wheel cache into the new virtualenv): the
wheel is built and installed on a thread from the session's start (``tests/support/packaging.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import REPO, WHEEL
from tests.support.packaging import Installed, run

pytestmark = [pytest.mark.slow, pytest.mark.drill]  # builds and installs the wheel: make drills

PACKAGES = ("bookchat", "ingestion", "chat", "audit", "bench")
# The top-level folders of the checkout that the wheel carries inside the bookchat package (pyproject.toml).
SITE_FOLDERS = ("templates", "static")


def files_the_apps_read() -> set[str]:
    """Every file of the packages (modules, templates, static files, data, migrations) as the wheel names it:
    the top-level templates/ and static/ inside the bookchat package."""
    found = set()
    for folder in PACKAGES + SITE_FOLDERS:
        for path in (REPO / folder).rglob("*"):
            relative = path.relative_to(REPO)
            if path.is_file() and "__pycache__" not in relative.parts and path.suffix != ".pyc":
                found.add(("bookchat/" if folder in SITE_FOLDERS else "") + relative.as_posix())
    return found


@pytest.fixture(scope="module")
def installed(pytestconfig) -> Installed:
    """The wheel and the virtualenv it is installed in, made on a thread since the session's start (conftest)."""
    return pytestconfig.stash[WHEEL][0].result()


def test_the_wheel_holds_every_module_template_static_file_data_file_and_migration(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    expected = files_the_apps_read()
    assert {"bookchat/static/bookchat/widget.js", "bookchat/templates/bookchat/chat.html",
            "chat/data/off_topic_questions.txt", "ingestion/templates/admin/ingestion/ingestionjob/change_form.html",
            "chat/migrations/0001_conversations_and_calibration.py", "chat/pipeline/answering.py",
            "ingestion/management/commands/ingest.py"} <= expected
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
    assert not any(name.startswith(("tests/", "docs/")) for name in names)


def test_the_installed_wheel_passes_check_outside_the_checkout(installed, tmp_path):
    venv, python = installed.venv, installed.python

    # Outside the checkout, with a data folder of its own, and a database that isn't there: settings never
    # start the embedded server when DATABASE_URL is set, and `check` doesn't connect.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("BOOKCHAT_", "DJANGO_", "PYTHON", "VIRTUAL_ENV"))}
    env |= {"DJANGO_SETTINGS_MODULE": "bookchat.settings", "BOOKCHAT_DATA_DIR": str(tmp_path / "data"),
            "DATABASE_URL": "postgresql://bookchat@127.0.0.1:9/bookchat"}
    checked = run(python, "-m", "django", "check", cwd=elsewhere, env=env)
    assert "no issues" in checked.stdout

    script = (
        "import django, bookchat; django.setup()\n"
        "from django.contrib.staticfiles import finders\n"
        "from django.template.loader import get_template\n"
        "from chat.pipeline.calibration import OFF_TOPIC_FILE\n"
        "print(bookchat.__file__)\n"
        "print(finders.find('bookchat/widget.js'))\n"
        "for name in ('bookchat/chat.html', 'admin/audit/dashboard.html',\n"
        "             'admin/ingestion/ingestionjob/change_form.html'):\n"
        "    print(get_template(name).origin.name)\n"
        "print(OFF_TOPIC_FILE.is_file())\n"
    )
    lines = run(python, "-c", script, cwd=elsewhere, env=env).stdout.splitlines()
    assert all(line.startswith(str(venv)) for line in lines[:-1]), f"read from the installed package: {lines}"
    assert lines[-1] == "True"

    # The task worker's command (`serve --role worker`, and `all`) runs from the wheel, which has no manage.py.
    from bookchat.management.commands.serve import task_command

    worker = run(python, *task_command()[1:], "--help", cwd=elsewhere, env=env)
    assert "qcluster" in worker.stdout and task_command()[0] == sys.executable

    refused = subprocess.run([python, "-m", "django", "check"], cwd=elsewhere, env=env | {"BOOKCHAT_FUSION": "x"},
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "BOOKCHAT_FUSION='x'" in refused.stderr
