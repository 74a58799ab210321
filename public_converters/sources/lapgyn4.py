"""LapGyn4 v1.2 (Leibetseder et al. 2018, ITEC Klagenfurt): four image-classification problems in gynecologic
laparoscopy, shipped as class folders of 1-fps JPEG frames; no masks, no annotation file, no split.

Layout read (``docs/sources/lapgyn4.md``, the official Readme as quoted by EndoViT)::

    LapGyn4_v1.2/Readme.txt                              (the root may be this folder or the one holding it)
    LapGyn4_v1.2/Actions_on_Anatomy/Suturing_{Other,Ovary,Uterus,Vagina}/c_<case>_v_<video>_f_<frame>.jpg
    LapGyn4_v1.2/Anatomical_Structures/{Colon,Liver,Ovary,Oviduct,Uterus}/c_..._v_..._f_....jpg
    LapGyn4_v1.2/Instrument_Count/{0,1,2,3}/<random int>.jpg
    LapGyn4_v1.2/Surgical_Actions/{Coagulation,...,Suturing}/c_..._v_..._f_....jpg

Confirmed [official Readme]: the four subsets, their class folders, the file-name convention and its meaning (case =
one operation, video = a recording of it, frame = frame number), "no train/val/test split", Instrument_Count names
being random with no case. What each subset becomes (the image branch only):

- Surgical_Actions: the frame's ``actions`` (one class folder = one action);
- Anatomical_Structures: the frame's ``anatomy`` (Oviduct = fallopian tube);
- Actions_on_Anatomy: ``<Action>_<Structure>`` -> the action and the structure it is performed on as ``anatomy``;
  ``Other`` names no structure, so those frames leave anatomy unannotated;
- Instrument_Count: a count without names: ``n`` box-less "surgical instrument" instances and presence (``[]`` for
  0), one pseudo-video ``Instrument_Count`` with a running index.

Presence lists name the labelled class; they are not exhaustive over the vocabulary (the release labels one class
per folder). A file found in several class folders of one subset is one frame with the union of their labels.

Videos: ``<subset>_c<case>_v<video>`` with ``fps=None`` and the native frame number as the index (whether it counts
seconds or original frames is not stated). Split: patient-level by case (``_itec.hashed_split``: 70/10/20 by a
sha256 of the case id), so one operation never straddles splits across all subsets. Instrument_Count has no case;
it is kept whole in train (some of its images come from Cholec80, per EndoViT: do not evaluate Cholec80 on it).
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import Frame, Instance, SourceError, SourceTables, Video
from public_converters.sources._itec import files, hashed_split, subfolders
from public_converters.spec import SourceSpec


SUBSETS = ("Actions_on_Anatomy", "Anatomical_Structures", "Instrument_Count", "Surgical_Actions")
ACTIONS = {
    "Coagulation": "coagulation",
    "Cutting_Cold": "cold cutting",
    "Cutting_HF": "high-frequency cutting",
    "Dissection_Blunt": "blunt dissection",
    "Injection": "injection",
    "Sling_Hysterectomy": "sling hysterectomy",
    "Suction_Irrigation": "suction irrigation",
    "Suturing": "suturing",
}
ANATOMY = {
    "Colon": "colon",
    "Liver": "liver",
    "Ovary": "ovary",
    "Oviduct": "fallopian tube",
    "Uterus": "uterus",
    "Vagina": "vagina",
}
TOOLS = {"instrument": "surgical instrument"}  # Instrument_Count names no tool
NO_STRUCTURE = "Other"
CASE_FRAME = re.compile(r"^c_(\d+)_v_(\d+)_f_(\d+)\.jpe?g$", re.IGNORECASE)
COUNT_FRAME = re.compile(r"^(\d+)\.jpe?g$", re.IGNORECASE)
COUNT_VIDEO = "Instrument_Count"


def _base(root: Path) -> Path:
    nested = root / "LapGyn4_v1.2"
    base = nested if nested.is_dir() else root
    for subset in SUBSETS:
        if not (base / subset).is_dir():
            raise SourceError(base / subset, "subset folder not found", fix="extract the whole LapGyn4_v1.2.zip")
    return base


def _class_labels(subset: str, name: str, where: str, labels) -> tuple[list[str] | None, list[str] | None]:
    """(actions, anatomy) a class folder gives its frames."""
    if subset == "Surgical_Actions":
        return [labels.map("action", name, where)], None
    if subset == "Anatomical_Structures":
        return None, [labels.map("anatomy", name, where)]
    action, _, structure = name.partition("_")
    if not structure:
        raise SourceError(where, f"class folder {name!r} is not <Action>_<Structure>")
    anatomy = None if structure == NO_STRUCTURE else [labels.map("anatomy", structure, where)]
    return [labels.map("action", action, where)], anatomy


def _read_case_subset(root: Path, base: Path, subset: str, labels) -> tuple[list[Frame], dict[str, str]]:
    found: dict[tuple[str, int], dict] = {}
    cases = {}
    for folder in subfolders(base / subset):
        where = folder.relative_to(root).as_posix()
        actions, anatomy = _class_labels(subset, folder.name, where, labels)
        for image in files(folder):
            match = CASE_FRAME.match(image.name)
            if not match:
                raise SourceError(image, "file name is not c_<case>_v_<video>_f_<frame>.jpg")
            case, video, frame = (int(group) for group in match.groups())
            video_id = f"{subset}_c{case}_v{video}"
            cases[video_id] = str(case)
            entry = found.setdefault(
                (video_id, frame), {"path": image.relative_to(root).as_posix(), "actions": None, "anatomy": None}
            )
            for key, values in (("actions", actions), ("anatomy", anatomy)):
                if values is not None:
                    entry[key] = sorted(set(entry[key] or []) | set(values))
    frames = [
        Frame(video_id, frame, entry["path"], actions=entry["actions"], anatomy=entry["anatomy"])
        for (video_id, frame), entry in sorted(found.items())
    ]
    return frames, cases


def _read_counts(root: Path, base: Path, labels) -> tuple[list[Frame], list[Instance]]:
    images = []
    for folder in subfolders(base / COUNT_VIDEO):
        if not folder.name.isdigit():
            raise SourceError(folder, "Instrument_Count class folders are instrument counts (0, 1, 2, 3)")
        for image in files(folder):
            if not COUNT_FRAME.match(image.name):
                raise SourceError(image, "Instrument_Count file names are <integer>.jpg")
            images.append((int(folder.name), int(image.stem), image))
    frames, instances = [], []
    tool = labels.map("tool", "instrument", base / COUNT_VIDEO) if images else None
    for index, (count, _, image) in enumerate(sorted(images)):
        relative = image.relative_to(root).as_posix()
        frames.append(Frame(COUNT_VIDEO, index, relative, tools=[tool] if count else []))
        instances += [Instance(COUNT_VIDEO, index, "tool", tool, instance_id=i) for i in range(count)]
    return frames, instances


def read(root: Path, labels) -> SourceTables:
    base = _base(root)
    tables = SourceTables()
    cases: dict[str, str] = {}
    for subset in SUBSETS:
        if subset == COUNT_VIDEO:
            frames, instances = _read_counts(root, base, labels)
            tables.instances += instances
            if frames:
                tables.videos.append(Video(COUNT_VIDEO, "train"))
        else:
            frames, subset_cases = _read_case_subset(root, base, subset, labels)
            cases |= subset_cases
        if not frames:
            raise SourceError(base / subset, "no images in this subset", fix="extract the whole LapGyn4_v1.2.zip")
        tables.frames += frames
    tables.videos += [Video(video_id, hashed_split("lapgyn4", case)) for video_id, case in sorted(cases.items())]
    return tables


SPEC = SourceSpec(
    name="lapgyn4",
    title="LapGyn",
    procedure="gynecologic laparoscopy",
    branches=("image",),
    capabilities=frozenset({"has_actions", "has_anatomy_presence", "has_tool_presence"}),
    labels={"action": ACTIONS, "anatomy": ANATOMY, "tool": TOOLS},
    read=read,
    homepage="http://ftp.itec.aau.at/datasets/LapGyn4/",
    license="CC BY-NC 4.0",
    unconfirmed=(
        "license (DKFZ mml's tag, not the Readme)",
        "whether f_<frame> counts 1-fps samples or original video frames (used only as an ordering index)",
        "case ids shared across subsets (assumed: one operation = one case id, so splits are per case)",
        "no official split: a hashed patient-level 70/10/20 split by case",
    ),
)
