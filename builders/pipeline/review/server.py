"""The review app's web server: its own login, sessions and checks in front of the Gradio app.

    sureon review serve --dataset DIR --db review.sqlite --videos DIR [--host 127.0.0.1 --port 7860]
        [--server-name review.example.org] [--trusted-proxy 10.0.0.5] [--tls-cert C --tls-key K]

The Gradio Blocks (:func:`~builders.pipeline.review.app.build_blocks`) are mounted in a FastAPI app served by
uvicorn, behind :class:`~builders.pipeline.review.gate.Gate`, an ASGI middleware that every request passes first; its
module says what it checks (sessions, routes, abuse, clients, headers). The login and logout routes and the session
cookie are in :mod:`~builders.pipeline.review.login`; the options and the listening socket in
:mod:`~builders.pipeline.review.network`. This module puts them together and serves them.

Gradio's telemetry is off (``analytics_enabled=False``), as are its server-side rendering, MCP server, run history
and monitoring. TLS: put a TLS-terminating proxy in front (the README's deployment section) or pass
``--tls-cert``/``--tls-key``. The port is taken (:func:`~builders.pipeline.review.network.bind_socket`) before the
dataset is read and before the log says it serves, so a port in use is one line naming it, not a traceback after a
claim to serve.
"""

import logging
import socket
import threading
import time
from pathlib import Path

from builders.errors import InputError
from builders.pipeline.review.accounts import SessionPolicy
from builders.pipeline.review.gate import Gate
from builders.pipeline.review.login import add_login_routes
from builders.pipeline.review.network import ServerOptions, bind_socket
from builders.pipeline.review.store import open_review_database


VIDEO_TYPES = {
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".webm": "video/webm",
    ".avi": "video/x-msvideo",
    ".mpg": "video/mpeg",
    ".mpeg": "video/mpeg",
    ".ts": "video/mp2t",
}
DEFAULT_OPTIONS = ServerOptions()  # 127.0.0.1:7860, no proxy, no TLS (one frozen instance: a safe default argument)
logger = logging.getLogger(__name__)


def create_app(ui, options: ServerOptions):
    """The FastAPI app: login/logout/videos routes, the Gradio Blocks mounted at ``/``, all behind :class:`Gate`."""
    import gradio as gr
    from fastapi import FastAPI, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import FileResponse, Response

    from builders.pipeline.review.app import build_blocks

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    add_login_routes(app, ui)

    @app.api_route("/videos/{source_id}", methods=["GET", "HEAD"])
    async def video(source_id: str, request: Request):
        path = await run_in_threadpool(ui.video_of, request.scope.get("sureon.review_user"), source_id)
        media_type = VIDEO_TYPES.get(path.suffix.lower()) if path else None
        if media_type is None:
            return Response(status_code=404)
        return FileResponse(path, media_type=media_type, content_disposition_type="inline")

    # Starlette's CORS middleware with no allowed origin: Gradio then adds no CORS headers of its own.
    app.add_middleware(CORSMiddleware, allow_origins=[], allow_credentials=False)
    blocks = build_blocks(ui).queue(default_concurrency_limit=8, max_size=256)
    gr.mount_gradio_app(
        app,
        blocks,
        path="/",
        server_name=options.host,
        server_port=options.port,
        footer_links=[],
        run_history=False,
        auth_dependency=lambda request: request.scope.get("sureon.review_user"),
        show_error=False,
        max_file_size=1,  # uploads are refused by the gate anyway; this is Gradio's own limit
        ssr_mode=False,
        enable_monitoring=False,
        pwa=False,
        mcp_server=False,
        # system fonts: the default theme imports Google Fonts, which the CSP (and a hospital network) would block
        theme=gr.themes.Default(
            font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]
        ),
    )
    return Gate(app, ui, options, events=blocks.fns), blocks


class ReviewServer:
    """uvicorn serving :func:`create_app`; :meth:`run` blocks, :meth:`start` serves from a thread (tests). Both serve
    on a socket bound first (:func:`bind_socket`; or the one given), so nothing claims to serve a port it cannot."""

    def __init__(self, ui, options: ServerOptions = DEFAULT_OPTIONS):
        import uvicorn

        options.check_tls()
        self.options = options
        self.app, self.blocks = create_app(ui, options)
        config = uvicorn.Config(
            self.app,
            host=options.host,
            port=options.port,
            proxy_headers=False,  # the Gate believes forwarded headers from --trusted-proxy addresses only
            server_header=False,
            ws="none",
            log_level="warning",
            ssl_certfile=options.tls_cert,
            ssl_keyfile=options.tls_key,
        )
        self.server = uvicorn.Server(config)
        self.thread = None

    @property
    def url(self) -> str:
        scheme = "https" if self.options.tls_cert else "http"
        host = self.options.host if ":" not in self.options.host else f"[{self.options.host}]"
        return f"{scheme}://{host}:{self.options.port}/"

    def run(self, sock: socket.socket | None = None) -> None:
        sock = sock or bind_socket(self.options)
        logger.info("serving the review app on %s", self.url)
        self.server.run(sockets=[sock])

    def start(self, timeout: float = 60.0) -> "ReviewServer":
        sock = bind_socket(self.options)
        self.thread = threading.Thread(target=self.server.run, args=([sock],), daemon=True, name="review-server")
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the review server did not start on {self.url}")
            time.sleep(0.05)
        return self

    def close(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=30)
        self.blocks.close()


def serve(
    dataset: Path,
    db: Path,
    videos: Path | None = None,
    config: str | None = None,
    options: ServerOptions = DEFAULT_OPTIONS,
    sessions: SessionPolicy | None = None,
) -> None:
    """``sureon review serve``: every cheap check first (options, the database, the dataset's card, --videos, the
    port), then the slow start (reading the dataset, building the page), then serving until stopped."""
    from builders.pipeline.review.app import ReviewUI
    from builders.pipeline.review.samples import DEFAULT_CONFIG, check_dataset, load_samples
    from builders.sureon.frames import index_videos

    config = config or DEFAULT_CONFIG
    options.check()
    store = open_review_database(db)
    check_dataset(dataset, config)
    if videos is not None and not Path(videos).is_dir():
        raise InputError(
            f"--videos {videos} is not a folder: give the folder of source videos named <source_id>.<ext>"
        )
    sock = bind_socket(options)
    try:
        samples = load_samples(dataset, config)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        found = index_videos(videos) if videos else {}
        ui = ReviewUI(store, samples, found, session_policy=sessions)
        if videos and not ui.videos:
            logger.warning("none of the dataset's source videos is in --videos %s: reviewers will see no clip", videos)
        ReviewServer(ui, options).run(sock)
    finally:
        sock.close()
