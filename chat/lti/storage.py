"""Where a launch's state, nonce and data wait between requests: the database (``LaunchRecord``), never the
per-process cache django-lti uses by default. A state is taken once (``take``): a replayed launch finds nothing."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from pylti1p3.launch_data_storage.base import LaunchDataStorage

from chat.lti.models import LaunchRecord

STATE_SECONDS = 600  # from the OIDC login to the launch: the platform's login page in between


def put(key: str, value, seconds: int) -> None:
    LaunchRecord.objects.update_or_create(key=key[:255], defaults={
        "value": value, "expires_at": timezone.now() + timedelta(seconds=seconds)})


def get(key: str):
    record = LaunchRecord.objects.filter(key=key[:255], expires_at__gt=timezone.now()).first()
    return None if record is None else record.value


def take(key: str):
    """The value under ``key``, removed in the same transaction (None: never there, expired or already taken)."""
    with transaction.atomic():
        record = LaunchRecord.objects.select_for_update().filter(key=key[:255]).first()
        if record is None:
            return None
        record.delete()
    return record.value if record.expires_at > timezone.now() else None


def sweep() -> int:
    """Delete the expired records (logins abandoned at the platform's page, deep links never answered); each OIDC
    login runs it, so the table holds only the launches in flight."""
    return LaunchRecord.objects.filter(expires_at__lte=timezone.now()).delete()[0]


class DatabaseLaunchStorage(LaunchDataStorage):
    """pylti1p3's launch data storage on ``LaunchRecord``. No session cookie: keys are the launch's own ids."""

    def get_session_cookie_name(self):
        return None

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str):
        return get(self._prepare_key(key))

    def set_value(self, key: str, value, exp: int | None = None) -> None:
        put(self._prepare_key(key), value, exp or STATE_SECONDS)

    def check_value(self, key: str) -> bool:
        return get(self._prepare_key(key)) is not None
