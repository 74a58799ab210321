"""The command line of ``sureon videos fetch``, which ``sureon/cli.py`` mounts from this package:

    sureon videos fetch --release DIR --out VIDEOS_DIR [--configs bench ...] [--max-height 720]
        [--cookies FILE | --cookies-from-browser NAME] [--sleep-interval S] [--concurrency N] [--sections [--pad S]]
        [--on-rate-limit stop|wait] [--rate-limit-wait 3600]

``run`` checks what the fetcher does not (``--pad``, yt-dlp installed), prints the report
(:mod:`builders.sureon.fetch.report`) and returns its exit status.
"""

import math
import sys
from pathlib import Path

from builders.arguments import non_negative_float, positive_int
from builders.errors import InputError
from builders.sureon.configs import CONFIGS
from builders.sureon.fetch.fetcher import YOUTUBE_URL, Fetcher, FetchOptions
from builders.sureon.fetch.rate_limit import ON_RATE_LIMIT, RATE_LIMIT_WAIT


def add_arguments(parser) -> None:
    parser.add_argument("--release", required=True, type=Path, help="the release folder, or a built Sureon folder")
    parser.add_argument("--out", required=True, type=Path, help="the videos folder (then: build --videos OUT)")
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), help="fetch only these configs' sources")
    parser.add_argument(
        "--url-template", default=YOUTUBE_URL, help="URL of a source, {id} = its YouTube id (mirrors, tests)"
    )
    parser.add_argument(
        "--max-height", type=positive_int, default=720, help="best video-only stream up to this height"
    )
    cookies = parser.add_mutually_exclusive_group()
    cookies.add_argument("--cookies", type=Path, help="Netscape cookies file (never printed)")
    cookies.add_argument("--cookies-from-browser", metavar="BROWSER[:PROFILE]", help="read cookies from a browser")
    parser.add_argument(
        "--sleep-interval", type=non_negative_float, default=0.0, help="seconds between two download starts"
    )
    parser.add_argument("--concurrency", type=positive_int, default=2, help="downloads at a time")
    parser.add_argument("--sections", action="store_true", help="download only the span each source's clips need")
    parser.add_argument("--pad", type=non_negative_float, default=5.0, help="seconds added around that span")
    parser.add_argument("--retries", type=positive_int, default=5, help="attempts per source on transient errors")
    parser.add_argument(
        "--retry-backoff", type=non_negative_float, default=2.0, help="first backoff in seconds (then doubled)"
    )
    parser.add_argument(
        "--on-rate-limit",
        choices=ON_RATE_LIMIT,
        default="stop",
        help="when YouTube rate-limits the session: stop starting downloads (default; rerun in an hour, nothing is "
        "lost) or wait --rate-limit-wait seconds and go on",
    )
    parser.add_argument(
        "--rate-limit-wait",
        type=non_negative_float,
        default=RATE_LIMIT_WAIT,
        help="seconds of that wait (YouTube: up to an hour)",
    )


def run(args) -> int:
    if not math.isfinite(args.pad) or args.pad < 0:
        raise InputError(f"--pad must be >= 0, got {args.pad}")
    try:
        import yt_dlp  # noqa: F401
    except ImportError as err:
        raise RuntimeError('sureon videos fetch needs yt-dlp: pip install -e ".[videos]"') from err
    opts = FetchOptions(**{k: v for k, v in vars(args).items() if k in FetchOptions.__dataclass_fields__})
    report = Fetcher(opts).run()
    print(report.summary())
    status = report.exit_status()
    if status == 2:
        print(f"error: {report.nothing_fetched()}", file=sys.stderr)
        return 2
    print(f"Build with: sureon build sureon --release {args.release} --videos {args.out} --out OUT")
    return status
