"""One error family for bookchat: a code and a human message that each edge renders its own way.

Below the channels nothing knows HTTP: a failure is a ``BookchatError`` (``RequestError`` carries the status
its code is answered with), a database outage, or a bug. ``failure`` says which, in the one error body every
channel sends (``chat.channels.error_responses`` adds DRF's own exceptions for the API); ``exit_command`` is how
a management command says it.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, NoReturn

from django.db import InterfaceError, OperationalError

if TYPE_CHECKING:
    from django.core.management.base import BaseCommand

# psycopg's "connection refused / terminated / closed" errors, as Django raises them: an outage, not a bug.
DATABASE_ERRORS = (OperationalError, InterfaceError)
DATABASE_UNAVAILABLE = "bookchat's database is unavailable at the moment; try again shortly"
INTERNAL_ERROR = "bookchat failed unexpectedly; the error was logged"


class BookchatError(Exception):
    """A failure the user can act on. ``code`` is stable and machine-readable."""

    code = "error"

    def __init__(self, message: str, *, code: str | None = None, file: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.file = file
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}"

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "message": self.message}


class ConfigurationError(BookchatError):
    code = "configuration"


class ParseError(BookchatError):
    """A source file cannot be read as Markdown/MDX; names the file and line."""

    code = "parse_error"


class EmbedderMismatch(BookchatError):
    """A book indexed with one embedder is used with another."""

    code = "embedder_mismatch"


class RequestError(BookchatError):
    """A request that cannot be answered as sent. ``status`` is the HTTP status the API answers with and
    ``field`` names the offending input, when there is one."""

    code = "invalid_request"
    status = 400

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 status: int | None = None):
        super().__init__(message, code=code)
        self.field = field
        if status:
            self.status = status

    def as_response(self) -> dict:
        return error_body(self.code, self.message, self.field)


class NotFound(RequestError):
    code = "not_found"
    status = 404


class DeadlineExceeded(RequestError):
    """The request's time budget ran out; the API answers 504 and never a half answer."""

    code = "timeout"
    status = 504


def error_body(code: str, message: str, field: str | None = None) -> dict:
    """The JSON body of every error bookchat answers, on every channel."""
    return {"error": code, "message": message, "field": field}


def failure(exc: BaseException) -> tuple[int, dict]:
    """The status and body a failure below the channels is answered with: a ``RequestError`` its own, the
    database down 503 ``database_unavailable``, another ``BookchatError`` (an embedder mismatch, a bad setting)
    503 with its code, anything else 500 ``internal_error``."""
    if isinstance(exc, RequestError):
        return exc.status, exc.as_response()
    if isinstance(exc, DATABASE_ERRORS):
        return 503, error_body("database_unavailable", DATABASE_UNAVAILABLE)
    if isinstance(exc, BookchatError):
        return 503, error_body(exc.code, exc.message)
    return 500, error_body("internal_error", INTERNAL_ERROR)


def exit_command(command: BaseCommand, exc: BookchatError | OperationalError | InterfaceError, *, as_json: bool,
                 status: int | None = None) -> NoReturn:
    """Ends a management command that failed: with ``--json`` one object (``{"error": code, "message": …}``) on
    its stdout, else ``<command>: <message>`` on its stderr; a database outage is ``database_unavailable``. The
    exit status is ``status``, else the error's own (``status`` on it), else 1."""
    if isinstance(exc, DATABASE_ERRORS):
        exc = BookchatError(f"the database is unavailable: {str(exc).strip()}", code="database_unavailable")
    if as_json:
        command.stdout.write(json.dumps({"error": exc.code, "message": exc.message}, ensure_ascii=False))
    else:
        command.stderr.write(f"{type(command).__module__.rpartition('.')[2]}: {exc.message}")
    sys.exit(status if status is not None else getattr(exc, "status", 1))
