"""Staff uploads: ``intake`` (files checked and stored), ``forms`` (the upload form), ``jobs`` (a queued job run
on a django-q2 worker, retried, noticed when its worker died) and ``admin`` (the upload pages of the admin,
registered by ``ingestion.admin``).

It calls indexing (``ingestion.indexing``) and reading; nothing else in ingestion imports it.
"""
