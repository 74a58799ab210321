"""GynSurg (Nasirihaghighi et al., ACM MM 2025, ITEC Klagenfurt): action clips (clip branch) and COCO polygon
segmentation of instruments and anatomy (image branch) in gynecologic laparoscopy.

Layout read (``../shared/research/formats_B.md`` §8; ``Sahar-Nasiri/GynSurg`` README and mask scripts)::

    GynSurg_Action_3sec/<set>/<Class>/<clip>.mp4    3 s clips with 1 s overlap; <set> e.g. GynSurg_bleeding_dataset
    instruments.json, anatomy.json                   COCO: images[] (id, path, width, height), annotations[]
                                                     (image_id, category_id, polygons), categories[] (id, name)
    insseg/INSSEG_xx/0.mp4_/<frame>.jpg, ganseg/GANSEG_xx/...   images[].path (an absolute prefix is cut off)

Clips [official README; folders 3p]: Coagulation, Needle passing, Suction/Irrigation, Transection, Rest (no
instrument activity -> "idle"). Each clip is its own Video (``video_path``; rate and frame count from its header,
30 fps per the README) with one action segment over all its frames; ``:`` in names (``_`` on some filesystems) is
``_`` in ids. The side-effect sets (Bleeding / Non_bleeding, Smoke / Non_smoke) are not read: the schema has no
side-effect kind. Any other class folder must be in the action table.

Segmentation [official scripts]: the category table is not published, so names come from each file's own
``categories`` (compared lower-case, ``_``/``-`` as spaces) and are mapped through the README's 21 instrument and 4
anatomy classes. Masks via ``rle_from_coco``; boxes from the mask (COCO ``bbox`` not trusted). Every listed image is
annotated: its presence list (tools for instruments.json, anatomy for anatomy.json) is what its polygons show.
Video = the image's folder (``INSSEG_01/0.mp4_``, the authors' split unit); frame index = the last integer in the
file name, at 30 fps (inferred).

Splits: none official (the authors draw random 4-fold splits by video folder). Hashed 70/10/20 (``_itec``) by image
folder, and by the clip name's first ``_`` token for clips (inferred to name the source video, so overlapping clips
of one segment stay together).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path, PurePosixPath

from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video
from public_converters.seg_to_box import box_of_rle, rle_from_coco
from public_converters.sources._itec import add_whole_clip, files, hashed_split, subfolders
from public_converters.spec import SourceSpec


FRAME_FPS = 30
CLIP_ROOT = "GynSurg_Action_3sec"
ANNOTATIONS = {"instruments.json": "tool", "anatomy.json": "anatomy"}
IMAGE_FOLDERS = ("insseg", "ganseg")
SIDE_EFFECTS = ("Bleeding", "Non_bleeding", "Smoke", "Non_smoke")
ACTIONS = {
    "Coagulation": "coagulation",
    "Needle_passing": "needle passing",
    "Needle passing": "needle passing",
    "Suction_Irrigation": "suction irrigation",
    "Suction-Irrigation": "suction irrigation",
    "Transection": "transection",
    "Rest": "idle",
}
TOOLS = {
    "grasper": "grasper",
    "suture carrier": "suture carrier",
    "scissor": "scissors",
    "scissors": "scissors",
    "irrigator": "irrigator",
    "clip applier": "clip applier",
    "needle": "suturing needle",
    "trocar": "trocar",
    "needle holder": "needle driver",
    "corkscrew": "corkscrew",
    "bipolar forcep": "bipolar forceps",
    "bipolar forceps": "bipolar forceps",
    "knot pusher": "knot pusher",
    "sealer divider": "vessel sealer",
    "hook": "electrocautery hook",
    "colpotomizer": "colpotomizer",
    "clip": "clip",
    "cannula": "cannula",
    "thread": "thread",
    "trocar sleeve": "trocar sleeve",
    "morcellator": "morcellator",
    "thread fragment": "thread fragment",
    "glove": "glove",
}
ANATOMY = {
    "uterus": "uterus",
    "ovary": "ovary",
    "fallopian tube": "fallopian tube",
    "tube": "fallopian tube",
    "organ": "other organ",
}
LAST_INTEGER = re.compile(r"(\d+)\D*$")


def _name(native) -> str:
    """Category names compared lower-case with _ and - as spaces (the release's exact spellings are unknown)."""
    return re.sub(r"[_\s-]+", " ", str(native or "")).strip().lower()


def _read_clips(root: Path, labels, tables: SourceTables) -> None:
    clip_root, seen = root / CLIP_ROOT, {}
    for folder in subfolders(clip_root):
        class_folders = subfolders(folder) or [folder]  # a set of class folders, or a class folder itself
        for class_folder in class_folders:
            if class_folder.name in SIDE_EFFECTS:
                continue
            action = labels.map("action", class_folder.name, class_folder.relative_to(root))
            for clip in files(class_folder):
                if clip.suffix.lower() != ".mp4":
                    raise SourceError(clip, "expected only .mp4 clips in a class folder")
                name = clip.stem.replace(":", "_")
                video_id = f"clip_{class_folder.name}_{name}"
                if video_id in seen:
                    raise SourceError(clip, f"the same clip as {seen[video_id]} (':' written as '_')")
                seen[video_id] = clip.name
                split = hashed_split("gynsurg", "clip:" + name.split("_")[0])
                add_whole_clip(tables, root, clip, video_id, split, action)


def _image_path(root: Path, image: dict, path: Path, row: str) -> PurePosixPath:
    native = PurePosixPath(str(image.get("path") or image.get("file_name") or ""))
    parts = native.parts
    start = next((i for i, part in enumerate(parts) if part.lower() in IMAGE_FOLDERS), 0 if parts else None)
    if start is None or not parts[start:]:
        raise SourceError(path, "image entry without path / file_name", row=row)
    relative = PurePosixPath(*parts[start:])
    if len(relative.parts) < 3:
        raise SourceError(path, f"image path {native} has no video folder (insseg/INSSEG_xx/..)", row=row)
    if not (root / relative).is_file():
        raise SourceError(root / relative, "file not found (listed in images[])", fix=f"re-extract it; see {path}")
    return relative


def _mask(segmentation, height: int, width: int, path: Path, row: str) -> dict:
    """COCO polygons (or RLE) -> RLE; every polygon must have at least three points (pycocotools fails obscurely)."""
    polygons = segmentation if isinstance(segmentation, list) else []
    if any(not isinstance(p, list) or len(p) < 6 or len(p) % 2 for p in polygons):
        raise SourceError(path, "a polygon needs an even number of coordinates, at least 6", row=row)
    try:
        return rle_from_coco(segmentation, height, width)
    except (ValueError, TypeError, KeyError) as error:
        raise SourceError(path, f"bad segmentation ({error})", row=row) from error


def _read_coco(root: Path, name: str, default_kind: str, labels, tables: SourceTables, sizes: dict) -> None:
    path = root / name
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SourceError(path, f"cannot read the COCO file ({error})") from error
    if not all(isinstance(data.get(key), list) for key in ("images", "annotations", "categories")):
        raise SourceError(path, "expected COCO lists images, annotations and categories")
    categories = {c.get("id"): _name(c.get("name")) for c in data["categories"]}
    images, by_image, listed = {}, defaultdict(list), set()
    for index, image in enumerate(data["images"]):
        row = f"images[{index}]"
        if not all(isinstance(image.get(key), int) for key in ("id", "width", "height")):
            raise SourceError(path, "image entry needs integer id, width and height", row=row)
        relative = _image_path(root, image, path, row)
        match = LAST_INTEGER.search(relative.stem)
        if not match:
            raise SourceError(path, f"no frame number in the file name {relative.name}", row=row)
        video_id, frame = "-".join(relative.parent.parts[1:]), int(match.group(1))
        if image["id"] in images or (video_id, frame) in listed:
            raise SourceError(path, f"image id {image['id']} or frame {relative} listed twice", row=row)
        listed.add((video_id, frame))
        images[image["id"]] = (video_id, frame, relative.as_posix(), image["width"], image["height"])
        sizes.setdefault(video_id, set()).add((image["width"], image["height"]))
    for index, annotation in enumerate(data["annotations"]):
        row = f"annotations[{index}]"
        image, category = images.get(annotation.get("image_id")), categories.get(annotation.get("category_id"))
        if image is None or category is None or not annotation.get("segmentation"):
            raise SourceError(path, "needs a listed image_id, a known category_id and a segmentation", row=row)
        video_id, frame, _, width, height = image
        kind = labels.kind_of(category) or default_kind
        mask = _mask(annotation["segmentation"], height, width, path, row)
        label = labels.map(kind, category, path, row)
        found = by_image[annotation["image_id"]]
        found.append(Instance(video_id, frame, kind, label, box_of_rle(mask), mask, instance_id=len(found)))
    for image_id, (video_id, frame, relative, _, _) in images.items():
        found = by_image[image_id]
        present = {kind: sorted({i.label for i in found if i.kind == kind}) for kind in ("tool", "anatomy")}
        tools = present["tool"] if default_kind == "tool" or present["tool"] else None
        anatomy = present["anatomy"] if default_kind == "anatomy" or present["anatomy"] else None
        tables.frames.append(Frame(video_id, frame, relative, tools=tools, anatomy=anatomy))
        tables.instances += found


def read(root: Path, labels) -> SourceTables:
    tables, sizes = SourceTables(), {}
    present = [name for name in ANNOTATIONS if (root / name).is_file()]
    if not present and not (root / CLIP_ROOT).is_dir():
        raise SourceError(root, f"neither {CLIP_ROOT}/ nor {' / '.join(ANNOTATIONS)} found", fix="extract the release")
    for name in present:
        _read_coco(root, name, ANNOTATIONS[name], labels, tables, sizes)
    for video_id, found in sorted(sizes.items()):
        width, height = next(iter(found)) if len(found) == 1 else (None, None)
        split = hashed_split("gynsurg", "images:" + video_id)
        tables.videos.append(Video(video_id, split, FRAME_FPS, width=width, height=height))
    if (root / CLIP_ROOT).is_dir():
        _read_clips(root, labels, tables)
    return tables


SPEC = SourceSpec(
    name="gynsurg",
    title="GynSurg",
    procedure="gynecologic laparoscopy",
    branches=("image", "clip"),
    capabilities=frozenset(
        {"has_actions", "has_tool_presence", "has_anatomy_presence", "has_tool_bbox", "has_anatomy_bbox", "has_masks"}
    ),
    labels={"action": ACTIONS, "tool": TOOLS, "anatomy": ANATOMY},
    read=read,
    homepage="https://ftp.itec.aau.at/datasets/GynSurge/ (raw videos behind a usage agreement)",
    license="CC BY-NC-ND 4.0",
    unconfirmed=(
        "the full COCO category table (names read from each file's categories[])",
        "action-set folder name and clip naming (the split key is the name's first _ token)",
        "segmentation frame numbers from file names, at 30 fps; whether derived *_mask.png files ship (not read)",
        "layout of the JSONs and image folders side by side at the root",
    ),
)
