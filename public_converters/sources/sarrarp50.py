"""SAR-RARP50 (Psychogyios et al. 2023, EndoVis 2022): suturing in 50 robot-assisted radical prostatectomies.

Layout read (``docs/sources/sarrarp50.md``; the official toolkit ``surgical-vision/SAR_RARP50-evaluation``)::

    train1/video_2/  train2/video_1/  test/video_41/ ...   each video_XX.zip unzipped; the top folders are optional
    video_XX/video_left.avi          60 fps (the toolkit hard-codes 60)
    video_XX/action_discrete.txt     no header, "<frame>,<action id>" at 10 Hz: frame = native 60-fps index
                                     (may be zero-padded, "000000006"), stepping by 6; ids 0-7, 0-based
    video_XX/segmentation/*.png      1 Hz class-id masks (not read, see below)

Confirmed (toolkit code): the file names, 60 fps, 10 Hz rows stepping by 6 on the native frame index, 0-based action
ids and their names. Quirks handled: folder numbers padded or not (``video_1`` / ``video_01``, both read as
``video_01``); videos 11, 15, 17 and 29 ship as halves ``video_XX_1`` / ``video_XX_2`` with their own frame numbering,
so each half is its own video here (one file, one time base), and both halves take the split of the operation number.
Action 0 ("Other") is the background class: such frames carry no action (``actions=[]``) and no segment.
Each 10-Hz sample covers its 6 frames; the frame count is not in the labels, so the media check clips the last
sample's segment at the video's last frame (the video may end 0-5 frames after that sample).

Left out: the 1 Hz segmentation. The Sureon paper feeds SAR-RARP50 to the clip branch only (Table 13) and the clip
branch needs tool *segments*, which would mean decoding every mask in the reader; class presence from 1 Hz masks is
left for an image-branch use of the source, if one is ever wanted.

Splits: the challenge's training set 1 and 2 (videos 1-40) are "train", 41-50 "test"; there is no validation split.
A video found under a ``test`` folder must be numbered 41-50 and vice versa.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import (
    Coverage,
    Frame,
    SourceError,
    SourceTables,
    Video,
    read_text,
    segments_from_labels,
)
from public_converters.spec import SourceSpec


FPS = 60
STEP = 6  # 10 Hz samples on the 60-fps frame index
ACTION_NAMES = {
    0: "Other",
    1: "Picking-up the needle",
    2: "Positioning the needle tip",
    3: "Pushing the needle through the tissue",
    4: "Pulling the needle out of the tissue",
    5: "Tying a knot",
    6: "Cutting the suture",
    7: "Returning/dropping the needle",
}
BACKGROUND = 0
ACTIONS = {
    "Picking-up the needle": "picking up the needle",
    "Positioning the needle tip": "positioning the needle tip",
    "Pushing the needle through the tissue": "pushing the needle through the tissue",
    "Pulling the needle out of the tissue": "pulling the needle out of the tissue",
    "Tying a knot": "tying a knot",
    "Cutting the suture": "cutting the suture",
    "Returning/dropping the needle": "returning or dropping the needle",
}
HALVED = (11, 15, 17, 29)  # one operation shipped as two recordings, video_XX_1 and video_XX_2
TRAIN_SET_1 = (2, 4, 5, 6, 8, 9, 10, 11, 12, 15, 16, 17, 19)
TEST = tuple(range(41, 51))
VIDEO_DIR = re.compile(r"^video_(\d{1,2})(?:_([12]))?$")


def video_id(number: int, half: str | None) -> str:
    return f"video_{number:02d}" + (f"_{half}" if half else "")


def _official_splits() -> dict[str, str]:
    splits = {}
    for number in range(1, 51):
        split = "test" if number in TEST else "train"
        for half in (None, "1", "2") if number in HALVED else (None,):
            splits[video_id(number, half)] = split
    return splits


SPLITS = {"official": _official_splits()}


def _actions(path: Path, labels) -> list[tuple[int, int, str | None]]:
    """(row, frame, canonical action or None for background) of one action_discrete.txt."""
    text = read_text(path, fix="every video_XX folder needs its action_discrete.txt")
    rows, previous = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 2 or not cells[0].isdigit() or not cells[1].isdigit():
            raise SourceError(path, f"malformed row {line!r}", row=number, fix="expected '<frame>,<action id>'")
        frame, action = int(cells[0]), int(cells[1])
        expected = 0 if previous is None else previous + STEP
        if frame != expected:
            raise SourceError(
                path, f"frame {frame} where {expected} was expected", row=number, fix="rows step by 6 from frame 0"
            )
        previous = frame
        native = ACTION_NAMES.get(action, f"action id {action}")
        rows.append((number, frame, None if action == BACKGROUND else labels.map("action", native, path, number)))
    if not rows:
        raise SourceError(path, "no rows", fix="the file is empty; re-extract the video's zip")
    return rows


def _video_dirs(root: Path) -> list[tuple[Path, str]]:
    """(folder, the top folder it sits in or '') for video_* folders at the root or one level below."""
    found = [(path, "") for path in sorted(root.iterdir()) if path.is_dir() and VIDEO_DIR.match(path.name)]
    for top in sorted(root.iterdir()):
        if top.is_dir() and not VIDEO_DIR.match(top.name):
            found += [
                (path, top.name) for path in sorted(top.iterdir()) if path.is_dir() and VIDEO_DIR.match(path.name)
            ]
    return found


def read(root: Path, labels) -> SourceTables:
    tables = SourceTables()
    seen: dict[str, Path] = {}
    for folder, top in _video_dirs(root):
        match = VIDEO_DIR.match(folder.name)
        number, half = int(match.group(1)), match.group(2)
        vid = video_id(number, half)
        if vid in seen:
            raise SourceError(folder, f"{vid} also found at {seen[vid]}", fix="keep one copy of each video")
        seen[vid] = folder
        split = SPLITS["official"].get(vid)
        if split is None:
            raise SourceError(folder, f"{vid} is not one of SAR-RARP50's videos 1-50", fix="check the folder name")
        if top.lower().startswith(("train", "test")) and top.lower().startswith("test") != (split == "test"):
            raise SourceError(folder, f"video {number} sits in {top}/ but the official split says {split}")
        # a video_left.avi that is missing or misnamed is named by the media check, with every other media problem
        action_path = folder / "action_discrete.txt"
        rows = _actions(action_path, labels)
        relative = folder.relative_to(root).as_posix()
        tables.videos.append(Video(vid, split, FPS, video_path=f"{relative}/video_left.avi"))
        # a row every 6 frames from 0 to the end: a file that stops earlier is short (a warning of the media check)
        labelled = rows[-1][1] + STEP
        tables.coverage[vid] = Coverage(labelled, f"{relative}/action_discrete.txt", "action labels", STEP)
        tables.frames += [Frame(vid, frame, actions=[action] if action else []) for _, frame, action in rows]
        # the last sample covers its 6 frames; the media check clips them at the video's last frame
        tables.segments += segments_from_labels(vid, "action", [(f, action) for _, f, action in rows], step=STEP)
    if not tables.videos:
        raise SourceError(root, "no video_XX folders", fix="point --source sarrarp50= at the unzipped release")
    return tables


SPEC = SourceSpec(
    name="sarrarp50",
    title="SARRARP50",
    procedure="robot-assisted radical prostatectomy",
    branches=("clip",),
    capabilities=frozenset({"has_actions"}),
    labels={"action": ACTIONS},
    read=read,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://www.synapse.org/#!Synapse:syn27618412 (UCL Research Data Repository)",
    license="CC BY-NC-SA 4.0 (as mirrors state; not confirmed from the release)",
    unconfirmed=(
        "license (mirrors say CC BY-NC-SA 4.0)",
        "the train1/train2 membership list (the copied wiki lists video 34 twice); the split is by video number",
        "that the halves video_XX_1/_2 each restart their frame numbering at 0",
    ),
)
