"""Blurring of on-screen text and non-surgical regions in evaluation frames (the Sureon paper's D.1).

The Sureon paper blurs, before inference, on-screen text found by OCR (procedure labels, instrument names in a user
interface, equipment text) and non-surgical regions (faces, logos) found by a YOLO detector trained on YouTube
surgical videos (LEMON's curation models, its ref [12]), because VLMs read such overlays and answer without looking
at the surgery. The detectors here all work offline, with their weights inside pip packages:

- ``text``: the PP-OCR text *detector* that rapidocr ships as ONNX inside its wheel (onnxruntime). Only detection
  runs (no recognition), on the frame scaled to 512 px on its longer side: any text-like region is blurred, whatever
  it says. It misses text lines smaller than about 1/60 of the frame height (7 px on a stored 768x432 frame) and
  stylised logos without letters.
- ``faces``: OpenCV's bundled Haar cascades (frontal and profile; ``opencv-python-headless<5``, the 5.x wheels ship
  none), frontal faces searched on the frame scaled to 360 px high, profiles (both ways) more coarsely at 288 px
  (:data:`CASCADES`). They find upright faces of about 1/12 of the frame height or more (60 px at 720p); they miss
  smaller picture-in-picture faces, faces turned between frontal and profile, and faces behind masks and caps
  (common in operating-room footage). A missed frame of a face seen in its neighbours happens too (about 1 frame in
  30 in the tests).
- ``detector=PATH``: a local YOLO weights file (for example one of LEMON's curation models,
  ``visurg/LEMON_curation_models`` on the Hub), run with ultralytics (AGPL-3.0; the ``blur-yolo`` extra, imported
  only when a weights file is given). Every class it detects is blurred.

Each detected box is grown by a margin, clipped to the frame and replaced by a strong Gaussian blur of itself; pixels
outside the boxes are untouched, and a frame with no detection is returned as the very same array. Boxes are
recorded on the 0-1000 grid of the frame (the public corpus's convention) with the detector that found them, so a
user can audit what was hidden. Everything is deterministic: the detectors are, and the blur is a fixed kernel.
``Blurrer.fingerprint`` names the settings and the detectors' versions; the frame cache keys on it, so changing
either re-detects, and an unchanged rebuild detects nothing twice; within a build, a frame byte-identical to one of
the last :data:`SEEN_FRAMES` (a video holding still) reuses their detections.

Cost (``benchmarks/blur.py``, 720p lecture videos, stored 768x432 frames, one thread per detector call, two frames
at once on 2 cores): PP-OCR's network takes about 46 ms of CPU a frame at 512x288, the frontal cascade about 44 ms
and each of the two profile passes about 28 ms; what was spent around them (RapidOCR's float64 normalisation,
blurring the whole frame rather than the boxes, OpenCV's threads on top of the build's) is gone, at the same output
bytes: 135-138 -> 108-112 ms of CPU per frame. The blurred build costs about 6x the CPU time of ``--no-blur``
(4.3-4.8x wall clock) with every text (68/68) and face (32/32) frame of the benchmark found; the issue's 2x needs
the detection off the CPU (onnxruntime's CUDA provider, a YOLO face model on a GPU), or searches that find less.
"""

from __future__ import annotations

import hashlib
import math
import threading
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from builders.errors import InputError


BLUR_TARGETS = ("text", "faces")
GRID = 1000
MAX_TEXT_LINE_HEIGHT = 0.25  # share of the frame height
# Text is detected on the frame scaled down (never up) to this longer side: a stored 768x432 frame at 512x288, 2.3x
# fewer pixels for the detector. Measured on 768x432 JPEG frames of text lines drawn over a textured background: every
# line with capitals 5 px high or more (7 px with descenders, 1/60 of the frame height) was found at 512 as at 768;
# lines with 4 px capitals, all found at 768, were found 4 times in 12.
TEXT_SIDE = 512
# Each Haar cascade: (file, the height the frame is scaled down to (never up), pyramid step, neighbouring hits).
# Frontal faces keep OpenCV's fine search (10% steps, 5 hits) at 360 px, where the 24 px window finds faces of about
# 1/15 of the height; a coarser search lost small frontal faces (1/10 of the height) on JPEG frames. The profile
# cascade, twice the frontal's cost and run twice (mirrored for right-facing profiles), searches 288 px frames in 20%
# steps with 3 hits (fewer levels give each face fewer hits): 2.8x less work; its window is 1/12 of the height there.
CASCADES = (("haarcascade_frontalface_default.xml", 360, 1.1, 5), ("haarcascade_profileface.xml", 288, 1.2, 3))

SEEN_FRAMES = 64  # detections remembered by frame content (Blurrer.seen): a few decoded chunks' worth


class BlurError(InputError):
    """Blur settings that cannot be used (unknown target, missing or unreadable detector file)."""


@dataclass(frozen=True)
class BlurSettings:
    """What to blur: ``targets`` among :data:`BLUR_TARGETS`, plus an optional YOLO weights file."""

    targets: tuple[str, ...] = BLUR_TARGETS
    detector: str | None = None  # a path, kept as text so the settings stay JSON-able in manifests
    margin: float = 0.15  # grown by this share of the box's size on each side
    radius: float = 24.0  # Gaussian blur radius in pixels of the frame as stored (--max-side)

    def __post_init__(self):
        unknown = sorted(set(self.targets) - set(BLUR_TARGETS))
        if unknown:
            raise BlurError(f"unknown blur target(s) {unknown}; choose from {list(BLUR_TARGETS)} and detector=PATH")
        if self.detector is not None:
            path = Path(self.detector)
            if not path.is_file():
                raise BlurError(f"blur detector file {path} does not exist; give detector=PATH of a YOLO .pt file")
            try:
                with path.open("rb") as handle:
                    handle.read(1)
            except OSError as err:
                raise BlurError(f"blur detector file {path} cannot be read: {err}") from err

    @classmethod
    def parse(cls, spec: str) -> BlurSettings:
        """``"text,faces"`` / ``"faces,detector=weights.pt"`` -> settings (the ``--blur`` option's syntax)."""
        targets, detector = [], None
        for part in (item.strip() for item in spec.split(",")):
            if not part:
                continue
            if part.startswith("detector="):
                detector = part.removeprefix("detector=")
            else:
                targets.append(part)
        if not targets and detector is None:
            raise BlurError(f"--blur {spec!r} names nothing to blur; e.g. --blur text,faces")
        return cls(tuple(dict.fromkeys(targets)), detector)


class TextDetector:
    """PP-OCR text detection (rapidocr, ONNX weights inside the wheel), on onnxruntime's GPU provider when present."""

    name = "text"

    def __init__(self):
        from rapidocr import RapidOCR  # heavy: onnxruntime sessions

        # "max" never upscales (the default "min" enlarges a small frame to 736 px, slow and prone to false boxes);
        # frames arrive already scaled to TEXT_SIDE (detect), so the 960 px limit never binds.
        params = {"Global.log_level": "error", "Det.limit_type": "max", "Det.limit_side_len": 960}
        # One thread per call: the build detects on several frames at once, a thread each (builders/sureon/frames.py),
        # which keeps every core busy without onnxruntime's threads spin-waiting on each other (40% of its CPU time
        # on a 768 px frame with two threads).
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = 1
        params["EngineConfig.onnxruntime.inter_op_num_threads"] = 1
        provider = onnx_provider()
        if provider == "cuda":
            params["EngineConfig.onnxruntime.use_cuda"] = True
        # Only the detection model: RapidOCR's full call also crops every box for the recogniser and pads frames of
        # extreme aspect ratios, work that detection alone never uses (a fifth of its time on a 768 px frame).
        self._detect = RapidOCR(params=params)._load_det_model()
        # RapidOCR normalises each frame in float64 and resizes it to the size it already has (3.0 ms of its 54 ms call
        # on a 512x288 frame); the same values, bit for bit, come from a table of the 256 levels of each channel
        # (0.8 ms), so the boxes found are exactly RapidOCR's (checked on the benchmark's frames).
        levels = np.arange(256, dtype=np.float32)[:, None] * (1 / 255.0)
        self._levels = ((levels - self._detect.mean) / self._detect.std).astype(np.float32).T.copy()
        self.version = f"rapidocr-{version('rapidocr')}+onnxruntime-{version('onnxruntime')}+side{TEXT_SIDE}"
        if provider == "cuda":  # CUDA kernels round differently: boxes may move by a pixel, so the cache keeps apart
            self.version += "+cuda"

    def detect(self, rgb: np.ndarray) -> list[tuple[float, float, float, float]]:
        import cv2

        height, width = rgb.shape[:2]
        image, sx, sy = rgb, 1.0, 1.0
        if max(height, width) > TEXT_SIDE:  # area-averaged down to the working size (sides a multiple of 32)
            scale = TEXT_SIDE / max(height, width)
            size = (max(32, round(width * scale / 32) * 32), max(32, round(height * scale / 32) * 32))
            image = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
            sx, sy = size[0] / width, size[1] / height
        found = []
        for b in self._boxes(image):
            xs, ys = b[:, 0] / sx, b[:, 1] / sy  # back to the frame's pixels
            box = (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))
            # PP-OCR boxes are text lines: one taller than a quarter of the frame is a textured region, not text.
            if box[3] - box[1] <= MAX_TEXT_LINE_HEIGHT * rgb.shape[0]:
                found.append(box)
        return found

    def _boxes(self, image: np.ndarray) -> np.ndarray:
        """RapidOCR's detection of text-line quadrilaterals (N x 4 x 2, pixels of ``image``) as its own call finds
        them, less its overhead: its rounding of the sides to multiples of 32, the network's input built from
        :attr:`_levels`, then its post-processing."""
        import cv2

        height, width = image.shape[:2]
        size = (round(width / 32) * 32, round(height / 32) * 32)
        if 0 in size:
            return np.zeros((0, 4, 2), np.float32)
        net = cv2.resize(image, size) if size != (width, height) else image
        chw = np.stack([self._levels[channel][net[:, :, channel]] for channel in range(3)])[None]
        boxes, _ = self._detect.postprocess_op(self._detect.session(chw), (height, width))
        return self._detect.sorted_boxes(boxes) if len(boxes) else boxes


def onnx_provider() -> str:
    """``cuda`` when the installed onnxruntime has its CUDA provider (the ``onnxruntime-gpu`` wheel) and torch sees a
    GPU, else ``cpu``: the GPU is used when present, never required."""
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class FaceDetector:
    """OpenCV's bundled Haar cascades: frontal faces, and profiles facing either way (:data:`CASCADES`)."""

    name = "faces"

    def __init__(self):
        import cv2

        # One thread per search, as for the text detector: the build already runs a frame per core
        # (builders/sureon/frames.py), and OpenCV's own threads on top cost about 10% more CPU per search (768x432
        # frames, quiet 2-core machine). The setting is OpenCV's, process-wide; nothing else in a build uses OpenCV.
        cv2.setNumThreads(1)
        self._cv2 = cv2
        folder = Path(getattr(getattr(cv2, "data", None), "haarcascades", "") or "")
        missing = [name for name, *_ in CASCADES if not (folder / name).is_file()]
        if missing:
            raise BlurError(
                f"OpenCV {cv2.__version__} ships no Haar cascades {missing} (the 5.x wheels dropped them); install "
                "the version pyproject.toml pins: pip install 'opencv-python-headless>=4.8,<5'"
            )
        self._paths = [str(folder / name) for name, *_ in CASCADES]
        self._local = threading.local()  # a CascadeClassifier is not safe to share: one set per frame thread
        digest = hashlib.sha256(b"".join((folder / name).read_bytes() for name, *_ in CASCADES)).hexdigest()[:12]
        search = "-".join(f"h{h}s{step}n{hits}" for _, h, step, hits in CASCADES)  # the search changes what is found
        self.version = f"opencv-{cv2.__version__}+haar-{digest}+{search}"

    def _cascades(self) -> list:
        if not hasattr(self._local, "cascades"):
            self._local.cascades = [self._cv2.CascadeClassifier(path) for path in self._paths]
        return self._local.cascades

    def detect(self, rgb: np.ndarray) -> list[tuple[float, float, float, float]]:
        cv2 = self._cv2
        full = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        found = []
        for cascade, (name, height, step, hits) in zip(self._cascades(), CASCADES, strict=True):
            scale = min(1.0, height / full.shape[0])
            gray = cv2.resize(full, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else full
            # the profile cascade finds left-facing profiles only: it also runs on the mirrored frame
            for flip in (False, True) if "profile" in name else (False,):
                image = np.ascontiguousarray(gray[:, ::-1]) if flip else gray
                for x, y, w, h in cascade.detectMultiScale(image, step, hits, minSize=(24, 24)):
                    x0 = gray.shape[1] - (x + w) if flip else x
                    found.append(tuple(float(v) / scale for v in (x0, y, x0 + w, y + h)))
        return found


class YoloDetector:
    """A local YOLO weights file run with ultralytics (the ``blur-yolo`` extra); every detected class is blurred."""

    name = "yolo"

    def __init__(self, path: Path):
        try:
            from ultralytics import YOLO
        except ImportError as err:
            raise BlurError(f"detector={path} needs ultralytics: pip install -e '.[blur-yolo]'") from err
        try:
            self._model = YOLO(str(path))
        except Exception as err:
            raise BlurError(f"blur detector file {path} cannot be loaded by ultralytics: {err}") from err
        self._lock = threading.Lock()  # ultralytics' predictors are not thread-safe; the frame threads take turns
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
        self.version = f"ultralytics-{version('ultralytics')}+{Path(path).name}-{digest}"

    def detect(self, rgb: np.ndarray) -> list[tuple[float, float, float, float]]:
        with self._lock:
            result = self._model.predict(rgb[:, :, ::-1], verbose=False)[0]  # ultralytics takes BGR arrays
        return [tuple(float(v) for v in box) for box in result.boxes.xyxy.tolist()]


@dataclass
class Blurrer:
    """The detectors of one set of :class:`BlurSettings`, loaded once and applied to every frame."""

    settings: BlurSettings
    detectors: list = field(default_factory=list)
    # The detections of the last SEEN_FRAMES frames by content: a video holding still (a slide, a paused picture)
    # decodes to byte-identical frames, and the detectors, deterministic, would find the same boxes again.
    seen: dict = field(default_factory=dict, repr=False)
    _seen_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # frames run on several threads

    @classmethod
    def load(cls, settings: BlurSettings) -> Blurrer:
        detectors = []
        if "text" in settings.targets:
            detectors.append(TextDetector())
        if "faces" in settings.targets:
            detectors.append(FaceDetector())
        if settings.detector is not None:
            detectors.append(YoloDetector(Path(settings.detector)))
        return cls(settings, detectors)

    def fingerprint(self) -> dict:
        """Everything the blurred pixels depend on: the cache key of blurred frames includes it."""
        return {
            "detectors": {detector.name: detector.version for detector in self.detectors},
            "margin": self.settings.margin,
            "radius": self.settings.radius,
        }

    def describe(self) -> str:
        return ", ".join(f"{detector.name} ({detector.version})" for detector in self.detectors)

    def apply(self, rgb: np.ndarray) -> tuple[np.ndarray, list[dict]]:
        """An HWC uint8 frame -> (the frame with every detected box blurred, the boxes on the 0-1000 grid)."""
        height, width = rgb.shape[:2]
        key = (rgb.shape, hashlib.blake2b(np.ascontiguousarray(rgb).data, digest_size=16).digest())  # ~1 ms, GIL-free
        with self._seen_lock:
            regions = self.seen.get(key)
        if regions is None:
            regions = []
            for detector in self.detectors:
                for box in detector.detect(rgb):
                    grown = grow(box, self.settings.margin, width, height)
                    if grown is not None:
                        box = to_grid(grown, width, height)
                        regions.append({"detector": detector.name, "box": box, "pixels": grown})
            with self._seen_lock:
                self.seen[key] = regions
                while len(self.seen) > SEEN_FRAMES:
                    del self.seen[next(iter(self.seen))]  # the oldest
        if not regions:
            return rgb, []
        return blur_boxes(rgb, [r["pixels"] for r in regions], self.settings.radius), [
            {"detector": r["detector"], "box": r["box"]} for r in regions
        ]


def blur_boxes(rgb: np.ndarray, boxes: list[tuple[int, int, int, int]], radius: float) -> np.ndarray:
    """A copy of ``rgb`` with each pixel box replaced by the Gaussian blur of the frame there.

    Only the boxes and the reach of the blur around them are blurred, not the whole frame (15 ms on a 768x432 frame
    for a text line and a face): PIL's Gaussian is three box blurs in integer arithmetic with edges extended, so a
    pixel's blurred value depends only on the pixels within ``3 * (ceil(radius) + 2)`` of it and on the frame's edges,
    and a crop keeping both gives the same bytes as the whole frame blurred (tests/test_blur.py checks it)."""
    height, width = rgb.shape[:2]
    reach = 3 * (math.ceil(radius) + 2)
    crops = [
        (max(0, x0 - reach), max(0, y0 - reach), min(width, x1 + reach), min(height, y1 + reach))
        for x0, y0, x1, y1 in boxes
    ]
    if sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in crops) >= width * height:
        crops = [(0, 0, width, height)] * len(boxes)  # crops as large as the frame together: blur it once
    out, blurred = rgb.copy(), {}
    for (x0, y0, x1, y1), crop in zip(boxes, crops, strict=True):
        if crop not in blurred:
            cx0, cy0, cx1, cy1 = crop
            patch = Image.fromarray(np.ascontiguousarray(rgb[cy0:cy1, cx0:cx1]))
            blurred[crop] = np.asarray(patch.filter(ImageFilter.GaussianBlur(radius)))
        cx0, cy0 = crop[:2]
        out[y0:y1, x0:x1] = blurred[crop][y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
    return out


def grow(box, margin: float, width: int, height: int) -> tuple[int, int, int, int] | None:
    """A detection box grown by ``margin`` of its size on each side, as integer pixels clipped to the frame."""
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * margin, (y1 - y0) * margin
    left, top = max(0, int(np.floor(x0 - dx))), max(0, int(np.floor(y0 - dy)))
    right, bottom = min(width, int(np.ceil(x1 + dx))), min(height, int(np.ceil(y1 + dy)))
    return (left, top, right, bottom) if right > left and bottom > top else None


def to_grid(box: tuple[int, int, int, int], width: int, height: int) -> list[int]:
    """Pixel box -> ``[x0, y0, x1, y1]`` on the 0-1000 grid of the frame (resolution independent)."""
    x0, y0, x1, y1 = box
    return [round(x0 * GRID / width), round(y0 * GRID / height), round(x1 * GRID / width), round(y1 * GRID / height)]


_LOADED: dict[BlurSettings, Blurrer] = {}


def blurrer_for(settings: BlurSettings) -> Blurrer:
    """The detectors of ``settings``, loaded once per process (frame workers each load their own)."""
    if settings not in _LOADED:
        _LOADED[settings] = Blurrer.load(settings)
    return _LOADED[settings]
