"""CholecInstanceSeg (Alabi et al. 2025): tool instance polygons on 41.9k cholecystectomy frames, 85 sequences.

Layout read (``docs/sources/cholecinstanceseg.md``)::

    <split>/<VIDnn>_<partition>/ann_dir/<prefix>_<VIDnn|videoNN>_<frame>.json   LabelMe, one file per frame
    <split>/<VIDnn>_<partition>/img_dir/<same stem>.png                          the frame (see below)

``<split>`` is ``train``, ``val`` or ``test``; ``<partition>`` is ``seg8k``, ``t50_full``, ``t50_sparse`` or
``t80_sparse`` (file prefix ``seg8k``, ``t50``, ``t80``). Confirmed (the official repository's sample files, its
COCO converter and ``dataset_variables.py``; torch-em's loader): LabelMe ``shapes`` with ``label``, ``points`` as
(x, y) pixels (ints or floats) and ``group_id``; one instance = all polygons sharing (label, group_id) in a frame,
as the official COCO converter groups them; the seven tool names; ``seq_to_split_dict``; ``imagePath`` can be an
absolute Windows path, so it is never used. Frames without instruments may lack ``imageHeight``/``imageWidth``: a
frame with shapes but without them is rasterised at its image's actual size (the official converter assumes
854x480, which is what the frames are).

Choices: a sequence folder is one "video" (the split key; the same VIDnn appears in several partitions with different
frames); there is no video, so ``fps`` is None and frames get a running index in the order of the frame number in
their file names (the number stays in ``image_path``). Only annotations are distributed: the images must be placed in
``img_dir/`` next to ``ann_dir/`` (the layout of the official sample and of its ``combine_annotations_with_images``
utility); a sequence without ``img_dir/`` is an error that names it. A polygon covering no pixel keeps its tool's
presence, with no box. The folder split must agree with the official dictionary.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.coco import read_json
from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video, finite_number
from public_converters.seg_to_box import box_of_rle, image_size, rle_from_polygons
from public_converters.spec import SourceSpec


TOOLS = {
    "grasper": "grasper",
    "hook": "electrocautery hook",
    "irrigator": "irrigator",
    "clipper": "clip applier",
    "bipolar": "bipolar forceps",
    "scissors": "scissors",
    "snare": "snare",
}
SPLIT_FOLDERS = {"train": "train", "val": "validation", "test": "test"}
PREFIX = {"seg8k": "seg8k", "t50_full": "t50", "t50_sparse": "t50", "t80_sparse": "t80"}
SEQUENCE = re.compile(r"^VID(\d{2,})_(seg8k|t50_full|t50_sparse|t80_sparse)$")
FRAME_FILE = re.compile(r"^(seg8k|t50|t80)_(?:VID|video)(\d+)_(\d+)\.json$")
# seq_to_split_dict of utilities/general_utils/dataset_variables.py: split -> partition -> video numbers
_T80_TEST = [7, 16, 21, 33, 38, 41, 45, 53, 58, 61, 64, 69, 72, 77]
_T80_VAL = [3, 11, 19, 30, 34, 39, 44, 46, 54, 59, 63, 67, 71, 76]
_T50_SPARSE = [2, 4, 5, 6, 8, 10, 13, 31, 32, 36, 40, 42, 47, 49, 50, 51, 56, 57, 60, 62, 65, 66, 68, 70, 73, 74, 75]
_T50_SPARSE += [78, 79, 80, 92, 96, 103, 110, 111]
_FULL_TRAIN = [1, 12, 18, 25, 26, 27, 35, 43, 48, 52]
OFFICIAL = {
    "test": {"seg8k": [9, 20, 24, 55], "t50_full": [14, 15, 22, 29], "t80_sparse": _T80_TEST},
    "validation": {"seg8k": [17, 28, 37], "t50_full": [23], "t80_sparse": _T80_VAL},
    "train": {"seg8k": _FULL_TRAIN, "t50_full": _FULL_TRAIN, "t50_sparse": _T50_SPARSE},
}
SPLITS = {
    "official": {
        f"VID{n:02d}_{partition}": split
        for split, partitions in OFFICIAL.items()
        for partition, numbers in partitions.items()
        for n in numbers
    }
}


def _json(path: Path) -> dict:
    data = read_json(path, fix="re-download the annotations")
    if not isinstance(data, dict) or not isinstance(data.get("shapes"), list):
        raise SourceError(path, "no 'shapes' list", fix="is this a LabelMe file of CholecInstanceSeg?")
    return data


def _polygons(shapes: list, path: Path, labels) -> dict[tuple[str, int | None], list[list[float]]]:
    """(native label, group_id) -> flat pixel polygons; one key is one tool instance."""
    groups: dict[tuple[str, int | None], list[list[float]]] = {}
    for number, shape in enumerate(shapes):
        row = f"shapes[{number}]"
        points = shape.get("points") if isinstance(shape, dict) else None
        if not (
            isinstance(points, list)
            and isinstance(shape.get("label"), str)
            and shape.get("shape_type") in (None, "polygon")
            and len(points) >= 3
            and all(isinstance(p, list) and len(p) == 2 and all(isinstance(v, int | float) for v in p) for p in points)
        ):
            raise SourceError(path, f"not a polygon with a label and >= 3 (x, y) points: {str(shape)[:80]}", row=row)
        labels.map("tool", shape["label"], path, row)
        flat = [finite_number(value, path, row, "polygon point") for point in points for value in point]
        groups.setdefault((shape["label"], shape.get("group_id")), []).append(flat)
    return groups


def read_sequence(root: Path, folder: Path, labels, tables: SourceTables) -> None:
    video_id, split = folder.name, SPLIT_FOLDERS[folder.parent.name]
    number, partition = SEQUENCE.match(video_id).groups()
    ann_dir, img_dir = folder / "ann_dir", folder / "img_dir"
    for needed in (ann_dir, img_dir):
        if not needed.is_dir():
            raise SourceError(
                needed,
                "folder not found",
                fix="only annotations are distributed: put the frames from CholecT50 / Cholec80 / CholecSeg8k "
                "into img_dir/ next to ann_dir/, named like the JSON files",
            )
    official = SPLITS["official"].get(video_id)
    if official != split:
        raise SourceError(folder, f"sequence is under {split}, the official split says {official}")
    files = []
    for path in sorted(ann_dir.glob("*.json")):
        match = FRAME_FILE.match(path.name)
        if not match or match.group(1) != PREFIX[partition] or int(match.group(2)) != int(number):
            raise SourceError(
                path, f"file name does not fit {video_id}", fix=f"expected {PREFIX[partition]}_VIDnn_N.json"
            )
        files.append((int(match.group(3)), path))
    sizes = set()
    for index, (_, path) in enumerate(sorted(files)):
        data = _json(path)
        image = (img_dir / f"{path.stem}.png").relative_to(root).as_posix()
        width, height = data.get("imageWidth"), data.get("imageHeight")
        if width and height:
            sizes.add((width, height))
        elif data["shapes"]:
            width, height = image_size(root / image, fix="copy the frame into img_dir/ (its JSON has no size)")
        tools = set()
        for (label, group), polygons in _polygons(data["shapes"], path, labels).items():
            tool = labels.map("tool", label, path)
            try:
                rle = rle_from_polygons(polygons, int(height), int(width))
            except (ValueError, TypeError) as error:
                raise SourceError(path, f"cannot rasterise {label} {group} ({error})", row=f"group {group}") from error
            box = box_of_rle(rle)
            instance_id = group if isinstance(group, int) else 0
            tables.instances.append(Instance(video_id, index, "tool", tool, box, rle if box else None, instance_id))
            tools.add(tool)
        tables.frames.append(Frame(video_id, index, image, tools=sorted(tools)))
    width, height = sizes.pop() if len(sizes) == 1 else (None, None)
    tables.videos.append(Video(video_id, split, None, len(files), width, height))


def read(root: Path, labels) -> SourceTables:
    tables = SourceTables()
    split_dirs = [root / name for name in sorted(SPLIT_FOLDERS) if (root / name).is_dir()]
    if not split_dirs:
        raise SourceError(root, "no train/, val/ or test/ folder", fix="point the source at the extracted release")
    seen: dict[str, Path] = {}
    for split_dir in split_dirs:
        for folder in sorted(p for p in split_dir.iterdir() if p.is_dir()):
            if not SEQUENCE.match(folder.name):
                raise SourceError(folder, "not a sequence folder", fix="expected VIDnn_<seg8k|t50_full|...>")
            if folder.name in seen:
                raise SourceError(folder, f"sequence also under {seen[folder.name]}", fix="keep one copy")
            seen[folder.name] = folder
            read_sequence(root, folder, labels, tables)
    if not tables.videos:
        raise SourceError(root, "no sequence folders", fix="the split folders of the release are empty")
    return tables


SPEC = SourceSpec(
    name="cholecinstanceseg",
    title="CholecInstanceSeg",
    procedure="laparoscopic cholecystectomy",
    branches=("image",),
    capabilities=frozenset({"has_tool_presence", "has_tool_bbox", "has_masks"}),
    labels={"tool": TOOLS},
    read=read,
    split_variants=SPLITS,
    default_split_variant="official",
    homepage="https://www.synapse.org/Synapse:syn60239970 (annotations; frames from CholecT50, Cholec80, CholecSeg8k)",
    license="CC BY 4.0 (annotations, per the Synapse wiki as read by torch-em; frames keep their sources' licenses)",
    unconfirmed=(
        "top-level split folder names train/ val/ test/ (torch-em's reading)",
        "seg8k annotation file names seg8k_videoNN_<frame>.json (torch-em's regex)",
        "img_dir/ holds <json stem>.png for every partition (the official sample shows t80_sparse only)",
        "shapes without group_id: grouped per label, as the official COCO converter does",
    ),
)
