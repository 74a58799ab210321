"""GynSurg (Nasirihaghighi et al., ACM MM 2025, ITEC Klagenfurt): action clips (clip branch) and COCO polygon
segmentation of instruments and anatomy (image branch) in gynecologic laparoscopy.

Layout read (``docs/sources/gynsurg.md``; ``Sahar-Nasiri/GynSurg`` README and mask scripts)::

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

import re
from pathlib import Path, PurePosixPath

from public_converters import coco
from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video
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


def _read_coco(root: Path, name: str, default_kind: str, labels, tables: SourceTables, sizes: dict) -> None:
    path = root / name
    data = coco.load(path)
    categories = {i: _name(native) for i, native in coco.index_categories(data, path).items()}
    paths = {}

    def frame_of(image: dict, row: str) -> tuple[str, int]:
        relative = _image_path(root, image, path, row)
        match = LAST_INTEGER.search(relative.stem)
        if not match:
            raise SourceError(path, f"no frame number in the file name {relative.name}", row=row)
        paths[image["id"]] = relative.as_posix()
        return "-".join(relative.parent.parts[1:]), int(match.group(1))

    images = coco.index_images(data, path, frame_of)
    found: dict[tuple[str, int], list[Instance]] = {key: [] for key, _ in images.values()}
    for annotation in coco.annotations(data, path, images, categories):
        kind = labels.kind_of(annotation.category) or default_kind
        box, mask = coco.geometry(annotation, path, with_mask=True, box_from_mask=True)
        label = labels.map(kind, annotation.category, path, annotation.row)
        listed = found[annotation.key]
        listed.append(Instance(*annotation.key, kind, label, box, mask, instance_id=len(listed)))
    for image_id, (key, image) in images.items():
        sizes.setdefault(key[0], set()).add((image["width"], image["height"]))
        present = {kind: sorted({i.label for i in found[key] if i.kind == kind}) for kind in ("tool", "anatomy")}
        tools = present["tool"] if default_kind == "tool" or present["tool"] else None
        anatomy = present["anatomy"] if default_kind == "anatomy" or present["anatomy"] else None
        tables.frames.append(Frame(*key, paths[image_id], tools=tools, anatomy=anatomy))
        tables.instances += found[key]


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
