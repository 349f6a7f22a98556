"""One error family for bookchat: a code and a human message that each edge renders its own way."""

from __future__ import annotations


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
        return {"error": self.code, "message": self.message, "field": self.field}


class NotFound(RequestError):
    code = "not_found"
    status = 404


class DeadlineExceeded(RequestError):
    """The request's time budget ran out; the API answers 504 and never a half answer."""

    code = "timeout"
    status = 504
