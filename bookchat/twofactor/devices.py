"""A staff user's second factor on django-otp's models: one authenticator app (a ``TOTPDevice``, confirmed by its
first code) and one set of ten single-use recovery codes (a ``StaticDevice``). Writes are ``twofactor_*`` and
``recovery_codes_new``; reads say whether it is on, check a code, and list every staff user's state."""

from __future__ import annotations

import re
from base64 import b32encode

import segno
from django.contrib.auth import get_user_model
from django.db import transaction
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError

RECOVERY_CODES = 10
APP_NAME = "authenticator app"
CODES_NAME = "recovery codes"
_APP_CODE = re.compile(r"^\d{6}$")


class CodeThrottled(BookchatError):
    """Too many wrong codes in a row: django-otp refuses every code for a while (1 s, 2 s, 4 s …)."""

    code = "code_throttled"


def required() -> bool:
    return setting("ADMIN_2FA") == "required"


def twofactor_on(user) -> bool:
    """Whether ``user`` has a confirmed authenticator app (and so must give a code at every login)."""
    return TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def unconfirmed_app(user) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=False).order_by("-pk").first()


def recovery_codes_left(user) -> int:
    return StaticToken.objects.filter(device__user=user, device__confirmed=True).count()


@transaction.atomic
def twofactor_start(*, user) -> TOTPDevice:
    """A new, unconfirmed app for ``user`` (a set-up begun earlier and not finished is dropped)."""
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    return TOTPDevice.objects.create(user=user, name=APP_NAME, confirmed=False)


def app_secret(device: TOTPDevice) -> str:
    """The app's key in base32, in groups of four, for typing into an app by hand."""
    text = b32encode(device.bin_key).decode()
    return " ".join(text[i:i + 4] for i in range(0, len(text), 4))


def app_qr_svg(device: TOTPDevice) -> str:
    """The ``otpauth://`` URI as an inline SVG QR code, dark on white whatever the admin's theme."""
    return segno.make(device.config_url, error="m").svg_inline(scale=5, dark="#000", light="#fff",
                                                               title="QR code of the authenticator app's key")


@transaction.atomic
def twofactor_confirm(*, device: TOTPDevice, code: str) -> list[str] | None:
    """Confirm the app with its first ``code``: the new recovery codes, or None when the code is not right."""
    device = TOTPDevice.objects.select_for_update().get(pk=device.pk)
    if not device.verify_token(code.strip()):
        return None
    TOTPDevice.objects.filter(user=device.user, confirmed=True).delete()
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    return recovery_codes_new(user=device.user)


@transaction.atomic
def recovery_codes_new(*, user) -> list[str]:
    """Ten new recovery codes for ``user``; the old ones stop working."""
    device, _ = StaticDevice.objects.get_or_create(user=user, name=CODES_NAME, defaults={"confirmed": True})
    device.token_set.all().delete()
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create(StaticToken(device=device, token=code) for code in codes)
    return codes


def code_check(*, user, code: str) -> Device | None:
    """The device that accepts ``code`` (six digits: the app; anything else: a recovery code, used up), or None.
    Raises ``CodeThrottled`` while that device refuses codes after wrong ones."""
    code = re.sub(r"[\s-]", "", code).lower()
    model = TOTPDevice if _APP_CODE.match(code) else StaticDevice
    with transaction.atomic():
        device = model.objects.select_for_update().filter(user=user, confirmed=True).first()
        if device is None:
            return None
        allowed, _ = device.verify_is_allowed()
        if not allowed:
            raise CodeThrottled("Too many wrong codes: wait a few seconds, then enter the code your app shows now.")
        return device if device.verify_token(code) else None


@transaction.atomic
def twofactor_off(*, user) -> int:
    """Delete ``user``'s app and recovery codes (confirmed or not); how many devices there were."""
    apps, _ = TOTPDevice.objects.filter(user=user).delete()
    code_sets, _ = StaticDevice.objects.filter(user=user).delete()
    return apps + code_sets


def twofactor_reset(*, username: str) -> dict:
    """``manage.py twofactor --reset``: delete a user's app and recovery codes (a lost phone), so they set up again."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise BookchatError(f"there is no user {username!r}", code="unknown_user")
    state = twofactor_state(user)
    twofactor_off(user=user)
    return {"username": username, "had_app": state["app"], "recovery_codes_deleted": state["recovery_codes_left"]}


def twofactor_state(user) -> dict:
    return {"username": user.get_username(), "superuser": user.is_superuser, "app": twofactor_on(user),
            "recovery_codes_left": recovery_codes_left(user)}


def staff_states() -> list[dict]:
    """Every active staff user's second factor, by user name."""
    staff = get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
    return [twofactor_state(user) for user in staff]
