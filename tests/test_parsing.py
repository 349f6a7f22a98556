"""parse_document on real Docusaurus MDX snippets and on every page of the shared corpora (no Django).

Snippets marked "real" are copied from ../shared/data (docusaurus-docs, physical-ai-book)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bookchat.base.errors import ParseError
from ingestion.reading.documents import ParsedDocument
from ingestion.reading.parsing import parse_document
from tests.support.shared_data import shared_data


def parse(text: str, rel_path: str = "guides/page.mdx") -> ParsedDocument:
    return parse_document(text, rel_path=rel_path, category="Guides")


def texts(doc: ParsedDocument) -> list[str]:
    return [block.text for block in doc.blocks]


# -- front matter and title -----------------------------------------------------------------------

ADMONITIONS_HEAD = """\
---
id: admonitions
description: Handling admonitions/callouts in Docusaurus Markdown
slug: /markdown-features/admonitions
---

# Admonitions

import BrowserWindow from '@site/src/components/BrowserWindow';
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
import Admonition from '@theme/Admonition';

In addition to the basic Markdown syntax, we have a special admonitions syntax by wrapping text with a set \
of 3 colons, followed by a label denoting its type.
"""  # real: guides/markdown-features/markdown-features-admonitions.mdx


def test_front_matter_title_slug_and_imports():
    doc = parse(ADMONITIONS_HEAD, "guides/markdown-features/markdown-features-admonitions.mdx")
    assert doc.front_matter == {
        "id": "admonitions",
        "description": "Handling admonitions/callouts in Docusaurus Markdown",
        "slug": "/markdown-features/admonitions",
    }
    assert doc.title == "Admonitions"  # the first H1
    assert doc.slug == "markdown-features/admonitions"
    assert doc.category == "Guides"
    assert doc.rel_path == "guides/markdown-features/markdown-features-admonitions.mdx"
    assert [block.kind for block in doc.blocks] == ["paragraph"]
    assert doc.blocks[0].text.startswith("In addition to the basic Markdown syntax")
    assert doc.blocks[0].line == 14  # front matter lines count
    headings = [(h.level, h.title, h.anchor, h.line) for h in doc.headings]
    assert headings == [(1, "Admonitions", "admonitions", 7)]


def test_front_matter_values_are_json_serialisable():
    doc = parse("---\ntitle: Release notes\ndate: 2024-05-01\nupdated: 2024-05-01 10:30:00\n"
                "sidebar_position: 3\nsidebar_label: Notes\ntags: [a, b]\n---\n\nBody.\n")
    assert doc.front_matter["date"] == "2024-05-01"
    assert doc.front_matter["updated"] == "2024-05-01T10:30:00"
    assert doc.front_matter["sidebar_position"] == 3
    assert doc.front_matter["tags"] == ["a", "b"]
    json.dumps(doc.front_matter)
    assert doc.title == "Release notes"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("---\ntitle: Setting Up Isaac SDK\ndescription: Step: guide\n---\n\nx\n", 3, "mapping values"),
        ("---\ntitle: ok\ntags: [isaac-sim, installation\n---\n\nx\n", 3, "invalid YAML"),
        ("---\n- just\n- a list\n---\n\nx\n", 2, "not a mapping"),
        ("---\ntitle: never closed\n\n# Heading\n", 1, "never closed"),
    ],
)
def test_bad_front_matter_names_file_and_line(text, line, words):
    with pytest.raises(ParseError) as caught:
        parse(text, "module-03/page-20.mdx")
    assert caught.value.file == "module-03/page-20.mdx"
    assert caught.value.line == line
    assert words in caught.value.message


def test_title_fallbacks():
    assert parse("---\ntitle: From FM\n---\n# From H1\n\nx\n").title == "From FM"
    assert parse("# From H1 {#custom}\n\nx\n").title == "From H1"
    assert parse("---\nsidebar_label: Label\n---\nx\n").title == "Label"
    assert parse("Just text.\n", "01-getting-started/02-first-steps.md").title == "First steps"
    assert parse("Just text.\n", "07-gazebo-ignition/index.md").title == "Gazebo ignition"


def test_title_h1_is_a_heading_not_content():
    doc = parse("# Chapter 7: Gazebo & Ignition Simulation\n\n## Learning Objectives\n\nAfter completing.\n")
    assert doc.title == "Chapter 7: Gazebo & Ignition Simulation"
    assert texts(doc) == ["After completing."]
    assert [h.anchor for h in doc.blocks[0].headings] == ["chapter-7-gazebo--ignition-simulation",
                                                          "learning-objectives"]


def test_only_front_matter_or_only_imports_gives_no_blocks():
    assert parse("---\ntitle: Stub\nsidebar_position: 4\n---\n").blocks == []
    doc = parse("import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n")
    assert doc.blocks == [] and doc.warnings == []
    assert parse("").blocks == []


# -- MDX: ESM, JSX, comments ------------------------------------------------------------------------

ROUTING_EXPORTS = """\
# Routing

```mdx-code-block
import Link from '@docusaurus/Link';
import {useLatestVersion, useActiveDocContext} from '@docusaurus/plugin-content-docs/client';
import {useLocation} from '@docusaurus/router';
import BrowserWindow from '@site/src/components/BrowserWindow';
```

The docs is the only plugin that creates **nested routes**.

```mdx-code-block
export const URLPath = () => <code>{useLocation().pathname}</code>;

export const FilePath = () => {
  const currentVersion = useActiveDocContext('default').activeVersion.name;
  return <code>{currentVersion === 'current' ? './docs/' : `./versioned/v-${currentVersion}/`}x.md</code>;
}
```

The individual docs are rendered in the remaining space. For example, this page, <URLPath />, is generated \
from the file at <FilePath />. The component used is `@theme/DocItem`.
"""  # real: advanced/routing.mdx


def test_import_and_export_blocks_are_removed_including_multiline():
    doc = parse(ROUTING_EXPORTS, "advanced/routing.mdx")
    assert texts(doc) == [
        "The docs is the only plugin that creates **nested routes**.",
        "The individual docs are rendered in the remaining space. For example, this page, , is generated "
        "from the file at . The component used is `@theme/DocItem`.",
    ]
    assert [(w.line, w.message) for w in doc.warnings] == [
        (21, "dropped JSX component <URLPath />"), (21, "dropped JSX component <FilePath />")]


def test_multiline_import_and_export_object():
    text = ("import {\n  useLatestVersion,\n  useActiveDocContext,\n} from '@docusaurus/plugin-content-docs';"
            "\n\nexport const toc = {\n  a: 1,\n\n  b: [2, 3],\n};\n\nFirst real line.\n")
    assert texts(parse(text)) == ["First real line."]


def test_import_words_in_prose_and_code_are_kept():
    text = ("You can import the `Tabs` component:\nimport it once per page.\n\n"
            "```js\nimport Tabs from '@theme/Tabs';\n```\n\nexport your site with `npm run build`.\n")
    doc = parse(text)
    assert texts(doc) == [
        "You can import the `Tabs` component:\nimport it once per page.",
        "```js\nimport Tabs from '@theme/Tabs';\n```",
        "export your site with `npm run build`.",
    ]


def test_self_closing_components_are_dropped_with_one_warning_per_unknown_name():
    text = """\
This section is not going to be very structured, but we will cover the following topics:

```mdx-code-block
import DocCardList from '@theme/DocCardList';

<DocCardList />
```

The high-level overview of Docusaurus configuration can be categorized into:

<TOCInline toc={toc} minHeadingLevel={3} maxHeadingLevel={3} />

<ColorGenerator />

Line one<br />line two.

<ColorGenerator />
"""  # real: advanced/index.mdx, configuration.mdx, styling-layout.mdx
    doc = parse(text)
    assert texts(doc) == [
        "This section is not going to be very structured, but we will cover the following topics:",
        "The high-level overview of Docusaurus configuration can be categorized into:",
        "Line one line two.",
    ]
    assert [(w.line, w.message) for w in doc.warnings] == [(13, "dropped JSX component <ColorGenerator />")]


TABS = """\
```mdx-code-block
<BrowserWindow>
  <Tabs>
    <TabItem value="apple" label="Apple">This is an apple 🍎</TabItem>
    <TabItem value="orange" label="Orange">This is an orange 🍊</TabItem>
    <TabItem value="banana" label="Banana">This is a banana 🍌</TabItem>
  </Tabs>
</BrowserWindow>
```

```mdx-code-block
<BrowserWindow>
  <Tabs
    defaultValue="apple"
    values={[
      {label: 'Apple 1', value: 'apple'},
      {label: 'Orange 1', value: 'orange'},
    ]}>
    <TabItem value="apple" label="Apple 2">This is an apple 🍎</TabItem>
    <TabItem value="orange">This is an orange 🍊</TabItem>
  </Tabs>
</BrowserWindow>
```
"""  # real: guides/markdown-features/markdown-features-tabs.mdx


def test_tab_items_keep_their_label_in_front_of_their_content():
    assert texts(parse(TABS)) == [
        "**Apple:** This is an apple 🍎\n**Orange:** This is an orange 🍊\n**Banana:** This is a banana 🍌",
        "**Apple 1:** This is an apple 🍎\n**Orange 1:** This is an orange 🍊",  # <Tabs values> labels win
    ]


def test_tab_item_label_before_code_and_text():
    text = """\
<Tabs>
<TabItem value="js" label="JavaScript">

```js
function helloWorld() {
  console.log('Hello, world!');
}
```

</TabItem>
<TabItem value="npm">

Run the installer.

</TabItem>
</Tabs>
"""  # real (shortened): guides/markdown-features/markdown-features-code-blocks.mdx
    doc = parse(text)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "**JavaScript:**"),
        ("code", "```js\nfunction helloWorld() {\n  console.log('Hello, world!');\n}\n```"),
        ("paragraph", "**npm:** Run the installer."),
    ]
    assert (doc.blocks[2].line, doc.blocks[2].end_line) == (11, 13)  # from the <TabItem> line


def test_details_and_summary_keep_their_text():
    text = """\
The following directory structure may help you visualize this file → URL mapping.

<details>

<summary>A sample site structure</summary>

```bash
.
├── blog                            # blog plugin has routeBasePath: '/blog'
```

</details>

So much about content plugins.
"""  # real: advanced/routing.mdx
    assert texts(parse(text)) == [
        "The following directory structure may help you visualize this file → URL mapping.",
        "A sample site structure",
        "```bash\n.\n├── blog                            # blog plugin has routeBasePath: '/blog'\n```",
        "So much about content plugins.",
    ]


def test_four_backtick_mdx_code_block_with_a_fence_and_nested_details():
    text = """\
````mdx-code-block
<BrowserWindow>

<h3>Details element example</h3>

<details>
  <summary>Toggle me!</summary>

  This is the detailed content

  ```js
  console.log("Markdown features including the code block are available");
  ```

  <details>
    <summary>Nested toggle! Some surprise inside...</summary>

    😲😲😲😲😲
  </details>
</details>

</BrowserWindow>
````
"""  # real: guides/markdown-features/markdown-features-intro.mdx
    doc = parse(text)
    assert [(b.kind, b.text, b.line) for b in doc.blocks] == [
        ("paragraph", "Details element example", 4),
        ("paragraph", "Toggle me!", 7),
        ("paragraph", "This is the detailed content", 9),
        ("code", '```js\nconsole.log("Markdown features including the code block are available");\n```', 11),
        ("paragraph", "Nested toggle! Some surprise inside...", 16),
        ("paragraph", "😲😲😲😲😲", 18),
    ]
    assert doc.warnings == []


def test_summary_with_inline_code_tags():
    text = ("<details>\n  <summary><code>Tabs</code> props take precedence over the <code>TabItem</code>"
            " props:</summary>\n\nBody.\n\n</details>\n")  # real: markdown-features-tabs.mdx
    assert texts(parse(text)) == ["Tabs props take precedence over the TabItem props:", "Body."]


def test_html_and_mdx_comments_are_dropped_even_multiline():
    text = """\
{/* TODO: Add hero image - Isaac Sim interface showing humanoid robot in warehouse environment */}
{/* File: static/img/module-03/isaac-sim-hero-screenshot.webp */}

Blog intro.

<!-- truncate -->

{/*
  A comment over
  several lines
*/}
<!--
also
hidden -->
Rest of the post.
"""  # real: physical-ai-book page-20 (first lines) and blog.mdx
    doc = parse(text)
    assert texts(doc) == ["Blog intro.", "Rest of the post."]
    assert doc.blocks[1].line == 15


def test_jsx_expression_strings_become_text():
    text = ("<pre>\n  <b>{'Input: '}</b>1 2 3 4{'\\n'}\n</pre>\n\n"
            "{` `}and <Highlight color=\"#1877F2\">Facebook blue</Highlight>\n")  # real: code-blocks, react
    assert texts(parse(text)) == ["Input: 1 2 3 4", "and Facebook blue"]


def test_code_block_component_becomes_a_fence():
    text = """\
<BrowserWindow>
  <CodeBlock
    language="jsx"
    title="/src/components/HelloCodeTitle.js"
    showLineNumbers>
    {`function HelloCodeTitle(props) {
  return <h1>Hello, {props.name}</h1>;
}`}
  </CodeBlock>
</BrowserWindow>

<CodeBlock language="jsx">{MyComponentSource}</CodeBlock>
"""  # real: markdown-features-code-blocks.mdx and markdown-features-react.mdx
    doc = parse(text)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("code", '```jsx title="/src/components/HelloCodeTitle.js"\nfunction HelloCodeTitle(props) {\n'
                 "  return <h1>Hello, {props.name}</h1>;\n}\n```"),
    ]
    assert [(w.line, w.message) for w in doc.warnings] == [
        (12, "dropped <CodeBlock> whose content is computed at build time")]


def test_head_element_is_dropped_with_its_content():
    text = """\
```mdx-code-block
<head>
  <html className="some-extra-html-class" />
  <title>Head Metadata customized title!</title>
  <meta charSet="utf-8" />
</head>
```

This `<head>` declaration has been added to the current Markdown doc as a demo.
"""  # real: markdown-features-head-metadata.mdx
    assert texts(parse(text)) == [
        "This `<head>` declaration has been added to the current Markdown doc as a demo."]


def test_angle_brackets_that_are_not_jsx():
    text = ("Latency must stay a < b and 1 <= 2, see <https://docusaurus.io> or <team@example.com>.\n\n"
            "Use `<Tabs lazy />` to render lazily.\n\nAdd this inside the <robot> tags: `<link>`.\n")
    assert texts(parse(text, "module-01/page-09.md")) == [
        "Latency must stay a < b and 1 <= 2, see <https://docusaurus.io> or <team@example.com>.",
        "Use `<Tabs lazy />` to render lazily.",
        "Add this inside the <robot> tags: `<link>`.",
    ]


def test_html_entities_are_decoded_outside_code():
    text = ("✅ **Production-Grade** - 100/100 Lighthouse score, \\&lt; 2s load time, \\&lt; 15MB total\n\n"
            "| Planning latency | &lt;5s |\n|---|---|\n| Use the HTML code: | `&#123;` |\n\n"
            "```html\n&lt;p&gt;\n```\n")  # real: physical-ai-book intro.md, page-04-testing-validation.md
    assert texts(parse(text, "intro.md")) == [
        "✅ **Production-Grade** - 100/100 Lighthouse score, < 2s load time, < 15MB total",
        "| Planning latency | <5s |\n|---|---|\n| Use the HTML code: | `&#123;` |",
        "```html\n&lt;p&gt;\n```",
    ]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# T\n\n<Tabs>\n  <TabItem value=\"apple\" label=\"Apple\">This is an apple 🍎</TabItem>\n\nText.\n",
         3, "<Tabs> is never closed"),
        ("# T\n\nSome text.\n\n</TabItem>\n", 5, "</TabItem> has no matching opening tag"),
        ("<BrowserWindow>\n<Tabs>\n\nx\n\n</BrowserWindow>\n", 2, "<Tabs> is never closed"),
    ],
)
def test_unbalanced_jsx_is_an_error_with_the_line(text, line, words):
    with pytest.raises(ParseError) as caught:
        parse(text, "guides/tabs.mdx")
    assert (caught.value.file, caught.value.line) == ("guides/tabs.mdx", line)
    assert words in caught.value.message


def test_unbalanced_jsx_in_a_plain_md_file_only_warns():
    doc = parse("Replace <YourUsername> with your login.\n", "setup.md")
    assert texts(doc) == ["Replace  with your login."]
    assert [(w.line, w.message) for w in doc.warnings] == [(1, "JSX tag <YourUsername> is never closed")]


# -- admonitions ------------------------------------------------------------------------------------


def test_admonitions_plain_titled_and_bracket_titled():
    text = """\
:::note

Some **content** with _Markdown_ `syntax`. Check [this `api`](#).

:::

:::info Learning Objectives
By the end of this guide, you will:
- Understand the hardware and software prerequisites for NVIDIA Isaac Sim 2024.1+
- Successfully install Isaac Sim on Ubuntu 20.04/22.04 or Windows 10/11
:::

:::note[Your Title **with** some _Markdown_ `syntax`!]

Some **content** with some _Markdown_ `syntax`.

:::
"""  # real: markdown-features-admonitions.mdx and physical-ai-book page-20
    doc = parse(text)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "**Note:** Some **content** with _Markdown_ `syntax`. Check [this `api`](#)."),
        ("paragraph", "**Info (Learning Objectives):**\nBy the end of this guide, you will:"),
        ("list", "- Understand the hardware and software prerequisites for NVIDIA Isaac Sim 2024.1+\n"
                 "- Successfully install Isaac Sim on Ubuntu 20.04/22.04 or Windows 10/11"),
        ("paragraph", "**Note (Your Title with some _Markdown_ `syntax`!):** Some **content** with some "
                      "_Markdown_ `syntax`."),
    ]
    assert (doc.blocks[0].line, doc.blocks[0].end_line) == (1, 3)  # the block starts at its :::note line
    assert doc.warnings == []


def test_nested_admonitions():
    text = """\
:::::info Parent

Parent content

::::danger Child

Child content

:::tip Deep Child

Deep child content

:::

::::

:::::
"""  # real: markdown-features-admonitions.mdx
    assert texts(parse(text)) == ["**Info (Parent):** Parent content", "**Danger (Child):** Child content",
                                  "**Tip (Deep Child):** Deep child content"]


def test_admonition_inside_a_list_item_stays_in_the_list():
    text = """\
1.  Install the `remark-math` and `rehype-katex` plugins:

    ```bash npm2yarn
    npm install --save remark-math@6 rehype-katex@7
    ```

    :::warning

    Make sure to use `remark-math 6` and `rehype-katex 7` for Docusaurus v3 (using MDX v3).

    :::

2.  These 2 plugins are only available as ES Modules.
"""  # real (shortened): markdown-features-math-equations.mdx
    doc = parse(text)
    assert [b.kind for b in doc.blocks] == ["list"]
    assert doc.blocks[0].text == (
        "1.  Install the `remark-math` and `rehype-katex` plugins:\n\n"
        "    ```bash\n    npm install --save remark-math@6 rehype-katex@7\n    ```\n\n"
        "    **Warning:**\n\n"
        "    Make sure to use `remark-math 6` and `rehype-katex 7` for Docusaurus v3 (using MDX v3).\n\n"
        "2.  These 2 plugins are only available as ES Modules."
    )


def test_admonition_component_and_code_only_admonition():
    text = """\
<Admonition type="tip" icon="💡" title="Did you know...">
  Use plugins to introduce shorter syntax for the most commonly used JSX
  elements in your project.
</Admonition>

:::tip

```bash
npm run swizzle
```

:::

:::note
:::
"""  # first element real: markdown-features-admonitions.mdx
    doc = parse(text)
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "**Tip (Did you know...):**\nUse plugins to introduce shorter syntax for the most commonly"
                      " used JSX\nelements in your project."),
        ("paragraph", "**Tip:**"),
        ("code", "```bash\nnpm run swizzle\n```"),
    ]  # the empty :::note leaves nothing


def test_unclosed_admonition_warns_and_keeps_content():
    doc = parse("# Title\n\n:::caution Careful\n\nThe content is kept.\n")
    assert texts(doc) == ["**Caution (Careful):** The content is kept."]
    warnings = [(w.line, w.message) for w in doc.warnings]
    assert warnings == [(3, "admonition 'Caution (Careful):' is never closed (:::)")]


# -- code, tables, lists -------------------------------------------------------------------------------


def test_four_backtick_fence_keeps_the_inner_fence():
    text = """\
````md
```js
function HighlightSomeText(highlight) {
  if (highlight) {
    // highlight-next-line
    return 'This text is highlighted!';
  }
}
```
````
"""  # real: markdown-features-code-blocks.mdx
    doc = parse(text)
    assert [b.kind for b in doc.blocks] == ["code"]
    assert doc.blocks[0].text == text.rstrip("\n")  # magic comments are the point of a Markdown example


def test_code_meta_and_magic_comments_are_dropped_title_kept():
    text = """\
```js title="docusaurus.config.js" {4-7} showLineNumbers
export default {
  themeConfig: {
    // highlight-start
    prism: {additionalLanguages: ['powershell']},
    // highlight-end
  },
};
```

```{1,3}
plain
```
"""
    assert texts(parse(text)) == [
        '```js title="docusaurus.config.js"\nexport default {\n  themeConfig: {\n'
        "    prism: {additionalLanguages: ['powershell']},\n  },\n};\n```",
        "```\nplain\n```",
    ]


def test_unclosed_code_fence_is_an_error_at_its_opening_line():
    text = "# Setup\n\nRun this:\n\n```bash\nsudo apt install python3.10\n\nMore text that became code.\n"
    with pytest.raises(ParseError) as caught:
        parse(text, "module-01/page-05.md")
    assert (caught.value.file, caught.value.line) == ("module-01/page-05.md", 5)
    assert "never closed" in caught.value.message


def test_tables_and_nested_lists_with_code_are_single_blocks():
    text = """\
| Name | Type | Default | Description |
| --- | --- | --- | --- |
| `path` | `string` | `'blog'` | Path to the blog content directory on the file system. |
| `editUrl` | <code>string \\| [EditUrlFn](#EditUrlFn)</code> | `undefined` | Base URL to edit your site. |

1. **NVIDIA GPU Driver 525.60.13 or higher**
   - Download: [NVIDIA Driver Downloads](https://www.nvidia.com/download/index.aspx)
   - Verify version:
     ```bash
     nvidia-smi
     ```

2. **CUDA Toolkit 12.1 or higher** (Ubuntu only)
   - Verify version:
     ```bash
     nvcc --version
     ```
"""  # real: plugin-content-blog.mdx (table) and physical-ai-book page-20 (list)
    doc = parse(text)
    assert [(b.kind, b.line, b.end_line) for b in doc.blocks] == [("table", 1, 4), ("list", 6, 17)]
    assert doc.blocks[0].text.split("\n")[3] == (
        "| `editUrl` | string \\| [EditUrlFn](#EditUrlFn) | `undefined` | Base URL to edit your site. |")
    assert doc.blocks[1].text == text.split("\n\n", 1)[1].rstrip("\n")


def test_math_block():
    doc = parse("For display mode:\n\n$$\nI = \\int_0^{2\\pi} \\sin(x)\\,dx\n$$\n\nIt costs $5 and $10.\n")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "For display mode:"),
        ("math", "$$\nI = \\int_0^{2\\pi} \\sin(x)\\,dx\n$$"),
        ("paragraph", "It costs $5 and $10."),
    ]


# -- headings -------------------------------------------------------------------------------------------


def test_headings_custom_ids_duplicates_and_chains():
    text = """\
# Docs

## Routing in content plugins {#routing-in-content-plugins}

Intro.

### `<BrowserOnly>` {#browseronly}

Browser only.

### Setup

#### Setup

Deep.

##### Fine print {#fine}

## Setup

Back at level two.
"""
    doc = parse(text)
    assert [(h.level, h.title, h.anchor, h.line) for h in doc.headings] == [
        (1, "Docs", "docs", 1),
        (2, "Routing in content plugins", "routing-in-content-plugins", 3),
        (3, "<BrowserOnly>", "browseronly", 7),
        (3, "Setup", "setup", 11),
        (4, "Setup", "setup-1", 13),
        (2, "Setup", "setup-2", 19),
    ]
    chains = {block.text: [h.anchor for h in block.headings] for block in doc.blocks}
    assert chains == {
        "Intro.": ["docs", "routing-in-content-plugins"],
        "Browser only.": ["docs", "routing-in-content-plugins", "browseronly"],
        "Deep.": ["docs", "routing-in-content-plugins", "setup", "setup-1"],
        "**Fine print**": ["docs", "routing-in-content-plugins", "setup", "setup-1"],  # H5 is content
        "Back at level two.": ["docs", "setup-2"],
    }


# -- positions --------------------------------------------------------------------------------------------


def test_offsets_and_lines_point_into_the_original_text():
    text = ADMONITIONS_HEAD + "\n:::tip\n\nUse **tabs**.\n\n:::\n\n- one\n- two\n"
    doc = parse(text)
    lines = text.split("\n")
    for block in doc.blocks:
        source = text[block.start : block.end]
        assert source == "\n".join(lines[block.line - 1 : block.end_line])
    assert text[doc.blocks[1].start : doc.blocks[1].end] == ":::tip\n\nUse **tabs**."
    assert text[doc.blocks[2].start : doc.blocks[2].end] == "- one\n- two"


def test_offsets_with_windows_line_endings():
    text = "---\r\ntitle: T\r\n---\r\n\r\nFirst para\r\nstill first.\r\n\r\n- a\r\n- b\r\n"
    doc = parse(text)
    assert [(b.text, b.line, b.end_line) for b in doc.blocks] == [
        ("First para\nstill first.", 5, 6), ("- a\n- b", 8, 9)]
    assert text[doc.blocks[0].start : doc.blocks[0].end] == "First para\r\nstill first."
    assert text[doc.blocks[1].start : doc.blocks[1].end] == "- a\r\n- b"


# -- the real corpora ---------------------------------------------------------------------------------------

CORPORA = ("docusaurus-docs", "physical-ai-book", "physical-ai-book-2", "squad2-dev")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_LEFTOVERS = {
    "ESM line": re.compile(r"^(?:import|export)\s+(?:[\w{*]|const|default)", re.M),
    "TabItem tag": re.compile(r"</?TabItem"),
    "MDX comment": re.compile(r"\{/\*"),
    "HTML comment": re.compile(r"<!--"),
    "admonition fence": re.compile(r"^\s*:::", re.M),
    "JSX tag": re.compile(r"</?[A-Z][\w.]*(?:\s[^>]*)?/?>"),
}


def _parse_corpus(name: str) -> list[tuple[Path, ParsedDocument]]:
    root = shared_data() / name / "docs"
    if not root.is_dir():
        pytest.fail(f"corpus {name} has no docs/ folder at {root}")
    parsed = []
    for path in sorted(root.rglob("*")):
        if path.suffix in (".md", ".mdx"):
            rel_path = path.relative_to(root).as_posix()
            parsed.append((path, parse_document(path.read_text(encoding="utf-8"), rel_path=rel_path)))
    return parsed


@pytest.mark.needs("shared-data")
@pytest.mark.parametrize("name", CORPORA)
def test_every_corpus_page_parses_cleanly(name):
    parsed = _parse_corpus(name)  # raises on the first ParseError
    assert parsed
    for path, doc in parsed:
        text = path.read_text(encoding="utf-8")
        source_lines = text.split("\n")
        json.dumps(doc.front_matter)
        assert doc.title.strip(), path
        assert doc.slug == doc.slug.strip("/"), path
        previous_end = -1
        for block in doc.blocks:
            where = f"{path}:{block.line}"
            assert block.text.strip(), where
            assert 1 <= block.line <= block.end_line and block.start < block.end <= len(text), where
            assert block.start > previous_end, where  # in order, never overlapping
            source = "\n".join(source_lines[block.line - 1 : block.end_line])
            assert text[block.start : block.end] == source, where
            previous_end = block.end
            levels = [h.level for h in block.headings]
            assert levels == sorted(set(levels)), where
            if block.kind == "code":
                lines = block.text.split("\n")
                fence = re.match(r"`{3,}", lines[0])
                assert fence and lines[-1] == fence.group() and len(lines) >= 3, where
                continue
            prose = _CODE_SPAN.sub("", block.text)
            for what, pattern in _LEFTOVERS.items():
                assert not pattern.search(prose), f"{where}: {what} left in {block.text[:200]!r}"


@pytest.mark.needs("shared-data")
def test_docusaurus_docs_custom_heading_ids_are_the_anchors():
    checked = 0
    for path, doc in _parse_corpus("docusaurus-docs"):
        lines = path.read_text(encoding="utf-8").split("\n")
        for heading in doc.headings:
            explicit = re.search(r"\{#([^}]+)\}\s*$", lines[heading.line - 1])
            if explicit:
                assert heading.anchor == explicit.group(1), (path, heading)
                assert "{#" not in heading.title
                checked += 1
    assert checked >= 650  # ~700 in the corpus


@pytest.mark.needs("shared-data")
def test_corpus_pages_with_known_content():
    data = shared_data()
    tabs = parse_document(
        (data / "docusaurus-docs/docs/guides/markdown-features/markdown-features-tabs.mdx").read_text(),
        rel_path="guides/markdown-features/markdown-features-tabs.mdx")
    assert tabs.slug == "markdown-features/tabs" and tabs.title == "Tabs"
    apples = "**Apple:** This is an apple 🍎\n**Orange:** This is an orange 🍊\n**Banana:** This is a banana 🍌"
    assert apples in texts(tabs)

    isaac_path = "module-03-ai-robot-brain/chapter-07-isaac-sim-sdk/page-20-setting-up-isaac-sdk.mdx"
    isaac = parse_document((data / "physical-ai-book/docs" / isaac_path).read_text(), rel_path=isaac_path)
    # HardwareTable and InstallationStep keep their title/caption/description props as text.
    assert [w.message for w in isaac.warnings] == ["dropped JSX component <TroubleshootingAccordion />"]
    step = ("InstallationStep: Download NVIDIA Omniverse Launcher — The Omniverse Launcher is the centralized "
            "application manager for all NVIDIA Omniverse apps, including Isaac Sim. — Omniverse Launcher")
    assert any(text.startswith(step) for text in texts(isaac))
    code = [b.text for b in isaac.blocks if b.kind == "code" and "verify_isaac_sim" in b.text]
    assert code and code[0].startswith('```python title="test_installation.py"\n#!/usr/bin/env python3')

    normans = parse_document((data / "squad2-dev/docs/01-normans.md").read_text(), rel_path="01-normans.md")
    assert normans.title == "Normans" and normans.slug == "normans"
    assert all(b.kind == "paragraph" for b in normans.blocks) and len(normans.blocks) > 10
