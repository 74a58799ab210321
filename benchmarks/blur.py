"""Benchmark the blurring of evaluation frames (builders/blur.py) against decoding the same frames.

A 720p H.264 lecture-like video (a title overlay and a presenter's face, the astronaut photo shipped in scikit-image,
over a textured surgical-coloured background) is written once into ``--workdir``. For ``--frames`` frames spread over
it, this times

- decoding: torchcodec's exact seek + decode of each frame (``get_frames_at``), the baseline;
- detection + blur per detector (``text``: rapidocr's PP-OCR detector, ``faces``: OpenCV's Haar cascades) and for
  both together (what ``sureon build sureon`` runs on evaluation configs), on the decoded frames;

and prints milliseconds per frame and each as a ratio to decoding that frame, measured in the same run.

    python benchmarks/blur.py [--frames 24] [--repeats 3] [--workdir build/bench]
"""

import argparse
import sys
from pathlib import Path

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from skimage.data import astronaut


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of  # noqa: E402
from builders.blur import Blurrer, BlurSettings  # noqa: E402
from builders.video import open_decoder  # noqa: E402
from sample_data.make_videos import encode_h264  # noqa: E402


WIDTH, HEIGHT, FPS, SECONDS = 1280, 720, 25, 60


def lecture_frame(index: int, face: np.ndarray, font) -> np.ndarray:
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    red = 120 + 60 * np.sin((x + 3 * index) / 97.0) * np.cos(y / 53.0)
    frame = np.stack([red, 0.35 * red, 0.3 * red], axis=-1).astype(np.uint8)
    frame[HEIGHT - face.shape[0] :, WIDTH - face.shape[1] :] = face
    image = Image.fromarray(frame)
    ImageDraw.Draw(image).text((40, 30), f"LAPAROSCOPIC CHOLECYSTECTOMY  {index // FPS:02d}s", fill="white", font=font)
    return np.asarray(image)


def write_video(path: Path) -> Path:
    if not path.exists():
        face = np.asarray(Image.fromarray(astronaut()).resize((384, 384)))  # a picture-in-picture presenter
        font = ImageFont.load_default(size=36)
        frames = (
            av.VideoFrame.from_ndarray(lecture_frame(i, face, font), format="rgb24") for i in range(SECONDS * FPS)
        )
        tmp = path.with_suffix(".partial.mp4")
        encode_h264(tmp, frames, FPS, (WIDTH, HEIGHT), 250, {"crf": "23", "preset": "ultrafast"})
        tmp.replace(path)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=REPO / "build" / "bench")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    video = write_video(args.workdir / "blur_lecture_720p.mp4")
    decoder = open_decoder(video)
    count = decoder.metadata.num_frames
    indices = [round((i + 0.5) * count / args.frames) for i in range(args.frames)]
    decode_s = best_of(args.repeats, lambda: [decoder.get_frames_at([i]) for i in indices]) / len(indices)
    frames = [decoder.get_frames_at([i]).data[0].permute(1, 2, 0).numpy() for i in indices]

    variants = {"text": ("text",), "faces": ("faces",), "text + faces (the build's default)": ("text", "faces")}
    print(f"{video.name}: {WIDTH}x{HEIGHT}, {len(frames)} frames; best of {args.repeats} runs")
    print(f"{'decode (torchcodec seek + decode), the baseline':<48} {decode_s * 1e3:8.1f} ms/frame   1.00x")
    for label, targets in variants.items():
        blurrer = Blurrer.load(BlurSettings(targets))
        found = sum(bool(blurrer.apply(frame)[1]) for frame in frames)
        seconds = best_of(args.repeats, lambda b=blurrer: [b.apply(frame) for frame in frames]) / len(frames)
        print(
            f"{'detect + blur: ' + label:<48} {seconds * 1e3:8.1f} ms/frame {seconds / decode_s:6.2f}x decode"
            f"   (frames with a detection: {found}/{len(frames)})"
        )


if __name__ == "__main__":
    main()
