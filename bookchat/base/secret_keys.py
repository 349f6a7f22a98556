"""The secret key bookchat generates into the data folder when ``BOOKCHAT_SECRET_KEY`` is unset, and the previous
keys kept beside it while a rotation's overlap lasts.

``DATA_DIR/secret_key`` holds the key; ``DATA_DIR/secret_key_fallbacks`` the previous ones, one a line, newest
first; both mode 600 and replaced whole (written under another name, then renamed), never edited in place. The
settings read both (``SECRET_KEY``, and ``SECRET_KEY_FALLBACKS`` after ``BOOKCHAT_SECRET_KEY_FALLBACKS``);
``manage.py secretkey`` rotates the key, ends the overlap and says where the keys come from; a backup made with
``--with-secrets`` carries both files' keys.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from bookchat.base.errors import BookchatError
from bookchat.base.files import replacing_privately

KEY_FILE = "secret_key"
FALLBACKS_FILE = "secret_key_fallbacks"
_LOCK_FILE = ".secret_key.lock"
# What the key signs is read back by every web and worker process: all of them load the keys when they start.
RESTART = ("restart all of this install's bookchat processes together (`manage.py serve`: the web server and the "
           "task workers, whichever --role)")
MANUAL_STEPS = "the manual's Security page, \"Rotate the secret key\""


class SecretKeyError(BookchatError):
    """``status``: the exit status ``manage.py secretkey`` ends with (2: refused, nothing changed; 1: failed)."""

    code = "secret_key_failed"

    def __init__(self, message: str, *, code: str | None = None, status: int = 1):
        super().__init__(message, code=code)
        self.status = status


def new_key() -> str:
    return secrets.token_urlsafe(50)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, mode 600, whole or not at all (``bookchat.base.files``)."""
    with replacing_privately(path) as file:
        file.write(text.encode())


def generated_key(data_dir: Path) -> str:
    """The key in ``data_dir``'s key file, created (mode 600) the first time."""
    key_file = data_dir / KEY_FILE
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        data_dir.mkdir(parents=True, exist_ok=True)
    key = new_key()
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first
        return key_file.read_text().strip()
    with os.fdopen(fd, "w") as file:
        file.write(key)
    return key


def split_keys(text: str, separator: str | None = None) -> list[str]:
    """The keys of a comma-separated variable (``separator=","``) or of the fallbacks file (one a line), in order,
    each once."""
    parts = text.split(separator) if separator else text.splitlines()
    return list(dict.fromkeys(key.strip() for key in parts if key.strip()))


def file_fallbacks(data_dir: Path) -> list[str]:
    try:
        return split_keys((data_dir / FALLBACKS_FILE).read_text())
    except FileNotFoundError:
        return []


def fallbacks(data_dir: Path, from_environment: str) -> list[str]:
    """``SECRET_KEY_FALLBACKS``: ``BOOKCHAT_SECRET_KEY_FALLBACKS``'s keys, then the fallbacks file's."""
    return list(dict.fromkeys(split_keys(from_environment, ",") + file_fallbacks(data_dir)))


def write_fallbacks(data_dir: Path, keys: list[str]) -> None:
    write_private(data_dir / FALLBACKS_FILE, "".join(f"{key}\n" for key in dict.fromkeys(keys)))


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """One change of the key files at a time (two rotations at once would each keep only their own old key)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / _LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _refuse_operator_key(key_from_environment: str) -> None:
    if key_from_environment:
        raise SecretKeyError("BOOKCHAT_SECRET_KEY is set, so the operator owns the key and bookchat doesn't change "
                             f"it: rotate it where it is set, as {MANUAL_STEPS} says", code="operator_key",
                             status=2)


@dataclass
class KeyChange:
    action: str
    key_file: str
    fallbacks_file: str
    fallbacks_in_file: int
    restart: str

    def as_dict(self) -> dict:
        return asdict(self)


def rotate(data_dir: Path, *, key_from_environment: str) -> KeyChange:
    """A new generated key; the one it replaces goes first in the fallbacks file (written before the key, so a
    failure between the two leaves the old key both in force and accepted). Refused when the environment sets the
    key."""
    _refuse_operator_key(key_from_environment)
    with _locked(data_dir):
        old = generated_key(data_dir)
        kept = [old] + file_fallbacks(data_dir)
        write_fallbacks(data_dir, kept)
        write_private(data_dir / KEY_FILE, new_key())
    return KeyChange("rotated", str(data_dir / KEY_FILE), str(data_dir / FALLBACKS_FILE), len(dict.fromkeys(kept)),
                     RESTART)


def drop_fallbacks(data_dir: Path) -> KeyChange:
    """End the overlap: the fallbacks file is removed (``BOOKCHAT_SECRET_KEY_FALLBACKS`` is the operator's)."""
    with _locked(data_dir):
        dropped = len(file_fallbacks(data_dir))
        (data_dir / FALLBACKS_FILE).unlink(missing_ok=True)
    return KeyChange("dropped" if dropped else "nothing_to_drop", str(data_dir / KEY_FILE),
                     str(data_dir / FALLBACKS_FILE), dropped, RESTART if dropped else "")


def status(data_dir: Path, *, key_from_environment: str, fallbacks_from_environment: str) -> dict:
    """Where the key comes from and how many fallbacks from where; never a key."""
    key_file, fallbacks_file = data_dir / KEY_FILE, data_dir / FALLBACKS_FILE
    private = [str(p) for p in (key_file, fallbacks_file) if p.exists() and p.stat().st_mode & 0o077]
    return {"key_source": "BOOKCHAT_SECRET_KEY" if key_from_environment else "data folder",
            "key_file": str(key_file), "key_file_exists": key_file.exists(),
            "fallbacks": {"BOOKCHAT_SECRET_KEY_FALLBACKS": len(split_keys(fallbacks_from_environment, ",")),
                          "data folder": len(file_fallbacks(data_dir))},
            "fallbacks_file": str(fallbacks_file), "readable_by_others": private}
