"""Write the short synthetic source videos of the sample release with PyAV (H.264 mp4).

Each frame paints its own index as 12 black/white vertical stripes (most significant bit first), so a test can read
back exactly which frames a sampler picked, even after JPEG compression and resizing (:func:`read_frame_index`).

    python sample_data/make_videos.py --out build/demo/videos
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np


BITS = 12
STRIPE = 16
WIDTH, HEIGHT = BITS * STRIPE, 108


@dataclass(frozen=True)
class VideoSpec:
    source_id: str
    seconds: float
    fps: int


# The sources of sample_data/sureon_release; "MissingVid1" (a test question's source) is deliberately absent.
SAMPLE_VIDEOS = (
    VideoSpec("aB3_dE-5fGh", 90, 25),
    VideoSpec("Zx9Qw_8eRt1", 90, 30),
    VideoSpec("0c0368222999f0438acd67df0e414a9f", 90, 24),
    VideoSpec("Vq2-Lm7Np0s", 90, 25),
    VideoSpec("Tt4Kk9Jj2Hh", 90, 25),
    VideoSpec("9f1e2d3c4b5a69788796a5b4c3d2e1f0", 90, 10),
)


def paint_index(index: int, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """An RGB frame whose stripes spell ``index`` in binary (white = 1)."""
    if not 0 <= index < 2**BITS:
        raise ValueError(f"frame index {index} does not fit in {BITS} bits")
    stripe = width // BITS
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    for bit in range(BITS):
        if (index >> (BITS - 1 - bit)) & 1:
            frame[:, bit * stripe : (bit + 1) * stripe] = 255
    return frame


def read_frame_index(image, bits: int = BITS) -> int:
    """Inverse of :func:`paint_index` for a decoded frame (PIL image or HxWx3 array), at any size."""
    pixels = np.asarray(image.convert("RGB") if hasattr(image, "convert") else image)
    height, width = pixels.shape[:2]
    row = pixels[height // 2]
    value = 0
    for bit in range(bits):
        centre = int((bit + 0.5) * width / bits)
        value = (value << 1) | int(row[centre].mean() > 127)
    return value


def encode_h264(path: Path, frames, fps: int, size: tuple[int, int], gop: int, options: dict) -> None:
    """Encode an iterable of ``av.VideoFrame`` as an H.264 mp4 (yuv420p) with a keyframe every ``gop`` frames."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.gop_size = gop
        stream.options = options
        for frame in frames:
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def write_video(path: Path, seconds: float, fps: int, gop: int = 50) -> int:
    """Write ``seconds`` of painted frames at ``fps``; return the frame count."""
    import av

    count = round(seconds * fps)
    frames = (av.VideoFrame.from_ndarray(paint_index(index), format="rgb24") for index in range(count))
    encode_h264(path, frames, fps, (WIDTH, HEIGHT), gop, {"crf": "18", "preset": "veryfast"})
    return count


def write_sample_videos(out: Path, specs=SAMPLE_VIDEOS) -> list[Path]:
    paths = []
    for spec in specs:
        path = out / f"{spec.source_id}.mp4"
        if not path.exists():
            tmp = path.with_suffix(".partial.mp4")
            write_video(tmp, spec.seconds, spec.fps)
            tmp.replace(path)
        paths.append(path)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    paths = write_sample_videos(args.out)
    print(f"{len(paths)} sample videos in {args.out} (the source 'MissingVid1' is left out on purpose)")


if __name__ == "__main__":
    main()
