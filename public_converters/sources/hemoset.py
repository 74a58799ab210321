"""HemoSet (Miao et al. 2024): blood segmentation in porcine surgery for automated hemostasis.

Layout read (``docs/sources/hemoset.md``; several third-party loaders agree)::

    pig1/ ... pig11/
      imgs/000000.png, 000030.png, ...      frames, the 6-digit original frame number (step 30 in the examples)
      labels/000000_mask.png, ...           one blood mask per frame
    (some extractions nest once more: pigN/imgs/imgs/*.png and pigN/labels/labels/*_mask.png; both are read)

A video is a pig (the split key); the frame index is the file's frame number (the recording's fps is unknown, so
``fps`` is None and the index only orders frames). Blood masks become pseudo-instances by connected components
(separate pools are separate instances).

Inferred / validated: the mask encoding. Loaders disagree (RGB blood #800000, grey thresholded at > 0, probably a
VOC-palette PNG with index 1), so the palette accepts black as background and (128, 0, 0), white or grey 1 as blood,
compared after conversion to RGB (a VOC palette index 1 is (128, 0, 0)); any other colour is an error naming the
file. The host page and licence are unknown. There is no official split: every pig is ``train`` by default; the
``third-party`` variant is one loader's pig split (train 1, 3, 4, 6, 9, 11 / val 2, 7 / test 5, 10; pig 8 unused).
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import Frame, SemanticMask, SourceError, SourceTables, Video
from public_converters.seg_to_box import image_size
from public_converters.spec import SourceSpec


BLOOD = "blood"
PALETTE = {(0, 0, 0): None, (128, 0, 0): BLOOD, (255, 255, 255): BLOOD, (1, 1, 1): BLOOD}
PIG = re.compile(r"^pig(\d+)$")
IMAGE = re.compile(r"^(\d{6})\.png$")
MASK = re.compile(r"^(\d{6})_mask\.png$")
THIRD_PARTY = {"train": (1, 3, 4, 6, 9, 11), "validation": (2, 7), "test": (5, 10)}
SPLITS = {"third-party": {f"pig{n}": split for split, numbers in THIRD_PARTY.items() for n in numbers}}


def _folder(pig: Path, name: str) -> Path:
    """``pigN/<name>`` or, in nested extractions, ``pigN/<name>/<name>``."""
    folder = pig / name
    if (folder / name).is_dir():
        return folder / name
    if not folder.is_dir():
        raise SourceError(folder, "folder not found", fix=f"each pigN/ needs {name}/ (or {name}/{name}/)")
    return folder


def _numbered(folder: Path, pattern: re.Pattern, what: str) -> dict[int, Path]:
    found = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):  # hidden files: OS litter (.DS_Store)
            match = pattern.match(path.name)
            if not match:
                raise SourceError(path, f"unexpected file name, expected {what}", fix="remove stray files")
            found[int(match[1])] = path
    return found


def read_pig(root: Path, pig: Path, labels, tables: SourceTables) -> set:
    image_folder, mask_folder = _folder(pig, "imgs"), _folder(pig, "labels")
    images = _numbered(image_folder, IMAGE, "NNNNNN.png")
    masks = _numbered(mask_folder, MASK, "NNNNNN_mask.png")
    for number in sorted(set(images) ^ set(masks)):
        missing = mask_folder / f"{number:06d}_mask.png" if number in images else image_folder / f"{number:06d}.png"
        raise SourceError(missing, "file not found", fix="every frame needs its image and its mask")
    labels.map("anatomy", BLOOD, pig)
    sizes = set()
    for number in sorted(images):
        size = image_size(images[number])[::-1]  # (height, width), as masks state it
        sizes.add(size)
        tables.frames.append(Frame(pig.name, number, str(images[number].relative_to(root))))
        mask = str(masks[number].relative_to(root))
        tables.masks.append(SemanticMask(pig.name, number, mask, PALETTE, size, exhaustive=False))  # blood only
    return sizes


def read(root: Path, labels) -> SourceTables:
    pigs = sorted((int(m[1]), p) for p in root.iterdir() if p.is_dir() and (m := PIG.match(p.name)))
    if not pigs:
        raise SourceError(root, "no pigN/ folders", fix="point --source hemoset= at the extracted HemoSet/ folder")
    tables = SourceTables()
    for _, pig in pigs:
        sizes = read_pig(root, pig, labels, tables)
        (height, width) = next(iter(sizes)) if len(sizes) == 1 else (None, None)
        tables.videos.append(Video(pig.name, "train", width=width, height=height))
    return tables


SPEC = SourceSpec(
    name="hemoset",
    title="HemoSet",
    procedure="porcine surgery (hemostasis)",
    branches=("image",),
    capabilities=frozenset({"has_anatomy_bbox", "has_masks"}),
    labels={"anatomy": {BLOOD: "blood"}},
    read=read,
    mask_policies={BLOOD: "components"},
    split_variants=SPLITS,
    homepage="unknown (paper: Miao et al., ISMR 2024)",
    license="unknown",
    unconfirmed=(
        "mask encoding (VOC palette / RGB #800000 / grey; accepted: black background, (128,0,0), white or 1 blood)",
        "host page and licence",
        "no official split (all train; a third-party pig split as a variant)",
        "the procedure and frame rate",
    ),
)
