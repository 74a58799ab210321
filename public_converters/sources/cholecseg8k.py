"""CholecSeg8k (Hong et al. 2020): 8,080 Cholec80 frames with 13-class semantic masks, read from the watershed masks.

Layout read (``docs/sources/cholecseg8k.md``, the Kaggle release ``newslab/cholecseg8k``)::

    videoNN/videoNN_SSSSS/frame_<k>_endo.png                    RGB frame (854x480 in the release)
    videoNN/videoNN_SSSSS/frame_<k>_endo_watershed_mask.png     ground truth: class as a decimal grey level
    videoNN/videoNN_SSSSS/frame_<k>_endo_mask.png               annotation-tool mask (not read)
    videoNN/videoNN_SSSSS/frame_<k>_endo_color_mask.png         colour rendering (not read; its colours are wrong)

``SSSSS`` is the zero-padded first frame of an 80-frame clip and ``k`` the (unpadded) Cholec80 frame number, so frame
indices are Cholec80's own 25-fps frame numbers and join Cholec80 / CholecT50 labels of the same ``videoNN``; ``fps``
is 25 for that reason, but there is no video file (image branch only).

Confirmed by two independent third-party loaders (torch-em, the EndoViT loader): the layout, the 17 videos, and that
the Kaggle table's ``#505050`` watershed codes are *decimal* grey levels (50), not hex. The watershed mask has a
1-pixel white (255) border and black (0) unlabelled pixels: both are read as unlabelled; some masks are RGBA (the
alpha channel is dropped). Class 0 "Black Background" (50) is the dark area outside the endoscope's view: unlabelled.

Seg-to-box policies (the Sureon paper, C.2; choices documented here): structures present once per view are ``single``
(gallbladder, liver, cystic duct); countable things are ``components`` (blood pools, grasper and hook instances,
hepatic vein segments); large background tissue is ``semantic`` (abdominal wall, fat, connective tissue, liver
ligament, gastrointestinal tract).

Splits: there is no official split. The default is Scheikl et al.'s (train 13 videos, validation 17/52, test 12/27).
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import Frame, SemanticMask, SourceError, SourceTables, Video
from public_converters.seg_to_box import image_size
from public_converters.spec import SourceSpec


FPS = 25
CLIP_LENGTH = 80
# watershed grey level -> Kaggle class name; None = unlabelled (view background, unlabelled pixels, white border)
PALETTE = {
    50: None,
    0: None,
    255: None,
    11: "Abdominal Wall",
    21: "Liver",
    13: "Gastrointestinal Tract",
    12: "Fat",
    31: "Grasper",
    23: "Connective Tissue",
    24: "Blood",
    25: "Cystic Duct",
    32: "L-hook Electrocautery",
    22: "Gallbladder",
    33: "Hepatic Vein",
    5: "Liver Ligament",
}
TOOLS = {"Grasper": "grasper", "L-hook Electrocautery": "electrocautery hook"}
ANATOMY = {
    "Abdominal Wall": "abdominal wall",
    "Liver": "liver",
    "Gastrointestinal Tract": "gastrointestinal tract",
    "Fat": "fat",
    "Connective Tissue": "connective tissue",
    "Blood": "blood",
    "Cystic Duct": "cystic duct",
    "Gallbladder": "gallbladder",
    "Hepatic Vein": "hepatic vein",
    "Liver Ligament": "liver ligament",
}
MASK_POLICIES = {
    "Gallbladder": "single",
    "Liver": "single",
    "Cystic Duct": "single",
    "Blood": "components",
    "Grasper": "components",
    "L-hook Electrocautery": "components",
    "Hepatic Vein": "components",
    "Abdominal Wall": "semantic",
    "Fat": "semantic",
    "Connective Tissue": "semantic",
    "Liver Ligament": "semantic",
    "Gastrointestinal Tract": "semantic",
}
SCHEIKL = {"train": (1, 9, 18, 20, 24, 25, 26, 28, 35, 37, 43, 48, 55), "validation": (17, 52), "test": (12, 27)}
SPLITS = {"scheikl": {f"video{n:02d}": split for split, numbers in SCHEIKL.items() for n in numbers}}
VIDEO_DIR = re.compile(r"^video(\d{2})$")
FILE_NAME = re.compile(r"^frame_(\d+)_endo(_watershed_mask|_mask|_color_mask)?\.png$")


def _clip_frames(clip: Path) -> dict[int, set[str]]:
    """frame number -> the file kinds present ('' = the frame image) in one clip folder; checks every name."""
    match = re.fullmatch(rf"{clip.parent.name}_(\d{{5}})", clip.name)
    if not match:
        raise SourceError(clip, "clip folder name is not <video>_<5-digit start frame>", fix="e.g. video01_00080")
    start = int(match.group(1))
    found: dict[int, set[str]] = {}
    for path in sorted(clip.iterdir()):
        if path.name.startswith("."):
            continue
        name = FILE_NAME.match(path.name)
        if not name:
            raise SourceError(path, "unexpected file in a clip folder", fix="expected frame_<k>_endo[...].png")
        frame = int(name.group(1))
        if not start <= frame < start + CLIP_LENGTH:
            raise SourceError(
                path, f"frame {frame} is outside the clip's frames {start}-{start + CLIP_LENGTH - 1}", row=frame
            )
        found.setdefault(frame, set()).add(name.group(2) or "")
    return found


def read_video(root: Path, folder: Path, video_id: str) -> tuple[Video, list[Frame], list[SemanticMask]]:
    frames, masks, size = [], [], None
    for clip in sorted(p for p in folder.iterdir() if p.is_dir()):
        for frame, kinds in sorted(_clip_frames(clip).items()):
            image = clip / f"frame_{frame}_endo.png"
            mask = clip / f"frame_{frame}_endo_watershed_mask.png"
            for needed, path in (("", image), ("_watershed_mask", mask)):
                if needed not in kinds:
                    raise SourceError(path, "file not found", fix="every annotated frame needs its image and mask")
            size = size or image_size(image)
            frames.append(Frame(video_id, frame, image_path=str(image.relative_to(root))))
            masks.append(SemanticMask(video_id, frame, str(mask.relative_to(root)), PALETTE, (size[1], size[0])))
    if not frames:
        raise SourceError(folder, "no clip folders with frames", fix="expected videoNN_SSSSS/frame_<k>_endo.png")
    split = SPLITS["scheikl"].get(video_id)
    if split is None:
        raise SourceError(folder, f"{video_id} is not one of CholecSeg8k's 17 videos", fix="check the folder")
    return Video(video_id, split, FPS, width=size[0], height=size[1]), frames, masks


def read(root: Path, labels) -> SourceTables:
    tables = SourceTables()
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and VIDEO_DIR.match(p.name)):
        video, frames, masks = read_video(root, folder, folder.name)
        tables.videos.append(video)
        tables.frames += frames
        tables.masks += masks
    if not tables.videos:
        raise SourceError(root, "no videoNN folders", fix="point --source cholecseg8k= at the extracted Kaggle folder")
    return tables


SPEC = SourceSpec(
    name="cholecseg8k",
    title="CholecSeg8k",
    procedure="laparoscopic cholecystectomy",
    branches=("image",),
    capabilities=frozenset(
        {"has_tool_presence", "has_anatomy_presence", "has_tool_bbox", "has_anatomy_bbox", "has_masks"}
    ),
    labels={"tool": TOOLS, "anatomy": ANATOMY},
    read=read,
    mask_policies=MASK_POLICIES,
    split_variants=SPLITS,
    default_split_variant="scheikl",
    homepage="https://www.kaggle.com/datasets/newslab/cholecseg8k",
    license="CC BY-NC-SA 4.0",
    unconfirmed=(
        "no official split (Scheikl et al.'s split is the default)",
        "license as listed by third parties (CC BY-NC-SA 4.0)",
        "watershed grey levels from third-party loaders (decimal, not hex)",
    ),
)
