"""One launch validated: pylti1p3's checks, with the state and nonce in the database and taken once, no deployment
created on the way (django-lti's tool config makes an unknown one), and ours after them: a message type and version
we handle, a role, a book that exists. Every refusal is a ``LaunchRefused`` that says why, raised before anything is
written."""

from __future__ import annotations

import uuid

from lti_tool.models import Key, LtiDeployment, LtiLaunch, LtiRegistration
from lti_tool.utils import DjangoToolConfig
from pylti1p3.contrib.django import DjangoMessageLaunch
from pylti1p3.deployment import Deployment
from pylti1p3.exception import LtiException

from chat.lti import storage
from chat.lti.models import DeploymentBook, LtiPlatform
from ingestion.models import Book

RESOURCE = "LtiResourceLinkRequest"
DEEP_LINK = "LtiDeepLinkingRequest"
PRIVACY = "DataPrivacyLaunchRequest"
HANDLED = (RESOURCE, DEEP_LINK, PRIVACY)
CUSTOM = "https://purl.imsglobal.org/spec/lti/claim/custom"
DEPLOYMENT_ID = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
MESSAGE_TYPE = "https://purl.imsglobal.org/spec/lti/claim/message_type"
VERSION = "https://purl.imsglobal.org/spec/lti/claim/version"
ROLES = "https://purl.imsglobal.org/spec/lti/claim/roles"
STAFF_ROLES = ("#Instructor", "#TeachingAssistant", "#ContentDeveloper", "#Administrator", "/Instructor",
               "/ContentDeveloper", "/Administrator")
LEARNER_ROLES = ("#Learner", "/Learner")


class LaunchRefused(Exception):
    """A launch bookchat will not take; ``message`` is what the page says."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status


def state_key(state: str) -> str:
    return f"state-{state}"


class ToolConfig(DjangoToolConfig):
    """django-lti's tool config, but an unknown deployment is unknown (django-lti creates it, inactive)."""

    def find_deployment(self, iss, deployment_id):
        return self.find_deployment_by_params(iss, deployment_id, None)

    def find_deployment_by_params(self, iss, deployment_id, client_id, *args, **kwargs):
        found = LtiDeployment.objects.filter(registration=self.registration, deployment_id=deployment_id,
                                             is_active=True).first()
        if found is None:
            return None
        self.deployment = found
        return Deployment().set_deployment_id(deployment_id)


class MessageLaunch(DjangoMessageLaunch):
    """pylti1p3's launch with the state taken from the database (once) and its nonce compared with the token's."""

    _nonce: str | None = None

    def validate_state(self):
        state = self._get_request_param("state")
        if not state:
            raise LaunchRefused("The launch has no OIDC state: start it again from your course.")
        saved = storage.take(state_key(state))
        if saved is None:
            raise LaunchRefused("This launch is unknown, expired or was already used: start it again from your course.")
        self._nonce = saved["nonce"]
        return self

    def validate_nonce(self):
        if not self._get_jwt_body().get("nonce") or self._get_jwt_body().get("nonce") != self._nonce:
            raise LaunchRefused("The launch's nonce does not match the one bookchat sent: start it again.")
        return self

    def validate_message(self):
        body = self._get_jwt_body()
        if body.get(VERSION) != "1.3.0":
            raise LaunchRefused(f"bookchat takes LTI 1.3.0 launches, not version {str(body.get(VERSION))[:20]!r}.")
        if body.get(MESSAGE_TYPE) not in HANDLED:
            raise LaunchRefused(f"bookchat does not handle the message type {str(body.get(MESSAGE_TYPE))[:60]!r}.")
        if not body.get(ROLES) and body.get(MESSAGE_TYPE) != PRIVACY:
            raise LaunchRefused("The launch names no role in the course: bookchat cannot tell a student from staff.",
                                status=403)
        super().validate_message()
        book_of(self.get_tool_conf().registration, body)  # a book that exists, or refused here
        return self


def ensure_key() -> None:
    """A tool key to sign with (django-lti's ``Key``): the first one is made on first need; ``rotate_keys`` adds
    the next."""
    if not Key.objects.active().exists():
        Key.objects.generate()


def restored(request, launch_id: str, data: dict) -> MessageLaunch:
    """A launch validated earlier (a deep link's), restored from its data, as pylti1p3's ``from_cache`` does."""
    ensure_key()
    launch = MessageLaunch(request, ToolConfig(), launch_data_storage=storage.DatabaseLaunchStorage())
    return (launch.set_launch_id(launch_id).set_auto_validation(enable=False).set_jwt({"body": data})
            .set_restored().validate_registration())


def validate(request) -> LtiLaunch:
    """The launch ``request`` posts, validated, or ``LaunchRefused``."""
    ensure_key()
    launch = MessageLaunch(request, ToolConfig(), launch_data_storage=storage.DatabaseLaunchStorage())
    launch.set_launch_id("lti1p3-launch-" + str(uuid.uuid4()))
    try:
        launch.validate()
    except LaunchRefused:
        raise
    except LtiException as exc:
        raise LaunchRefused(f"The launch could not be verified: {exc}.") from None
    except Exception as exc:  # a malformed token reaches pyjwt's and requests' own errors
        raise LaunchRefused(f"The launch could not be verified ({type(exc).__name__}).") from None
    return LtiLaunch(launch)


def platform_of(registration: LtiRegistration) -> LtiPlatform:
    return LtiPlatform.objects.get_or_create(registration=registration)[0]


def bound_book(registration: LtiRegistration, deployment_id: str) -> Book | None:
    """The book a launch is bound to: its deployment's (``DeploymentBook``), else its platform's, else none."""
    own = (DeploymentBook.objects.filter(deployment__registration=registration, deployment__deployment_id=deployment_id)
           .select_related("book").first())
    if own is not None:
        return own.book
    platform = platform_of(registration)
    return platform.book if platform.book_id else None


def book_of(registration: LtiRegistration, body: dict) -> Book | None:
    """The launch's book: the custom parameter ``book``, else the one its deployment or platform is bound to (None
    for a deep link that picks it); a custom ``book`` other than the bound one is refused."""
    bound = bound_book(registration, str(body.get(DEPLOYMENT_ID) or ""))
    wanted = str((body.get(CUSTOM) or {}).get("book") or "").strip()
    if bound is not None and wanted and wanted != bound.slug:
        raise LaunchRefused(f"This course opens the book {bound.slug!r} only, not {wanted[:64]!r}.", status=403)
    slug = wanted or (bound.slug if bound is not None else "")
    if not slug:
        if body.get(MESSAGE_TYPE) in (DEEP_LINK, PRIVACY):
            return None
        raise LaunchRefused("No book is set for this course: the instructor picks one when adding bookchat.", 404)
    book = Book.objects.roots().filter(slug=slug).first()
    if book is None:
        raise LaunchRefused(f"There is no book {slug[:64]!r} here: ask the course staff to pick it again.", 404)
    return book


def is_staff(roles: list[str]) -> bool:
    return any(role.endswith(STAFF_ROLES) for role in roles or [])


def is_learner(roles: list[str]) -> bool:
    return any(role.endswith(LEARNER_ROLES) for role in roles or [])
