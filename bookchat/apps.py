"""The bookchat project package as a Django app: its system checks (``bookchat.checks``)."""

from django.apps import AppConfig


class BookchatConfig(AppConfig):
    name = "bookchat"

    def ready(self) -> None:
        from bookchat import checks  # noqa: F401  (registers the checks)
