"""The wheel built from a copy of the checkout and installed into a fresh virtualenv, on a thread from the start of
the session (``start``): test_packaging's slow half, ~30 s of building and of pip, runs beside the node drill's
waits instead of after them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOT_SOURCE = ("var", ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache",
              ".hypothesis")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path  # the fresh virtualenv the wheel is installed in

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


def build_and_install(base: Path) -> Installed:
    """Built from a copy of the checkout, so the build's own folders (build/, *.egg-info) stay out of it."""
    source = base / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    run(sys.executable, "-m", "build", "--wheel", "--outdir", base / "dist", source)
    (wheel,) = (base / "dist").glob("bookchat-*.whl")
    venv = base / "venv"
    run(sys.executable, "-m", "venv", venv)
    # --no-compile: Python compiles what the checks import; pip would byte-compile every dependency first.
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        wheel)
    return Installed(wheel, venv)


def start() -> tuple[Future, Path]:
    """The build and install, begun on a thread (its future), and the folder it works in (remove it after)."""
    base = Path(tempfile.mkdtemp(prefix="bookchat-wheel-"))
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheel").submit(build_and_install, base), base
