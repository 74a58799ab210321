"""Benchmark the clip frame sampler (builders/sureon/frames.py) on a window deep in a long video.

For the same 8 frames of an 8-second window starting at 90% of a long synthetic H.264 video, this times

- the sampler: ``open_decoder`` + ``sample_clip`` on a freshly opened decoder (the per-video cost: it includes the
  exact-mode scan of the whole file), and ``sample_clip`` on a decoder already open (the per-clip cost, the opening
  amortised over a video's clips);
- (a) torchcodec's own exact seek+decode of the same frames, decoder opening included, no JPEG encoding:
  ``VideoDecoder(path, seek_mode="exact").get_frames_at(indices)`` and ``.get_frames_played_at(seconds)``;
- (b) a naive PyAV decode from frame 0, no seeking, up to the last needed frame,

and prints the sampler's time as a ratio against (a) and (b), measured in the same run. Every method's frames are
checked against the index painted into them. Decoding is single-threaded everywhere (torchcodec's default).

The video (640x360, 25 fps, a keyframe every 250 frames like a web video, libx264 ultrafast, a band of noise so each
frame costs real bits to decode) is written once into ``--workdir`` and reused.

    python benchmarks/frames.py [--minutes 20] [--repeats 5] [--workdir build/bench]     # or: make bench
"""

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import av
import numpy as np
from PIL import Image
from torchcodec.decoders import VideoDecoder


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from builders.sureon.frames import FramePolicy, open_decoder, plan_frame_indices, sample_clip  # noqa: E402
from sample_data.make_videos import encode_h264, read_frame_index  # noqa: E402


WIDTH, HEIGHT, FPS, GOP = 640, 360, 25, 250
BITS = 20  # the stripes spell frame indices up to ~11 h at 25 fps (the sample videos' 12 bits stop at 4096 frames)
STRIPE = WIDTH // BITS
NOISE_ROWS, NOISE_AMPLITUDE, NOISE_PATTERNS = 64, 4, 31
SAMPLER = "sampler, fresh decoder: open_decoder + sample_clip (per video)"
SEEK = "(a) decoder seek: VideoDecoder + get_frames_at"
SCRATCH = "(b) decode from start: PyAV, no seeking"


def paint(index: int, noise: np.ndarray) -> av.VideoFrame:
    """Like ``sample_data.make_videos.paint_index`` with 20 bits, written straight as yuv420p (4x faster to encode),
    with a band of noise at the bottom so that each frame costs real bits to decode."""
    planes = np.full((HEIGHT * 3 // 2, WIDTH), 128, dtype=np.uint8)  # neutral chroma
    bits = (index >> np.arange(BITS - 1, -1, -1)) & 1
    planes[:HEIGHT] = np.repeat(bits * 255, STRIPE)
    planes[HEIGHT - NOISE_ROWS : HEIGHT] = noise[index % len(noise)]
    return av.VideoFrame.from_ndarray(planes, format="yuv420p")


def read_index(pixels) -> int:
    return read_frame_index(pixels, bits=BITS)


def make_video(workdir: Path, minutes: float) -> Path:
    path = (
        workdir / f"stripes_{minutes:g}min_{WIDTH}x{HEIGHT}_{FPS}fps_gop{GOP}_noise{NOISE_ROWS}x{NOISE_AMPLITUDE}.mp4"
    )
    if path.exists():
        print(f"reusing {path}")
        return path
    count = round(minutes * 60 * FPS)
    if count > 2**BITS:
        raise SystemExit(f"{minutes} minutes is {count} frames; the painted index holds {2**BITS}")
    noise = np.random.default_rng(0).integers(
        128 - NOISE_AMPLITUDE, 128 + NOISE_AMPLITUDE + 1, (NOISE_PATTERNS, NOISE_ROWS, WIDTH), dtype=np.uint8
    )
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial.mp4")
    began = time.perf_counter()
    frames = (paint(index, noise) for index in range(count))
    encode_h264(tmp, frames, FPS, (WIDTH, HEIGHT), GOP, {"crf": "23", "preset": "ultrafast"})
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
    return [read_index(frame.permute(1, 2, 0).numpy()) for frame in batch.data]


def time_method(run, repeats: int) -> tuple[list[float], object]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return times, result


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench", help="where the video is cached")
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the synthetic video")
    parser.add_argument("--window-start", type=float, default=0.9, help="window start, as a fraction of the video")
    parser.add_argument("--window-seconds", type=float, default=8.0, help="window length in seconds")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per method (median and min reported)")
    return parser


def main(argv=None) -> None:
    args = make_parser().parse_args(argv)
    video = make_video(args.workdir, args.minutes)
    policy = FramePolicy()
    decoder = open_decoder(video)  # also the "already open" decoder of the per-clip variant
    meta = decoder.metadata
    start = args.window_start * meta.duration_seconds
    end = start + args.window_seconds
    indices = plan_frame_indices(start, end, meta.average_fps, meta.num_frames, policy)
    seconds = [(index + 0.5) / meta.average_fps for index in indices]  # the middle of each frame's display time
    print(
        f"video: {meta.num_frames} frames, {meta.duration_seconds:.1f} s at {meta.average_fps:g} fps, {meta.width}x"
        f"{meta.height}, a keyframe every {GOP} frames"
    )
    print(f"window [{start:.2f} s, {end:.2f} s]: frames {indices}")

    def fresh():
        return VideoDecoder(str(video), seek_mode="exact")

    methods = {
        SAMPLER: (
            lambda: sample_clip(open_decoder(video), start, end, policy),
            jpeg_indices,
        ),
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
    print(f"\nmedians of {args.repeats} runs; 'sampler' = open_decoder + sample_clip (fresh decoder, JPEGs included)")
    print(f"sampler / decoder seek (VideoDecoder + get_frames_at) = {sampler / seek:.2f}x")
    print(f"sampler / decode from start = {sampler / scratch:.3f}x ({scratch / sampler:.0f}x faster)")


if __name__ == "__main__":
    main()
