"""Unit tests of the answering pipeline's pure parts: the grounding check, score fusion, the extractive
composer, terms, follow-up resolution and text-fragment links; and the scope calibration
stored for the bundled manual."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bookchat.base.errors import ConfigurationError
from chat.pipeline.calibration import off_topic_questions
from chat.pipeline.conversations import is_follow_up, resolve_follow_up
from chat.pipeline.extractive import compose_extractive
from chat.pipeline.grounding import answer_segments, check_grounding
from chat.pipeline.retrieval import fuse
from chat.pipeline.source_cards import fragment_url
from chat.pipeline.terms import citations, content_terms, plain_text, split_sentences, strip_citations

INGEST = "The ingest command reads a folder of Markdown files and stores the chunks in Postgres."
WIDGET = "The widget shows answers on the page with a script tag."
CODE_SOURCE = "Run it like this:\n\n```bash\nmanage.py ingest docs/\n```"


def source(text: str, heading_path: str = "Using > Ingest", score: float = 0.9) -> SimpleNamespace:
    return SimpleNamespace(text=text, heading_path=heading_path, score=score)


# -- check_grounding --------------------------------------------------------------------------
def test_grounding_passes_a_supported_sentence_citing_a_valid_source():
    report = check_grounding("The ingest command reads a folder of Markdown files. [1]", [INGEST, WIDGET])
    assert report.passed, report.reason
    assert report.cited_sources == [1]
    assert (report.sentences, report.supported) == (1, 1)
    assert report.invalid_citations == []


def test_grounding_fails_a_citation_of_a_source_that_was_not_retrieved():
    report = check_grounding("The ingest command reads Markdown files. [3]", [INGEST, WIDGET])
    assert not report.passed
    assert report.invalid_citations == [3]
    assert report.reason == "cites a source that was not retrieved"


def test_grounding_fails_an_answer_that_cites_nothing():
    report = check_grounding("The ingest command reads a folder of Markdown files.", [INGEST, WIDGET])
    assert not report.passed
    assert report.reason == "cites no source"


def test_grounding_fails_mostly_unsupported_sentences():
    answer = ("Penguins migrate to Jupiter every winter [1]. Volcanoes bake bread for sailors [1]. "
              "The ingest command reads Markdown files [1].")
    report = check_grounding(answer, [INGEST, WIDGET])
    assert not report.passed
    assert (report.sentences, report.supported) == (3, 1)
    assert report.reason == "most sentences are not supported by their sources"
    assert [s.split()[0] for s in report.unsupported_sentences] == ["Penguins", "Volcanoes"]


def test_grounding_judges_a_sentence_against_the_source_it_cites():
    assert check_grounding("The widget shows answers on a page [2].", [INGEST, WIDGET]).passed
    report = check_grounding("The widget shows answers on a page [1].", [INGEST, WIDGET])
    assert not report.passed
    assert report.supported == 0


def test_grounding_judges_a_citation_after_the_full_stop_with_its_sentence():
    # "Sentence. [n]" is how the extractive generator (and many models) cite.
    assert check_grounding("The widget shows answers on a page. [2]", [INGEST, WIDGET]).passed
    report = check_grounding("The widget shows answers on a page. [1] The ingest command reads Markdown files. [1]",
                             [INGEST, WIDGET])
    assert (report.sentences, report.supported) == (2, 1)
    assert report.unsupported_sentences == ["The widget shows answers on a page."]
    assert [text for _, text in answer_segments("Done reading files. [1] Then it stores chunks. [2, 3]")] == [
        "Done reading files. [1]", "Then it stores chunks. [2, 3]"]


def test_grounding_does_not_judge_short_sentences():
    report = check_grounding("Yes. In short: [1] The ingest command reads Markdown files [1].", [INGEST])
    assert report.passed, report.reason
    assert (report.sentences, report.supported) == (1, 1)


def test_grounding_requires_code_blocks_verbatim_in_a_source():
    sources = [INGEST, CODE_SOURCE]
    good = check_grounding("Run this [2]:\n\n```bash\nmanage.py ingest docs/\n```\n", sources)
    assert good.passed, good.reason
    assert (good.sentences, good.supported) == (1, 1)
    made_up = check_grounding("Run this [2]:\n\n```bash\nmanage.py ingest --everything\n```\n", sources)
    assert not made_up.passed
    assert made_up.unsupported_sentences == ["manage.py ingest --everything"]


def test_grounding_reads_no_citation_inside_code():
    indexing = "To change the first chapter, edit the book's items in the preprocessor:"
    code = 'book["items"][0]["content"] = "# Hello"'
    sources = [f"{indexing}\n\n```python\n{code}\n```\n", WIDGET]
    block = check_grounding(f"{indexing} [1]\n\n```python\n{code}\n```", sources)
    assert block.passed and block.invalid_citations == [] and block.cited_sources == [1], "[0] in a block is an index"
    inline = check_grounding("To change the first chapter, edit `book['items'][3]` in the preprocessor. [1]",
                             sources)
    assert inline.passed and inline.invalid_citations == [] and inline.cited_sources == [1], "[3] in a code span too"
    outside = check_grounding("To change the first chapter, edit the book's items in the preprocessor. [3]", sources)
    assert outside.invalid_citations == [3] and not outside.passed


# -- fuse ---------------------------------------------------------------------------------------
def test_weighted_fusion_gives_the_best_in_both_lists_full_marks(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DENSE_WEIGHT": 0.85, "LEXICAL_WEIGHT": 0.15}
    dense = {"a": 0.9, "b": 0.5, "c": 0.7}
    lexical = {"a": 12.0, "b": 3.0, "c": 0.0, "d": 6.0}
    fused = fuse(dense, lexical, mode="weighted")
    assert set(fused) == {"a", "b", "c", "d"}
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx(0.15 * 3.0 / 12.0)  # the lowest cosine normalises to 0
    assert fused["c"] == pytest.approx(0.85 * 0.5)
    assert fused["d"] == pytest.approx(0.15 * 0.5)  # lexical only: the lexical share of the weight, no more
    assert max(fused, key=fused.get) == "a"


def test_weighted_fusion_of_a_lexical_only_best_is_the_lexical_weight(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DENSE_WEIGHT": 0.85, "LEXICAL_WEIGHT": 0.15}
    fused = fuse({"a": 0.8, "b": 0.4}, {"a": 1.0, "x": 2.0}, mode="weighted")
    assert fused["x"] == pytest.approx(0.15)
    assert fused["a"] == pytest.approx(1.0 * 0.85 + 0.15 * 0.5)


def test_rrf_ranks_the_candidate_first_in_both_lists_on_top(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RRF_K": 60}
    dense = {"a": 0.9, "b": 0.8, "c": 0.1}
    lexical = {"a": 5.0, "c": 4.0, "b": 0.0}
    fused = fuse(dense, lexical, mode="rrf")
    assert fused["a"] == pytest.approx(1.0)
    assert sorted(fused, key=fused.get, reverse=True)[0] == "a"
    assert all(fused["a"] > fused[other] for other in ("b", "c"))
    assert fused["b"] == pytest.approx((1 / 62) / (2 / 61))  # a zero lexical score earns no lexical rank


def test_fusion_of_nothing_is_empty():
    assert fuse({}, {}, mode="weighted") == {}


def test_unknown_fusion_mode_is_a_configuration_error_not_the_requests():
    with pytest.raises(ConfigurationError) as raised:
        fuse({"a": 1.0}, {"a": 1.0}, mode="borda")
    assert raised.value.code == "bad_setting"
    assert "borda" in raised.value.message


# -- compose_extractive ---------------------------------------------------------------------------
def test_extractive_answer_cites_every_sentence():
    sources = [source("The ingest command reads a folder of Markdown files. It stores the chunks in Postgres. "
                      "A folder may hold MDX files too."),
               source("Ingesting a folder again only re-embeds the changed files.", "Using > Ingest > Updates",
                      0.7)]
    answer = compose_extractive("Which files get re-embedded, and where are chunks stored?", sources)
    sentences = [text for kind, text in answer_segments(answer) if kind == "sentence"]
    assert sentences == ["Ingesting a folder again only re-embeds the changed files. [2]",
                         "It stores the chunks in Postgres. [1]"]
    assert all(citations(s) and s.rstrip().endswith("]") for s in sentences), answer
    assert check_grounding(answer, [s.text for s in sources]).passed


def test_extractive_answer_picks_the_sentence_with_the_questions_rare_words():
    sources = [source("Bookchat answers questions about a book. Bookchat cites every answer.", "Intro"),
               source("Bookchat stores embeddings in pgvector. Bookchat answers quickly.", "Storage", 0.8)]
    answer = compose_extractive("Where does bookchat store embeddings?", sources)
    # The lead sentence and the one after it in the same paragraph: an answer often goes on there.
    assert answer == "Bookchat stores embeddings in pgvector. Bookchat answers quickly. [2]"


def test_extractive_answer_to_a_chinese_question_picks_the_chinese_sentence_that_shares_its_words():
    # A run of ideographs is a clause, not a word: compared whole, the question shares nothing with either
    # passage and the better-ranked one would lead.
    sources = [source("站点的导航栏显示在每个页面的顶部。", "介绍"),
               source("静态文件夹里的文件会被复制到构建目录。", "静态资源", 0.8)]
    answer = compose_extractive("构建时静态文件夹里的文件会怎样？", sources)
    assert answer.startswith("静态文件夹里的文件会被复制到构建目录。"), answer
    assert "导航栏" not in answer


def test_extractive_answer_brings_the_code_block_after_a_colon():
    text = ("Bookchat answers questions from a book.\n\nTo rebuild the search index, run:\n\n"
            "```bash\nmanage.py ingest docs/ --rebuild\n```\n\nThe widget is embedded with a script tag.")
    answer = compose_extractive("How do I rebuild the search index?", [source(text)])
    assert answer == "To rebuild the search index, run: [1]\n\n```bash\nmanage.py ingest docs/ --rebuild\n```"


def test_extractive_answer_from_no_sources_is_empty():
    assert compose_extractive("How do I ingest a folder?", []) == ""
    assert compose_extractive("How do I ingest a folder?", [source("")]) == ""


# -- what the reader selected, what a follow-up follows, and leads that answer nothing ----------------
VERSIONING = ("Most of the time, you don't need versioning: it increases your build time and adds complexity. "
              "Versioning is best suited for websites with high traffic and rapid changes between versions. "
              "If your documentation rarely changes, don't add versioning.")


def test_a_question_about_a_selection_is_answered_by_what_the_book_says_next():
    selected = "Most of the time, you don't need versioning: it increases your build time and adds complexity."
    answer = compose_extractive("So when is it worth it?", [source(VERSIONING, "Guides > Versioning")],
                                selected_text=selected)
    assert answer.startswith("Versioning is best suited for websites with high traffic"), answer
    assert "build time" not in answer, "the selection is the reader's: it is never quoted back"


def test_an_answer_about_a_selected_list_item_has_each_other_item_once():
    steps = ("To publish:\n\n1. Build the site with the build command of the generator.\n"
             "2. Upload the build folder to the static host of your choice.\n"
             "3. Check the published pages in a private browser window.")
    answer = compose_extractive("And how do I check the published pages?", [source(steps, "Guide > Publish")],
                                selected_text="Build the site with the build command of the generator.")
    assert answer.count("Upload the build folder") <= 1 and answer.count("Check the published pages") == 1, answer


def test_a_selection_that_is_the_whole_passage_gives_no_answer_to_quote():
    text = "Versioning increases your build time."
    assert compose_extractive("Why?", [source(text)], selected_text=text) == ""


def test_the_words_of_the_question_a_follow_up_follows_only_say_what_it_is_about():
    sources = [source("The sidebar is 300 pixels wide. Its width has a default of 300 and is set with "
                      "`sidebarWidth`.", "Theme > Sidebar"),
               source("The navbar hides on scroll by default. Set `hideOnScroll: false` to keep it.",
                      "Theme > Navbar", 0.88)]
    answer = compose_extractive("Can I change its default?", sources, context="How wide is the sidebar?")
    assert "`sidebarWidth`" in answer and "hideOnScroll" not in answer, answer
    bare = compose_extractive("How do I keep the navbar on scroll?", sources, context="How wide is the sidebar?")
    assert "hideOnScroll" in bare, "the question's own words still lead"


def test_a_label_with_nothing_after_it_is_never_the_answer():
    """"Strengths:" closing a passage (its list went to the next one) answers nothing on its own."""
    sources = [source("Docusaurus is a static site generator.\n\n**Docusaurus strengths:**", "Compare > Docusaurus"),
               source("Docusaurus builds fast pages and has versioned docs built in.", "Compare > Summary", 0.6)]
    answer = compose_extractive("What are the strengths of Docusaurus?", sources)
    assert strip_citations(answer).strip() not in ("**Docusaurus strengths:**", "Docusaurus strengths:"), answer
    assert "versioned docs" in answer or "static site generator" in answer, answer


def test_a_list_item_is_never_cut_from_its_list():
    items = "\n".join(f"- `option{n}`: sets the {word} of the site." for n, word in enumerate(
        ["title", "tagline", "favicon", "footer", "colour"], 1))
    answer = compose_extractive("Which option sets the favicon?", [source(items, "Config > Options")])
    assert "`option3`: sets the favicon" in answer and "`option2`" in answer and "`option4`" in answer, \
        "a list that opens its passage comes with the items around the one that answers"
    introduced = compose_extractive("Which option sets the favicon?",
                                    [source(f"The site config has five options.\n\n{items}", "Config > Options")])
    assert introduced.startswith("The site config has five options."), introduced


# -- refusals ---------------------------------------------------------------------------------
def test_a_refusal_quotes_what_was_asked_in_the_readers_words():
    from chat.pipeline.answering import asked_about, named_as_asked

    assert asked_about("Hi! I run Docusaurus on Linux. Does it generate AMP pages?") == "Does it generate AMP pages?"
    long = asked_about("How " + "very " * 30 + "long can a question be?")
    assert long.endswith("…") and len(long.split()) == 16
    quoted = asked_about("What is [2] ![x](http://evil.example/a) **bold** <script>alert(1)</script>?")
    assert not set(quoted) & set("[]()<>*!`"), "nothing the answer's Markdown would read as a link or a citation"
    assert named_as_asked("What Core Web Vitals scores does a new site get?", ["vitals"]) == ["Core Web Vitals"]
    assert named_as_asked("Can I import pages from notion?", ["notion"]) == ["notion"], "as the reader wrote it"


# -- terms ------------------------------------------------------------------------------------
def test_content_terms_cut_ideographs_into_character_pairs_and_keep_the_latin_names_within():
    assert content_terms("部署到GitHub时怎么设置") == ("部署", "署到", "github", "时怎", "怎么", "么设", "设置")
    assert set(content_terms("构建站点时")) & set(content_terms("部署站点")) == {"站点"}
    assert content_terms("静") == ()  # one ideograph alone is not a term (as one Latin letter is not)


def test_content_terms_drop_stop_words_and_stem_alike():
    assert content_terms("How do I install the book?") == ("install", "book")
    assert content_terms("installing") == content_terms("installs") == content_terms("installed") == ("install",)
    assert "the" not in content_terms("the ingest of the folder")
    assert content_terms("trailing-slash") == ("trailing-slash", "trail", "slash")


def test_citations_and_their_removal():
    assert citations("[1] and [2, 3]") == [1, 2, 3]
    assert citations("no citation here") == []
    assert strip_citations("Done [1]. Next [2, 3].") == "Done. Next."


def test_split_sentences():
    assert split_sentences("Run the command. Then wait!  Is it done? Yes.") == [
        "Run the command.", "Then wait!", "Is it done?", "Yes."]
    assert split_sentences("See docusaurus.config.js for details. The value 3.5 is fine.") == [
        "See docusaurus.config.js for details.", "The value 3.5 is fine."]
    assert split_sentences("   \n ") == []


def test_chinese_sentences_end_at_their_full_stop_without_a_space():
    assert split_sentences("FastAPI 是一个框架。它很快！你用过吗？“好。”然后用 `BackgroundTasks`。") == [
        "FastAPI 是一个框架。", "它很快！", "你用过吗？", "“好。”", "然后用 `BackgroundTasks`。"]
    assert split_sentences("Version 3.5。is odd.") == ["Version 3.5。", "is odd."]  # after 。 anything starts one


def test_plain_text_reads_a_markdown_table_as_its_rows_words():
    table = ("Options:\n\n| Name | Type | Default |\n| --- | :-: | ---: |\n| `path` | `string` | `'docs'` |\n"
             "| **routeBasePath** | string | The route. |\n| a \\| b | | x |\n\nAfter the table.")
    text = plain_text(table)
    assert text == ("Options: Name · Type · Default. path · string · 'docs'. routeBasePath · string · The route. "
                    "a | b · x. After the table.")
    assert "---" not in text and "| Name" not in text
    assert plain_text("Name | Type\n--- | ---\nx | y") == "Name · Type. x · y."
    assert "|" not in plain_text("| Name | Type |\n|------|------|\n| path | string |")


def test_plain_text_leaves_prose_with_pipes_and_rules_as_it_was():
    assert plain_text("A *b* | c [link](../x.md) and `d`.\n\n---\n\n# Next\n\n- item") == (
        "A b | c link and d. --- Next item")


# -- follow-ups ------------------------------------------------------------------------------
@pytest.mark.parametrize(("question", "follow_up"), [
    ("and how do I install it?", True),
    ("What about the widget?", True),
    ("how do I configure it?", True),
    ("Why?", True),
    ("What is the default chunk size of the ingest command?", False),
    ("How do I ingest a folder of Markdown files?", False),
    ("Great, and where do I put the translated copies of my docs?", False),  # it says what it is about
])
def test_is_follow_up(question, follow_up):
    assert is_follow_up(question) is follow_up


def test_resolve_follow_up_searches_with_the_previous_question():
    turns = [SimpleNamespace(question="How do I ingest a folder?", resolved_question="How do I ingest a folder?")]
    assert resolve_follow_up("and how do I install it?", turns) == \
        "and how do I install it? (How do I ingest a folder?)"
    assert resolve_follow_up("What is the default chunk size of the ingest command?", turns) == \
        "What is the default chunk size of the ingest command?"
    assert resolve_follow_up("and how do I install it?", []) == "and how do I install it?"


def test_resolve_follow_up_chains_through_the_resolved_question():
    turns = [SimpleNamespace(question="and the widget?", resolved_question="and the widget? (How do I install?)")]
    assert resolve_follow_up("what about it?", turns) == "what about it? (and the widget? (How do I install?))"


# -- links ------------------------------------------------------------------------------------
def test_fragment_url_after_an_existing_anchor():
    url = fragment_url("/using/ingest#options", "The ingest command reads a folder of Markdown files.")
    assert url == "/using/ingest#options:~:text=The%20ingest%20command%20reads%20a%20folder"


def test_fragment_url_without_an_anchor_and_with_hyphens():
    url = fragment_url("/using/ingest", "A self-hosted server is fine. More later.")
    assert url == "/using/ingest#:~:text=A%20self%2Dhosted%20server%20is%20fine"


def test_fragment_url_needs_two_words():
    assert fragment_url("/faq", "Yes") == "/faq"


# -- calibration ------------------------------------------------------------------------------
def test_off_topic_questions_ship_with_bookchat():
    questions = off_topic_questions()
    assert len(questions) >= 50
    assert len(set(questions)) == len(questions)
    assert not any(q.startswith("#") for q in questions)


@pytest.mark.django_db
def test_the_manual_is_calibrated_when_indexed(manual_book):
    from chat.models import ScopeCalibration

    calibration = ScopeCalibration.objects.get(book__slug="bookchat-manual")
    details = calibration.details
    assert {"method", "off_topic", "in_scope_probes"} <= set(details)
    assert details["off_topic"]["n"] == len(off_topic_questions())
    assert details["in_scope_probes"]["n"] > 0
    assert details["off_topic"]["p50"] < calibration.threshold < 1.0
    assert details["threshold"] == pytest.approx(calibration.threshold, abs=1e-4)


def test_brackets_in_the_books_own_sentences_are_not_citations_of_a_quoted_answer():
    """FastAPI's pages hold ``{* app.py hl[18,22] *}`` lines; a quoted sentence holding one was withheld as citing
    sources 18 and 22. The extractive composer writes its markers after a space; a language model may not."""
    book = "To return errors you use HTTPException. {* docs_src/app.py hl[18,22] *} It is raised as usual."
    answer = "To return errors you use HTTPException. {* docs_src/app.py hl[18,22] *} [1]"
    assert check_grounding(answer, [book], quoted=True).passed
    model = check_grounding(answer, [book])
    assert not model.passed and model.invalid_citations == [18, 22]
    assert check_grounding("You use HTTPException.[1]", [book]).passed  # a model's marker with no space counts
    assert not check_grounding("You use HTTPException.[1]", [book], quoted=True).passed
