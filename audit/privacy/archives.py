"""A learner's rows in the audit archives (``audit.retention`` writes them under the data folder's ``archive/``, one
gzip JSON Lines file per purge): read for an export, erased in place for an erasure.

An archive that holds a learner's rows is written again whole under a temporary name and renamed over the old one,
so a failure leaves the old archive as it was (the erasure then fails, and may be run again).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

from audit.retention import archive_dir, read_archive


def archive_files() -> list[Path]:
    directory = archive_dir()
    return sorted(directory.glob("*.jsonl.gz")) if directory.is_dir() else []


def learner_rows(learner) -> list[dict]:
    """Each archived row of ``learner``, with the name of its archive."""
    return [{"archive": path.name, "row": row} for path in archive_files() for row in read_archive(path)
            if learner.holds(row)]


def erase(learner, *, scrub: Callable[[dict, dict], dict]) -> tuple[int, list[str]]:
    """Rewrite every archive holding ``learner``'s rows with those rows passed through ``scrub`` (which shares one
    map of old to new conversation ids); how many rows, and the archives rewritten."""
    erased, rewritten, sessions = 0, [], {}
    for path in archive_files():
        rows = read_archive(path)
        mine = [learner.holds(row) for row in rows]
        if not any(mine):
            continue
        rows = [scrub(row, sessions) if held else row for row, held in zip(rows, mine, strict=True)]
        _replace(path, rows)
        erased += sum(mine)
        rewritten.append(path.name)
    return erased, rewritten


def _replace(path: Path, rows: list[dict]) -> None:
    temporary = path.with_name(f".{path.name}.erasing")
    body = b"".join(json.dumps(row, default=str, ensure_ascii=False).encode() + b"\n" for row in rows)
    with open(temporary, "wb") as raw:
        raw.write(gzip.compress(body, mtime=0))
        raw.flush()
        os.fsync(raw.fileno())
    os.replace(temporary, path)
