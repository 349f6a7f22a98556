"""Running a Docusaurus config with node: ``site_config.mjs`` (shipped beside this module) loads it as
Docusaurus does and prints its JSON-able values; ``ingestion.reading.site_config`` makes sense of them.

Decisions:
- Node runs in a session of its own with the site as cwd, a minimal environment (PATH, HOME, temp and
  locale variables; no secrets, no NODE_OPTIONS) and ``NODE_ENV=production`` as for ``docusaurus build``.
- When node exits, or at the deadline, its whole process group is killed: a process the config started
  (a dev server, a watcher) would otherwise keep the pipes, and the read, open for as long as it runs.
- Only the last line of stdout counts; the helper sends the config module's own output to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

HELPER = Path(__file__).with_name("site_config.mjs")
_ENV_KEEP = ("PATH", "HOME", "USERPROFILE", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP", "LANG", "LC_ALL")
_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class NodeRun:
    config: dict | None  # the config's raw values, when node gave them
    error: str = ""  # else why not, in a few words: "node could not load it: Cannot find package 'x' …"
    not_a_config: bool = False  # the module ran but gives no object (``error`` says what it gives)
    no_node: bool = False  # the node executable is not there


def run_config(node: str, config_file: Path, *, timeout: float) -> NodeRun:
    """Run ``config_file`` with the ``node`` executable, from the config's folder, for at most ``timeout`` s."""
    env = {key: os.environ[key] for key in _ENV_KEEP if key in os.environ}
    env |= {"NODE_ENV": "production", "BABEL_ENV": "production", "NO_COLOR": "1"}
    config_file = Path(config_file).absolute()
    try:
        process = subprocess.Popen([node, str(HELPER), str(config_file)], cwd=config_file.parent, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
    except FileNotFoundError:
        return NodeRun(None, f"node was not found at {node}", no_node=True)
    except OSError as exc:
        return NodeRun(None, f"node can't start: {exc}")
    stdout, stderr, timed_out = _communicate(process, timeout)
    if timed_out:
        return NodeRun(None, f"node did not finish loading it in {timeout:g} s")
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        detail = _first_line(stderr.decode("utf-8", "replace")) or f"exit status {process.returncode}"
        return NodeRun(None, f"node could not load it: {detail}")
    if result.get("ok") and isinstance(result.get("config"), dict):
        return NodeRun(result["config"])
    error = str(result.get("error") or "no error message")
    if result.get("stage") == "shape":
        return NodeRun(None, error, not_a_config=True)
    return NodeRun(None, f"node could not load it: {error}")


def _communicate(process: subprocess.Popen, timeout: float) -> tuple[bytes, bytes, bool]:
    """``(stdout, stderr, timed_out)``, the process group killed once node is done or out of time."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            stdout, stderr = process.communicate(timeout=_POLL_SECONDS)
            timed_out = False
            break
        except subprocess.TimeoutExpired:
            timed_out = process.poll() is None and time.monotonic() > deadline
            if process.poll() is None and not timed_out:
                continue
            _kill_group(process)  # node is done, or out of time: whatever it started goes too
            try:
                stdout, stderr = process.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes
                process.kill()
                process.stdout.close()
                process.stderr.close()
                stdout, stderr = b"", b""
            break
    _kill_group(process)
    return stdout, stderr, timed_out


def _kill_group(process: subprocess.Popen) -> None:
    if hasattr(os, "killpg"):
        with contextlib.suppress(OSError):  # already gone
            os.killpg(process.pid, signal.SIGKILL)
    elif process.poll() is None:
        process.kill()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:500]
