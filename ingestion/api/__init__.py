"""Ingestion's REST API: a book published from its CI (``views``: ``POST /books/{slug}/sources``, ``GET
/books/{slug}/syncs/{id}``), its contract (``contract``: the queries and the sync as the schema states them) and the
sync as text for a CI log (``text``); ``urls`` gives the routes, which the project mounts under ``/api/v1/``.

It calls the uploads (``ingestion.uploads.publishing``) and stands on the base's API parts
(``bookchat.base.api``); it imports no other app. Who may call (chat's API keys, its publish limit) reaches it
through the project's wiring (``bookchat.urls``), and the caller through ``bookchat.base.api.ApiCaller``.
"""
