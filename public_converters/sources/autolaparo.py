"""AutoLaparo (Wang et al. 2022): laparoscopic hysterectomy; workflow, laparoscope motion and segmentation tasks.

Layout read (``docs/sources/autolaparo.md``), every task folder optional but at least one present::

    AutoLaparo_Task1/videos/01.mp4 ... 21.mp4          25 fps
    AutoLaparo_Task1/labels/label_01.txt ...           header line, then "<second>\t<phase>" per second, both 1-based
    AutoLaparo_Task2/clips/001.mp4 ... 300.mp4         25-fps motion clips
    AutoLaparo_Task2/laparoscope_motion_label.txt      header line, then "<clip>\t<motion>\t..." (0-based motion)
    AutoLaparo_Task3/imgs/CCCFFF.jpg, masks/CCCFFF.png clip CCC, 1-based frame FFF of that clip; grey-level masks

Confirmed (official README/code, Surgformer): 25-fps videos, 1-based rows (row k = video frame 25 * (k - 1), as the
official preprocessing takes every 25th frame), phases 1-7 and their names, motion label in column 1 after one
header line, 1-based frame counting in clips, the official splits. Third-party: the motion names (0 Static ... 6
Zoom-out), the Task 3 file names and grey levels (20 tool1 manipulator ... 160 tool4 shaft, 180 uterus).

Time bases: Task 1 phases become segments at 25 fps (``step=25``); the last second's segment is clipped at the
video's last frame by the media check (videos are not a whole number of seconds long). Task 2 is a
motion-*prediction* task: the official preprocessing feeds frames 1-125 (the first 5 s) and the label names the
laparoscope motion that follows, so the label becomes an ``action`` segment of the laparoscope from frame 125 to the
clip's end (10-s clips; clipped at the end of a shorter one); the motion's own end is not annotated. The clip file's
third column (a phase, per one third party) is not read.
Task 3 frames belong to the Task 2 clip with the same number; a tool's manipulator and shaft grey levels are one
class (the tool), split into instances by connected components; the uterus is one structure.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import (
    Coverage,
    Frame,
    Segment,
    SemanticMask,
    SourceError,
    SourceTables,
    Video,
    read_text,
    segments_from_labels,
)
from public_converters.seg_to_box import image_size
from public_converters.spec import SourceSpec


FPS = 25
CLIP_FRAMES = 250  # 10-s motion clips
MOTION_ONSET = 125  # the labelled motion follows the 5-s observation window
MOTION_FILES = ("laparoscope_motion_label.txt", "camera_motion_label.txt")
PHASES = {
    "1": "preparation",
    "2": "dividing ligament and peritoneum",
    "3": "dividing uterine vessels and ligament",
    "4": "transecting the vagina",
    "5": "specimen removal",
    "6": "suturing",
    "7": "washing",
}
MOTIONS = {
    "0": "laparoscope static",
    "1": "laparoscope moving up",
    "2": "laparoscope moving down",
    "3": "laparoscope moving left",
    "4": "laparoscope moving right",
    "5": "laparoscope zooming in",
    "6": "laparoscope zooming out",
}
TOOLS = {
    "grasping forceps": "grasper",
    "LigaSure": "vessel sealer",
    "dissecting and grasping forceps": "dissecting forceps",
    "electric hook": "electrocautery hook",
}
ANATOMY = {"uterus": "uterus"}
PALETTE = {0: None, 180: "uterus"} | {20 * (2 * i + part): tool for i, tool in enumerate(TOOLS) for part in (1, 2)}
POLICIES = {**dict.fromkeys(TOOLS, "components"), "uterus": "single"}
SPLITS = {
    "official": {
        **{f"video{n:02d}": "train" if n <= 10 else "validation" if n <= 14 else "test" for n in range(1, 22)},
        **{f"clip{n:03d}": "train" if n <= 170 else "validation" if n <= 227 else "test" for n in range(1, 301)},
    }
}
VIDEO_NAME = re.compile(r"^(\d+)\.mp4$")
LABEL_NAME = re.compile(r"^label_(\d+)\.txt$")
TASK3_NAME = re.compile(r"^(\d{3})(\d{3})\.jpg$")
MASK_NAME = re.compile(r"^(\d{3})(\d{3})\.png$")


def _rows(path: Path, columns: int) -> list[tuple[int, list[str]]]:
    """(line number, cells) after the header line; every row needs at least ``columns`` integer cells."""
    lines = read_text(path, fix="extract the task's label files").splitlines()
    if not lines or lines[0].split("\t")[0].strip().isdigit():
        raise SourceError(path, "expected a header line first", row=1, fix="is this an AutoLaparo label file?")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.strip().split("\t")
        if not line.strip():
            continue
        if len(cells) < columns or not all(cell.strip().isdigit() for cell in cells[:columns]):
            raise SourceError(path, f"malformed row {line!r}", row=number, fix=f"expected {columns} tab-separated ids")
        rows.append((number, [cell.strip() for cell in cells]))
    return rows


def _listing(folder: Path, pattern: re.Pattern) -> list[tuple[Path, re.Match]]:
    """Sorted files of a folder whose names match ``pattern`` (other files, e.g. READMEs, are not data)."""
    if not folder.is_dir():
        raise SourceError(folder, "folder not found", fix="extract the task's archive completely")
    return [(path, match) for path in sorted(folder.iterdir()) if (match := pattern.match(path.name))]


def _numbered(folder: Path, pattern: re.Pattern) -> dict[int, str]:
    """number -> the number as the file name spells it, of ``folder``'s files named by ``pattern`` (none when
    ``folder`` is not there)."""
    return {int(match[1]): match[1] for _, match in _listing(folder, pattern)} if folder.is_dir() else {}


def read_workflow(root: Path, labels, tables: SourceTables) -> None:
    """Every video with a video or a label file: each needs both (a video file that is missing or misnamed is named
    by the media check, never silently left out)."""
    if not (root / "videos").is_dir() and not (root / "labels").is_dir():
        raise SourceError(root / "videos", "folder not found", fix="extract the task's archive completely")
    videos, label_files = _numbered(root / "videos", VIDEO_NAME), _numbered(root / "labels", LABEL_NAME)
    for video_number in sorted(videos.keys() | label_files.keys()):
        spelt = videos.get(video_number) or label_files[video_number]
        path = root / "videos" / f"{spelt}.mp4"
        label_path = root / "labels" / f"label_{label_files.get(video_number, spelt)}.txt"
        video_id = f"video{video_number:02d}"
        labelled = []
        for index, (number, cells) in enumerate(_rows(label_path, 2)):
            if int(cells[0]) != index + 1:
                raise SourceError(label_path, f"second {cells[0]}, expected {index + 1}", row=number)
            labelled.append((FPS * index, labels.map("phase", cells[1], label_path, number)))
        if video_id not in SPLITS["official"]:
            raise SourceError(path, "video number outside 01-21", fix="AutoLaparo Task 1 has videos 01..21")
        relative = str(path.relative_to(root.parent))
        # the frame count is the video's (the media check reads it): the last second's label may end inside it
        tables.videos.append(Video(video_id, SPLITS["official"][video_id], FPS, video_path=relative))
        tables.frames += [Frame(video_id, frame, phase=phase) for frame, phase in labelled]
        tables.segments += segments_from_labels(video_id, "phase", labelled, step=FPS)
        # a row for every second: a file that stops a second or more before the video is short (a warning)
        label_file = str(label_path.relative_to(root.parent))
        tables.coverage[video_id] = Coverage(FPS * len(labelled), label_file, "phase labels", FPS)


def read_motion(root: Path, labels) -> dict[str, tuple[str, str]]:
    """clip id -> (clip path relative to the source root, canonical motion)."""
    found = [root / name for name in MOTION_FILES if (root / name).is_file()]
    path = found[0] if found else root / MOTION_FILES[0]
    clips = {}
    for number, cells in _rows(path, 2):
        # a clip that is missing or misnamed is named by the media check, with every other media problem
        clip, video_id = root / "clips" / f"{int(cells[0]):03d}.mp4", f"clip{int(cells[0]):03d}"
        if video_id in clips:
            raise SourceError(path, f"a second row for clip {cells[0]}", row=number)
        clips[video_id] = (str(clip.relative_to(root.parent)), labels.map("action", cells[1], path, number))
    return clips


def read(root: Path, labels) -> SourceTables:
    tasks = [root / f"AutoLaparo_Task{n}" for n in (1, 2, 3)]
    if not any(task.is_dir() for task in tasks):
        raise SourceError(root, "no AutoLaparo_Task1/2/3 folder", fix="point --source at the folder holding them")
    tables = SourceTables()
    if tasks[0].is_dir():
        read_workflow(tasks[0], labels, tables)
    clips = read_motion(tasks[1], labels) if tasks[1].is_dir() else {}
    sizes: dict[str, tuple[int, int]] = {}
    if tasks[2].is_dir():
        images = _listing(tasks[2] / "imgs", TASK3_NAME)
        orphans = sorted({p.stem for p, _ in _listing(tasks[2] / "masks", MASK_NAME)} - {p.stem for p, _ in images})
        if orphans:
            raise SourceError(tasks[2] / "masks" / f"{orphans[0]}.png", "mask without its image in imgs/")
        for path, match in images:
            clip, frame = f"clip{match[1]}", int(match[2]) - 1
            width, height = sizes.setdefault(clip, image_size(path, fix="re-extract AutoLaparo_Task3"))
            mask = tasks[2] / "masks" / f"{path.stem}.png"
            image_size(mask, fix="every Task 3 image needs its mask and vice versa")
            tables.frames.append(Frame(clip, frame, f"AutoLaparo_Task3/imgs/{path.name}"))
            tables.masks.append(
                SemanticMask(clip, frame, f"AutoLaparo_Task3/masks/{mask.name}", PALETTE, (height, width))
            )
    for clip in sorted(set(clips) | set(sizes)):
        if clip not in SPLITS["official"]:
            raise SourceError(tasks[1] if clip in clips else tasks[2], f"{clip} outside clips 001-300")
        video_path, motion = clips.get(clip, (None, None))
        width, height = sizes.get(clip, (None, None))
        tables.videos.append(Video(clip, SPLITS["official"][clip], FPS, None, width, height, video_path))
        if motion:
            # one label for the rest of the clip: its end is clipped to a clip shorter than 10 s by the media check
            period = CLIP_FRAMES - MOTION_ONSET
            tables.segments.append(Segment(clip, "action", motion, MOTION_ONSET, CLIP_FRAMES - 1, period))
    return tables


SPEC = SourceSpec(
    name="autolaparo",
    title="AutoLaparo",
    procedure="laparoscopic hysterectomy",
    branches=("image", "clip"),
    capabilities=frozenset(
        {"has_phase", "has_actions", "has_tool_presence", "has_anatomy_presence", "has_tool_bbox"}
        | {"has_anatomy_bbox", "has_masks"}
    ),
    labels={"phase": PHASES, "action": MOTIONS, "tool": TOOLS, "anatomy": ANATOMY},
    read=read,
    mask_policies=POLICIES,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://autolaparo.github.io (request form)",
    license="academic research only, no commercial use (via request form)",
    unconfirmed=(
        "Task 2 clip length (10 s) and motion onset at 5 s; label file name; motion id names",
        "Task 3 file names, grey levels, and that clip CCC is the Task 2 clip of the same number",
        "Task 3 split (taken from the Task 2 clip split)",
        "whether LabelMe JSONs ship with Task 3 (not read)",
    ),
)
