"""Endoscapes2023 (Murali et al. 2023): cholecystectomy frames with CVS criteria, boxes (BBox201) and masks (Seg50).

Layout read (``docs/sources/endoscapes.md``)::

    all/<vid>_<frame>.jpg                       the real JPEGs (frame = 25-fps frame number of the original video)
    train/ val/ test/                           symlinks to all/ + annotation_coco.json, annotation_ds_coco.json
    train_seg/ val_seg/ test_seg/               Seg50: symlinked JPEGs + annotation_coco.json with RLE masks
    train_vids.txt val_vids.txt test_vids.txt   the official split (one video id per line: 1 or 1.000...e+00)
    all_metadata.csv                            vid, frame, avg_cvs, C1, C2, C3, is_ds_keyframe, ... (cross-checked)

Confirmed [official README, SurgLatentGraph]: the folders and JSON names, the extra image keys ``is_det_keyframe``,
``is_ds_keyframe``, ``ds`` (C1-C3 each averaged over 3 annotators) and ``video_id``; the six categories; the
official split (videos 1-120 train, 121-161 val, 162-201 test). Handled traps: ``ds`` is causally filled on frames
that are not CVS keyframes, so CVS is taken only where ``is_ds_keyframe`` is true; Seg50 masks are RLE with
``iscrowd: 0``; split folders are symlinks into ``all/`` (an extraction without symlinks leaves them empty or as
link stubs), so images are read from ``all/`` when it holds them, else from the split folder.

Inferred: the file name's frame number is the 25-fps frame index (every known example is a multiple of 25), so
``Video.fps`` is 25 although no video ships; a frame in a Seg50 file takes its instances (box + mask) from there
rather than from the BBox201 file; ``all_metadata.csv`` booleans are ``True``/``False`` or ``1``/``0``. Frames are
keyed by the file name, never by the COCO image id (``int(f"{vid}0{frame}")`` in the release: the video number, a
literal 0, the frame number), which the reader does not need to decode. The ``*_vids.txt`` lists hold one number per
line, written by numpy ``savetxt`` (``1.000000000000000000e+00``) or as integers; both are read. Not read:
``annotation_coco_vid.json`` (1-fps frames without labels), the semi-supervised ``12_5/`` and ``25/`` subsets,
``semseg/`` and ``insseg/`` (the same Seg50 masks as the COCO RLE).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from builders.errors import InputError
from public_converters import coco
from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video, read_text
from public_converters.spec import SourceSpec


FPS = 25
SPLIT_FOLDERS = {"train": "train", "val": "validation", "test": "test"}
CATEGORIES = {
    "cystic_plate": "cystic plate",
    "calot_triangle": "calot triangle",
    "cystic_artery": "cystic artery",
    "cystic_duct": "cystic duct",
    "gallbladder": "gallbladder",
}
TOOLS = {"tool": "surgical instrument"}  # Endoscapes has one class for every instrument
IMAGE_NAME = re.compile(r"^(\d+)_(\d+)\.jpg$")
METADATA_COLUMNS = ("vid", "frame", "C1", "C2", "C3", "is_ds_keyframe")


def _official(number: int) -> str:
    return "train" if number <= 120 else "validation" if number <= 161 else "test"


SPLITS = {"official": {str(n): _official(n) for n in range(1, 202)}}


def _frame_key(path: Path, image: dict, row: str) -> tuple[str, int]:
    match = IMAGE_NAME.match(str(image.get("file_name", "")))
    if not match or ("video_id" in image and int(image["video_id"]) != int(match[1])):
        raise SourceError(path, f"image record {image} is not <vid>_<frame>.jpg of its video_id", row=row)
    return str(int(match[1])), int(match[2])


def _cvs(path: Path, image: dict, row: str) -> list[float] | None:
    """The CVS criteria of a keyframe; None elsewhere (``ds`` is a causal fill there, not a label)."""
    if not image.get("is_ds_keyframe"):
        return None
    ds = image.get("ds")
    if not isinstance(ds, list) or len(ds) != 3 or not all(isinstance(v, int | float) and 0 <= v <= 1 for v in ds):
        raise SourceError(path, f"ds {ds!r} is not three values in [0, 1]", row=row)
    return [round(float(v), 4) for v in ds]


def _read_coco(path: Path, split: str, labels, state: dict, with_instances: bool, seg: bool) -> None:
    data = coco.load(path, fix="every split folder needs its COCO files")
    names = coco.index_categories(data, path)
    images = coco.index_images(data, path, lambda image, row: _frame_key(path, image, row), required=("file_name",))
    for index, (key, image) in enumerate(images.values()):
        row = f"images[{index}]"
        video = state["videos"].setdefault(key[0], {"split": split, "sizes": set(), "path": path})
        if video["split"] != split:
            raise SourceError(path, f"video {key[0]} is also in the {video['split']} folders", row=row)
        video["sizes"].add((image["width"], image["height"]))
        frame = state["frames"].setdefault(key, {"name": image["file_name"], "cvs": None, "boxed": None})
        cvs = _cvs(path, image, row)
        if cvs is not None and frame["cvs"] not in (None, cvs):
            raise SourceError(path, f"ds {cvs} disagrees with {frame['cvs']} in another file", row=row)
        frame["cvs"] = cvs or frame["cvs"]
        if with_instances and image.get("is_det_keyframe", True) and (seg or frame["boxed"] != "seg"):
            frame["boxed"] = "seg" if seg else "box"
            state["instances"][key] = []
    if not with_instances:
        return
    for annotation in coco.annotations(data, path, images, names):
        boxed = state["frames"][annotation.key]["boxed"]
        if boxed is None:
            raise SourceError(path, "annotation on an image with is_det_keyframe false", row=annotation.row)
        if boxed != ("seg" if seg else "box"):
            continue  # this frame's instances come from the Seg50 file
        kind = "tool" if annotation.category in TOOLS else "anatomy"
        box, mask = coco.geometry(annotation, path, with_mask=seg)
        label = labels.map(kind, annotation.category, path, annotation.row)
        instances = state["instances"][annotation.key]
        instances.append(Instance(*annotation.key, kind, label, box, mask, instance_id=len(instances)))


def _listed_video(path: Path, cell: str, row: int) -> str:
    """The video id of one ``<split>_vids.txt`` line: ``1``, or numpy ``savetxt``'s ``1.000000000000000000e+00`` (the
    release's lists are written that way): an integer-valued float is that integer; anything else is an error."""
    try:
        value = float(cell)
    except ValueError:
        value = None
    if value is None or not value.is_integer():
        raise SourceError(
            path, f"{cell!r} is not a whole video number", row=row, fix="one video id per line, e.g. 1 or 1.0e+00"
        )
    return str(int(value))


def _check_vids_file(root: Path, folder: str, state: dict) -> None:
    """``<split>_vids.txt``, where shipped, must agree with the official split table and the folder's videos."""
    path = root / f"{folder}_vids.txt"
    if not path.is_file():
        return
    listed = set()
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if line.strip():
            video = _listed_video(path, line.strip(), number)
            if SPLITS["official"].get(video) != SPLIT_FOLDERS[folder]:
                raise SourceError(path, f"{line.strip()!r} is not a {folder} video of the official split", row=number)
            listed.add(video)
    found = {vid for vid, video in state["videos"].items() if video["split"] == SPLIT_FOLDERS[folder]}
    if found - listed:
        raise SourceError(path, f"videos {sorted(found - listed, key=int)[:5]} are in {folder}/ but not listed")


def _whole(cell: str) -> int:
    value = float(cell)  # pandas writes "12.0" for ints in a column that also holds blanks
    if not value.is_integer():
        raise InputError(f"{cell!r} is not a whole number")
    return int(value)


def _check_metadata(root: Path, frames: dict) -> None:
    """``all_metadata.csv``, where shipped, must give the same CVS keyframes as the COCO files' ``ds``."""
    path = root / "all_metadata.csv"
    if not path.is_file():
        return
    compared = keyframes = 0
    videos = {video for video, _ in frames}
    with io.StringIO(read_text(path), newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in METADATA_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SourceError(path, f"columns {missing} missing from the header {reader.fieldnames}", row=1)
        for number, row in enumerate(reader, start=2):
            try:
                key = (str(_whole(row["vid"])), _whole(row["frame"]))
                flag = row["is_ds_keyframe"].strip().lower()
                keyframe = {"true": True, "1": True, "1.0": True, "false": False, "0": False, "0.0": False}[flag]
                cvs = [round(float(row[c]), 4) for c in ("C1", "C2", "C3")] if keyframe else None
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise SourceError(
                    path, f"malformed row ({error})", row=number, fix="vid/frame whole numbers, C1-C3 floats"
                ) from error
            known = frames.get(key, {}).get("cvs")
            keyframes += keyframe and key[0] in videos
            if keyframe and known is not None:
                compared += 1
                if any(abs(a - b) > 1e-3 for a, b in zip(cvs, known, strict=True)):
                    raise SourceError(path, f"CVS {cvs} disagrees with the COCO ds {known}", row=number)
    if keyframes and not compared:
        raise SourceError(path, "no CVS keyframe matches a COCO image", fix="is 'frame' the file-name frame number?")


def read(root: Path, labels) -> SourceTables:
    state: dict = {"videos": {}, "frames": {}, "instances": {}}
    for folder, split in SPLIT_FOLDERS.items():
        if not (root / folder).is_dir():
            raise SourceError(root / folder, "folder not found", fix="point --source endoscapes= at endoscapes/")
        _read_coco(root / folder / "annotation_coco.json", split, labels, state, with_instances=True, seg=False)
        _read_coco(root / folder / "annotation_ds_coco.json", split, labels, state, with_instances=False, seg=False)
    for folder, split in SPLIT_FOLDERS.items():
        if (root / f"{folder}_seg").is_dir():  # Seg50 (optional: some extractions drop it)
            path = root / f"{folder}_seg" / "annotation_coco.json"
            _read_coco(path, split, labels, state, with_instances=True, seg=True)
    for folder in SPLIT_FOLDERS:
        _check_vids_file(root, folder, state)
    _check_metadata(root, state["frames"])
    tables = SourceTables()
    for video_id, video in sorted(state["videos"].items()):
        official = SPLITS["official"].get(video_id)
        if official != video["split"]:
            raise SourceError(
                video["path"], f"video {video_id} is in the {video['split']} folder, official {official}"
            )
        (width, height) = next(iter(video["sizes"])) if len(video["sizes"]) == 1 else (None, None)
        tables.videos.append(Video(video_id, video["split"], FPS, width=width, height=height))
    for (video_id, frame_index), frame in sorted(state["frames"].items()):
        folder = next(f for f, s in SPLIT_FOLDERS.items() if s == state["videos"][video_id]["split"])
        image = f"all/{frame['name']}" if (root / "all" / frame["name"]).is_file() else f"{folder}/{frame['name']}"
        instances = state["instances"].get((video_id, frame_index))
        tools = anatomy = None
        if instances is not None:
            tools = sorted({i.label for i in instances if i.kind == "tool"})
            anatomy = sorted({i.label for i in instances if i.kind == "anatomy"})
            tables.instances += instances
        tables.frames.append(Frame(video_id, frame_index, image, tools=tools, anatomy=anatomy, cvs=frame["cvs"]))
    if not tables.frames:
        raise SourceError(root, "no images in the COCO files", fix="the annotation files of the release are empty")
    return tables


SPEC = SourceSpec(
    name="endoscapes",
    title="Endoscapes",
    procedure="laparoscopic cholecystectomy",
    branches=("image",),
    capabilities=frozenset(
        {
            "has_tool_presence",
            "has_anatomy_presence",
            "has_tool_bbox",
            "has_anatomy_bbox",
            "has_masks",
            "has_cvs",
        }
    ),
    labels={"tool": TOOLS, "anatomy": CATEGORIES},
    read=read,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://github.com/CAMMA-public/Endoscapes",
    license="CC BY-NC-SA 4.0",
    unconfirmed=(
        "file-name frame numbers are 25-fps frame indices (fps 25 assumed; no video ships)",
        "Seg50 frames take their instances from the Seg50 file rather than BBox201",
        "all_metadata.csv column formats (booleans True/False or 1/0)",
        "<split>_vids.txt: one video id per line (integers or numpy savetxt floats)",
    ),
)
