"""Who a launch is: a learner's pseudonym, django-lti's LTI user without the claims we don't keep, and a staff
launch's Django user, limited to the course's book."""

from __future__ import annotations

import hashlib
import hmac

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from lti_tool.models import LtiLaunch, LtiUser

from chat.lti.models import LearnerKey, LtiPlatform
from ingestion.models import Book, BookAccess

REVIEWERS = "Reviewers"  # the group that may read and answer hand-offs (audit's migrations make it)
IDENTITY_CLAIMS = {"given_name": "given_name", "family_name": "family_name", "name": "name", "email": "email",
                   "picture_url": "picture"}


def learner_key() -> bytes:
    key = LearnerKey.objects.order_by("pk").first() or LearnerKey.objects.create()
    return key.key.encode()


def pseudonym(issuer: str, subject: str) -> str:
    """The learner's id: HMAC-SHA256 of issuer and subject under ``LearnerKey``, 32 hex characters."""
    message = f"{len(issuer)}:{issuer}|{subject}".encode()
    return hmac.new(learner_key(), message, hashlib.sha256).hexdigest()[:32]


def lti_user(launch: LtiLaunch, platform: LtiPlatform) -> LtiUser:
    """django-lti's record of the launch's user: its subject, and its name, e-mail and picture only when the
    platform keeps them (django-lti's own sync would always save them)."""
    defaults = {}
    if platform.keep_identity:
        defaults = {field: launch.get_claim(claim) for field, claim in IDENTITY_CLAIMS.items()
                    if launch.get_claim(claim) is not None}
    user, _ = LtiUser.objects.update_or_create(registration=launch.registration, sub=launch.get_claim("sub"),
                                               defaults=defaults)
    return user


@transaction.atomic
def staff_user(launch: LtiLaunch, platform: LtiPlatform, book: Book):
    """The Django user of a staff launch: the one its LTI user is linked to, else a new staff user (no password,
    a Reviewer) limited to ``book``; either way ``book`` is among its books."""
    record = lti_user(launch, platform)
    user = record.auth_user
    if user is None:
        name = f"lti-{pseudonym(launch.get_claim('iss'), launch.get_claim('sub'))[:24]}"
        user, created = get_user_model().objects.get_or_create(username=name, defaults={"is_staff": True})
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        user.groups.add(*Group.objects.filter(name=REVIEWERS))
        record.auth_user = user
        record.save(update_fields=["auth_user"])
        access, _ = BookAccess.objects.get_or_create(user=user)
    else:
        access = BookAccess.objects.filter(user=user).first()
    if access is not None and not user.is_superuser:
        access.books.add(book)
    return user
