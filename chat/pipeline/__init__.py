"""The answering pipeline: from a validated question to an answer with its sources, or to passages.

It knows nothing of HTTP, DRF, MCP or the audit trail: it takes a ``questions.AskRequest``, returns results,
raises domain errors (``bookchat.errors.BookchatError`` and its kinds) and tells others what happened through
``signals``. The channels (``chat.channels``) map its errors to what a client gets; the audit app listens.

In the order a question goes through it:

- ``answering`` (``answer``), ``searching`` (``search``, an assistant's passages) and ``finding``
  (``find_sections``, the search box as a reader types): the entry points, each one screen, top-down.
- the question: ``questions`` (the request), ``editions`` (which book and edition), ``conversations``
  (follow-ups resolved against the session's last turns), ``deadline`` (the time budget).
- retrieve and re-rank: ``retrieval`` (dense + lexical, fused), ``lexical`` (BM25), ``reranking`` (the fitted
  model), ``sentences`` (sentence vectors for the best answer units).
- in scope?: ``calibration`` (the book's threshold and the scope check), ``answerability`` (covered or not).
- compose: ``generation`` (the configured generator), ``extractive`` (the book's own words), ``units`` (a
  passage read as answer units).
- check and present: ``grounding`` (every sentence supported), ``confidence`` (a probability and a level),
  ``sources`` (excerpts and links), ``rendering`` (safe HTML).
- shared: ``terms`` (words that carry meaning), ``signals`` (what chat tells the audit trail).

It may import ``chat.models``, ``ingestion`` (models, embedders, lexicon, the Qdrant mirror) and the project's
base (``bookchat.conf``, ``bookchat.errors``); the import rules in ``pyproject.toml`` check it.
"""
