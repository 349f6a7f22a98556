"""The LTI endpoints: OIDC login initiation, the launch (a resource link, a deep link, the data-privacy message), the
tool's JWKS and the deep link's pick. Each refusal is a page that says why (``LaunchRefused``), with nothing stored.
The pages speak the launch's language (its ``launch_presentation`` locale, when bookchat has a catalogue for it) unless
the reader chose one with the page's switch; the session a launch starts keeps it for the pages that follow."""

from __future__ import annotations

import secrets
from urllib.parse import urlencode, urlsplit

from django.contrib.auth import login
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from lti_tool.models import LtiLaunch, LtiRegistration
from lti_tool.views import jwks as tool_jwks
from pylti1p3.deep_link_resource import DeepLinkResource

from bookchat.base import languages
from bookchat.base.conf import setting
from bookchat.base.security import LTI_VERIFIED_SESSION
from chat.channels.access import PAGE_BOUND_BOOK, PAGE_LEARNER, PAGE_SESSION_FLAG
from chat.lti import identity, storage
from chat.lti import launch as launching
from chat.lti.framing import LAUNCH_SESSION
from chat.lti.models import LtiPlatform
from ingestion.models import Book
from ingestion.reading.outline import book_outline


def refused(request, exc: launching.LaunchRefused):
    in_launch_language(request, exc.locale)
    return render(request, "bookchat/lti_message.html", {
        "title": _("This launch from your course did not work"),
        "paragraphs": [exc.message, _("Nothing was stored. Go back to your course and open bookchat again; if this "
                                      "happens again, tell your course staff what this page says.")]},
        status=exc.status)


def in_launch_language(request, locale: str, *, keep: bool = False) -> None:
    """This response in the launch's ``locale`` (one bookchat has a catalogue for), unless the reader chose a
    language with the switch; ``keep`` it in the session for the pages that follow (a session the launch started)."""
    code = languages.django_code(locale)
    if code is None:
        return
    if keep:
        request.session[languages.LAUNCH_LANGUAGE] = code
    if not languages.switched(request):
        languages.speak(request, code)


def _param(request, name: str) -> str:
    return str((request.POST if request.method == "POST" else request.GET).get(name, "")).strip()


def _ours(request, url: str) -> bool:
    """``url`` is one of bookchat's launch URLs (the platform sends it as ``target_link_uri``)."""
    ours = {reverse("lti-launch"), reverse("lti-deep-link")}
    parts = urlsplit(url)
    return parts.netloc == request.get_host() and parts.path in ours


@csrf_exempt
@xframe_options_exempt
@require_http_methods(["GET", "POST"])
def oidc_login(request):
    """Third-party initiated login: remember a state and a nonce (the database), send the browser to the platform."""
    iss, client_id, target = _param(request, "iss"), _param(request, "client_id"), _param(request, "target_link_uri")
    registrations = LtiRegistration.objects.active().filter(issuer=iss)
    if client_id:
        registrations = registrations.filter(client_id=client_id)
    registration = registrations.first() if registrations.count() == 1 else None
    if registration is None:
        return refused(request, launching.LaunchRefused(
            gettext_lazy("This platform is not registered with bookchat (issuer “%(issuer)s”, client id "
                         "“%(client)s”)."), issuer=iss[:100], client=client_id[:100]))
    if not _param(request, "login_hint") or not _ours(request, target):
        return refused(request, launching.LaunchRefused(gettext_lazy(
            "The login request lacks a login hint or names a launch URL that is not bookchat's.")))
    storage.sweep()  # the logins abandoned at the platform's page: each new login clears those expired
    state, nonce = "state-" + secrets.token_urlsafe(24), secrets.token_urlsafe(32)
    storage.put(launching.state_key(state), {"nonce": nonce, "registration": registration.pk},
                storage.STATE_SECONDS)
    params = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
              "client_id": registration.client_id, "redirect_uri": target, "state": state, "nonce": nonce,
              "login_hint": _param(request, "login_hint")}
    if _param(request, "lti_message_hint"):
        params["lti_message_hint"] = _param(request, "lti_message_hint")
    return HttpResponseRedirect(f"{registration.auth_url}?{urlencode(params)}")


@csrf_exempt
@xframe_options_exempt
@require_POST
def launch(request):
    """The platform posts the launch here (and to ``deep-link``): validated, then a learner goes to the book's
    chat page, staff to the book's hand-offs, a deep link to the pick, a data-privacy message to what we keep."""
    try:
        lti_launch = launching.validate(request)
    except launching.LaunchRefused as exc:
        return refused(request, exc)
    body = lti_launch.get_launch_data()
    in_launch_language(request, launching.locale_of(body))
    platform = launching.platform_of(lti_launch.registration)
    message = body.get(launching.MESSAGE_TYPE)
    if message == launching.PRIVACY:
        return privacy(request)
    roles = body.get(launching.ROLES) or []
    if message == launching.DEEP_LINK:
        if not launching.is_staff(roles):
            return refused(request, launching.LaunchRefused(
                gettext_lazy("Only the course staff can add bookchat to a course."), 403))
        return deep_link_form(request, lti_launch, platform)
    book = launching.book_of(lti_launch.registration, body)
    if launching.is_staff(roles):
        return staff_landing(request, lti_launch, platform, book)
    if launching.is_learner(roles):
        return learner_landing(request, lti_launch, platform, book)
    return refused(request, launching.LaunchRefused(
        gettext_lazy("bookchat opens for learners and the course staff; the launch names neither role."), 403))


def _start_session(request, lti_launch: LtiLaunch, platform: LtiPlatform, role: str) -> None:
    request.session.flush()  # whatever the browser had before, the launch starts a session of its own
    request.session[LAUNCH_SESSION] = {"platform": platform.pk, "origins": platform.origins(), "role": role}
    in_launch_language(request, launching.locale_of(lti_launch.get_launch_data()), keep=True)


def learner_landing(request, lti_launch: LtiLaunch, platform: LtiPlatform, book: Book):
    if keeps_identity(platform):
        identity.lti_user(lti_launch, platform)
    _start_session(request, lti_launch, platform, "learner")
    request.session[PAGE_LEARNER] = identity.pseudonym(lti_launch.get_claim("iss"), lti_launch.get_claim("sub"))
    request.session[PAGE_BOUND_BOOK] = book.slug
    request.session[PAGE_SESSION_FLAG] = True
    query = {"book": book.slug}
    chapter = str((lti_launch.get_claim(launching.CUSTOM) or {}).get("chapter") or "").strip()
    if chapter:
        query["q"] = chapter[:200]  # the page opens on the chapter's sections
    return HttpResponseRedirect(f"{reverse('chat')}?{urlencode(query)}")


def keeps_identity(platform: LtiPlatform) -> bool:
    return platform.keep_identity or bool(setting("LTI_KEEP_IDENTITY"))


def staff_landing(request, lti_launch: LtiLaunch, platform: LtiPlatform, book: Book):
    user = identity.staff_user(lti_launch, platform, book)
    _start_session(request, lti_launch, platform, "staff")
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    if platform.trusted:
        request.session[LTI_VERIFIED_SESSION] = True  # the admin's second factor: the LMS vouched for them
    return HttpResponseRedirect(reverse("admin:audit_handoff_changelist"))


def deep_link_form(request, lti_launch: LtiLaunch, platform: LtiPlatform):
    deployment = str(lti_launch.get_launch_data().get(launching.DEPLOYMENT_ID) or "")
    bound = launching.bound_book(platform.registration, deployment)
    books = [bound] if bound is not None else list(Book.objects.roots().order_by("title", "slug"))
    chapters = []
    for book in books[:1]:
        chapters = [entry["chapter"] for entry in book_outline(book) if entry.get("chapter")]
    return render(request, "bookchat/lti_deep_link.html", {
        "launch_id": lti_launch.get_launch_id(), "books": books, "chapters": chapters})


@csrf_exempt
@xframe_options_exempt
@require_POST
def deep_link_pick(request):
    """The instructor's pick, sent back to the platform as an ``LtiDeepLinkingResponse`` (a form that posts itself).
    The launch id in the form is the proof of the deep-linking launch; it is used once."""
    launch_id = _param(request, "launch")
    data = storage.take(launch_id) if launch_id.startswith("lti1p3-launch-") else None
    if data is None or not launching.is_staff(data.get(launching.ROLES) or []):
        return refused(request, launching.LaunchRefused(gettext_lazy(
            "This deep-linking request is unknown, expired or already answered: add bookchat again from your "
            "course.")))
    in_launch_language(request, launching.locale_of(data))
    message_launch = launching.restored(request, launch_id, data)
    try:
        book = launching.book_of(message_launch.get_tool_conf().registration,
                                 {**data, launching.MESSAGE_TYPE: launching.RESOURCE,
                                  launching.CUSTOM: {"book": _param(request, "book")}})
    except launching.LaunchRefused as exc:
        return refused(request, exc)
    custom = {"book": book.slug}
    if _param(request, "chapter"):
        custom["chapter"] = _param(request, "chapter")[:200]
    resource = (DeepLinkResource().set_url(request.build_absolute_uri(reverse("lti-launch")))
                .set_custom_params(custom).set_title(_("Ask %(title)s") % {"title": book.title}))
    return LtiLaunch(message_launch).deep_link_response([resource])


@require_GET
def privacy_page(request):
    return privacy(request)


def privacy(request):
    """What bookchat keeps about a learner (the data-privacy launch, and a link anyone may open): the privacy page
    that audit's data inventory makes (``/privacy/``), one text for the LMS, the chat page and the manual."""
    return HttpResponseRedirect(reverse("privacy"))


@require_GET
def jwks(request):
    """The tool's public keys (django-lti's active ``Key`` rows): platforms verify bookchat's messages with them."""
    launching.ensure_key()
    return tool_jwks(request)


def tool_urls(base: str) -> dict:
    """The URLs an LMS administrator registers, absolute under ``base`` (``https://bookchat.example.org``)."""
    base = base.rstrip("/")
    return {"login_url": base + reverse("lti-login"), "launch_url": base + reverse("lti-launch"),
            "jwks_url": base + reverse("lti-jwks"), "deep_link_url": base + reverse("lti-deep-link"),
            "privacy_url": base + reverse("lti-privacy"), "domain": urlsplit(base).netloc}
