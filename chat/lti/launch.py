"""One launch validated: pylti1p3's checks, with the state and nonce in the database and taken once, no deployment
created on the way (django-lti's tool config makes an unknown one), and ours after them: a message type and version
we handle, a role, a book that exists. Every refusal is a ``LaunchRefused`` that says why, raised before anything is
written; its message is translated when a page shows it, in the launch's language once the launch's signature is
verified (the ``launch_presentation`` claim's locale), before that in the browser's."""

from __future__ import annotations

import uuid

from django.utils.translation import gettext_lazy as _
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
LAUNCH_PRESENTATION = "https://purl.imsglobal.org/spec/lti/claim/launch_presentation"
STAFF_ROLES = ("#Instructor", "#TeachingAssistant", "#ContentDeveloper", "#Administrator", "/Instructor",
               "/ContentDeveloper", "/Administrator")
LEARNER_ROLES = ("#Learner", "/Learner")


class LaunchRefused(Exception):
    """A launch bookchat will not take; ``message`` is what the page says, ``text`` (a lazy translation) formatted
    with ``params`` in the language active when it is read; ``locale`` is the verified launch's, if any."""

    def __init__(self, text: str, status: int = 400, **params):
        super().__init__(text)
        self.text, self.status, self.params, self.locale = text, status, params, ""

    @property
    def message(self) -> str:
        return str(self.text) % self.params if self.params else str(self.text)


def locale_of(body: dict) -> str:
    """The launch's locale (``es-ES``, ``zh-CN``: the LMS's language for this user), or empty."""
    presentation = body.get(LAUNCH_PRESENTATION)
    return str(presentation.get("locale") or "")[:35] if isinstance(presentation, dict) else ""


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
    verified = False  # the token's signature checked: its claims (its locale) are the platform's

    def validate_state(self):
        state = self._get_request_param("state")
        if not state:
            raise LaunchRefused(_("The launch has no OIDC state: start it again from your course."))
        saved = storage.take(state_key(state))
        if saved is None:
            raise LaunchRefused(_("This launch is unknown, expired or was already used: start it again from your "
                                  "course."))
        self._nonce = saved["nonce"]
        return self

    def validate_nonce(self):
        if not self._get_jwt_body().get("nonce") or self._get_jwt_body().get("nonce") != self._nonce:
            raise LaunchRefused(_("The launch's nonce does not match the one bookchat sent: start it again."))
        return self

    def validate_jwt_signature(self):
        super().validate_jwt_signature()
        self.verified = True
        return self

    def validate_message(self):
        body = self._get_jwt_body()
        if body.get(VERSION) != "1.3.0":
            raise LaunchRefused(_("bookchat takes LTI 1.3.0 launches, not version “%(version)s”."),
                                version=str(body.get(VERSION))[:20])
        if body.get(MESSAGE_TYPE) not in HANDLED:
            raise LaunchRefused(_("bookchat does not handle the message type “%(type)s”."),
                                type=str(body.get(MESSAGE_TYPE))[:60])
        if not body.get(ROLES) and body.get(MESSAGE_TYPE) != PRIVACY:
            raise LaunchRefused(_("The launch names no role in the course: bookchat cannot tell a student from "
                                  "staff."), status=403)
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
    """The launch ``request`` posts, validated, or ``LaunchRefused`` (with the launch's locale once verified)."""
    ensure_key()
    launch = MessageLaunch(request, ToolConfig(), launch_data_storage=storage.DatabaseLaunchStorage())
    launch.set_launch_id("lti1p3-launch-" + str(uuid.uuid4()))
    try:
        launch.validate()
    except Exception as exc:  # a malformed token reaches pyjwt's and requests' own errors
        refusal = exc if isinstance(exc, LaunchRefused) else (
            LaunchRefused(_("The launch could not be verified: %(reason)s."), reason=str(exc))
            if isinstance(exc, LtiException) else
            LaunchRefused(_("The launch could not be verified (%(error)s)."), error=type(exc).__name__))
        # the token's body as read (pylti1p3's _get_jwt_body would validate the launch again, after a failure)
        refusal.locale = locale_of(launch._jwt.get("body") or {}) if launch.verified else ""  # noqa: SLF001
        raise refusal from None
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
        raise LaunchRefused(_("This course opens the book “%(bound)s” only, not “%(wanted)s”."), status=403,
                            bound=bound.slug, wanted=wanted[:64])
    slug = wanted or (bound.slug if bound is not None else "")
    if not slug:
        if body.get(MESSAGE_TYPE) in (DEEP_LINK, PRIVACY):
            return None
        raise LaunchRefused(_("No book is set for this course: the instructor picks one when adding bookchat."), 404)
    book = Book.objects.roots().filter(slug=slug).first()
    if book is None:
        raise LaunchRefused(_("There is no book “%(book)s” here: ask the course staff to pick it again."), 404,
                            book=slug[:64])
    return book


def is_staff(roles: list[str]) -> bool:
    return any(role.endswith(STAFF_ROLES) for role in roles or [])


def is_learner(roles: list[str]) -> bool:
    return any(role.endswith(LEARNER_ROLES) for role in roles or [])
