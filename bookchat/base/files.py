"""A private file written whole or not at all: under a temporary name beside its destination (``.NAME.PID.partial``,
mode 600), synced to disk, then renamed over it, so the destination never holds half a file and a failure leaves
nothing behind. The secret key files and backup archives (which hold the audit trail) are written so."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

PARTIAL_SUFFIX = ".partial"


@contextlib.contextmanager
def replacing_privately(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; ``path`` is replaced once the block ends without an
    error, and left as it was (the partial file removed) when it raises."""
    partial = path.with_name(f".{path.name}.{os.getpid()}{PARTIAL_SUFFIX}")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
