"""The floor every app stands on: settings (``conf``), the error family (``errors``), what every app's REST API
shares (``api``: the strict request contract, the error body's schema, the caller), what ``/metrics`` counts
(``metrics``), the task broker, the embedded PostgreSQL and its tools, secret keys and private files, HTTPS and
the Content-Security-Policy (``security``, ``subpath``), the database outage page, setting up a deployment
(``deployment``), the interface's languages and their catalogues (``languages``, ``catalogues``), and the
project's own models (``models``: the command-line log, the task workers' heartbeats; Django finds them as the
``bookchat`` app's, so their tables keep their names).

It imports nothing of bookchat above it: not the project (``bookchat`` itself: settings, URLs, serving, the
admin), not the apps. ``make lint`` holds that (``[tool.importlinter]``, contract ``base``).
"""
