"""A local HTTP server speaking the chat-completions protocol, scripted per call, for testing ``builders.llm``.

``script(body, call_index) -> Reply`` decides each answer (status, content, raw body, headers, delay), so a test can
return 429 / 500 / invalid JSON / slow replies on chosen calls. The server records every request body and header
and the most requests it ever held at once.
"""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str = "OK"
    status: int = 200
    raw: str | None = None  # a body sent as is (e.g. not JSON)
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    usage: dict = field(default_factory=lambda: {"prompt_tokens": 10, "completion_tokens": 2})


def completion(content: str, usage: dict, model: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    }


def last_user_text(body: dict) -> str:
    """The text of the last user message (string or content parts), for scripts that answer per prompt."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


class FakeChatServer:
    def __init__(self, script: Callable[[dict, int], Reply] | None = None):
        self.script = script or (lambda body, index: Reply())
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.served = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()  # set on stop: wakes handlers sleeping in a delay
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.script(body, index)
                    if reply.delay:
                        server.release.wait(reply.delay)
                    payload = reply.raw
                    if payload is None:
                        payload = json.dumps(completion(reply.content, reply.usage, body.get("model", "")))
                    data = payload.encode()
                finally:
                    with server._lock:  # before replying: the client may send its next request as soon as it reads
                        server.in_flight -= 1
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                    with server._lock:
                        server.served += 1
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
