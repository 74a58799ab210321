"""A local HTTP server on 127.0.0.1 serving mp4 files as a video host does (range requests): ``sureon videos fetch``.

``files`` maps a source id to the bytes served at ``/<source_id>.mp4`` (any query string is ignored); an id not in it
is a 404, and ``fail[id]`` lists error statuses its next requests get first. ``chunk_delay`` slows every response
down; ``pause_at[id] = fraction`` stops a response to that id at that fraction of the file until ``resume`` is set.
Every request is recorded (id, first byte asked, start and end time, cookies), and ``max_active_sources`` is the
most distinct ids ever served at the same time.
"""

import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


CHUNK = 8192


@dataclass
class Request:
    source_id: str
    range_start: int
    started: float
    ended: float | None = None
    sent: int = 0
    cookie: str = ""


class FakeVideoHost:
    def __init__(self, files: dict[str, bytes], chunk_delay: float = 0.0):
        self.files = dict(files)
        self.chunk_delay = chunk_delay
        self.pause_at: dict[str, float] = {}
        self.fail: dict[str, list[int]] = {}
        self.resume = threading.Event()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.max_active_sources = 0
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                host.serve(self, body=False)

            def do_GET(self):
                host.serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url_template = f"http://127.0.0.1:{self.server.server_address[1]}/{{id}}.mp4"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.resume.set()
        self.server.shutdown()
        self.server.server_close()

    def requests_for(self, source_id: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.source_id == source_id]

    def serve(self, handler, body: bool) -> None:
        source_id = handler.path.lstrip("/").split("?")[0].removesuffix(".mp4")
        data = self.files.get(source_id)
        match = re.match(r"bytes=(\d*)-(\d*)", handler.headers.get("Range", ""))
        start = int(match[1] or 0) if match else 0
        request = Request(source_id, start, time.monotonic(), cookie=handler.headers.get("Cookie", ""))
        with self.lock:
            self.requests.append(request)
            self.active[source_id] = self.active.get(source_id, 0) + 1
            self.max_active_sources = max(self.max_active_sources, sum(1 for n in self.active.values() if n))
        try:
            if data is None or self.fail.get(source_id):
                handler.send_error(self.fail[source_id].pop(0) if data is not None else 404)
                return
            end = int(match[2]) if match and match[2] else len(data) - 1
            handler.send_response(206 if match else 200)
            if match:
                handler.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            handler.send_header("Content-Type", "video/mp4")
            handler.send_header("Accept-Ranges", "bytes")
            handler.send_header("Content-Length", str(end - start + 1))
            handler.end_headers()
            if not body:
                return
            pause = self.pause_at.get(source_id)
            for offset in range(start, end + 1, CHUNK):
                if pause is not None and offset >= pause * len(data):
                    self.resume.wait(timeout=60)
                    return  # the client is gone by then
                handler.wfile.write(data[offset : min(offset + CHUNK, end + 1)])
                request.sent += min(CHUNK, end + 1 - offset)
                if self.chunk_delay:
                    time.sleep(self.chunk_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.lock:
                request.ended = time.monotonic()
                self.active[source_id] -= 1
