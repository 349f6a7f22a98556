"""What bookchat keeps for LTI besides django-lti's tables: a platform's bookchat side (its book, whether it is
trusted, whether a launch may keep names), a deployment's own book, the launches in flight (OIDC state and nonce,
a deep link's request), and the learners' pseudonym key."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from django.db import models
from lti_tool.models import LtiDeployment, LtiRegistration

from ingestion.models import Book


class LtiPlatform(models.Model):
    """bookchat's settings for one registered platform (django-lti's ``LtiRegistration``)."""

    registration = models.OneToOneField(LtiRegistration, on_delete=models.CASCADE, related_name="bookchat")
    book = models.ForeignKey(Book, null=True, blank=True, on_delete=models.SET_NULL, related_name="lti_platforms",
                             help_text="The book its launches open (a deep link may pick another only when empty).")
    trusted = models.BooleanField(default=False, help_text="An instructor launch skips the admin's second factor "
                                  "(the LMS has checked who they are). Off by default.")
    keep_identity = models.BooleanField(default=False, help_text="Keep the name, e-mail and picture a launch sends "
                                        "(on django-lti's LTI user). Off by default: only a pseudonym is kept.")
    frame_origins = models.TextField(blank=True, help_text="More origins that frame the launch, one per line (the "
                                     "issuer's and the login URL's origins always may).")

    class Meta:
        verbose_name = "LTI platform"

    def __str__(self) -> str:
        return self.registration.name

    def origins(self) -> list[str]:
        """The origins allowed to frame this platform's launched pages."""
        urls = [self.registration.issuer, self.registration.auth_url, *self.frame_origins.split()]
        found = []
        for url in urls:
            parts = urlsplit(url.strip())
            origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""
            if origin and origin not in found:
                found.append(origin)
        return found


class DeploymentBook(models.Model):
    """The book one deployment of a platform opens (a course's, when the LMS gives each course a deployment of its
    own): over the platform's book, and bound like it (a deep link may not pick another)."""

    deployment = models.OneToOneField(LtiDeployment, on_delete=models.CASCADE, related_name="bookchat")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="lti_deployments")

    class Meta:
        verbose_name = "LTI deployment's book"

    def __str__(self) -> str:
        return f"{self.deployment.deployment_id} → {self.book.slug}"


class LaunchRecord(models.Model):
    """A value pylti1p3 keeps between the requests of a launch (an OIDC state with its nonce, a deep link's request),
    in the database so that every web process and host sees it; expired rows are ignored and swept."""

    key = models.CharField(max_length=255, unique=True)
    value = models.JSONField()
    expires_at = models.DateTimeField(db_index=True)


def _new_key() -> str:
    return secrets.token_hex(32)


class LearnerKey(models.Model):
    """The key of the learners' pseudonyms: one row, made on first use."""

    key = models.CharField(max_length=64, default=_new_key, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
