"""Helpers for the tiny native-layout copies that tests and ``make demo`` build (no binaries are committed).

Each sample module ``public_converters/samples/<source>.py`` defines ``write(root)`` and ``BAD_INPUTS``: a dict from a
bad-input case (see ``BAD_INPUT_CASES``) to a function that damages a written copy and returns the name (or a fragment
of the path relative to the root) that the resulting error must mention; ``remove``, ``cut``, ``shrink``, ``rewrite``,
``rename``, ``edit_json``, ``cut_lines``, ``not_utf8``, ``remove_video`` and ``misname_video`` build the usual ones.
Every source whose annotations name its videos has ``missing_video``, and every source that decodes videos
``misnamed_video``: an annotated video is never left out without a word. A module may also define
``WARNED_INPUTS`` (cases of ``WARNED_INPUT_CASES``): damage the build keeps going through, with a named, counted
warning that must mention the returned name. ``short_annotation`` is in one or the other for every source whose
annotation files label every frame of a video it ships: an error where another file gives the cut away (masks or
instrument rows past the phases' end), else a warning (``SourceTables.coverage``). Images are small (64x48 unless
the source needs a fixed size) and deterministic: content is drawn from a generator seeded by the file's name.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

from builders.errors import InputError
from builders.options import stable_seed


Damage = Callable[[Path], str]
"""Damages a written sample copy (its root) and returns what the resulting error must mention."""

BAD_INPUT_CASES = (
    "missing_file",
    "truncated_image",
    "wrong_mask_size",
    "malformed_row",
    "unknown_label",
    "not_utf8",  # an annotation file saved in another encoding
    "bad_number",  # NaN, infinity or a negative size where an annotation gives a number
    "short_annotation",  # an annotation file cut at a line boundary, that another file gives away
    "missing_video",  # an annotated video that is not there (a download that failed, a zip not extracted)
    "misnamed_video",  # an annotated video under another name (case, extension, a typo)
)
WARNED_INPUT_CASES = ("short_annotation",)  # cut at a line boundary: it builds, with a warning naming the file


def rng_for(*parts) -> np.random.Generator:
    return np.random.default_rng(stable_seed(*parts))


def noise_image(name: str, size: tuple[int, int] = (64, 48)) -> np.ndarray:
    """A deterministic RGB frame (width, height = size) whose content depends on ``name``."""
    width, height = size
    return rng_for("sample-frame", name).integers(0, 256, (height, width, 3), dtype=np.uint8)


def write_image(path: Path, pixels: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path)
    return path


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_json(path: Path, payload) -> Path:
    return write_text(path, json.dumps(payload, indent=1))


def write_video(path: Path, frames: int, fps: int, size: tuple[int, int] = (64, 48)) -> Path:
    """A short H.264 mp4 of painted frames (each frame's index readable back, see sample_data/make_videos.py)."""
    import av

    from sample_data.make_videos import encode_h264, paint_index

    width, height = size
    stream = (
        av.VideoFrame.from_ndarray(paint_index(index, width=width, height=height), format="rgb24")
        for index in range(frames)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    encode_h264(path, stream, fps, size, gop=fps * 2, options={"crf": "28", "preset": "ultrafast"})
    return path


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut a file to a fraction of its bytes (a broken download)."""
    data = path.read_bytes()
    path.write_bytes(data[: max(1, int(len(data) * keep))])


def resize_image(path: Path, size: tuple[int, int]) -> None:
    """Save the image at another size, nearest-neighbour so class values survive."""
    with Image.open(path) as image:
        image.resize(size, Image.Resampling.NEAREST).save(path)


def replace_in_file(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    if old not in text:
        raise InputError(f"{path}: {old!r} not found (the sample layout changed)")
    path.write_text(text.replace(old, new, count))


def _damage(relative: str, names: str | None, apply: Callable[[Path], None]) -> Damage:
    def damage(root: Path) -> str:
        apply(root / relative)
        return Path(relative).name if names is None else names

    return damage


def remove(relative: str, names: str | None = None) -> Damage:
    """Delete a file or a whole folder (an incomplete download)."""
    return _damage(relative, names, lambda path: shutil.rmtree(path) if path.is_dir() else path.unlink())


def cut(relative: str, keep: float = 0.4, names: str | None = None) -> Damage:
    """Keep only the first ``keep`` fraction of a file's bytes (a broken download)."""
    return _damage(relative, names, lambda path: truncate(path, keep))


def shrink(relative: str, size: tuple[int, int] = (32, 24), names: str | None = None) -> Damage:
    """Resave an image (a mask, usually) at another (width, height) than its frame's."""
    return _damage(relative, names, lambda path: resize_image(path, size))


def rewrite(relative: str, old: str, new: str, count: int = 1, names: str | None = None) -> Damage:
    """Replace text in a file (a malformed row, a misspelled label)."""
    return _damage(relative, names, lambda path: replace_in_file(path, old, new, count))


def rename(relative: str, new_name: str, names: str | None = None) -> Damage:
    """Rename a file or folder within its folder; the error must mention ``names``, else the new name."""
    return _damage(relative, names or new_name, lambda path: path.rename(path.with_name(new_name)))


def cut_lines(relative: str, keep: int, names: str | None = None) -> Damage:
    """Keep the first ``keep`` lines of a text file (cut at a line boundary: every row it keeps is well formed)."""

    def apply(path: Path) -> None:
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:keep]))

    return _damage(relative, names, apply)


def not_utf8(relative: str, names: str | None = None) -> Damage:
    """Put a Latin-1 byte (an accented letter saved by a non-UTF-8 editor) at the start of the file's second line."""

    def apply(path: Path) -> None:
        data = path.read_bytes()
        at = data.find(b"\n") + 1
        path.write_bytes(data[:at] + b"\xe9" + data[at:])

    return _damage(relative, names, apply)


def edit_json(relative: str, change: Callable[[dict], None], names: str | None = None) -> Damage:
    """Load a JSON file, let ``change`` mutate the document in place, write it back."""

    def apply(path: Path) -> None:
        document = json.loads(path.read_text())
        change(document)
        write_json(path, document)

    return _damage(relative, names, apply)


def remove_video(relative: str) -> Damage:
    """Delete an annotated video; the error names the file expected."""

    def damage(root: Path) -> str:
        (root / relative).unlink()
        return f"{Path(relative).name}: not found"

    return damage


def misname_video(relative: str, new_name: str) -> Damage:
    """Rename an annotated video (``VIDEO41.MP4``, ``video41.avi``); the error names the file expected and the near
    miss found, relative to the root."""

    def damage(root: Path) -> str:
        (root / relative).rename((root / relative).with_name(new_name))
        return f"{Path(relative).name}: not found, but {Path(relative).with_name(new_name).as_posix()} is there"

    return damage
