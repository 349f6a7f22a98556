"""The reader's language: which interface languages bookchat speaks, and which one a request gets.

Decided: the student-facing pages (the chat page, its answers, hand-off pages, /privacy/, the LTI messages, the
unavailable page) follow the reader: the language chosen with the page's switch (Django's ``set_language``, kept in
its cookie), else the language of the LMS that launched the session (LTI's ``launch_presentation`` locale, kept in the
session: a reader who arrives from a course gets the course's language), else the browser's Accept-Language, else
English. The admin, the API and MCP stay in English: the
admin's many customised strings are English only, and the API's errors are codes a client matches, with English
messages; what an answer says in the question's language is the pipeline's to decide, from the question itself.
A language without a catalogue, or not in ``LANGUAGES``, falls back to English.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.utils import translation
from django.utils.cache import patch_vary_headers

# Lower-case BCP 47 base tags, as the API and the pipeline name them; Django's name for Chinese is zh-hans.
LANGUAGES = [
    ("en", "English"), ("es", "Español"), ("fr", "Français"), ("pt", "Português"), ("hi", "हिन्दी"),
    ("ur", "اردو"), ("ar", "العربية"), ("zh-hans", "中文"),
]
RIGHT_TO_LEFT = {"ur", "ar"}
# Paths (without the sub-path prefix) that stay in English whatever the reader's browser says; but a hand-off's
# status URL, under the API, is a student's page when a browser asks for it (Accept: text/html).
ENGLISH_ONLY = ("/admin/", "/api/", "/mcp", "/metrics")
STUDENT_PAGES_UNDER_API = "/api/v1/handoffs/"
# The session's key for the language of the LMS launch that started it (chat.lti sets it).
LAUNCH_LANGUAGE = "bookchat_launch_language"


def base_tag(django_code: str) -> str:
    """Django's language code as the API's base tag: ``zh-hans`` → ``zh``."""
    return django_code.split("-")[0].lower()


def django_code(tag: str) -> str | None:
    """A reader's language tag (``es``, ``es-MX``, ``zh``, ``zh-Hans-CN``) as one of ``LANGUAGES``, or None."""
    codes = {code for code, _ in settings.LANGUAGES}
    tag = (tag or "").strip().lower().replace("_", "-")
    if tag in codes:
        return tag
    base = tag.split("-")[0]
    if base == "zh" and "zh-hans" in codes and not any(part in ("hant", "tw", "hk", "mo") for part in tag.split("-")):
        return "zh-hans"
    return base if base in codes else None


def switched(request) -> str | None:
    """The language the reader chose with the page's switch (its cookie), if it is one of ``LANGUAGES``."""
    return django_code(request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) or "")


def reader_language(request) -> str:
    """The reader's language for ``request``: the switch's cookie, else the launching LMS's (``LAUNCH_LANGUAGE``,
    read only when there is a session to read), else Django's choice from Accept-Language, else English."""
    chosen = switched(request)
    if chosen:
        return chosen
    if settings.SESSION_COOKIE_NAME in request.COOKIES and hasattr(request, "session"):
        launched = django_code(request.session.get(LAUNCH_LANGUAGE) or "")
        if launched:
            return launched
    return translation.get_language_from_request(request)


def speak(request, code: str) -> None:
    """``code`` (one of ``LANGUAGES``) for the rest of this response, as the middleware would have chosen it."""
    translation.activate(code)
    request.LANGUAGE_CODE = translation.get_language()


def direction(django_code_: str) -> str:
    return "rtl" if base_tag(django_code_) in RIGHT_TO_LEFT else "ltr"


@functools.lru_cache(maxsize=32)
def script_messages(code: str) -> dict[str, str]:
    """The page's and the widget's script strings (the ``djangojs`` catalogue) in ``code``, translated ones only:
    what a script lacks it shows in English."""
    if base_tag(code) == "en":
        return {}
    catalogue = translation.trans_real.DjangoTranslation(code, domain="djangojs")
    return {msgid: text for msgid, text in catalogue._catalog.items()  # noqa: SLF001 (Django's JSONCatalog reads it too)
            if isinstance(msgid, str) and msgid and text}


def first_spoken(tags: str) -> str:
    """The first of the reader's comma-separated language tags (``sw,es-MX,en``: best first, as the widget sends
    navigator.languages) that is one of ``LANGUAGES``, as Django names it; English when none is (or ``tags`` is not a
    list of tags: over 8 of them, or one over 35 characters, counts as none)."""
    candidates = tags.split(",") if isinstance(tags, str) and len(tags) <= 300 else []
    for tag in candidates[:8]:
        code = django_code(tag) if len(tag.strip()) <= 35 else None
        if code:
            return code
    return "en"


def interface_catalogue(tags: str) -> dict:
    """What the widget loads for the reader's languages (``first_spoken``): the language it got, its direction, its
    messages and the languages a reader may switch to, each named in itself."""
    code = first_spoken(tags)
    return {"language": base_tag(code), "dir": direction(code), "messages": script_messages(code),
            "languages": [{"code": base_tag(c), "name": name, "dir": direction(c)} for c, name in settings.LANGUAGES]}


class ReaderLanguageMiddleware:
    """Activates the reader's language on student-facing paths, English elsewhere (the module's docstring says why);
    after the session middleware, so that a later language switch could read it too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path_info
        english_only = path.startswith(ENGLISH_ONLY) and not (
            path.startswith(STUDENT_PAGES_UNDER_API) and "text/html" in request.headers.get("Accept", ""))
        speak(request, "en" if english_only else reader_language(request))
        response = self.get_response(request)
        if not english_only:
            patch_vary_headers(response, ("Accept-Language", "Cookie"))
            response.headers.setdefault("Content-Language", request.LANGUAGE_CODE)
        translation.deactivate()
        return response
