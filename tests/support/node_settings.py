"""bookchat's settings for the drill's nodes, plus django-q2's own log (its INFO lines say when a cluster runs and
which task each worker takes; bookchat's logging config leaves them out)."""

from bookchat.settings import *  # noqa: F403
from bookchat.settings import LOGGING

LOGGING["loggers"]["django-q"] = {"handlers": ["console"], "level": "INFO", "propagate": False}
