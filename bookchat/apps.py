"""The bookchat project package as a Django app: its system checks (``bookchat.checks``), the metrics' count of
answers (``bookchat.base.metrics``), and tasks signed with a previous secret key
(``read_tasks_signed_with_fallbacks``). Its models are the base's (``bookchat.models``)."""

from django.apps import AppConfig
from django.conf import settings


class BookchatConfig(AppConfig):
    name = "bookchat"

    def ready(self) -> None:
        from bookchat import checks  # noqa: F401  (importing checks registers them)
        from bookchat.base import metrics
        from chat.pipeline.announcements import answered

        answered.connect(metrics.on_answered, dispatch_uid="bookchat.metrics")  # answers counted for /metrics
        read_tasks_signed_with_fallbacks()


def read_tasks_signed_with_fallbacks() -> None:
    """django-q2 signs each queued task with SECRET_KEY and reads it with that key alone: a task queued just before
    the key was rotated (an upload waiting for the worker) would fail to be read. Its reader here tries the
    ``SECRET_KEY_FALLBACKS`` (``BOOKCHAT_SECRET_KEY_FALLBACKS``) after the current key, as Django's own signing does."""
    from django_q import signing

    if getattr(signing.SignedPackage.loads, "reads_fallbacks", False):
        return
    current = signing.SignedPackage.loads

    def loads(obj):
        try:
            return current(obj)
        except signing.BadSignature:
            for key in settings.SECRET_KEY_FALLBACKS:
                try:
                    return signing.signing.loads(obj, key=key, salt=signing.Conf.PREFIX,
                                                 serializer=signing.PickleSerializer)
                except signing.BadSignature:
                    continue
            raise

    loads.reads_fallbacks = True
    signing.SignedPackage.loads = staticmethod(loads)
