"""WSGI entry point for gunicorn. Runs the system checks first: a bad setting stops the server at start; then loads
the question-language detector on a thread of its own (``chat.pipeline.language.warm_in_background``), so that the
worker has it before a lecture hall's first questions arrive together."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
application = get_wsgi_application()

from bookchat.checks import refuse_to_start_on_errors  # noqa: E402  (after setup: the checks need the apps)

refuse_to_start_on_errors()

from chat.pipeline.language import warm_in_background  # noqa: E402

warm_in_background()
