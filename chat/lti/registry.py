"""Platforms registered from the command line (``manage.py lti platform add|list|remove``) and what an LMS
administrator pastes (``manage.py lti tool-config``): the service the command is a thin shell over.

``add`` makes django-lti's registration (issuer + client id), its deployment (active: launches from an unknown or
inactive deployment are refused) and bookchat's ``LtiPlatform`` (untrusted; no names kept); adding another
deployment id to a registered issuer and client id adds the deployment. ``--book`` binds the deployment to the book
(``DeploymentBook``: an LMS that gives each course a deployment of its own gives each its book); on a new
registration it is also the platform's book, which its deployments without one of their own open. ``remove``
removes one deployment with ``--deployment-id``, else the whole registration (its deployments and LTI users with
it)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from lti_tool.models import LtiDeployment, LtiRegistration

from bookchat.base.errors import NotFound, RequestError
from chat.lti.models import DeploymentBook, LtiPlatform
from ingestion.models import Book

_URL = URLValidator(schemes=["http", "https"])
URL_FIELDS = ("issuer", "auth_url", "token_url", "keyset_url")


def _checked(field: str, value: str) -> str:
    value = (value or "").strip()
    if not value:
        raise RequestError(f"--{field.replace('_', '-')} is empty", code="missing_value", field=field)
    if field in URL_FIELDS:
        try:
            _URL(value)
        except ValidationError:
            raise RequestError(f"--{field.replace('_', '-')} {value[:200]!r} is not an http(s) URL", code="bad_url",
                               field=field) from None
    if len(value) > 200 and field not in URL_FIELDS:
        raise RequestError(f"--{field.replace('_', '-')} is longer than 200 characters", code="too_long", field=field)
    return value


def summary(registration: LtiRegistration) -> dict:
    platform = LtiPlatform.objects.filter(registration=registration).select_related("book").first()
    return {"name": registration.name, "issuer": registration.issuer, "client_id": registration.client_id,
            "deployments": sorted(registration.deployments.filter(is_active=True).values_list("deployment_id",
                                                                                               flat=True)),
            "deployment_books": dict(DeploymentBook.objects.filter(deployment__registration=registration)
                                     .values_list("deployment__deployment_id", "book__slug")),
            "auth_url": registration.auth_url, "token_url": registration.token_url,
            "keyset_url": registration.keyset_url, "active": registration.is_active,
            "book": platform.book.slug if platform and platform.book_id else None,
            "trusted": bool(platform and platform.trusted), "keep_identity": bool(platform and platform.keep_identity),
            "frame_origins": platform.origins() if platform else []}


@transaction.atomic
def add(*, issuer: str, client_id: str, deployment_id: str, auth_url: str, token_url: str, keyset_url: str,
        book: str | None = None, name: str = "", trusted: bool = False) -> tuple[dict, bool]:
    """Register a platform's deployment; (its summary, whether the registration is new)."""
    given = {"issuer": issuer, "client_id": client_id, "deployment_id": deployment_id, "auth_url": auth_url,
             "token_url": token_url, "keyset_url": keyset_url}
    values = {field: _checked(field, value) for field, value in given.items()}
    found = Book.objects.roots().filter(slug=book).first() if book else None
    if book and found is None:
        raise RequestError(f"unknown book {book[:64]!r}", code="unknown_book", field="book")
    registration, created = LtiRegistration.objects.get_or_create(
        issuer=values["issuer"], client_id=values["client_id"],
        defaults={"name": (name or values["issuer"])[:255], **{f: values[f] for f in URL_FIELDS[1:]}})
    if LtiDeployment.objects.filter(registration=registration, deployment_id=values["deployment_id"]).exists():
        raise RequestError(f"deployment {values['deployment_id']!r} of {values['issuer']} ({values['client_id']}) "
                           "is registered already", code="already_registered", field="deployment_id")
    deployment = LtiDeployment.objects.create(registration=registration, deployment_id=values["deployment_id"],
                                              is_active=True)
    if found is not None:
        DeploymentBook.objects.create(deployment=deployment, book=found)
    platform, _ = LtiPlatform.objects.get_or_create(registration=registration)
    if created:
        platform.book, platform.trusted = found, trusted
        platform.save()
    elif trusted and not platform.trusted:
        platform.trusted = True
        platform.save()
    return summary(registration), created


def listed() -> list[dict]:
    return [summary(r) for r in LtiRegistration.objects.order_by("issuer", "client_id")]


@transaction.atomic
def remove(*, issuer: str, client_id: str, deployment_id: str | None = None) -> str:
    """Remove a deployment, or (without one) the whole registration; what was removed, as a sentence."""
    registration = LtiRegistration.objects.filter(issuer=issuer, client_id=client_id).first()
    if registration is None:
        raise NotFound(f"no platform is registered with issuer {issuer[:200]!r} and client id {client_id[:100]!r}",
                       code="unknown_platform")
    if deployment_id is None:
        registration.delete()
        return f"Removed the platform {issuer} ({client_id}) and its deployments."
    deleted, _ = registration.deployments.filter(deployment_id=deployment_id).delete()
    if not deleted:
        raise NotFound(f"{issuer} ({client_id}) has no deployment {deployment_id[:100]!r}", code="unknown_deployment")
    return f"Removed deployment {deployment_id} of {issuer} ({client_id})."


def canvas_config(urls: dict) -> dict:
    """A Canvas developer key's JSON (Admin → Developer Keys → + LTI Key → Paste JSON)."""
    return {
        "title": "bookchat", "description": "Ask the course's book: answers cited from the book only.",
        "oidc_initiation_url": urls["login_url"], "target_link_uri": urls["launch_url"],
        "public_jwk_url": urls["jwks_url"], "scopes": [],
        "extensions": [{"domain": urls["domain"], "platform": "canvas.instructure.com", "privacy_level": "anonymous",
                        "settings": {"placements": [
                            {"placement": "course_navigation", "message_type": "LtiResourceLinkRequest",
                             "target_link_uri": urls["launch_url"], "text": "bookchat"},
                            {"placement": "link_selection", "message_type": "LtiDeepLinkingRequest",
                             "target_link_uri": urls["deep_link_url"], "text": "bookchat"},
                            {"placement": "assignment_selection", "message_type": "LtiDeepLinkingRequest",
                             "target_link_uri": urls["deep_link_url"], "text": "bookchat"}]}}],
        "custom_fields": {},
    }
