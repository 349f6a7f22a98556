"""The bookchat project package as a Django app: its system checks (``bookchat.checks``) and the metrics'
count of answers (``bookchat.metrics``)."""

from django.apps import AppConfig


class BookchatConfig(AppConfig):
    name = "bookchat"

    def ready(self) -> None:
        from bookchat import checks, metrics  # noqa: F401  (importing checks registers them)
        from chat.pipeline.signals import answered

        answered.connect(metrics.on_answered, dispatch_uid="bookchat.metrics")  # answers counted for /metrics
