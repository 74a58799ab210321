"""Benchmark the blurring of evaluation frames (builders/blur.py): the whole build, and per frame against decoding.

The sample release's evaluation sources are re-recorded at ``--height`` (720p by default, 16:9, H.264 with a keyframe
every 250 frames like a web video) over a moving, textured, surgical-coloured background, each once into
``--workdir``:

- ``Tt4Kk9Jj2Hh`` (bench): a lecture title overlay, static, on every frame;
- ``9f1e2d3c4b5a69788796a5b4c3d2e1f0`` (bench): a presenter's face in a picture-in-picture corner (the astronaut photo
  shipped in scikit-image), and a caption that appears only after 40 s;
- ``Vq2-Lm7Np0s`` (validation): plain, nothing to blur.

Part 1, the build: ``sureon build sureon`` of the bench and validation configs (frames from an empty cache each time,
best of ``--repeats``) with the default blurring against ``--no-blur``, measured in the same run; it prints both
times, their ratio, and how many of the frames that show text and a face got a text and a face region (all must).

Part 2, per frame: on ``--frames`` frames at the size the build stores them (``--max-side 768``), torchcodec's exact
seek + decode of each frame (the baseline) against detection + blur per detector (``text``: rapidocr's PP-OCR
detector, ``faces``: OpenCV's Haar cascades) and both together, as milliseconds per frame and ratios to decoding.

    python benchmarks/blur.py [--height 720] [--frames 24] [--repeats 2] [--workdir build/bench]
"""

import argparse
import io
import resource
import shutil
import sys
import time
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from skimage.data import astronaut


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, parse_with_quick  # noqa: E402
from builders.blur import Blurrer, BlurSettings, blurrer_for  # noqa: E402
from builders.sureon.build import BuildOptions, build_sureon  # noqa: E402
from builders.sureon.frames import FramePolicy, open_clip_decoder  # noqa: E402
from sample_data.make_videos import SAMPLE_VIDEOS, encode_h264  # noqa: E402


RELEASE = REPO / "sample_data" / "sureon_release"
TITLE, FACE, PLAIN = "Tt4Kk9Jj2Hh", "9f1e2d3c4b5a69788796a5b4c3d2e1f0", "Vq2-Lm7Np0s"
CAPTION_FROM = 40.0  # seconds: the face video's caption appears only then
GOP = 250


def background(width: int, height: int, shift: int) -> np.ndarray:
    """The textured reddish field, wide enough to pan ``shift`` pixels (a moving camera: every pixel changes)."""
    y, x = np.mgrid[0:height, 0 : width + shift]
    red = 120 + 60 * np.sin(x / (97.0 * height / 720)) * np.cos(y / (53.0 * height / 720))
    return np.stack([red, 0.35 * red, 0.3 * red], axis=-1).astype(np.uint8)


def lecture_frames(source: str, count: int, fps: int, width: int, height: int):
    field = background(width, height, 3 * count)
    font = ImageFont.load_default(size=max(8, height // 20))
    face = np.asarray(Image.fromarray(astronaut()).resize((height * 8 // 15,) * 2))  # 384 px at 720p
    for index in range(count):
        frame = np.ascontiguousarray(field[:, 3 * index : 3 * index + width])
        if source == FACE:
            frame[height - face.shape[0] :, width - face.shape[1] :] = face
        image = Image.fromarray(frame)
        if source == TITLE:
            ImageDraw.Draw(image).text((height // 18, height // 24), "LAPAROSCOPIC CHOLECYSTECTOMY", font=font)
        if source == FACE and index / fps >= CAPTION_FROM:
            ImageDraw.Draw(image).text((height // 18, height // 2), "Calot's triangle", font=font, fill="yellow")
        yield av.VideoFrame.from_ndarray(np.asarray(image), format="rgb24")


def write_videos(folder: Path, height: int, fps_cap: int | None) -> Path:
    width = height * 16 // 9 // 2 * 2
    for spec in SAMPLE_VIDEOS:
        if spec.source_id not in (TITLE, FACE, PLAIN):
            continue
        fps = min(spec.fps, fps_cap or spec.fps)
        path = folder / f"{spec.source_id}.mp4"
        if not path.exists():
            tmp = folder / f"{spec.source_id}.partial.mp4"
            count = round(spec.seconds * fps)
            frames = lecture_frames(spec.source_id, count, fps, width, height)
            encode_h264(tmp, frames, fps, (width, height), GOP, {"crf": "23", "preset": "ultrafast"})
            tmp.replace(path)
    return folder


def build_seconds(videos: Path, work: Path, repeats: int) -> dict:
    """Per variant (``plain``: ``--no-blur``, ``blurred``: the default), the best wall and CPU seconds of the build
    from an empty frame cache, the variants interleaved so that a busy machine slows both alike."""

    def build(blur: BlurSettings | None, folder: Path):
        shutil.rmtree(folder, ignore_errors=True)
        blurrer_for(BlurSettings()).seen.clear()  # every build detects afresh, none reuses the last one's frames
        options = BuildOptions(
            release=RELEASE,
            out=folder / "out",
            videos=videos,
            cache_dir=folder / "cache",
            on_missing_video="skip",
            configs=["bench", "validation"],
            blur=blur,
            decode_device="cpu",
        )
        return build_sureon(options)

    blurrer_for(BlurSettings())  # the detectors are loaded once per process, outside the timing
    build(None, work / "warm-up")  # untimed: what the builder imports on first use, and the videos read once
    runs = {"plain": [], "blurred": []}
    for _ in range(repeats):
        for variant, blur in (("plain", None), ("blurred", BlurSettings())):
            began, cpu = time.perf_counter(), cpu_seconds()
            build(blur, work / variant)
            runs[variant].append((time.perf_counter() - began, cpu_seconds() - cpu))
    return {variant: (min(w for w, _ in times), min(c for _, c in times)) for variant, times in runs.items()}


def cpu_seconds() -> float:
    """CPU time of this process, all its threads (FFmpeg's, onnxruntime's, OpenCV's): on a machine shared with other
    jobs it moves far less than the wall clock, which waits for the other jobs too."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def found(out: Path) -> dict[str, tuple[int, int]]:
    """Per kind, (frames that got a region of it, frames that show it), over the bench frames."""
    import pyarrow.parquet as pq

    counts = {"text": [0, 0], "faces": [0, 0]}
    for file in sorted((out / "bench").glob("*.parquet")):
        for row in pq.read_table(file, columns=["source_id", "frame_timestamps", "blurred_regions"]).to_pylist():
            for stamp, regions in zip(row["frame_timestamps"], row["blurred_regions"], strict=True):
                kinds = {region["detector"] for region in regions}
                shown = {"text"} if row["source_id"] == TITLE else set()
                if row["source_id"] == FACE:
                    shown = {"faces", "text"} if stamp >= CAPTION_FROM else {"faces"}
                for kind in shown:
                    counts[kind][1] += 1
                    counts[kind][0] += kind in kinds
    return {kind: (hit, total) for kind, (hit, total) in counts.items()}


def whole_build(videos: Path, work: Path, repeats: int) -> None:
    times = build_seconds(videos, work, repeats)
    (plain, plain_cpu), (blurred, blurred_cpu), out = times["plain"], times["blurred"], work / "blurred" / "out"
    print(f"part 1, the build (bench + validation, {RELEASE.name}, videos at {probe(videos)}), best of {repeats}")
    print(f"  {'':<32} {'wall s':>8} {'ratio':>7} {'CPU s':>8} {'ratio':>7}")
    print(f"  {'--no-blur, the baseline':<32} {plain:8.2f} {1:6.2f}x {plain_cpu:8.2f} {1:6.2f}x")
    print(
        f"  {'default blurring (text, faces)':<32} {blurred:8.2f} {blurred / plain:6.2f}x {blurred_cpu:8.2f} "
        f"{blurred_cpu / plain_cpu:6.2f}x"
    )
    print(f"  blurred / unblurred build: {blurred / plain:.2f}x wall clock, {blurred_cpu / plain_cpu:.2f}x CPU time")
    for kind, (hit, total) in found(out).items():
        print(f"  bench frames showing {kind:<5} that got a {kind} region: {hit}/{total}")


def probe(videos: Path) -> str:
    with av.open(str(videos / f"{TITLE}.mp4")) as container:
        stream = container.streams.video[0]
        return f"{stream.width}x{stream.height}"


def per_frame(videos: Path, count: int, repeats: int) -> None:
    policy = FramePolicy()
    decoder = open_clip_decoder(videos / f"{FACE}.mp4", policy)  # frames come out at the stored size
    total = decoder.metadata.num_frames
    indices = [round((i + 0.5) * total / count) for i in range(count)]
    decode_s = best_of(repeats, lambda: [decoder.get_frames_at([i]) for i in indices]) / len(indices)
    frames = [decoder.get_frames_at([i]).data[0].permute(1, 2, 0).numpy() for i in indices]
    jpeg_s = best_of(repeats, lambda: [Image.fromarray(f).save(io.BytesIO(), format="JPEG") for f in frames])
    print(f"\npart 2, per frame: {len(frames)} frames of {FACE[:8]}... at {frames[0].shape[1]}x{frames[0].shape[0]}")
    print(f"  {'decode (torchcodec seek + decode), the baseline':<48} {decode_s * 1e3:8.1f} ms/frame   1.00x")
    print(
        f"  {'JPEG encoding':<48} {jpeg_s / len(frames) * 1e3:8.1f} ms/frame {jpeg_s / len(frames) / decode_s:6.2f}x"
    )
    variants = {"text": ("text",), "faces": ("faces",), "text + faces (the build's default)": ("text", "faces")}
    for label, targets in variants.items():
        blurrer = Blurrer.load(BlurSettings(targets))
        hits = sum(bool(blurrer.apply(frame)[1]) for frame in frames)
        # detected afresh each time (the frames differ from each other, so none is remembered within a run)
        seconds = best_of(repeats, lambda b=blurrer: [b.seen.clear(), *(b.apply(f) for f in frames)]) / len(frames)
        print(
            f"  {'detect + blur: ' + label:<48} {seconds * 1e3:8.1f} ms/frame {seconds / decode_s:6.2f}x decode"
            f"   (frames with a detection: {hits}/{len(frames)})"
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--height", type=int, default=720, help="video height (16:9)")
    parser.add_argument("--fps-cap", type=int, help="record the videos at most at this rate (default: the sample's)")
    parser.add_argument("--frames", type=int, default=24, help="frames of part 2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parse_with_quick(parser, argv, {"height": 144, "fps_cap": 2, "frames": 2, "repeats": 1})
    videos = args.workdir / f"blur_lectures_{args.height}p_fps{args.fps_cap or 'sample'}"
    videos.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    write_videos(videos, args.height, args.fps_cap)
    print(f"videos in {videos} ({time.perf_counter() - began:.0f} s to write or find)")
    whole_build(videos, args.workdir / "blur_build", args.repeats)
    per_frame(videos, args.frames, args.repeats)


if __name__ == "__main__":
    main()
