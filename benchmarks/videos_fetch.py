"""Benchmark ``sureon videos fetch`` (builders/sureon/fetch/) against a local video host with a slow link.

For the sample release's four 11-character sources served by ``tests/fake_video_server.py`` on 127.0.0.1 (each 8 KiB
chunk delayed ``--chunk-delay`` seconds, as a slow host would), this times

- a fresh process's first yt-dlp download with its default extractor list (the URL is matched against ~1,900
  extractors, whose patterns are compiled on first use) against the fetcher's ``allowed_extractors`` (YouTube and
  the generic extractor only),
- the fetch with ``--concurrency 1`` (the baseline) and ``--concurrency 4``,
- a rerun of the same fetch, where every file is already verified (what a resumed run costs),

and prints each as a ratio against its baseline measured in the same run.

    python benchmarks/videos_fetch.py [--chunk-delay 0.02] [--repeats 3] [--workdir build/bench/videos]
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_video_server import FakeVideoHost  # noqa: E402

from benchmarks.timing import best_of, parse_with_quick  # noqa: E402
from builders.sureon.fetch.fetcher import Fetcher, FetchOptions  # noqa: E402
from sample_data.make_videos import write_sample_videos  # noqa: E402


SOURCES = ("Tt4Kk9Jj2Hh", "Vq2-Lm7Np0s", "Zx9Qw_8eRt1", "aB3_dE-5fGh")
RELEASE = REPO / "sample_data" / "sureon_release"


FIRST_DOWNLOAD = """
import sys, time
import yt_dlp
params = {"quiet": True, "noprogress": True, "outtmpl": sys.argv[2] + "/%(id)s.%(ext)s"}
if sys.argv[3]:
    params["allowed_extractors"] = sys.argv[3].split(",")
start = time.perf_counter()
with yt_dlp.YoutubeDL(params) as ydl:
    ydl.extract_info(sys.argv[1], download=True)
print(time.perf_counter() - start)
"""


def first_download(host, out: Path, extractors: str) -> float:
    """Seconds of a fresh process's first download (yt-dlp compiles its extractors' URL patterns on first use)."""
    shutil.rmtree(out, ignore_errors=True)
    url = host.url_template.format(id=SOURCES[0])
    command = [sys.executable, "-c", FIRST_DOWNLOAD, url, str(out), extractors]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])


def fetch(host, out: Path, concurrency: int, fresh: bool = True) -> None:
    if fresh:
        shutil.rmtree(out, ignore_errors=True)
    opts = FetchOptions(RELEASE, out, url_template=host.url_template, concurrency=concurrency, retry_backoff=0.01)
    Fetcher(opts).run()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunk-delay", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    args = parse_with_quick(parser, argv, {"chunk_delay": 0.0, "repeats": 1})
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-videos-"))
    videos = workdir / "served"
    write_sample_videos(videos)
    files = {source: (videos / f"{source}.mp4").read_bytes() for source in SOURCES}

    with FakeVideoHost(files) as host:
        default = min(first_download(host, workdir / "one", "") for _ in range(args.repeats))
        allowed = min(first_download(host, workdir / "one", "youtube,generic") for _ in range(args.repeats))
    print(f"first download, all extractors:      {default:6.2f} s  (baseline)")
    print(f"first download, youtube + generic:   {allowed:6.2f} s  ({default / allowed:.1f}x faster)")

    with FakeVideoHost(files, chunk_delay=args.chunk_delay) as host:
        serial = best_of(args.repeats, lambda: fetch(host, workdir / "fetched", 1))
        parallel = best_of(args.repeats, lambda: fetch(host, workdir / "fetched", 4))
        before = len(host.requests)
        started = time.perf_counter()
        fetch(host, workdir / "fetched", 4, fresh=False)
        rerun = time.perf_counter() - started
        asked = {r.source_id for r in host.requests[before:]}
    print(f"fetch {len(SOURCES)} videos, --concurrency 1:    {serial:6.2f} s  (baseline)")
    print(f"fetch {len(SOURCES)} videos, --concurrency 4:    {parallel:6.2f} s  ({serial / parallel:.1f}x faster)")
    print(
        f"rerun, everything verified:          {rerun:6.2f} s  ({serial / rerun:.1f}x faster; "
        f"sources asked again: {sorted(asked)}, the 404 only)"
    )


if __name__ == "__main__":
    main()
