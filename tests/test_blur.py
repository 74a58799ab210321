"""Blurring of on-screen text and faces in evaluation frames (the Sureon paper's D.1): detectors, pixels, the build."""

import io
import json

import numpy as np
import pytest
from conftest import SAMPLE_RELEASE
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from skimage.data import astronaut

from builders.blur import BlurError, Blurrer, BlurSettings, TextDetector, blur_boxes, blurrer_for
from builders.sureon.build import BuildOptions, build_sureon
from sample_data.make_videos import encode_h264, paint_index
from sureon.cli import main as cli_main


TEXT_BOX = (60, 40, 600, 96)  # where the overlay text is drawn on a 1280x720 frame


def surgical_background(height=720, width=1280) -> np.ndarray:
    """A reddish, smoothly shaded frame: no text, no face."""
    y, x = np.mgrid[0:height, 0:width]
    red = 120 + 60 * np.sin(x / 97.0) * np.cos(y / 53.0)
    return np.stack([red, 0.35 * red, 0.3 * red], axis=-1).astype(np.uint8)


def with_overlay_text(frame: np.ndarray) -> np.ndarray:
    image = Image.fromarray(frame)
    ImageDraw.Draw(image).text(
        TEXT_BOX[:2], "LAPAROSCOPIC CHOLECYSTECTOMY", fill=(255, 255, 255), font=ImageFont.load_default(size=40)
    )
    return np.asarray(image)


def with_face(frame: np.ndarray, left=700, top=150) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    face = astronaut()  # a real photograph shipped inside scikit-image
    out = frame.copy()
    out[top : top + face.shape[0], left : left + face.shape[1]] = face
    return out, (left, top, left + face.shape[1], top + face.shape[0])


def inside(region_box, frame_box, width=1280, height=720) -> bool:
    """A 0-1000 grid region covers the pixel box ``frame_box``."""
    x0, y0, x1, y1 = region_box
    px = (x0 * width / 1000, y0 * height / 1000, x1 * width / 1000, y1 * height / 1000)
    return (
        px[0] <= frame_box[0] + 2
        and px[1] <= frame_box[1] + 2
        and px[2] >= frame_box[2] - 2
        and px[3] >= frame_box[3] - 2
    )


def outside_mask(regions, shape, pad=0) -> np.ndarray:
    height, width = shape[:2]
    mask = np.ones((height, width), dtype=bool)
    for region in regions:
        x0, y0, x1, y1 = region["box"]
        mask[
            max(0, int(y0 * height / 1000) - pad) : int(np.ceil(y1 * height / 1000)) + pad,
            max(0, int(x0 * width / 1000) - pad) : int(np.ceil(x1 * width / 1000)) + pad,
        ] = False
    return mask


@pytest.fixture(scope="module")
def blurrer():
    return blurrer_for(BlurSettings())


def test_overlay_text_is_found_and_unreadable_after_blurring(blurrer):
    frame = with_overlay_text(surgical_background())
    blurred, regions = blurrer.apply(frame)
    text_regions = [r for r in regions if r["detector"] == "text"]
    assert text_regions, "the OCR detector found no overlay text"
    drawn = (80, 48, 560, 88)  # the glyphs' extent inside TEXT_BOX
    assert any(inside(r["box"], drawn) for r in text_regions)
    # after blurring, the OCR finds no text where the overlay was
    again = TextDetector().detect(blurred)
    overlaps = [
        b for b in again if b[0] < TEXT_BOX[2] and b[2] > TEXT_BOX[0] and b[1] < TEXT_BOX[3] and b[3] > TEXT_BOX[1]
    ]
    assert not overlaps
    # every pixel outside the blurred boxes is the original's
    keep = outside_mask(regions, frame.shape)
    assert np.array_equal(blurred[keep], frame[keep])
    assert not np.array_equal(blurred[~keep], frame[~keep])


def test_a_real_face_is_found_and_blurred(blurrer):
    frame, face_box = with_face(surgical_background())
    blurred, regions = blurrer.apply(frame)
    faces = [r for r in regions if r["detector"] == "faces"]
    assert faces, "the astronaut's face was not found"
    fx0, fy0, fx1, fy1 = faces[0]["box"]
    centre = ((fx0 + fx1) / 2 * 1280 / 1000, (fy0 + fy1) / 2 * 720 / 1000)
    assert face_box[0] < centre[0] < face_box[2] and face_box[1] < centre[1] < face_box[3]
    keep = outside_mask(regions, frame.shape)
    assert np.array_equal(blurred[keep], frame[keep])
    region = ~keep
    assert np.abs(blurred[region].astype(int) - frame[region].astype(int)).mean() > 5


def test_a_frame_without_text_or_face_is_returned_untouched(blurrer):
    frame = surgical_background()
    blurred, regions = blurrer.apply(frame)
    assert regions == [] and blurred is frame
    stripes = paint_index(1234)  # the sample videos' binary stripes must not read as text
    assert blurrer.apply(stripes)[1] == []


def test_blurring_is_deterministic(blurrer):
    frame = with_face(with_overlay_text(surgical_background()))[0]
    first = blurrer.apply(frame)
    blurrer.seen.clear()  # detected afresh, not remembered
    second = blurrer.apply(frame)
    assert first[1] == second[1] and np.array_equal(first[0], second[0])


def test_blurring_only_around_the_boxes_gives_the_bytes_of_the_whole_frame_blurred():
    rng = np.random.default_rng(7)
    frame = np.asarray(Image.fromarray(rng.integers(0, 256, (54, 96, 3), dtype=np.uint8)).resize((768, 432)))
    cases = [
        [(30, 20, 400, 50)],  # a text line, far from the edges
        [(30, 20, 400, 50), (540, 200, 768, 432)],  # and a face in the corner: crops reach the frame's edges
        [(0, 0, 768, 432)],  # everything
        [(100, 100, 300, 300), (200, 200, 700, 420), (10, 300, 60, 330)],  # overlapping boxes
    ]
    for boxes in cases:
        for radius in (24.0, 5.0):
            whole = Image.fromarray(frame).filter(ImageFilter.GaussianBlur(radius))
            mask = Image.new("L", (768, 432), 0)
            for box in boxes:
                mask.paste(255, box)
            expected = Image.fromarray(frame)
            expected.paste(whole, (0, 0), mask)
            assert np.array_equal(blur_boxes(frame, boxes, radius), np.asarray(expected)), (boxes, radius)


def test_a_frame_seen_before_is_not_detected_again_and_gets_the_same_pixels(monkeypatch):
    blurrer = Blurrer.load(BlurSettings())
    frame = with_face(with_overlay_text(surgical_background()))[0]
    first = blurrer.apply(frame)
    calls = []
    for detector in blurrer.detectors:
        monkeypatch.setattr(detector, "detect", lambda rgb, d=detector.detect: calls.append(1) or d(rgb))
    again = blurrer.apply(frame.copy())  # the same bytes in another array, as a still video decodes them
    assert calls == [] and again[1] == first[1] and np.array_equal(again[0], first[0])
    changed = frame.copy()
    changed[0, 0, 0] ^= 1  # one level of one pixel: detected afresh
    blurrer.apply(changed)
    assert len(calls) == len(blurrer.detectors)


def test_settings_are_validated_before_any_work(tmp_path):
    assert BlurSettings.parse("text,faces") == BlurSettings(("text", "faces"))
    assert BlurSettings.parse("faces").targets == ("faces",)
    with pytest.raises(BlurError, match="logos"):
        BlurSettings.parse("text,logos")
    missing = tmp_path / "lemon_yolo.pt"
    with pytest.raises(BlurError, match="lemon_yolo.pt does not exist"):
        BlurSettings.parse(f"text,detector={missing}")
    with pytest.raises(BlurError, match="names nothing"):
        BlurSettings.parse(",")


def test_fingerprint_names_every_detector_version(blurrer):
    fingerprint = blurrer.fingerprint()
    assert set(fingerprint["detectors"]) == {"text", "faces"}
    assert (
        fingerprint["detectors"]["text"].startswith("rapidocr-") and "onnxruntime-" in fingerprint["detectors"]["text"]
    )
    assert fingerprint["detectors"]["faces"].startswith("opencv-4.")
    assert Blurrer.load(BlurSettings(margin=0.3)).fingerprint() != fingerprint


# --- the build ---------------------------------------------------------------------------------------------------


BENCH_SOURCE = "9f1e2d3c4b5a69788796a5b4c3d2e1f0"  # 10 fps, 90 s: the source of the sample bench's clips


def write_overlay_video(path, seconds=90, fps=10):
    """The bench source re-recorded at 640x360 with a lecture overlay (title text) and a presenter's face."""
    import av

    face = np.asarray(Image.fromarray(astronaut()).resize((240, 240)))  # Haar cascades need a face of >= ~60 px
    title = ImageFont.load_default(size=28)

    def frames():
        for index in range(round(seconds * fps)):
            frame = paint_index(index, 640, 360) // 3
            frame[120:360, 400:640] = face
            image = Image.fromarray(frame)
            ImageDraw.Draw(image).text((30, 20), "LIVER RESECTION", fill=(255, 255, 0), font=title)
            yield av.VideoFrame.from_ndarray(np.asarray(image), format="rgb24")

    encode_h264(path, frames(), fps, (640, 360), 50, {"crf": "18", "preset": "veryfast"})


def build(tmp_path, release, videos, name, **kwargs):
    options = BuildOptions(
        release=release,
        out=tmp_path / name,
        videos=videos,
        cache_dir=tmp_path / "cache",
        on_missing_video="skip",
        configs=["bench", "db"],
        **kwargs,
    )
    return build_sureon(options)


def decode(frame) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(frame["bytes"])).convert("RGB")).astype(int)


@pytest.fixture(scope="module")
def overlay_builds(tmp_path_factory, sample_videos):
    import shutil

    tmp = tmp_path_factory.mktemp("blur_build")
    videos = tmp / "videos"
    shutil.copytree(sample_videos, videos)
    write_overlay_video(videos / f"{BENCH_SOURCE}.mp4")
    blurred = build(tmp, SAMPLE_RELEASE, videos, "blurred")
    plain = build(tmp, SAMPLE_RELEASE, videos, "plain", blur=None)
    return tmp, videos, blurred, plain


def raw_rows(build_report, config):
    import pyarrow.parquet as pq

    files = sorted((build_report.out / config).glob("*.parquet"))
    return [row for file in files for row in pq.read_table(file).to_pylist()]


def test_bench_frames_of_the_overlay_video_are_blurred_where_detected_and_nowhere_else(overlay_builds):
    _, _, blurred, plain = overlay_builds
    bench, bench_plain = raw_rows(blurred, "bench"), raw_rows(plain, "bench")
    touched = found_faces = 0
    for row, reference in zip(bench, bench_plain, strict=True):
        assert row["question_id"] == reference["question_id"]
        assert row["frame_timestamps"] == reference["frame_timestamps"]
        if row["source_id"] != BENCH_SOURCE:
            assert row["blurred_regions"] == [[] for _ in row["frames"]]
            assert [f["bytes"] for f in row["frames"]] == [f["bytes"] for f in reference["frames"]]
            continue
        for frame, frame_plain, regions in zip(
            row["frames"], reference["frames"], row["blurred_regions"], strict=True
        ):
            assert "text" in {r["detector"] for r in regions}  # the title is on every frame
            found_faces += "faces" in {r["detector"] for r in regions}
            pixels, pixels_plain = decode(frame), decode(frame_plain)
            far = outside_mask(regions, pixels.shape, pad=24)  # JPEG blocks and resizing reach a few pixels out
            assert np.abs(pixels[far] - pixels_plain[far]).max() <= 2
            touched += 1
    print(f"faces found on {found_faces} of {touched} frames")
    assert touched > 0 and found_faces >= touched / 2  # Haar cascades miss some frames of a face after H.264
    assert all(regions == [] for row in raw_rows(plain, "bench") for regions in row["blurred_regions"])


def test_training_configs_are_not_blurred_and_the_card_says_what_was(overlay_builds):
    _, _, blurred, plain = overlay_builds
    db, db_plain = raw_rows(blurred, "db"), raw_rows(plain, "db")
    # training configs store frames as files under media/ (the default layout): same paths, same bytes, no regions
    paths = [path for row in db for path in row["frames"]]
    assert paths and paths == [path for row in db_plain for path in row["frames"]]
    assert all((blurred.out / p).read_bytes() == (plain.out / p).read_bytes() for p in paths)
    assert not (blurred.out / "media" / "blurred").exists()
    assert all(regions == [] for row in db for regions in row["blurred_regions"])
    manifest = json.loads((blurred.out / "build_manifest.json").read_text())
    blur = manifest["frames"]["blur"]
    assert blur["configs"] == ["bench"] and set(blur["detectors"]) == {"text", "faces"}
    assert 0 < blur["frames"]["bench"]["frames_blurred"] < blur["frames"]["bench"]["frames"]
    card = (blurred.out / "README.md").read_text()
    assert "blurred in the frames of" in card and "`bench`" in card and "rapidocr-" in card
    plain_card = (plain.out / "README.md").read_text()
    assert (
        "does not do" in plain_card
        and json.loads((plain.out / "build_manifest.json").read_text())["frames"]["blur"] is None
    )


def test_a_rebuild_detects_nothing_twice_and_is_byte_identical(overlay_builds, monkeypatch):
    tmp, videos, blurred, _ = overlay_builds

    def no_detection(*args, **kwargs):
        raise AssertionError("a rebuild ran a detector")

    monkeypatch.setattr(Blurrer, "apply", no_detection)
    again = build(tmp, SAMPLE_RELEASE, videos, "again")
    for config in ("bench", "db"):
        first = sorted((blurred.out / config).glob("*.parquet"))
        second = sorted((again.out / config).glob("*.parquet"))
        assert first and [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_a_missing_detector_file_stops_the_build_before_any_decoding(sample_videos, tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["build", "sureon", "--release", str(SAMPLE_RELEASE), "--videos", str(sample_videos), "--out", str(out)]
    argv += ["--cache-dir", str(cache), "--blur", f"text,detector={tmp_path / 'lemon_yolo.pt'}"]
    assert cli_main(argv) == 2
    assert "lemon_yolo.pt does not exist" in capsys.readouterr().err
    assert not out.exists() and not cache.exists()


def test_a_training_config_blurred_on_request_keeps_its_frames_apart(overlay_builds):
    tmp, videos, _, _ = overlay_builds
    asked = build(tmp, SAMPLE_RELEASE, videos, "db-blurred", blur_configs=("bench", "db"))
    db = raw_rows(asked, "db")
    paths = [path for row in db for path in row["frames"]]
    assert paths and all(path.startswith("media/blurred/") for path in paths)  # never mixed with unblurred frames
    manifest = json.loads((asked.out / "build_manifest.json").read_text())
    assert manifest["frames"]["blur"]["configs"] == ["bench", "db"]


# --- every frame of a clip, however its text comes and goes ---------------------------------------------------------


CAPTION, CAPTION_AT = "CYSTIC ARTERY CLIPPED", (40, 280)


def write_caption_video(path, text_from: float, seconds=10, fps=10):
    """640x360 over a panning background (every pixel changes, as in surgical footage) with a caption drawn on the
    frames from ``text_from`` seconds on: 0 gives a static overlay on every frame."""
    import av

    y, x = np.mgrid[0:360, 0 : 640 + 4 * seconds * fps]
    red = 120 + 60 * np.sin(x / 48.0) * np.cos(y / 27.0)
    field = np.stack([red, 0.35 * red, 0.3 * red], axis=-1).astype(np.uint8)
    font = ImageFont.load_default(size=24)

    def frames():
        for index in range(seconds * fps):
            image = Image.fromarray(np.ascontiguousarray(field[:, 4 * index : 4 * index + 640]))
            if index / fps >= text_from:
                ImageDraw.Draw(image).text(CAPTION_AT, CAPTION, fill="white", font=font)
            yield av.VideoFrame.from_ndarray(np.asarray(image), format="rgb24")

    encode_h264(path, frames(), fps, (640, 360), 50, {"crf": "20", "preset": "veryfast"})
    return path


@pytest.mark.parametrize("text_from", [0.0, 6.0], ids=["static overlay", "text from 6 s on"])
def test_every_frame_of_a_clip_that_shows_text_is_blurred_and_no_other(tmp_path, text_from):
    from builders.sureon.frames import FramePolicy, open_clip_decoder, sample_clip

    video = write_caption_video(tmp_path / "caption.mp4", text_from)
    policy = FramePolicy(blur=BlurSettings())
    clip = sample_clip(open_clip_decoder(video, policy), 0.0, 9.9, policy)
    glyphs = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox(
        CAPTION_AT, CAPTION, font=ImageFont.load_default(size=24)
    )
    shown = [stamp >= text_from for stamp in clip.timestamps]
    assert len(clip.jpegs) == 8 and any(shown) and (text_from == 0 or not all(shown))
    for stamp, regions, has_text in zip(clip.timestamps, clip.blurred_regions, shown, strict=True):
        text = [r for r in regions if r["detector"] == "text"]
        if has_text:
            assert any(inside(r["box"], glyphs, 640, 360) for r in text), f"the caption at {stamp}s was not blurred"
        else:
            assert not text, f"a region was blurred at {stamp}s, before the caption appears"


def test_the_gpu_onnx_provider_is_used_only_when_installed_and_a_gpu_is_seen(monkeypatch):
    import onnxruntime
    import torch

    from builders.blur import onnx_provider

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert onnx_provider() == "cpu"  # the CPU wheel: never required, nothing to load
    monkeypatch.setattr(
        onnxruntime, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    assert onnx_provider() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert onnx_provider() == "cpu"  # onnxruntime-gpu on a machine without a GPU
