"""HeiCo (Maier-Hein et al., Sci Data 2021): 30 colorectal surgeries, phases at 25 fps and ROBUST-MIS instrument
segmentations; shared reader of ``heico_proctocolectomy``, ``heico_rectal_resection`` and ``heico_sigmoid_resection``
(the Sureon paper's Table 13 counts the three procedures as three sources; point each at the same ``HeiCo/`` folder).

Layout read (``docs/sources/heico.md``; third-party download script quoting the paper)::

    HeiCo/<Type>/<n>/<Type>_<n>.avi             25 fps, e.g. Proctocolectomy/1/Proctocolectomy_1.avi
    HeiCo/<Type>/<n>/<Type>_<n>_Phase.csv       no header, "frame,phase_id", a row for every video frame
    HeiCo/<Type>/<n>/<frame>/raw.png            frames of the ROBUST-MIS segmentation set (directly under <n>/ or
    HeiCo/<Type>/<n>/<frame>/instrument_instances.png     under <n>/Instrument segmentations/: both are read)

``<Type>`` is ``Proctocolectomy``, ``Rectal Resection`` or ``Sigmoid Resection`` (any case). Not read: the device CSV
(columns unknown), ``10s_video.zip`` (the 250 frames before each segmented frame, already in the video) and the
Synapse manifests.

Confirmed: the phase file format and the 0-13 phase table (EndoVis 2017 page and a loader checked on 30/30
videos); instance masks are 8-bit, 0 = background, 1, 2, ... = instrument instances without a class. Inferred: the
frame folder's name is the frame number in the video; a frame folder without ``instrument_instances.png`` shows no
instrument (ROBUST-MIS ships the mask "only if an instrument is visible"), so its tool list is empty, not unknown.

Choices: phase 13 ("Exception", ignored in the challenge's evaluation) is no phase: those frames get none. Instance
masks go to seg-to-box with the ``instances`` policy: each mask value is one "surgical instrument" instance (the masks
carry no class), and the mask must have its ``raw.png``'s size (read from the PNG header). Extra-abdominal
frames in the videos are blanked solid blue (RGB 0,0,255); they carry phase labels and can only be recognised from
the pixels, so the clip stage has to skip them (the segmentation frames are intra-abdominal).

Splits: the EndoVis 2017 / ROBUST-MIS test surgeries are not established, so every surgery is ``train``.
"""

from __future__ import annotations

from pathlib import Path

from public_converters.schema import (
    Coverage,
    Frame,
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
PHASE_NAMES = (
    "Preparation and orientation at abdomen",
    "Dissection of lymphnodes and blood vessels",
    "Retroperitoneal preparation to lower pancreatic border",
    "Retroperitoneal preparation of duodenum and pancreatic head",
    "Mobilizing the sigmoid and the descending colon",
    "Mobilizing the spenic flexure",
    "Mobilizing the tranverse colon",
    "Mobilizing the ascending colon",
    "Dissection and resection of rectum",
    "Preparing the anastomosis extraabdominally",
    "Preparing the anastomosis intraabdominally",
    "Placing stoma",
    "Finishing the operation",
)
EXCEPTION = 13
# Canonical names correct the official page's typos (spenic, tranverse, lymphnodes).
PHASES = {
    name: name.lower()
    .replace("spenic", "splenic")
    .replace("tranverse", "transverse")
    .replace("lymphnodes", "lymph nodes")
    for name in PHASE_NAMES
}
INSTRUMENT = "instrument"
TOOLS = {INSTRUMENT: "surgical instrument"}
SEGMENTATION_FOLDER = "instrument segmentations"


def _procedure_folder(root: Path, type_name: str) -> Path:
    folders = {path.name.lower(): path for path in sorted(root.iterdir()) if path.is_dir()} if root.is_dir() else {}
    if type_name.lower() in folders:
        return folders[type_name.lower()]
    if root.name.lower() == type_name.lower():
        return root
    raise SourceError(root / type_name, "folder not found", fix="point the source at the HeiCo/ folder")


def _one(folder: Path, suffix: str, expected: str, required: bool = True) -> Path:
    """The single file of ``folder`` whose name ends with ``suffix`` (case-insensitive); ``expected`` for errors.
    Not ``required`` (the video), none found is ``folder / expected``: the media check names it, with the file that
    is probably it under another name, among every media problem of the source."""
    found = [path for path in sorted(folder.iterdir()) if path.is_file() and path.name.lower().endswith(suffix)]
    if not found and not required:
        return folder / expected
    if len(found) != 1:
        what = "no file" if not found else f"{len(found)} files ({', '.join(p.name for p in found)})"
        raise SourceError(folder / expected, f"{what} named *{suffix}", fix="one per surgery folder")
    return found[0]


def _phases(path: Path, labels) -> list[tuple[int, str | None]]:
    phases = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 2 or not all(cell.isdigit() for cell in cells):
            raise SourceError(path, f"malformed row {line!r}", row=number, fix="expected headerless 'frame,phase_id'")
        frame, ident = int(cells[0]), int(cells[1])
        native = PHASE_NAMES[ident] if ident < len(PHASE_NAMES) else None if ident == EXCEPTION else cells[1]
        phases.append((frame, native and labels.map("phase", native, path, number)))
    if [frame for frame, _ in phases] != list(range(len(phases))):
        raise SourceError(path, "frame indices are not contiguous from 0", fix="the file is incomplete")
    return phases


def _frame_folders(surgery: Path) -> list[tuple[int, Path]]:
    parents = [surgery] + [p for p in sorted(surgery.iterdir()) if p.name.lower() == SEGMENTATION_FOLDER]
    found = [(int(p.name), p) for parent in parents for p in sorted(parent.iterdir()) if p.name.isdigit()]
    return sorted(found)


# ROBUST-MIS instance masks: 0 is background, each other grey value one instrument (seg-to-box's "instances" policy)
INSTANCE_PALETTE = {0: None, **{value: INSTRUMENT for value in range(1, 256)}}
MASK_POLICIES = {INSTRUMENT: "instances"}


def read_procedure(root: Path, labels, type_name: str, prefix: str) -> SourceTables:
    folder = _procedure_folder(root, type_name)
    surgeries = sorted((int(p.name), p) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    if not surgeries:
        raise SourceError(folder, "no numbered surgery folders", fix="expected <Type>/1 ... <Type>/10")
    tables = SourceTables()
    for number, surgery in surgeries:
        video_id = f"{prefix}_{number}"
        video = _one(surgery, f"_{number}.avi", f"{type_name}_{number}.avi", required=False)
        phase_path = _one(surgery, f"_{number}_phase.csv", f"{type_name}_{number}_Phase.csv")
        phases = _phases(phase_path, labels)
        tables.segments += segments_from_labels(video_id, "phase", phases)
        for frame, frame_dir in _frame_folders(surgery):
            image = frame_dir / "raw.png"
            if frame >= len(phases):
                raise SourceError(frame_dir, f"frame {frame} is past the video's {len(phases)} labelled frames")
            size = image_size(image, fix="every frame folder holds raw.png")[::-1]  # (height, width)
            mask = frame_dir / "instrument_instances.png"
            if mask.is_file():  # seg-to-box fills the frame's tools from it; no mask = no instrument visible
                tables.masks.append(
                    SemanticMask(video_id, frame, mask.relative_to(root).as_posix(), INSTANCE_PALETTE, size)
                )
            tools = None if mask.is_file() else []
            tables.frames.append(
                Frame(video_id, frame, image.relative_to(root).as_posix(), phases[frame][1], tools=tools)
            )
        relative = video.relative_to(root).as_posix()
        tables.videos.append(Video(video_id, "train", FPS, len(phases), video_path=relative))
        # a row for every video frame: a file that ends before the video is short (a warning of the media check)
        tables.coverage[video_id] = Coverage(len(phases), phase_path.relative_to(root).as_posix(), "phase labels")
    return tables


def procedure_spec(name: str, title: str, procedure: str, type_name: str, prefix: str) -> SourceSpec:
    """The spec of one HeiCo procedure: the three differ only in their folder, ids and procedure type."""

    def read(root: Path, labels) -> SourceTables:
        return read_procedure(root, labels, type_name, prefix)

    return SourceSpec(
        name=name,
        title=title,
        procedure=procedure,
        branches=("image", "clip"),
        capabilities=frozenset({"has_phase", "has_tool_presence", "has_tool_bbox", "has_masks"}),
        labels={"phase": PHASES, "tool": TOOLS},
        read=read,
        mask_policies=MASK_POLICIES,
        homepage="https://www.synapse.org/#!Synapse:syn21903917 (account, data use terms)",
        license="unknown",
        unconfirmed=(
            "frame folder name = frame number in the video",
            "frame folders directly under <n>/ or under 'Instrument segmentations/'",
            "test surgeries of EndoVis 2017 / ROBUST-MIS (all read as train)",
            "license",
        ),
    )
