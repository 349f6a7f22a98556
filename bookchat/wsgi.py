"""WSGI entry point for gunicorn. Runs the system checks first: a bad setting stops the server at start."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
application = get_wsgi_application()

from bookchat.checks import refuse_to_start_on_errors  # noqa: E402  (after setup: the checks need the apps)

refuse_to_start_on_errors()
