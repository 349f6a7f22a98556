"""A sync as plain text for a CI log (``text``: ``file:line: message``, as compilers write; ``github``: GitHub
Actions' workflow commands, which annotate the files of a pull request), and the HTTP status it is answered with,
so that ``curl --fail`` fails a CI step. It reads the sync as the JSON answer states it
(``ingestion.uploads.publishing.sync_summary``), so the two outputs say the same.
"""

from __future__ import annotations


def outcome_status(sync: dict) -> int:
    """The HTTP status a text report of ``sync`` is answered with, so that ``curl --fail`` fails a CI step."""
    if sync["status"] in ("queued", "running"):
        return 202
    if sync["status"] == "failed" or (sync["report"] or {}).get("errors"):
        return 422
    return 200


def sync_text(sync: dict, *, github: bool, source_dir: str = "") -> str:
    """``sync`` as lines for a CI log: a summary, then each page error and warning with its file and line."""
    prefix = f"{source_dir.strip('/')}/" if source_dir.strip("/") else ""
    lines = [_summary(sync)]
    report = sync["report"] or {}
    if github:
        lines[0] = f"::notice title=bookchat::{_escape_data(lines[0])}"
    for kind in ("errors", "warnings"):
        for issue in report.get(kind, ()):
            lines.append(_issue_line(issue, kind, github=github, prefix=prefix))
    if sync["error"]:
        message = f"sync failed ({sync['error']['code']}): {sync['error']['message']}"
        lines.append(f"::error title=bookchat::{_escape_data(message)}" if github else f"error: {message}")
    return "\n".join(lines) + "\n"


def _summary(sync: dict) -> str:
    what = "dry run" if sync["dry_run"] else "sync"
    head = f"bookchat {what} {sync['sync']} of {sync['book']}: {sync['status']}"
    if sync["revision"]:
        head += f" (revision {sync['revision']})"
    report = sync["report"]
    if report is None:
        return head + (f"; {sync['stage']}" if sync["stage"] else "")
    pages, passages = report["pages"], report["passages"]
    verb = "would be " if sync["dry_run"] else ""
    return (f"{head}; pages {verb}added {pages['added']}, changed {pages['changed']}, unchanged {pages['unchanged']}, "
            f"removed {pages['removed']}, failed {pages['failed']}; passages {verb}embedded {passages['embedded']}; "
            f"{len(report['errors'])} errors, {len(report['warnings'])} warnings")


def _issue_line(issue: dict, kind: str, *, github: bool, prefix: str) -> str:
    file = f"{prefix}{issue['file']}" if issue.get("file") else None
    message = issue["message"]
    if github:
        command = "error" if kind == "errors" else "warning"
        properties = ",".join(part for part in (
            f"file={_escape_property(file)}" if file else "",
            f"line={int(issue['line'])}" if issue.get("line") else "") if part)
        return f"::{command}{' ' + properties if properties else ''}::{_escape_data(message)}"
    where = f"{file}:{issue['line']}: " if file and issue.get("line") else f"{file}: " if file else ""
    return f"{where}{'error' if kind == 'errors' else 'warning'}: {message}"


def _escape_data(text: str) -> str:
    """A workflow command's message: GitHub's escapes for ``%``, CR and LF."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")

