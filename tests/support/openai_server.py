"""A small OpenAI-compatible HTTP server for tests, on 127.0.0.1 with a free port.

``/v1/embeddings`` answers with deterministic vectors (hashed bag of words, unit length),
so texts that share words are close. ``server.fail_next`` makes the next requests fail
with HTTP 500, to exercise error handling through the real ``openai`` client.

``/v1/chat/completions`` (streamed or not) answers from the prompt it is given: by default
the first sentence of excerpt [1], cited ``[1]``. ``server.chat_mode`` changes that:
``"answer"`` (default), ``"not_in_book"`` (replies NOT_IN_BOOK), ``"fabricated"`` (cites [9],
which was never retrieved), ``"unsupported"`` (cites [1] for made-up sentences),
``"malformed"`` (a stream of broken JSON), ``"error"`` (HTTP 500), ``"slow"`` (waits
``server.delay`` seconds before the first token), ``"hang"`` (streams a few words, then stalls
``server.delay`` seconds with the connection open), ``"drop"`` (streams a few words, then closes the
connection without finishing), ``"garbage"`` (HTTP 200 with an HTML page instead of a stream),
``"wrong_schema"`` (JSON events that are not chat chunks) and ``"empty_choices"`` (chunks whose
``choices`` are empty). ``server.reply`` overrides the text, and ``"template"`` plays a model that
fell for a prompt injection: it answers ``server.reply_template`` with ``{first}`` (that first
sentence of excerpt [1], outside its code blocks) and ``{system}`` (the system prompt it got) filled in.

A stream asked for ``stream_options.include_usage`` ends, as OpenAI's does, with a chunk of no choices carrying
``usage``: the prompt's words, and twice the answer's words as its completion tokens (so that a count taken from
the stream's pieces would differ). ``server.refuse_stream_options`` plays a strict server that answers such a
request HTTP 400 "Unrecognized request argument supplied: stream_options".
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import sys
import threading
import time
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
        if self.path.rstrip("/") == "/v1/chat/completions":
            self._chat(payload)
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


    def _chat_reply(self, payload: dict) -> str:
        server = self.server
        if server.reply is not None:
            return server.reply
        prompt = "\n".join(m.get("content", "") for m in payload.get("messages", []) if m.get("role") == "user")
        match = re.search(r"^\[1\] \([^\n]*\)\n(.+?)(?:\n\n\[2\] |\n\nThe reader|\Z)", prompt, re.S | re.M)
        excerpt = match.group(1) if match else ""
        # A code block's lines are not sentences: a model would say the prose around it.
        excerpt = re.sub(r"^\s*(`{3,}|~{3,}).*?^\s*\1\s*$", "", excerpt, flags=re.S | re.M)
        prose = [line for line in excerpt.splitlines()
                 if line.strip() and not line.lstrip().startswith(("#", "`", "|"))]
        if not prose:  # an excerpt that is only a table: a model would say its first row in words
            rows = [line.strip().strip("|") for line in excerpt.splitlines() if line.lstrip().startswith("|")
                    and not re.fullmatch(r"[\s|:-]+", line)]
            prose = [" ".join(cell.strip().strip("`") for cell in rows[1].split("|")) + "."] if len(rows) > 1 else []
        first = re.split(r"(?<=[.!?])\s", " ".join(prose).strip())[0] if prose else "The book says nothing"
        mode = server.chat_mode
        if mode == "not_in_book":
            return "NOT_IN_BOOK"
        if mode == "template":
            system = "\n".join(m.get("content", "") for m in payload.get("messages", []) if m.get("role") == "system")
            return server.reply_template.replace("{first}", first).replace("{system}", system)
        if mode == "fabricated":
            return f"{first} [1] It also ships a quantum flux capacitor for every reader. [9]"
        if mode == "unsupported":
            return ("Penguins migrate to Jupiter every winter [1]. Volcanoes bake bread for sailors [1]. "
                    "The moon is made of green cheese according to astronomers [1].")
        return f"{first} [1]"

    def _chat(self, payload: dict) -> None:
        server = self.server
        mode = server.chat_mode
        if server.refuse_stream_options and "stream_options" in payload:
            self._send(400, {"error": {"message": "Unrecognized request argument supplied: stream_options",
                                       "type": "invalid_request_error", "param": None, "code": None}})
            return
        if mode == "error":
            self._send(500, {"error": {"message": "test server told to fail", "type": "server_error"}})
            return
        if mode == "slow":
            time.sleep(server.delay)
        if mode == "garbage":  # what a misconfigured proxy in front of the model might send
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        reply = self._chat_reply(payload)
        model = payload.get("model", "test-model")
        if not payload.get("stream"):
            self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": reply}}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if mode == "malformed":
            self.wfile.write(b"data: {this is not json\n\n")
            self.wfile.flush()
            return
        if mode in ("wrong_schema", "empty_choices"):
            event = {"result": reply} if mode == "wrong_schema" else {
                "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": []}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode() * 3 + b"data: [DONE]\n\n")
            self.wfile.flush()
            return
        words = re.findall(r"\S+\s*", reply)
        for sent, word in enumerate(words):
            if sent == 3 and mode == "hang":
                time.sleep(server.delay)
            if sent == 3 and mode == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)  # mid-answer, no finish_reason, no [DONE]
                return
            chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            if server.token_delay:
                time.sleep(server.token_delay)
        done = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\n".encode())
        if (payload.get("stream_options") or {}).get("include_usage"):
            prompt = sum(len(str(m.get("content", "")).split()) for m in payload.get("messages", []))
            usage = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": 2 * len(words),
                                              "total_tokens": prompt + 2 * len(words)}}
            self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        server.streams_finished += 1


class FakeOpenAIServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many answers streaming at once connect together (socketserver's default: 5)

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.dimensions = dimensions
        self.fail_next = 0
        self.requests: list[tuple[str, dict]] = []
        self.chat_mode = "answer"
        self.reply: str | None = None
        self.reply_template = ""
        self.delay = 0.0
        self.token_delay = 0.0
        self.refuse_stream_options = False
        self.streams_finished = 0  # streamed answers written to their end ([DONE] sent)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a hanging answer has closed its end: expected here, not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def reset(self) -> None:
        self.fail_next, self.chat_mode, self.reply, self.delay, self.token_delay = 0, "answer", None, 0.0, 0.0
        self.reply_template, self.refuse_stream_options, self.streams_finished = "", False, 0
        self.requests.clear()

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()
