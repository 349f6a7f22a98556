"""The map of the code stays true: every module with logic has a test that imports it (tests/MODULES.md, written
by tests/support/codemap.py, says which), CONTRIBUTING.md's ask, publish and indexing paths name modules that exist
in an order their imports follow, and no function in a package of the checkout (tests/ apart) outgrows the length
rule (tests/support/long_functions.py). Each rule is also run on a small tree of its own, to show it can fail."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support import codemap, long_functions

_STEP = re.compile(r"^\d+\. `([\w/]+\.py)`", re.M)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


# --- which test covers which module -------------------------------------------------------------------------------

def test_every_module_with_logic_has_a_test_that_imports_it():
    missing = codemap.uncovered()
    assert not missing, (
        f"{len(missing)} modules with logic of their own have no test that imports them (or runs them, for a "
        "command); write one, or name the module in UNTESTED in tests/support/codemap.py with the reason:\n"
        + "\n".join(f"  {name}" for name in missing))


def test_each_module_left_untested_exists_has_logic_and_still_has_no_test():
    covered = codemap.coverage()
    stale = [name for name in codemap.UNTESTED if covered.get(name, ["(no such module with logic)"])]
    assert not stale, f"remove from UNTESTED (tested now, or gone): {stale}"
    assert all(reason.strip() for reason in codemap.UNTESTED.values())


@pytest.fixture
def small_tree(tmp_path) -> Path:
    return write(tmp_path, {
        "chat/__init__.py": "",
        "chat/steps.py": "def step():\n    return 1\n",
        "chat/shapes.py": "class Shape:\n    pass\n",
        "chat/constants.py": "LIMIT = 3\n",  # no logic: not listed
        "chat/pipeline/__init__.py": "",
        "chat/pipeline/ranking.py": "def rank():\n    pass\n",
        "chat/management/commands/tidy.py": "class Command:\n    pass\n",
        "chat/migrations/0001_initial.py": "class Migration:\n    pass\n",  # Django's: not listed
        "tests/test_steps.py": """
            def test_step():
                from chat.steps import step
                assert step() == 1
            """,
        "tests/pipeline/test_ranking.py": """
            from chat.pipeline import ranking
            from tests.conftest import run_command

            def test_tidy():
                run_command("tidy", "--all")
            """,
    })


def test_a_test_covers_what_it_imports_or_runs_by_name(small_tree):
    assert codemap.coverage(small_tree) == {
        "chat.management.commands.tidy": ["pipeline/test_ranking.py"],
        "chat.pipeline.ranking": ["pipeline/test_ranking.py"],
        "chat.shapes": [],
        "chat.steps": ["test_steps.py"],
    }
    assert codemap.uncovered(small_tree) == ["chat.shapes"]
    assert "| `chat/shapes.py` | **none** |" in codemap.render(small_tree)


def test_a_command_line_or_call_command_runs_a_command_by_name():
    tree = ast.parse('call_command("ingest", path)\nrun([sys.executable, str(REPO / "manage.py"), "mcp"])\n'
                     'subprocess.run(["echo", "serve"])')
    assert codemap.commands_run(tree) == {"ingest", "mcp"}


def test_imports_name_modules_relative_ones_and_dotted_strings_included():
    known = {"chat.pipeline", "chat.pipeline.retrieval", "chat.pipeline.terms", "chat.tasks", "ingestion.models"}
    tree = ast.parse("from . import terms\nfrom .retrieval import retrieve\nimport ingestion.models\n"
                     "async_task('chat.tasks.calibrate', 1)\nsend(dispatch_uid='chat.answered')")
    assert codemap.imported(tree, known, "chat.pipeline.answering") == {
        "chat.pipeline.terms", "chat.pipeline.retrieval", "ingestion.models"}
    assert codemap.named_in_strings(tree, known) == {"chat.tasks"}


# --- CONTRIBUTING.md's map ----------------------------------------------------------------------------------------

def paths_of_the_map() -> list[list[str]]:
    """Each numbered list in CONTRIBUTING.md's map, as the module paths its steps name."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text[text.index("## A map of the code"):]
    section = section[:section.index("\n## ", 1)]
    lists: list[list[str]] = []
    for found in _STEP.finditer(section):
        if found.group(0).startswith("1. "):
            lists.append([])
        lists[-1].append(found.group(1))
    return lists


def out_of_order(steps: list[str], graph: dict[str, set[str]]) -> list[str]:
    """The steps that no earlier step imports (or names as a task or a URLconf)."""
    modules = [codemap.module_name(REPO / step, REPO) for step in steps]
    return [steps[at] for at in range(1, len(modules))
            if not any(modules[at] in graph.get(before, ()) for before in modules[:at])]


def test_contributing_leads_with_the_ask_path_the_publish_path_and_the_indexing_path():
    text = (REPO / "CONTRIBUTING.md").read_text()
    assert re.search(r"^## .*", text, re.M).group(0) == "## A map of the code", "the map is the first section"
    lists = paths_of_the_map()
    assert [steps[0] for steps in lists] == [
        "bookchat/urls.py", "bookchat/urls.py", "ingestion/uploads/admin.py", "ingestion/management/commands/ingest.py"]
    assert "chat/pipeline/answering.py" in lists[0] and "ingestion/indexing/indexer.py" in lists[2]
    assert {"ingestion/api/views.py", "ingestion/uploads/publishing.py", "ingestion/uploads/sources.py",
            "ingestion/indexing/ingesting.py"} <= set(lists[1])


def test_every_module_the_map_names_exists():
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text[text.index("## A map of the code"):text.index("\n## ", text.index("## A map of the code") + 1)]
    named = re.findall(r"`([\w/]+\.(?:py|md))`", section)
    assert len(named) > 40
    assert [path for path in named if not (REPO / path).is_file()] == []


def test_each_step_of_the_map_is_imported_by_a_step_before_it():
    graph = codemap.import_graph()
    wrong = {steps[0]: out_of_order(steps, graph) for steps in paths_of_the_map()}
    assert all(not steps for steps in wrong.values()), wrong


def test_a_step_listed_before_its_caller_is_out_of_order():
    graph = codemap.import_graph()
    steps = ["chat/channels/api.py", "chat/pipeline/retrieval.py", "chat/channels/asking.py",
             "chat/pipeline/answering.py"]
    assert out_of_order(steps, graph) == ["chat/pipeline/retrieval.py"]


def test_every_module_the_layout_names_is_a_file():
    text = (REPO / "CONTRIBUTING.md").read_text()
    layout = text[text.index("## Layout"):text.index("\n## ", text.index("## Layout") + 1)]
    files = {path.name for app in (*codemap.APPS, "bench") for path in (REPO / app).rglob("*.py")} | {"manage.py"}
    assert [name for name in re.findall(r"\b\w+\.py\b", layout) if name not in files] == []


# --- the function-length rule --------------------------------------------------------------------------------------

def test_no_function_in_any_package_is_over_the_limit():
    assert long_functions.problems() == []


def function(name: str, lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{n} = {n}\n" for n in range(lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_a_function_one_line_over_the_limit_breaks_the_rule(tmp_path):
    write(tmp_path, {
        "chat/__init__.py": "",
        "chat/long.py": function("fits", 60) + "\n\nclass Steps:\n" + function("too_long", 61, "    "),
        "chat/migrations/0001_initial.py": function("forwards", 200),
        "pyproject.toml": '[tool.bookchat.function-length]\nlimit = 60\nexclude = ["tests"]\nallowed = {}\n',
    })
    assert long_functions.problems(tmp_path) == [
        "chat/long.py:64: Steps.too_long is 61 lines (limit 60)"]


def test_every_package_but_the_excluded_is_held_to_the_limit(tmp_path):
    write(tmp_path, {
        "newapp/__init__.py": "",
        "newapp/deep/long.py": function("too_long", 61),
        "tests/__init__.py": "",
        "tests/test_drill.py": function("test_a_long_scenario", 100),
        "scripts/not_a_package.py": function("standalone", 100),
        "pyproject.toml": '[tool.bookchat.function-length]\nlimit = 60\nexclude = ["tests"]\nallowed = {}\n',
    })
    assert long_functions.packages(tmp_path, ("tests",)) == ("newapp",)
    assert long_functions.problems(tmp_path) == ["newapp/deep/long.py:1: too_long is 61 lines (limit 60)"]


def test_an_allowed_function_passes_and_a_stale_allowance_fails(tmp_path):
    write(tmp_path, {
        "chat/__init__.py": "",
        "chat/long.py": function("long_on_purpose", 70),
        "pyproject.toml": '[tool.bookchat.function-length]\nlimit = 60\nexclude = ["tests"]\n'
                          '[tool.bookchat.function-length.allowed]\n'
                          '"chat/long.py:long_on_purpose" = "a table"\n"chat/long.py:gone" = "was long"\n',
    })
    assert long_functions.problems(tmp_path) == [
        "chat/long.py:gone: allowed in pyproject.toml but not over 60 lines (remove it from the list)"]
