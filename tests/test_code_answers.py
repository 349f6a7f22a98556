"""Code, tables, labels and math in answers and excerpts look as they do in the book.

Rendering: every fence syntax the indexer reads becomes one code block, its meta never text.
Composition: a code block comes whole with the sentence that introduces it; a long one is shortened
at a line boundary with a visible ``…``. Excerpts keep inline code, math and code lines verbatim.
And the page, the stream, the API and MCP show the same answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from chat.pipeline.extractive import compose_extractive
from chat.pipeline.grounding import answer_segments, check_grounding
from chat.pipeline.rendering import parse_info, pre_texts, render_answer, split_code_blocks
from chat.pipeline.source_cards import Source
from chat.pipeline.terms import plain_text
from chat.pipeline.units import MAX_CODE_LINES, SHORTENED, blocks_of
from chat.quality.evaluation import QuestionFileError, code_in_one_block, load_questions
from ingestion.reading.fences import opening, split_fenced, without_code
from ingestion.reading.parsing import parse_document

SOURCES = [Source(n=1, url="/guide/install#run", chapter="Guide", section="Run", heading_path="Guide > Run",
                  excerpt="", score=0.9, chunk_id="c1", cited=True, document="guide/install.md")]
MANUAL = "bookchat-manual"
WIDGET_QUESTION = "How do I add the widget to my Docusaurus site?"


def visible_outside_code(html: str) -> str:
    """The text of rendered HTML outside its code blocks, their captions and its inline code (a book may write a
    fence's backticks as code: "` ``` ` fences become code blocks", in Docusaurus's own docs)."""
    html = re.sub(r'<div class="bookchat-code".*?</pre></div>', " ", html, flags=re.DOTALL)
    html = re.sub(r"<code>.*?</code>", " ", html, flags=re.DOTALL)
    return re.sub(r"<[^>]+>", " ", html)


# -- rendering ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("info", "lang", "title"), [
    ('js title="docusaurus.config.js" {1,4-6} showLineNumbers', "js", "docusaurus.config.js"),
    ("bash npm2yarn", "bash", ""),
    ("jsx live", "jsx", ""),
    ("{1,3}", "", ""),
    ('{ .py title="main.py" linenums="1" hl_lines="2" }', "py", "main.py"),
    ('py title=\'hello.py\' linenums="1"', "py", "hello.py"),
    ("rust,ignore", "rust", ""),
    ("toml", "toml", ""),
    ("", "", ""),
    ("title=config.yml", "", "config.yml"),
])
def test_fence_info_of_every_syntax_the_indexer_reads(info, lang, title):
    assert parse_info(info) == (lang, title)


def test_a_docusaurus_fence_is_a_highlighted_block_with_its_title_as_caption():
    answer = ('Add it to the config: [1]\n\n```js title="docusaurus.config.js" {2} showLineNumbers\n'
              "export default {\n  scripts: ['/widget.js'],\n};\n```\n\nThen restart [1].")
    html = render_answer(answer, SOURCES)
    assert html.count("<pre>") == 1
    assert '<div class="bookchat-code-title">docusaurus.config.js</div>' in html
    assert pre_texts(html) == ["export default {\n  scripts: ['/widget.js'],\n};"], "line breaks kept"
    assert '<span class="k">export</span>' in html, "highlighted with Pygments' classes"
    outside = visible_outside_code(html)
    assert "title=" not in outside and "showLineNumbers" not in outside and "{2}" not in outside
    assert html.count('class="bookchat-cite"') == 2


def test_npm2yarn_mkdocs_mdbook_tilde_and_unknown_languages_render_as_blocks():
    answer = ("```bash npm2yarn\nnpm install --save @docusaurus/theme-live-codeblock\n```\n\n"
              '``` { .yaml title="mkdocs.yml" }\ntheme:\n  name: material\n```\n\n'
              "```rust,ignore\nfn main() {}\n```\n\n~~~\nplain <b>text</b>\n~~~\n\n"
              "```no-such-language\nx = 1\n```")
    html = render_answer(answer, [])
    assert html.count("<pre>") == 5
    assert pre_texts(html)[0] == "npm install --save @docusaurus/theme-live-codeblock", "npm2yarn: the npm command"
    assert '<div class="bookchat-code-title">mkdocs.yml</div>' in html
    assert "plain &lt;b&gt;text&lt;/b&gt;" in html and "<b>" not in html, "code is text, never markup"
    assert "npm2yarn" not in visible_outside_code(html) and ".yaml" not in visible_outside_code(html)


def test_hostile_titles_and_placeholders_stay_text():
    html = render_answer('```js title="<img src=x onerror=alert(1)>"\nalert(1)\n```\n\n'
                         "bookchatcode0000000000000000n0 and bookchatcodeXn0", [])
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert html.count("<pre>") == 1 and "bookchatcode0000000000000000n0" in html, "a placeholder in the text is text"


def test_an_unclosed_fence_runs_to_the_end_and_markers_in_code_stay_text():
    html = render_answer("Run: [1]\n\n```bash\nmake run [1]\nmake test", SOURCES)
    assert pre_texts(html) == ["make run [1]\nmake test"]
    assert html.count('class="bookchat-cite"') == 1


def test_a_fence_inside_a_list_item_is_a_block():
    html = render_answer("1. Install it:\n   ```bash\n   pip install bookchat\n   ```\n2. Run it.", [])
    assert pre_texts(html) == ["pip install bookchat"]
    assert "```" not in html


FENCE_INFOS = st.sampled_from(["", "js", 'js title="a.js"', "bash npm2yarn", "{1,3}", 'jsx title="b.jsx" {2}',
                               '{ .py title="c.py" linenums="1" }', "rust,ignore", "showLineNumbers", "text"])
CODE_LINE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30).filter(
    lambda line: not re.match(r"^\s*(`{3,}|~{3,})", line))
PROSE = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="`~"), max_size=60)


@hypothesis_settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(PROSE, FENCE_INFOS, st.lists(CODE_LINE, max_size=5)), min_size=1, max_size=4))
def test_property_every_fence_is_one_block_and_no_meta_outside_it(parts):
    answer = "\n\n".join(f"{prose}\n\n```{info}\n" + "\n".join(code) + "\n```" for prose, info, code in parts)
    html = render_answer(answer, SOURCES)
    assert len(split_code_blocks(answer)[1]) == len(parts) == html.count("<pre>")
    outside = visible_outside_code(html)
    for meta in ("title=", "showLineNumbers", "npm2yarn", "linenums", "rust,ignore", "{1,3}"):
        assert meta not in outside or any(meta in prose for prose, _, _ in parts)


@hypothesis_settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(PROSE, FENCE_INFOS, st.lists(CODE_LINE, max_size=5), st.sampled_from(["```", "````", "~~~"])),
                min_size=1, max_size=4), st.booleans())
def test_property_one_fence_reader_for_the_page_the_composer_and_the_checks(parts, last_unclosed):
    """The rendering, the composer's blocks, grounding, confidence and the page's plain text all see the same
    blocks, with the same code, whatever the fence (a longer or tilde one) and when the last is left open."""
    pieces = [f"{prose}\n\n{fence}{info}\n" + "\n".join(code) + f"\n{fence}" for prose, info, code, fence in parts]
    if last_unclosed:
        pieces[-1] = pieces[-1].rsplit("\n", 1)[0]
    answer = "\n\n".join(pieces)
    codes = ["\n".join(code) for _, _, code, _ in parts]
    assert [block.code for block in split_code_blocks(answer)[1]] == codes
    assert [text for kind, text in split_fenced(answer) if kind == "code"] == codes
    assert [text for kind, text in answer_segments(answer) if kind == "code"] == codes
    units = [u.text for block in blocks_of(answer, 1) for u in block.units if u.kind == "code"]
    assert ["\n".join(u.split("\n")[1:-1]) for u in units] == codes
    assert not any(opening(line) for line in without_code(answer).split("\n")), "no fence line is prose"


def test_a_backtick_fence_whose_info_holds_a_backtick_is_inline_code_everywhere():
    answer = "```a` b```\n\nThe end."
    assert split_code_blocks(answer)[1] == [] and split_fenced(answer) == [("text", answer)]
    assert [kind for kind, _ in answer_segments(answer)] == ["sentence", "sentence"]


# -- excerpts and labels ----------------------------------------------------------------------------
def test_plain_text_keeps_inline_code_math_and_code_lines_verbatim():
    text = plain_text("Put it in the `<head>` of a page (`<html lang>`) when `a < b`; **bold** <b>tag</b>.\n"
                      "Energy is $E = m c^2$ and $x_1 * y_2$.\n\n$$\n\\sum_{i=1}^n x_i\n$$\n\n"
                      "```js title=\"a.js\"\nconst key = 'pk_live';\n```")
    assert "the <head> of a page (<html lang>) when a < b; bold tag." in text
    assert "$E = m c^2$" in text and "$x_1 * y_2$" in text and "\\sum_{i=1}^n x_i" in text
    assert "const key = 'pk_live';" in text and "title=" not in text and "js" not in text.split()


def test_the_indexer_keeps_a_mkdocs_fences_language_and_title():
    doc = parse_document('# Setup\n\n``` { .yaml title="mkdocs.yml" linenums="1" }\ntheme: material\n```\n',
                         rel_path="setup.md")
    code = next(b.text for b in doc.blocks if b.kind == "code")
    assert code.startswith('```yaml title="mkdocs.yml"\n') and "linenums" not in code
    assert parse_info(code.split("\n", 1)[0][3:]) == ("yaml", "mkdocs.yml")


def test_a_jekyll_highlight_block_is_indexed_as_the_code_block_it_renders():
    doc = parse_document("# Ruby\n\nRun this:\n\n{% highlight ruby linenos %}\ndef hi\n  puts \"<b>hi</b>\" # {{ x }}\n"
                         "end\n{% endhighlight %}\n\nAfter {% if x %}text{% endif %}.\n"
                         "{% highlight js %}\nnever closed\n", rel_path="ruby.md")
    blocks = [(b.kind, b.text) for b in doc.blocks]
    assert ("code", '```ruby\ndef hi\n  puts "<b>hi</b>" # {{ x }}\nend\n```') in blocks
    assert ("paragraph", "never closed") in blocks, "an unclosed tag is only a tag (removed), its lines text"


def test_tab_and_admonition_labels_are_bold_labels():
    doc = parse_document(
        "# Install\n\nimport Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n<Tabs>\n"
        '<TabItem value="npm" label="npm">\n\nRun the installer.\n\n</TabItem>\n</Tabs>\n\n'
        ":::tip[Faster]\n\nUse the cache.\n\n:::\n", rel_path="install.mdx")
    texts = [b.text for b in doc.blocks]
    assert "**npm:** Run the installer." in texts
    assert "**Tip (Faster):** Use the cache." in texts


def test_bold_labels_are_embedded_and_counted_as_plain_words():
    from ingestion.indexing.chunking import embedding_text, unbold_labels

    assert unbold_labels("**npm:** Run it.\n  **Tip (Fast):**\nGo.") == "npm: Run it.\n  Tip (Fast):\nGo."
    assert unbold_labels("Some **bold:** words") == "Some **bold:** words", "only a label opening a line"
    assert embedding_text("Install", "**npm:** Run it.") == embedding_text("Install", "npm: Run it.")


# -- composing ----------------------------------------------------------------------------------------
@dataclass
class Passage:
    text: str
    heading_path: str = "Guide > Run"
    score: float = 0.9
    similarities: list[float] | None = None


def test_a_long_code_block_is_shortened_at_a_line_with_a_visible_ellipsis_and_cited():
    code = "\n".join(f"step_{i} = run({i})" for i in range(MAX_CODE_LINES + 15))
    passage = Passage(f"To run every step of the pipeline, use this script:\n\n```python\n{code}\n```\n")
    answer = compose_extractive("How do I run every step of the pipeline?", [passage])
    blocks = split_code_blocks(answer)[1]
    assert len(blocks) == 1
    lines = blocks[0].code.split("\n")
    assert lines[-1] == SHORTENED and len(lines) <= MAX_CODE_LINES + 1
    assert all(line == f"step_{i} = run({i})" for i, line in enumerate(lines[:-1])), "cut between lines"
    after = answer.split("```")[-1]
    assert "rest is in the book" in after and "[1]" in after, "says so, and links to the section"
    assert not re.search(r"\[\d\]", blocks[0].code), "no citation marker inside code"
    report = check_grounding(answer, [passage.text])
    assert report.passed and not report.unsupported_sentences, "what is shown is the book's"
    tampered = check_grounding(answer.replace("step_3 = run(3)", "rm -rf /"), [passage.text])
    assert len(tampered.unsupported_sentences) == 1 and "rm -rf /" in tampered.unsupported_sentences[0]


def test_a_how_to_answer_brings_the_block_its_sentence_introduces_whole():
    passage = Passage("Create the folder first.\n\n```bash\nmkdir docs\n```\n\n"
                      "To check that a file parses, run:\n\n```bash\nmanage.py ingest --dry-run docs/intro.md\n"
                      "echo done\n```\n")
    answer = compose_extractive("How do I check that a file parses?", [passage])
    assert "```bash\nmanage.py ingest --dry-run docs/intro.md\necho done\n```" in answer
    assert "mkdir" not in answer


def test_a_short_lead_followed_by_a_sentence_that_announces_a_block_brings_the_block():
    passage = Passage("Completions let your shell finish a subcommand when you press Tab.\n\n"
                      "Install them for your shell:\n\n```bash\nmdbook completions bash > ~/.bash_completion\n```\n\n"
                      "Where they go depends on your shell.")
    answer = compose_extractive("Is there completion of subcommands when I press Tab?", [passage])
    assert answer.index("press Tab") < answer.index("Install them for your shell:")
    assert "```bash\nmdbook completions bash > ~/.bash_completion\n```" in answer, "not a colon announcing nothing"


def test_a_how_to_answer_follows_its_steps_to_the_block_the_next_sentence_announces():
    passage = Passage("To add a style sheet, create it in the docs folder:\n\n"
                      "```sh\ndocs/stylesheets/extra.css\n```\n\n"
                      "Then, add the following lines to mkdocs.yml:\n\n"
                      "```yaml\nextra_css:\n  - stylesheets/extra.css\n```\n\n"
                      "Reload the page to see it.\n\n```sh\nmkdocs serve\n```\n")
    answer = compose_extractive("How do I add a style sheet?", [passage])
    assert "docs/stylesheets/extra.css\n```" in answer and "Then, add the following lines to mkdocs.yml:" in answer
    assert "```yaml\nextra_css:\n  - stylesheets/extra.css\n```" in answer
    assert "mkdocs serve" not in answer, "one next step, announced by its sentence, not every block after"
    assert "extra_css" not in compose_extractive("What does a style sheet change?", [passage]), "only for how-to"
    tabs = Passage(passage.text.replace("Then, add", "**mkdocs.yml:** Or add"))
    assert "extra_css" not in compose_extractive("How do I add a style sheet?", [tabs]), "a tab is an alternative"


def test_a_code_question_gets_the_block_from_another_passage_of_the_leads_section():
    command = Passage("Operators can ask from the shell with the `ask` command:\n\n"
                      "```bash\npython manage.py ask \"Which port?\" --book my-book --json\n```\n",
                      heading_path="Asking > From the command line", score=0.05)
    options = Passage("| Option | Meaning |\n|---|---|\n| `--book SLUG` | The book to ask |\n"
                      "| `--json` | Print the full response as one JSON object |",
                      heading_path="Asking > From the command line", score=0.9)
    elsewhere = Passage("Send the question as JSON:\n\n```bash\ncurl -d '{\"question\": \"Which port?\"}' /ask\n```\n",
                        heading_path="REST API > Ask", score=0.05)
    question = "Can I ask a book from the terminal and get the response as JSON?"
    answer = compose_extractive(question, [options, elsewhere, command])
    assert "`--json`" in answer and "python manage.py ask" in answer and "curl" not in answer
    assert answer.index("--json") < answer.index("Operators can ask"), "the lead stays first"
    far = Passage(command.text, heading_path="Asking > Scripts", score=0.05)
    assert "python manage.py ask" not in compose_extractive(question, [options, elsewhere, far]), \
        "a low-ranked passage of another section is not enough"
    unrelated = Passage("Run the build first:\n\n```bash\nmake book\n```\n", heading_path=command.heading_path,
                        score=0.05)
    assert "make book" not in compose_extractive(question, [options, elsewhere, unrelated]), "one shared word is chance"
    bare = Passage("```bash\npython manage.py ask \"Which port?\" --book my-book --json\n```\n",
                   heading_path=command.heading_path, score=0.05)
    assert "python manage.py ask" not in compose_extractive(question, [options, elsewhere, bare]), \
        "a block from another passage comes with the sentence that says what it is for, or not at all"


# -- evaluate's code questions ------------------------------------------------------------------------
def test_code_questions_need_their_code_strings(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "How do I build?", "kind": "code", "answers": ["npm run build"]}) + "\n")
    with pytest.raises(QuestionFileError, match="'code'"):
        load_questions(path)
    path.write_text(json.dumps({"question": "How do I build?", "kind": "code", "code": ["npm run build"]}) + "\n")
    assert load_questions(path)[0].code == ["npm run build"]


def test_code_counts_as_code_only_inside_one_block():
    html = render_answer("Run `npm run build`:\n\n```bash\nnpm run build\n```\n\n```bash\nnpm run serve\n```", [])
    assert code_in_one_block(html, ["npm run build"])
    assert not code_in_one_block(html, ["npm run build", "npm run serve"]), "two blocks are not one"
    assert not code_in_one_block(render_answer("Run `npm run build`.", []), ["npm run build"])


def test_shipped_code_question_sets_load():
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "bench" / "questions"
    names = ("code-docusaurus.jsonl", "code-manual.jsonl", "code-mdbook-guide.jsonl", "code-mkdocs-material.jsonl")
    questions = [q for name in names for q in load_questions(folder / name)]
    assert len(questions) >= 44 and all(q.kind == "code" and q.code for q in questions)


# -- one rendering everywhere ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_manual_answers_the_widget_question_with_its_code_block_and_verbatim_excerpts(client, manual_book,
                                                                                          no_llm):
    body = client.post("/api/v1/ask", data=json.dumps({"question": WIDGET_QUESTION, "book": MANUAL}),
                       content_type="application/json").json()
    assert any("scripts: [" in block and "\n" in block for block in pre_texts(body["answer_html"]))
    assert "title=" not in visible_outside_code(body["answer_html"])
    assert '```js title="docusaurus.config.js"' in body["answer"], "the API keeps the book's fence"
    assert not body["answer"].startswith("scripts entry:"), "a tab's label is not the first words of a sentence"
    excerpts = " ".join(s["excerpt"] for s in body["sources"])
    assert "puts it in the <head> of every page" in excerpts, "inline code with angle brackets kept"
    assert "js title=" not in excerpts


@pytest.mark.django_db
def test_page_stream_api_and_mcp_show_the_same_answer(client, manual_book, no_llm):
    from chat.channels.mcp_server import render_answer as mcp_text
    from chat.channels.responses import answer_data
    from chat.pipeline.answering import answer_question
    from chat.pipeline.questions import AskRequest
    from tests.test_api import sse_events

    payload = json.dumps({"question": WIDGET_QUESTION, "book": MANUAL})
    body = client.post("/api/v1/ask", data=payload, content_type="application/json").json()
    streamed = client.post("/api/v1/ask/stream", data=payload, content_type="application/json")
    final = next(data for name, data in sse_events(streamed) if name == "final")
    assert final["answer"] == body["answer"] and final["answer_html"] == body["answer_html"]
    page = client.post("/", {"question": WIDGET_QUESTION, "book": MANUAL}, follow=True).content.decode()
    assert pre_texts(page) == pre_texts(body["answer_html"]) != []
    assert page.count('<div class="bookchat-code-title">docusaurus.config.js</div>') == 1
    text = mcp_text(answer_data(answer_question(AskRequest(question=WIDGET_QUESTION, book=MANUAL))))
    fence = re.search(r"^```js title=\"docusaurus.config.js\"\n(.*?)\n```$", text, re.DOTALL | re.MULTILINE)
    assert fence and fence.group(1) == pre_texts(body["answer_html"])[0], "MCP: Markdown with the fence intact"


@pytest.mark.django_db
@pytest.mark.drill  # every answer of the shared sets: a whole-corpus check, run with the drills (make test's time)
def test_every_answer_evaluate_gives_on_the_shared_sets_renders_each_fence_as_one_block(ingest_corpus, manual_book,
                                                                                          no_llm):
    """Over every answer of the shared docusaurus-docs sets and the code sets: as many ``<pre>`` blocks as fences,
    and no fence meta outside them."""
    from pathlib import Path

    from chat.quality.evaluation import run_evaluation
    from tests.support.shared_data import shared_corpus

    assert ingest_corpus("docusaurus-docs").exit_code == 0
    data = shared_corpus("docusaurus-docs").parent
    folder = Path(__file__).resolve().parent.parent / "bench" / "questions"
    runs = [("docusaurus-docs", data / "questions.jsonl"), ("docusaurus-docs", data / "questions-2.jsonl"),
            ("docusaurus-docs", folder / "code-docusaurus.jsonl"), (MANUAL, folder / "code-manual.jsonl")]
    fences = 0
    for book, path in runs:
        _, records = run_evaluation(load_questions(path), book_slug=book)
        for record in records:
            answer = record.get("answer") or ""
            blocks = split_code_blocks(answer)[1]
            html = render_answer(answer, [])
            assert html.count("<pre>") == len(blocks), record["id"]
            fences += len(blocks)
            outside = visible_outside_code(html)
            # Meta as a fence's info string writes it (after the language); the book may name `npm2yarn` in prose.
            assert not re.search(r"\btitle=|\b(?:bash|sh|shell|console|jsx?|tsx?|json|ya?ml|mdx?|css|html|diff)\s+"
                                 r"(?:showLineNumbers|npm2yarn|\{[\d,-]+\})|```|~~~", outside), (record["id"], outside)
    assert fences >= 10, "the sets do bring code blocks"


def test_math_is_shown_as_written_and_markers_inside_it_stay_text():
    html = render_answer("Energy $E = m c^2$ and $x_1 * y_2 [1]$ cost $5 and $10 [1].\n\n$$\n\\sum_{i=1}^n x_i < 3\n$$",
                         SOURCES)
    assert '<span class="bookchat-math">$x_1 * y_2 [1]$</span>' in html, "no emphasis, no citation link"
    assert "<em>" not in html and "$5 and $10" in html
    assert '<span class="bookchat-math">$$\n\\sum_{i=1}^n x_i &lt; 3\n$$</span>' in html
    assert html.count('class="bookchat-cite"') == 1
