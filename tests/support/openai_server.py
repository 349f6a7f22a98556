"""A small OpenAI-compatible HTTP server for tests, on 127.0.0.1 with a free port.

``/v1/embeddings`` answers with deterministic vectors (hashed bag of words, unit length),
so texts that share words are close. ``server.fail_next`` makes the next requests fail
with HTTP 500, to exercise error handling through the real ``openai`` client.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DEFAULT_DIMENSIONS = 64


def hashed_embedding(text: str, dimensions: int) -> list[float]:
    vector = np.zeros(dimensions, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dimensions] += 1.0 if digest[4] % 2 else -1.0
    norm = np.linalg.norm(vector)
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return (vector / norm).tolist()


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAIServer

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        payload = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append((self.path, payload))
        if self.server.fail_next > 0:
            self.server.fail_next -= 1
            self._send(500, {"error": {"message": "test server told to fail", "type": "server_error"}})
            return
        if self.path.rstrip("/") != "/v1/embeddings":
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        inputs = payload.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dims = int(payload.get("dimensions") or self.server.dimensions)
        data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t, dims)}
                for i, t in enumerate(inputs)]
        tokens = sum(len(t.split()) for t in inputs)
        self._send(200, {"object": "list", "data": data, "model": payload.get("model", ""),
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


class FakeOpenAIServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.dimensions = dimensions
        self.fail_next = 0
        self.requests: list[tuple[str, dict]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
