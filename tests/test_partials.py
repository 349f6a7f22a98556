"""What Docusaurus renders, we index: imported MDX partials inlined where they are used, and the prose
props of self-closing components kept as a labelled line."""

from __future__ import annotations

import json

import pytest

from ingestion.models import Chunk, Document
from ingestion.reading.discovery import discover
from ingestion.reading.parsing import parse_document
from ingestion.reading.partials import PartialResolver
from tests.conftest import run_command

PAGE = """\
---
title: Setup
---

# Setup

import Intro from './_intro.mdx';

Before the partial.

<Intro />

## After {#after}

After the partial.
"""

INTRO = """\
---
title: not the page's title
---

## Prerequisites

You need Python 3.11 and a GPU with 8 GB of memory.
"""


def parse_page(book_dir, rel_path: str = "setup.mdx"):
    text = (book_dir.root / rel_path).read_text()
    return parse_document(text, rel_path=rel_path, partials=PartialResolver(book_dir.root, max_bytes=10**6))


def texts(doc) -> list[str]:
    return [block.text for block in doc.blocks]


def test_partial_is_inlined_where_it_is_used_with_its_heading_anchor(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("_intro.mdx", INTRO)
    doc = parse_page(book_dir)
    assert texts(doc) == ["Before the partial.", "You need Python 3.11 and a GPU with 8 GB of memory.",
                          "After the partial."]
    assert doc.title == "Setup" and doc.warnings == []
    assert [(h.title, h.anchor) for h in doc.headings] == [("Setup", "setup"), ("Prerequisites", "prerequisites"),
                                                          ("After", "after")]
    inlined = doc.blocks[1]
    assert [h.anchor for h in inlined.headings] == ["setup", "prerequisites"]
    # Reported at the page's line of <Intro />; the page's own lines keep their numbers.
    assert inlined.line == 11 and doc.blocks[2].line == 15 and doc.headings[2].line == 13


def test_nested_partials_are_inlined(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("_intro.mdx", INTRO + "\nimport Gpu from './_shared/_gpu.md';\n\n<Gpu />\n")
    book_dir.write("_shared/_gpu.md", "### GPU drivers {#gpu}\n\nInstall the NVIDIA driver 550 first.\n\n"
                                      "import Cuda from '../_cuda.md'\n\n  <Cuda />\n")
    book_dir.write("_cuda.md", "Then CUDA 12.\n")
    doc = parse_page(book_dir)
    assert texts(doc)[2:4] == ["Install the NVIDIA driver 550 first.", "Then CUDA 12."]
    gpu = next(b for b in doc.blocks if "driver 550" in b.text)
    assert [h.anchor for h in gpu.headings] == ["setup", "prerequisites", "gpu"]
    assert doc.warnings == [] and not any("import" in text for text in texts(doc))


def test_partial_import_cycle_is_a_warning_not_a_hang(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("_intro.mdx", INTRO + "\nimport Loop from './_loop.mdx';\n\n<Loop />\n")
    book_dir.write("_loop.mdx", "Loop text.\n\nimport Intro from './_intro.mdx';\n\n<Intro />\n")
    doc = parse_page(book_dir)
    assert texts(doc).count("Loop text.") == 1
    [warning] = doc.warnings
    assert warning.file == "setup.mdx" and warning.line == 11
    assert "import cycle setup.mdx → _intro.mdx → _loop.mdx → _intro.mdx" in warning.message


def test_partials_nested_too_deep_stop_with_a_warning(book_dir):
    book_dir.write("setup.mdx", PAGE)
    for level in range(8):
        book_dir.write(f"_p{level}.mdx", f"Level {level}.\n\nimport Next from './_p{level + 1}.mdx';\n\n<Next />\n")
    book_dir.write("_intro.mdx", "import Next from './_p0.mdx';\n\n<Next />\n")
    doc = parse_page(book_dir)
    assert [t for t in texts(doc) if t.startswith("Level")] == ["Level 0.", "Level 1.", "Level 2.", "Level 3."]
    assert [w.message for w in doc.warnings] == [
        "partial <Next /> from './_p4.mdx' not inlined: partials nested more than 5 deep"]


def test_missing_partial_is_a_warning_naming_the_import_and_the_rest_is_indexed(book_dir):
    book_dir.write("setup.mdx", PAGE)
    doc = parse_page(book_dir)
    assert texts(doc) == ["Before the partial.", "After the partial."]
    assert [w.as_dict() for w in doc.warnings] == [
        {"file": "setup.mdx", "line": 11,
         "message": "partial <Intro /> from './_intro.mdx' not inlined: file not found"}]


def test_site_paths_resolve_from_the_docusaurus_site_root(book_dir):
    book_dir.write("docs/setup.mdx", PAGE.replace("./_intro.mdx", "@site/docs/_intro.mdx"))
    book_dir.write("docs/_intro.mdx", INTRO)
    for config in (False, True):  # without a config, @site/docs/… still maps into a book folder named docs
        if config:
            book_dir.write("docusaurus.config.js", "export default {};\n")
        text = (book_dir.root / "docs/setup.mdx").read_text()
        doc = parse_document(text, rel_path="setup.mdx",
                             partials=PartialResolver(book_dir.root / "docs", max_bytes=10**6))
        assert "You need Python 3.11 and a GPU with 8 GB of memory." in texts(doc) and doc.warnings == []


def test_partials_outside_the_book_or_from_packages_are_not_read(book_dir):
    book_dir.write("book/setup.mdx", PAGE.replace("./_intro.mdx", "../_intro.mdx")
                   + "\nimport Other from '@site/src/_other.mdx';\n\n<Other />\n")
    book_dir.write("_intro.mdx", INTRO)
    text = (book_dir.root / "book/setup.mdx").read_text()
    doc = parse_document(text, rel_path="setup.mdx", partials=PartialResolver(book_dir.root / "book", max_bytes=10**6))
    assert [w.message.split(": ", 1)[1] for w in doc.warnings] == [
        "the file is outside the book",
        "@site is the Docusaurus site folder, and no docusaurus.config.* was found beside the book"]


def test_partial_use_in_a_code_example_is_left_alone(book_dir):
    book_dir.write("setup.mdx", PAGE + "\n```mdx\nimport Intro from './_intro.mdx';\n\n<Intro />\n```\n")
    book_dir.write("_intro.mdx", INTRO)
    doc = parse_page(book_dir)
    assert texts(doc)[-1] == "```mdx\nimport Intro from './_intro.mdx';\n\n<Intro />\n```"


def test_partial_file_is_not_a_page(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("_intro.mdx", INTRO)
    book_dir.write("_shared/_gpu.md", "GPU.\n")
    assert [file.rel_path for file in discover(book_dir.root).files] == ["setup.mdx"]


def test_editing_a_partial_changes_the_hash_of_the_pages_using_it(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("other.mdx", "# Other\n\nNo partials here.\n")
    book_dir.write("_intro.mdx", INTRO)

    def hashes() -> tuple[str, str]:
        resolver = PartialResolver(book_dir.root, max_bytes=10**6)
        return tuple(resolver.page_hash((book_dir.root / name).read_text(), f"bytes of {name}", rel_path=name)
                     for name in ("setup.mdx", "other.mdx"))

    before = hashes()
    assert before[1] == "bytes of other.mdx"  # a page without partials keeps its plain content hash
    assert hashes() == before
    book_dir.write("_intro.mdx", INTRO.replace("8 GB", "12 GB"))
    after = hashes()
    assert after[0] != before[0] and after[1] == before[1]


@pytest.mark.django_db
def test_incremental_ingest_reindexes_the_page_when_its_partial_changes(book_dir):
    book_dir.write("setup.mdx", PAGE)
    book_dir.write("other.md", "# Other\n\nA page that imports nothing and should stay as it is.\n")
    book_dir.write("_intro.mdx", INTRO)

    def ingest() -> dict:
        code, out, _ = run_command("ingest", str(book_dir.root), "--book", "partials", "--json")
        assert code == 0, out
        return json.loads(out)

    first = ingest()
    assert first["files_indexed"] == 2 and not first["warnings"]
    assert ingest()["files_unchanged"] == 2
    book_dir.write("_intro.mdx", INTRO.replace("8 GB", "12 GB"))
    report = ingest()
    assert report["files_indexed"] == 1 and report["files_unchanged"] == 1
    assert not Document.objects.filter(book__slug="partials", path="_intro.mdx").exists()
    stored = " ".join(Chunk.objects.filter(book__slug="partials", document__path="setup.mdx")
                      .values_list("text", flat=True))
    assert "12 GB" in stored and "8 GB" not in stored


# -- prose props of self-closing components ------------------------------------------------------

STEPS = """\
# Install

import InstallationStep from '@site/src/components/InstallationStep';

## With apt

<InstallationStep title="Install ROS 2" description="Use apt on Ubuntu 22.04" />

<InstallationStep
  stepNumber={2}
  title="Source the setup file"
  description="Add it to your shell profile."
  platforms={{ ubuntu: { instructions: `source /opt/ros/humble/setup.bash` } }}
  href="https://docs.ros.org/en/humble/Installation.html"
  className="install-step"
  id="step-two"
  optional
/>

<Figure src="/img/rviz.png" caption={caption} />
"""


def test_component_prose_props_become_a_labelled_line_under_their_heading():
    doc = parse_document(STEPS, rel_path="install.mdx")
    assert [(block.text, [h.anchor for h in block.headings], block.line) for block in doc.blocks] == [
        ("InstallationStep: Install ROS 2 — Use apt on Ubuntu 22.04", ["install", "with-apt"], 7),
        ("InstallationStep: Source the setup file — Add it to your shell profile.", ["install", "with-apt"], 9),
    ]


def test_expression_url_id_and_boolean_props_are_not_text():
    doc = parse_document(STEPS, rel_path="install.mdx")
    text = " ".join(texts(doc))
    for not_text in ("source /opt", "docs.ros.org", "install-step", "step-two", "optional", "/img/rviz.png"):
        assert not_text not in text
    # A component left with no prose is still dropped with its warning.
    assert [w.message for w in doc.warnings] == ["dropped JSX component <Figure />"]


# -- mdBook includes ----------------------------------------------------------------------------------------
MAIN_RS = """\
// ANCHOR: setup
let robot = Robot::new();
// ANCHOR_END: setup
robot.walk();
robot.stop();
"""

CHAPTER = """\
# Walking

{{#include snippets/safety.md}}

The whole program:

```rust
{{#include ../src/main.rs:setup}}
```

And its last two lines:

```rust
{{#include ../src/main.rs:4:5}}
```

{{#include missing.md}}
"""


def test_mdbook_includes_are_inlined_with_ranges_and_anchors(book_dir):
    book_dir.write("book/walking.md", CHAPTER)
    book_dir.write("book/snippets/safety.md", "## Safety\n\nKeep the emergency stop within reach.\n")
    book_dir.write("src/main.rs", MAIN_RS)
    text = (book_dir.root / "book/walking.md").read_text()
    doc = parse_document(text, rel_path="book/walking.md",
                         partials=PartialResolver(book_dir.root, max_bytes=10**6))
    blocks = texts(doc)
    assert "Keep the emergency stop within reach." in blocks
    assert [(h.title, h.anchor) for h in doc.headings][1] == ("Safety", "safety")
    assert "```rust\nlet robot = Robot::new();\n```" in blocks, "the anchor's lines, without its marks"
    assert "```rust\nrobot.walk();\nrobot.stop();\n```" in blocks
    assert not any("#include" in block for block in blocks)
    assert [(w.line, w.message) for w in doc.warnings] == [
        (17, "mdBook {{#include missing.md}} not inlined: file not found")]


def test_editing_an_included_file_reindexes_the_page_that_includes_it(book_dir):
    book_dir.write("walking.md", "# Walking\n\n{{#include safety.md}}\n")
    book_dir.write("safety.md", "Keep the emergency stop within reach of the operator at all times.\n")
    resolver = PartialResolver(book_dir.root, max_bytes=10**6)
    page = (book_dir.root / "walking.md").read_text()
    before = resolver.page_hash(page, "page-bytes", rel_path="walking.md")
    book_dir.write("safety.md", "Keep two emergency stops within reach.\n")
    after = PartialResolver(book_dir.root, max_bytes=10**6).page_hash(page, "page-bytes", rel_path="walking.md")
    assert before != after != "page-bytes"


def test_string_props_given_to_a_partial_are_substituted(book_dir):
    book_dir.write("setup.mdx", "# Setup\n\nimport Hello from './_hello.mdx';\n\n"
                                "<Hello name=\"Ada\" tool={'a soldering iron'} count={3} />\n")
    book_dir.write("_hello.mdx", "Welcome, {props.name}: bring {props.tool} and {props.count} spares.\n")
    assert texts(parse_page(book_dir)) == ["Welcome, Ada: bring a soldering iron and {props.count} spares."]
