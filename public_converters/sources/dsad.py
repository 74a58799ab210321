"""Dresden Surgical Anatomy Dataset (Carstens et al. 2023): 13,195 frames of 32 robot-assisted rectal resections with
expert-reviewed binary masks of 11 abdominal structures.

Layout read (``docs/sources/dsad.md``)::

    <structure>/<surgery>/imageNN.png, maskNN.png       one folder per structure (abdominal_wall ... vesicular_glands)
    <structure>/<surgery>/weak_labels.csv               per-image visibility of every structure
    multilabel/<surgery>/imageNN.png, maskNN_<structure>.png   one binary mask per visible structure
    <...>/<surgery>/anno_1/ anno_2/ anno_3/ merged/     per-annotator masks (not read; maskNN.png is the final one)

Confirmed [paper via EndoViT, torch-em loader]: the folder names, ``imageNN``/``maskNN`` pairing, binary masks
(black background, white structure), the multilabel naming (the structure after the first ``_``, which may itself
hold ``_``). A video is a surgery (the split key, fps None); frames are numbered in order of (folder, NN) within it.

Inferred / validated: mask values 0 and 255, or 0 and 1 (PIL mode "1" or 0/1 PNGs), anything else is an error.
``weak_labels.csv``: the paper lists 11 alphabetical columns, the HF mirror says 12 (with uterus); the reader needs
either a header row whose first cell names the image column and whose other cells are structure names (so 11 or 12
both work), or no header and exactly 11 value columns after the image cell in the paper's order. The image cell holds
the image number (``image05.png``, ``05`` or ``5``); values are 0/1. The multilabel images duplicate ``stomach/``'s
[3p, EndoViT]; they are kept as their own frames (their masks are exhaustive, the single-structure ones are not).
Splits: no official split; the default is Kolbinger et al. 2023's by surgery, as a third party encodes it.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from public_converters.schema import Frame, SemanticMask, SourceError, SourceTables, Video, read_text
from public_converters.seg_to_box import image_size
from public_converters.spec import SourceSpec


STRUCTURES = {
    "abdominal_wall": "abdominal wall",
    "colon": "colon",
    "inferior_mesenteric_artery": "inferior mesenteric artery",
    "intestinal_veins": "intestinal veins",
    "liver": "liver",
    "pancreas": "pancreas",
    "small_intestine": "small intestine",
    "spleen": "spleen",
    "stomach": "stomach",
    "ureter": "ureter",
    "vesicular_glands": "vesicular glands",
    "uterus": "uterus",  # a weak-label column only (HF mirror), never a mask folder
}
# The abdominal wall lines the whole view: presence only; every other structure is one organ, one box.
POLICIES = {name: "semantic" if name == "abdominal_wall" else "single" for name in STRUCTURES if name != "uterus"}
MULTILABEL = "multilabel"
SURGERY = re.compile(r"^\d{2}$")
IMAGE = re.compile(r"^image(\d+)\.png$")
MASK = re.compile(r"^mask(\d+)(?:_(.+))?\.png$")
KOLBINGER = {
    "train": (1, 4, 5, 6, 8, 9, 10, 12, 15, 16, 17, 19, 22, 23, 24, 25, 27, 28, 29, 30, 31),
    "validation": (3, 21, 26),
    "test": (2, 7, 11, 13, 14, 18, 20, 32),
}
SPLITS = {"kolbinger2023": {f"{n:02d}": split for split, numbers in KOLBINGER.items() for n in numbers}}
PAPER_COLUMNS = tuple(name for name in STRUCTURES if name != "uterus")


def palette(structure: str) -> dict:
    return {0: None, 1: structure, 255: structure}


def _structure_key(cell: str) -> str:
    return cell.strip().lower().replace(" ", "_")


def read_weak_labels(path: Path, labels) -> dict[int, list[str]]:
    """image number -> canonical structures visible (see the module docstring for the accepted layouts)."""
    rows = list(csv.reader(read_text(path).splitlines()))
    if not rows:
        raise SourceError(path, "empty file", fix="expected one row per image")
    header = not re.search(r"\d", rows[0][0]) if rows[0] else False
    if header and _structure_key(rows[0][0]) in STRUCTURES:
        raise SourceError(path, f"the header {rows[0]} has no image column", row=1, fix="expected image, structures")
    columns = [_structure_key(c) for c in rows[0][1:]] if header else list(PAPER_COLUMNS)
    names = [labels.map("anatomy", column, path, 1) for column in columns]
    visible = {}
    for number, cells in enumerate(rows[1:] if header else rows, start=2 if header else 1):
        if not cells:
            continue
        index = re.search(r"(\d+)", cells[0])
        if len(cells) != len(columns) + 1 or not index or any(c.strip() not in ("0", "1") for c in cells[1:]):
            raise SourceError(
                path,
                f"malformed row {cells}",
                row=number,
                fix=f"expected the image then {len(columns)} 0/1 values" + ("" if header else " (no header row)"),
            )
        visible[int(index[1])] = sorted(n for n, c in zip(names, cells[1:], strict=True) if c.strip() == "1")
    return visible


def _read_folder(root: Path, folder: Path, surgery: Path, labels, tables: SourceTables, first: int) -> int:
    """One ``<structure>/<surgery>`` folder: frames from ``first`` on; returns the next free frame index."""
    names = sorted(p.name for p in surgery.iterdir() if p.is_file())
    images = {int(m[1]): name for name in names if (m := IMAGE.match(name))}
    masks: dict[int, list[tuple[str, str]]] = {}
    for name in names:
        if match := MASK.match(name):
            if (match[2] is None) == (folder.name == MULTILABEL):
                raise SourceError(
                    surgery / name, "mask name does not fit the folder (maskNN_<structure>.png only in multilabel/)"
                )
            masks.setdefault(int(match[1]), []).append((name, match[2] or folder.name))
    for number in sorted(set(masks) - set(images)):
        raise SourceError(
            surgery / f"image{number:02d}.png", "file not found", fix=f"{masks[number][0][0]} has no image"
        )
    weak_path = surgery / "weak_labels.csv"
    weak = read_weak_labels(weak_path, labels) if weak_path.is_file() else {}
    extra = sorted(set(weak) - set(images))
    if extra:
        raise SourceError(weak_path, f"rows for images {extra[:5]} that are not in the folder", fix="1-based ids?")
    video_id = surgery.name
    for offset, number in enumerate(sorted(images)):
        image = surgery / images[number]
        if folder.name != MULTILABEL and number not in masks:
            raise SourceError(surgery / f"mask{number:02d}.png", "file not found", fix=f"{images[number]} has no mask")
        if weak and number not in weak:
            raise SourceError(weak_path, f"no row for {images[number]}", fix="one row per image")
        anatomy = weak.get(number, [] if folder.name == MULTILABEL else None)
        relative = str(image.relative_to(root))
        tables.frames.append(Frame(video_id, first + offset, relative, anatomy=anatomy))
        size = image_size(image)[::-1]  # (height, width), as masks state it
        for mask_name, structure in masks.get(number, []):
            if labels.kind_of(structure, ("anatomy",)) is None:
                labels.map("anatomy", structure, surgery / mask_name)  # reported with every other unmapped label
                continue
            path = str((surgery / mask_name).relative_to(root))
            exhaustive = folder.name == MULTILABEL  # a structure folder's mask says nothing of the other structures
            tables.masks.append(SemanticMask(video_id, first + offset, path, palette(structure), size, exhaustive))
    return first + len(images)


def read(root: Path, labels) -> SourceTables:
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if not folders:
        raise SourceError(root, "no structure folders", fix="point --source dsad= at the extracted DSAD folder")
    tables, next_frame, sizes = SourceTables(), {}, {}
    for folder in folders:
        if folder.name != MULTILABEL:
            labels.map("anatomy", folder.name, folder)
        for surgery in sorted(p for p in folder.iterdir() if p.is_dir()):
            if not SURGERY.match(surgery.name) or surgery.name not in SPLITS["kolbinger2023"]:
                raise SourceError(surgery, "not a surgery folder 01-32", fix="expected <structure>/<NN>/imageNN.png")
            next_frame[surgery.name] = _read_folder(
                root, folder, surgery, labels, tables, next_frame.get(surgery.name, 0)
            )
    for mask in tables.masks:
        sizes.setdefault(mask.video_id, set()).add(mask.size)
    for video_id in sorted(next_frame):
        (height, width) = next(iter(sizes[video_id])) if len(sizes.get(video_id, ())) == 1 else (None, None)
        tables.videos.append(Video(video_id, SPLITS["kolbinger2023"][video_id], width=width, height=height))
    return tables


SPEC = SourceSpec(
    name="dsad",
    title="Dresden",
    procedure="robot-assisted rectal resection",
    branches=("image",),
    capabilities=frozenset({"has_anatomy_presence", "has_anatomy_bbox", "has_masks"}),
    labels={"anatomy": STRUCTURES},
    read=read,
    mask_policies=POLICIES,
    split_variants=SPLITS,
    default_split_variant="kolbinger2023",
    homepage="https://doi.org/10.6084/m9.figshare.21702600",
    license="CC BY 4.0",
    unconfirmed=(
        "weak_labels.csv layout (header row or not; 11 or 12 columns; the image cell)",
        "mask grey levels (0/255 or 0/1 accepted)",
        "the split is Kolbinger et al. 2023's as a third party encodes it, not an official one",
        "multilabel/ images duplicate stomach/ images (kept as separate frames)",
    ),
)
