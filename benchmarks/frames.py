"""Benchmark the clip frame sampler (builders/sureon/frames.py) on synthetic lectures, by default at 1280x720.

Part 1, one window: for the same 8 frames of an 8-second window starting at 90% of a long synthetic H.264 video,
this times

- the sampler: ``open_clip_decoder`` + ``sample_clip`` on a freshly opened decoder (the per-video cost: it includes the
  exact-mode scan of the whole file), and ``sample_clip`` on a decoder already open (the per-clip cost, the opening
  amortised over a video's clips);
- (a) torchcodec's own exact seek+decode of the same frames, decoder opening included, no JPEG encoding:
  ``VideoDecoder(path, seek_mode="exact").get_frames_at(indices)`` and ``.get_frames_played_at(seconds)``;
- (b) a naive PyAV decode from frame 0, no seeking, up to the last needed frame.

Part 2, a lecture's clips (the build's workload: ``--clips`` windows of one video, mostly ~8 s and some ~100 s long
like Sureon's short-window and long-horizon clips, some overlapping), seconds per clip for

- before: the previous sampler, one single-threaded decoder and one ``get_frames_at`` seek+decode per clip, JPEGs
  included;
- after: ``extract_video_clips`` as the build runs it (one pass over the union of the clips' frames in time order,
  FFmpeg threads, the GPU when present), decoder opening, JPEGs and cache writes included; and the same on one
  FFmpeg thread (what the threads add on this machine);
- floor (a): torchcodec's seek+decode of the same frames per clip, no JPEG, on the same threads as "after";
- floor (b): one forward PyAV decode of the spans the clips need (merged windows, each from its keyframe), the
  needed frames converted to RGB, no JPEG, on the same threads;

and prints after / before and after / the cheaper floor. Every method's frames are checked against the index
painted into them.

The video (25 fps, a keyframe every 250 frames like a web video, libx264 ultrafast, a band of noise so each frame
costs real bits to decode) is written once into ``--workdir`` and reused.

    python benchmarks/frames.py [--minutes 20] [--height 720] [--clips 60] [--workdir build/bench]   # or: make bench
"""

import argparse
import io
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np
from PIL import Image
from torchcodec.decoders import VideoDecoder


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import parse_with_quick  # noqa: E402
from builders.sureon.frames import (  # noqa: E402
    FrameCache,
    FramePolicy,
    decode_threads,
    encode_jpeg,
    extract_video_clips,
    open_clip_decoder,
    open_decoder,
    plan_frame_indices,
    resolve_decode_device,
    sample_clip,
)
from sample_data.make_videos import encode_h264, read_frame_index  # noqa: E402


FPS, GOP = 25, 250
BITS = 20  # the stripes spell frame indices up to ~11 h at 25 fps (the sample videos' 12 bits stop at 4096 frames)
NOISE_AMPLITUDE, NOISE_PATTERNS = 4, 31
SAMPLER = "sampler, fresh decoder: open_clip_decoder + sample_clip (per video)"
SEEK = "(a) decoder seek: VideoDecoder + get_frames_at"
SCRATCH = "(b) decode from start: PyAV, no seeking"
BEFORE = "before: a seek+decode per clip, 1 thread, JPEGs"
AFTER = "after: extract_video_clips (one pass, threads), JPEGs + cache"
AFTER_ONE_THREAD = "after, 1 FFmpeg thread"
FLOOR_SEEK = "floor (a): torchcodec seek+decode per clip, no JPEG"
FLOOR_SPANS = "floor (b): one forward PyAV decode of the spans, no JPEG"


def noise_rows(height: int) -> int:
    return height * 64 // 360  # the band covers the same share of the frame at every size


def paint(index: int, noise: np.ndarray, width: int, height: int) -> av.VideoFrame:
    """Like ``sample_data.make_videos.paint_index`` with 20 bits, written straight as yuv420p (4x faster to encode),
    with a band of noise at the bottom so that each frame costs real bits to decode."""
    planes = np.full((height * 3 // 2, width), 128, dtype=np.uint8)  # neutral chroma
    bits = (index >> np.arange(BITS - 1, -1, -1)) & 1
    planes[:height] = np.repeat(bits * 255, width // BITS)
    planes[height - noise.shape[1] : height] = noise[index % len(noise)]
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


def read_index(pixels) -> int:
    return read_frame_index(pixels, bits=BITS)


def make_video(workdir: Path, minutes: float, height: int) -> Path:
    width = height * 16 // 9 // BITS * BITS  # stripes of whole pixels
    rows = noise_rows(height)
    path = workdir / f"stripes_{minutes:g}min_{width}x{height}_{FPS}fps_gop{GOP}_noise{rows}x{NOISE_AMPLITUDE}.mp4"
    if path.exists():
        print(f"reusing {path}")
        return path
    count = round(minutes * 60 * FPS)
    if count > 2**BITS:
        raise SystemExit(f"{minutes} minutes is {count} frames; the painted index holds {2**BITS}")
    noise = np.random.default_rng(0).integers(
        128 - NOISE_AMPLITUDE, 128 + NOISE_AMPLITUDE + 1, (NOISE_PATTERNS, rows, width), dtype=np.uint8
    )
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial.mp4")
    began = time.perf_counter()
    frames = (paint(index, noise, width, height) for index in range(count))
    encode_h264(tmp, frames, FPS, (width, height), GOP, {"crf": "23", "preset": "ultrafast"})
    tmp.replace(path)
    elapsed = time.perf_counter() - began
    print(f"generated {path} ({count} frames, {path.stat().st_size / 1e6:.0f} MB) in {elapsed:.1f} s")
    return path


def decode_from_start(path: Path, indices: list[int]) -> list[np.ndarray]:
    wanted, frames = set(indices), {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1  # as torchcodec (num_ffmpeg_threads=1)
        for number, frame in enumerate(container.decode(stream)):
            if number in wanted:
                frames[number] = frame.to_ndarray(format="rgb24")
                if len(frames) == len(wanted):
                    break
    return [frames[i] for i in indices]


def jpeg_indices(clip) -> list[int]:
    return [read_index(np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))) for jpeg in clip.jpegs]


def batch_indices(batch) -> list[int]:
    return [read_index(frame.permute(1, 2, 0).cpu().numpy()) for frame in batch.data]


def time_method(run, repeats: int) -> tuple[list[float], object]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return times, result


def lecture_windows(duration: float, count: int, seed: int = 0) -> list[tuple[float, float]]:
    """``count`` clip windows over a lecture: 80% short (6-10 s), 20% long (60-120 s); a third of the short ones sit
    right after another clip's start (questions grounded on neighbouring narration), so some windows overlap."""
    rng = random.Random(seed)
    windows: list[tuple[float, float]] = []
    while len(windows) < count:
        length = min(rng.uniform(60, 120) if rng.random() < 0.2 else rng.uniform(6, 10), duration - 1)
        if windows and length < 60 and rng.random() < 1 / 3:
            start = rng.choice(windows)[0] + rng.uniform(0, 5)
        else:
            start = rng.uniform(0, duration - length - 1)
        start = round(max(0.0, min(start, duration - length - 1)), 2)
        windows.append((start, round(start + length, 2)))
    return sorted(set(windows))


def sample_clip_before(decoder, start: float, end: float, policy: FramePolicy) -> list[bytes]:
    """The sampler before the shared pass: one ``get_frames_at`` per clip on a single-threaded decoder."""
    meta = decoder.metadata
    indices = plan_frame_indices(start, end, meta.average_fps, meta.num_frames, policy)
    unique = sorted(set(indices))
    batch = decoder.get_frames_at(unique)
    jpegs = {index: encode_jpeg(batch.data[i], policy)[0] for i, index in enumerate(unique)}  # (bytes, regions)
    return [jpegs[i] for i in indices]


def forward_decode_spans(path: Path, plans: list[list[int]], threads: int) -> dict[int, np.ndarray]:
    """Floor (b): merge the clips' frame ranges into spans, seek to each span's start and decode forward through it."""
    spans: list[list[int]] = []
    for first, last in sorted((min(p), max(p)) for p in plans):
        if spans and first <= spans[-1][1] + GOP:  # decoding through the gap is no dearer than a seek
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    wanted = {index for plan in plans for index in plan}
    frames: dict[int, np.ndarray] = {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = threads
        for first, last in spans:
            container.seek(int(first / FPS / stream.time_base), stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                number = round(frame.pts * stream.time_base * FPS)
                if number in wanted and first <= number:
                    frames[number] = frame.to_ndarray(format="rgb24")
                if number >= last:
                    break
    return frames


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench", help="where the video is cached")
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the synthetic video")
    parser.add_argument("--height", type=int, default=720, help="frame height (width 16:9); 360 was the old default")
    parser.add_argument("--window-start", type=float, default=0.9, help="window start, as a fraction of the video")
    parser.add_argument("--window-seconds", type=float, default=8.0, help="window length in seconds")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per method (median and min reported)")
    parser.add_argument("--clips", type=int, default=60, help="clips of the lecture in part 2 (0: skip part 2)")
    parser.add_argument("--decode-device", default="auto", help="part 2's 'after' device: auto, cpu or cuda")
    return parser


def one_window(video: Path, args) -> None:
    policy = FramePolicy()
    decoder = open_clip_decoder(video, policy)  # also the "already open" decoder of the per-clip variant
    meta = decoder.metadata
    # the window inside the video (a window past its end is refused, as a build refuses it)
    start = max(0.0, min(args.window_start * meta.duration_seconds, meta.duration_seconds - args.window_seconds))
    end = min(start + args.window_seconds, meta.duration_seconds)
    indices = plan_frame_indices(start, end, meta.average_fps, meta.num_frames, policy)
    seconds = [(index + 0.5) / meta.average_fps for index in indices]  # the middle of each frame's display time
    print(
        f"video: {meta.num_frames} frames, {meta.duration_seconds:.1f} s at {meta.average_fps:g} fps, {meta.width}x"
        f"{meta.height}, a keyframe every {GOP} frames"
    )
    print(f"part 1, one window [{start:.2f} s, {end:.2f} s]: frames {indices}")

    def fresh():
        return VideoDecoder(str(video), seek_mode="exact")

    methods = {
        SAMPLER: (lambda: sample_clip(open_clip_decoder(video, policy), start, end, policy), jpeg_indices),
        "sampler, decoder already open: sample_clip (per clip)": (
            lambda: sample_clip(decoder, start, end, policy),
            jpeg_indices,
        ),
        SEEK: (lambda: fresh().get_frames_at(indices), batch_indices),
        "(a) decoder seek: VideoDecoder + get_frames_played_at": (
            lambda: fresh().get_frames_played_at(seconds),
            batch_indices,
        ),
        SCRATCH: (
            lambda: decode_from_start(video, indices),
            lambda frames: [read_index(frame) for frame in frames],
        ),
    }
    results = {}
    for label, (run, read) in methods.items():
        times, output = time_method(run, args.repeats)
        got = read(output)
        if got != indices:
            raise SystemExit(f"{label}: expected frames {indices}, got {got}")
        results[label] = (statistics.median(times), min(times))
    print(f"all {len(methods)} methods returned the expected frames (painted indices checked)\n")

    sampler, seek, scratch = (results[label][0] for label in (SAMPLER, SEEK, SCRATCH))
    width = max(map(len, methods))
    print(f"{'method':<{width}}  {'median s':>9}  {'min s':>9}  {'sampler/method':>14}")
    for label, (median, best) in results.items():
        print(f"{label:<{width}}  {median:>9.4f}  {best:>9.4f}  {sampler / median:>13.3f}x")
    print(f"\nmedians of {args.repeats} runs; 'sampler' = open_clip_decoder + sample_clip (fresh decoder, JPEGs)")
    print(f"sampler / decoder seek (VideoDecoder + get_frames_at) = {sampler / seek:.2f}x")
    print(f"sampler / decode from start = {sampler / scratch:.3f}x ({scratch / sampler:.0f}x faster)")


def lecture(video: Path, args) -> None:
    policy = FramePolicy()
    device = resolve_decode_device(args.decode_device)
    threads = decode_threads(1)
    meta = open_decoder(video).metadata
    windows = lecture_windows(meta.duration_seconds, args.clips)
    plans = [plan_frame_indices(*w, meta.average_fps, meta.num_frames, policy) for w in windows]
    print(
        f"\npart 2, a lecture's clips: {len(windows)} windows of {video.name} "
        f"({sum(e - s for s, e in windows) / len(windows):.1f} s on average), {threads} FFmpeg thread(s), "
        f"'after' on {device}"
    )

    def before():
        decoder = open_decoder(video)
        return [sample_clip_before(decoder, *w, policy) for w in windows]

    def after(threads=threads):
        with tempfile.TemporaryDirectory() as cache_dir:
            outcome = extract_video_clips(video, windows, policy, cache_dir, device, threads)
            if any(outcome.values()):
                raise SystemExit(f"after: {[e for e in outcome.values() if e][:3]}")
            cache = FrameCache(cache_dir)
            return [cache.get(cache.key(video, *w, policy, device)).jpegs for w in windows]

    def floor_seek():
        decoder = open_decoder(video, num_threads=threads)
        return [decoder.get_frames_at(sorted(set(plan))) for plan in plans]

    def read_jpegs(clips):
        return [[read_index(np.asarray(Image.open(io.BytesIO(j)).convert("RGB"))) for j in clip] for clip in clips]

    methods = {
        BEFORE: (before, read_jpegs),
        AFTER: (after, read_jpegs),
        AFTER_ONE_THREAD: (lambda: after(1), read_jpegs),
        FLOOR_SEEK: (floor_seek, lambda batches: [batch_indices(b) for b in batches]),
        FLOOR_SPANS: (
            lambda: forward_decode_spans(video, plans, threads),
            lambda frames: [[read_index(frames[i]) for i in plan] for plan in plans],
        ),
    }
    expected_unique = [sorted(set(plan)) for plan in plans]
    results = {}
    for label, (run, read) in methods.items():
        times, output = time_method(run, max(1, args.repeats // 2))
        got = read(output)
        want = expected_unique if label == FLOOR_SEEK else plans
        if got != want:
            raise SystemExit(f"{label}: the frames read back are not the planned ones")
        results[label] = statistics.median(times) / len(windows)
    print(f"all {len(methods)} methods returned the planned frames (painted indices checked)\n")
    width = max(map(len, methods))
    print(f"{'method':<{width}}  {'s per clip':>10}")
    for label, per_clip in results.items():
        print(f"{label:<{width}}  {per_clip:>10.4f}")
    floor = min(results[FLOOR_SEEK], results[FLOOR_SPANS])
    print(
        f"\nafter / before = {results[AFTER] / results[BEFORE]:.3f}x "
        f"({results[BEFORE] / results[AFTER]:.1f}x faster); "
        f"after / the cheaper floor = {results[AFTER] / floor:.2f}x"
    )


def main(argv=None) -> None:
    args = parse_with_quick(
        make_parser(), argv, {"minutes": 0.5, "height": 144, "clips": 6, "repeats": 1, "decode_device": "cpu"}
    )
    video = make_video(args.workdir, args.minutes, args.height)
    one_window(video, args)
    if args.clips:
        lecture(video, args)


if __name__ == "__main__":
    main()
