"""A question's vector moved towards the book's language: the language offset of the multilingual embedder.

A multilingual embedder places a question and its translation near each other, but not at the same place: every
vector of one language carries a share that says "Chinese" or "Spanish" rather than what is asked, and against an
English book it pulls a Chinese question towards whatever passage looks most like Chinese text (code, tables,
names) instead of the one that answers. That share is close to a constant per language, so it can be measured and
taken off: a language's *offset* is the mean difference between the vectors of translated questions and of their
English originals (``chat/data/off_topic_questions.i18n.txt``: 19 everyday questions in each supported language,
the same ones for every book, never a book's questions). A question in language ``q`` asked of a book in language
``b`` is searched with ``normalise(v - offset[q] + offset[b])`` (English's offset is zero).

Measured on docusaurus-docs (BENCHMARKS.md, "Questions in other languages"): hit@5 of the answerable questions
asked in Chinese rose from 0.37 to 0.77, in Urdu from 0.47 to 0.60, in French from 0.57 to 0.63, Spanish unchanged
(0.67); the off-topic probes that calibrate the cross-lingual scope threshold are searched the same way.

Decisions: off-topic questions for the offsets (everyday domains, far from any book, so the offset can't carry a
book's subject); shipped for the default embedder (``OFFSETS_FILE``, written by ``python -m bench.crosslingual
--offsets``, with the translated questions' own vectors: embedding the 266 questions takes seconds, more than a
first question's time allows), computed once
per process from the embedder itself for any other; a language without translations there gets no offset.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

import numpy as np

from ingestion.indexing.embedders import get_embedder

PAIRS_FILE = Path(__file__).resolve().parent.parent / "data" / "off_topic_questions.i18n.txt"
OFFSETS_FILE = PAIRS_FILE.with_name("language_offsets.json")
_offsets: dict[str, dict[str, np.ndarray]] = {}
_vectors: dict[str, tuple[list[str], np.ndarray]] = {}
_lock = threading.Lock()


def pairs() -> list[tuple[str, str, str]]:
    """(language, English original, translation) of every line of the pairs file."""
    out = []
    for line in PAIRS_FILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or line.count("\t") != 2:
            continue
        language, english, translated = (part.strip() for part in line.split("\t"))
        out.append((language, english, translated))
    return out


def translated_vectors() -> tuple[list[str], np.ndarray]:
    """The translated questions' languages and their vectors (as queries): shipped, or embedded once per process."""
    embedder = get_embedder()
    with _lock:
        if embedder.name not in _vectors:
            rows = pairs()
            stored = _shipped_data(embedder.name)
            if stored is not None and "vectors" in stored:
                vectors = np.frombuffer(base64.b64decode(stored["vectors"]), dtype=np.float16)
                vectors = vectors.reshape(len(rows), -1).astype(np.float32)
            else:
                vectors = embedder.embed_queries([r[2] for r in rows])
            _vectors[embedder.name] = ([r[0] for r in rows], vectors)
        return _vectors[embedder.name]


def _shipped_data(embedder_name: str) -> dict | None:
    """What ``OFFSETS_FILE`` holds, when it was measured with this embedder on the current pairs."""
    try:
        data = json.loads(OFFSETS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("embedder") != embedder_name or data.get("pairs") != len(pairs()):
        return None
    return data


def shipped(embedder_name: str) -> dict[str, np.ndarray] | None:
    """The offsets ``OFFSETS_FILE`` holds, when they were measured with this embedder on the current pairs."""
    data = _shipped_data(embedder_name)
    if data is None:
        return None
    return {language: np.asarray(values, dtype=np.float32) for language, values in data["offsets"].items()}


def offsets() -> dict[str, np.ndarray]:
    """Each language's offset for the configured embedder (English's is zero): shipped, or measured."""
    embedder = get_embedder()
    if embedder.name in _offsets:
        return _offsets[embedder.name]
    found = shipped(embedder.name)
    if found is not None:
        with _lock:
            _offsets[embedder.name] = found
        return found
    return measure_offsets()


def measure_offsets() -> dict[str, np.ndarray]:
    """Each language's offset, measured now with the configured embedder."""
    embedder = get_embedder()
    languages, translated = translated_vectors()
    english = embedder.embed_queries([r[1] for r in pairs()])
    found = {}
    for language in sorted(set(languages)):
        rows = [n for n, lang in enumerate(languages) if lang == language]
        found[language] = (translated[rows] - english[rows]).mean(axis=0)
    with _lock:
        _offsets[embedder.name] = found
    return found


def moved(vector, language: str, book_language: str) -> np.ndarray:
    """``vector`` of a question in ``language`` moved to ``book_language``, of unit length."""
    known = offsets()
    zero = np.zeros(len(vector), dtype=np.float32)
    shifted = np.asarray(vector, dtype=np.float32) - known.get(language, zero) + known.get(book_language, zero)
    norm = float(np.linalg.norm(shifted))
    return shifted / norm if norm else np.asarray(vector, dtype=np.float32)


def off_topic_vectors(book_language: str) -> list[np.ndarray]:
    """The translated off-topic questions' vectors as a question of theirs is searched in a book of
    ``book_language`` (moved; those already in the book's language left out)."""
    languages, vectors = translated_vectors()
    return [moved(v, lang, book_language) for lang, v in zip(languages, vectors, strict=True) if lang != book_language]


def write_offsets() -> Path:
    """Measure the offsets with the configured embedder and write ``OFFSETS_FILE``, with the translated questions'
    vectors (float16, base64: what the cross-lingual scope threshold is measured with)."""
    _vectors.pop(get_embedder().name, None)
    _offsets.pop(get_embedder().name, None)
    found = measure_offsets()
    _, translated = translated_vectors()
    OFFSETS_FILE.write_text(json.dumps({
        "embedder": get_embedder().name, "pairs": len(pairs()),
        "offsets": {language: [round(float(x), 6) for x in vector] for language, vector in sorted(found.items())},
        "vectors": base64.b64encode(translated.astype(np.float16).tobytes()).decode("ascii"),
    }, separators=(",", ":")) + "\n", encoding="utf-8")
    return OFFSETS_FILE
