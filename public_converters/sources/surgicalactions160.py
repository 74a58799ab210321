"""SurgicalActions160 (Schoeffmann et al. 2018, ITEC Klagenfurt): 160 short gynecologic-laparoscopy clips, 16 actions.

Layout read (``docs/sources/surgicalactions160.md``, the official README as quoted by EndoViT)::

    SurgicalActions160/README.txt                  (the root may be this folder or the folder holding it)
    SurgicalActions160/01_abdominal_access/01_01.mp4 ... 01_10.mp4
    ...
    SurgicalActions160/16_endobag-out/16_01.mp4 ... 16_10.mp4

Confirmed [official README]: 16 class folders ``NN_<name>`` with 1-based ids in the README's order, no annotation
file; the class of a clip is its folder. Quirk: the README's naming convention says ``c_<class>_v_<video>.mp4`` while
its tree shows ``NN_MM.mp4``; both are accepted and the class number in the name must match the folder's.
Inferred [3p]: 25 fps, 427x240, 2-5 s per clip. The reader does not rely on them: each clip's rate and frame count
come from its container header (``_itec.probe_clip``), and the clip becomes one Video (``video_path``) with one
action segment covering all its frames. Video ids are ``NN_MM`` whatever the file naming.

Splits: none shipped, and the 59 underlying recordings are not named, so no held-out split can be leakage-free.
The default ``all-train`` keeps every clip in train; ``by-clip-number`` holds out clips 08 (validation) and 09-10
(test) of every class: deterministic and class-balanced, but clips of one recording may straddle splits.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import SourceError, SourceTables
from public_converters.sources._itec import add_whole_clip, files, subfolders
from public_converters.spec import SourceSpec


# README order = the 1-based folder id
FOLDER_NAMES = (
    "abdominal_access",
    "injection",
    "cutting",
    "blunt_dissection",
    "dissection_thermal",
    "irrigation",
    "coagulation",
    "suction",
    "needle_positioning",
    "needle_puncture",
    "knot_pushing",
    "knotting",
    "thread_cut",
    "sling-in",
    "endobag-in",
    "endobag-out",
)
FOLDER_IDS = {name: number for number, name in enumerate(FOLDER_NAMES, start=1)}
ACTIONS = {name: name.replace("_", " ") for name in FOLDER_NAMES} | {"dissection_thermal": "thermal dissection"}
CLIPS_PER_CLASS = 10
FOLDER = re.compile(r"^(\d{2})_(.+)$")
CLIP = re.compile(r"^(?:(\d{2})_(\d{2})|c_(\d{1,2})_v_(\d{1,2}))\.mp4$", re.IGNORECASE)


def _by_clip_number(clip: int) -> str:
    return "test" if clip > 8 else "validation" if clip == 8 else "train"


SPLITS = {
    "all-train": {f"{c:02d}_{v:02d}": "train" for c in range(1, 17) for v in range(1, CLIPS_PER_CLASS + 1)},
    "by-clip-number": {
        f"{c:02d}_{v:02d}": _by_clip_number(v) for c in range(1, 17) for v in range(1, CLIPS_PER_CLASS + 1)
    },
}


def _base(root: Path) -> Path:
    nested = root / "SurgicalActions160"
    return nested if nested.is_dir() else root


def read(root: Path, labels) -> SourceTables:
    base = _base(root)
    folders = [folder for folder in subfolders(base) if FOLDER.match(folder.name)]
    if not folders:
        raise SourceError(
            base, "no NN_<action> class folders", fix="point at the extracted SurgicalActions160/ folder"
        )
    tables, seen = SourceTables(), {}
    for folder in folders:
        number, name = FOLDER.match(folder.name).groups()
        action = labels.map("action", name, folder.relative_to(root))
        if name in FOLDER_IDS and FOLDER_IDS[name] != int(number):
            raise SourceError(
                folder, f"folder id {number} but the README numbers {name!r} {FOLDER_IDS[name]:02d}", fix="rename it"
            )
        clips = files(folder)
        if not clips:
            raise SourceError(folder, "class folder without clips", fix="the release has 10 per class; re-extract it")
        for clip in clips:
            match = CLIP.match(clip.name)
            if not match:
                raise SourceError(clip, "expected a clip named NN_MM.mp4 or c_<class>_v_<video>.mp4")
            class_number = int(match.group(1) or match.group(3))
            if class_number != int(number):
                raise SourceError(clip, f"class {class_number} in the name, {int(number)} by its folder {folder.name}")
            video_id = f"{class_number:02d}_{int(match.group(2) or match.group(4)):02d}"
            if video_id in seen:
                raise SourceError(clip, f"clip {video_id} also named {seen[video_id]}", fix="keep one of the two")
            seen[video_id] = clip.name
            add_whole_clip(tables, root, clip, video_id, SPLITS["all-train"].get(video_id, "train"), action)
    if not tables.videos:
        raise SourceError(base, "the class folders hold no clips", fix="re-extract SurgicalActions160.zip")
    return tables


SPEC = SourceSpec(
    name="surgicalactions160",
    title="SurgicalActions160",
    procedure="gynecologic laparoscopy",
    branches=("clip",),
    capabilities=frozenset({"has_actions"}),
    labels={"action": ACTIONS},
    read=read,
    split_variants=SPLITS,
    default_split_variant="all-train",
    homepage="http://ftp.itec.aau.at/datasets/SurgicalActions160/",
    license="unknown (ITEC's sibling datasets are CC BY-NC 4.0)",
    unconfirmed=(
        "license",
        "clip file naming (NN_MM.mp4 in the README tree vs c_<class>_v_<video>.mp4 in its naming note; both read)",
        "recording of each clip (not in the release): held-out splits may leak",
        "25 fps / 427x240 (read from each clip's header instead)",
    ),
)
