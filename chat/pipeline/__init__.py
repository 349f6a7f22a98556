"""The answering pipeline: from a validated question to an answer with its sources, or to passages.

It knows nothing of HTTP, DRF, MCP or the audit trail: it takes a ``questions.AskRequest``, returns results,
raises domain errors (``bookchat.base.errors.BookchatError`` and its kinds) and tells others what happened through
``announcements`` (each question's ``Outcome``, in its own words). The channels (``chat.channels``) map its
errors to what a client gets; the audit app listens and maps outcomes to its statuses.

The entry points, each read top to bottom:

- ``answering``: ``prepare`` (book → conversation → retrieve → check scope), then ``answer_steps`` (compose →
  ground → assess confidence → respond → remember); ``answer_events`` streams it, ``answer_question`` returns
  the response, an ``answers.Answer`` (the one list of its fields, each a typed value).
- ``assistant_search``: ``search_passages``, passages for an AI assistant (MCP ``search_book``).
- ``typeahead``: ``find_sections``, the book's search box as a reader types.

The steps, in the order a question meets them:

- the question: ``questions`` (the request), ``editions`` (which book and edition), ``conversations``
  (follow-ups resolved against the session's last turns), ``deadline`` (the time budget).
- retrieve and re-rank: ``retrieval`` (dense + lexical, fused), ``lexical`` (BM25), ``reranking`` (the fitted
  re-ranker), ``sentences`` (sentence vectors re-sort the best passages), ``scoring`` (their shared arithmetic).
- in scope?: ``calibration`` (the book's threshold and the scope check), ``answerability`` (does the passage name
  what the question asks about).
- compose: ``generation`` (the configured generator), ``extractive`` (the book's own words), ``units`` (a
  passage read as answer units).
- check and present: ``grounding`` (every sentence supported), ``confidence`` (a probability and a level),
  ``source_cards`` (each source's excerpt and link), ``rendering`` (safe HTML).
- the course staff's answers: ``staff_answers`` (kept, citing sections), ``staff_matching`` (a question matched to
  one, served instead of the book's answer unless that is high), ``staff_following`` (sent to review when an
  indexing run removes or rewrites a section one cites).
- shared: ``terms`` (words that carry meaning), ``announcements`` (the signals chat sends, the ``AuditRecord``
  they carry, the ``Outcome`` names).

It may import ``chat.models``, ``ingestion`` (models, embedders, lexicon, the Qdrant mirror) and the project's
base (``bookchat.base.conf``, ``bookchat.base.errors``); the import rules in ``pyproject.toml`` check it.
"""
