"""Indexing a book: its pages chunked, embedded and stored, and the stores kept in step.

- ``ingesting`` (a folder or a site, one book at a time under a lock: what ``ingest``, upload jobs and
  ``bootstrap`` call) and ``indexer`` (``BookIndexer``: discover → read → chunk → embed what is new → store).
- its parts: ``storing`` (a page's passages written in one transaction, and copied to the mirror), ``chunking``
  (heading-aware passages), ``embedders`` (the configured embedder, loaded once per process), ``lexicon`` (a
  book's lexical statistics), ``vector_index`` (a big book's own HNSW index), ``qdrant`` and
  ``qdrant_sync`` (the optional Qdrant mirror and its repair), ``reports`` (what a run reports).

It calls reading (``ingestion.reading``) and imports ``ingestion.models``; staff uploads
(``ingestion.uploads``) call it.
"""
