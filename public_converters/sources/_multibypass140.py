"""MultiBypass140 (Lavanchy et al. 2024): laparoscopic Roux-en-Y gastric bypass, phases and steps, two centres.

Shared reader of ``multibypass_bern`` (BernBypass70) and ``multibypass_strasbourg`` (StrasBypass70); the seed's
Table 13 counts the centres as two sources. Layout read (``docs/sources/multibypass140.md``; the labels live in the
``CAMMA-public/MultiBypass140`` git repository, the videos in its zips; point the source at the repository clone)::

    labels/<centre>/labels_by70/BBP01.mp4.json                    {"phases": [...], "steps": [...]}
    labels/<centre>/labels_by70_splits/labels/train/1fps_100_0.pickle   fold-0 training videos (1-fps frame lists)
    labels/<centre>/labels_by70_splits/labels/{val,test}/1fps_0.pickle
    tables/phase.csv, tables/step.csv                               header "id, name"; ids 0-13 and 0-45
    datasets/MultiBypass140/<Centre>Bypass70/videos/BBP01.mp4       (or <Centre>Bypass70/videos/ at the root)

Confirmed (the public repository's files): the JSON keys, intervals ``{start, end, label_name, label_id}``, the
vocabularies, the split-pickle structure. Inferred: ``start``/``end`` are milliseconds (BBP03's steps end at
3,769,553 ms, its last 1-fps frame is 3768). Unconfirmed: the videos' frame rate (25 fps assumed, as CAMMA's other
recordings; the media check only catches labels running past a video's end).

Overlaps, resolved by priority: phase intervals overlap because ``out_of_body`` (12) and ``severe_index`` (13) are
nested inside ordinary phases, and the file is not sorted. ``out_of_body`` wins over phases and steps: its frames
get neither (the camera is outside the patient; the official 1-fps pickles drop those frames too). ``severe_index``
is a flag, not a phase: it is not read (the schema has no place for it). ``s0_null_step`` means "no step": its
frames get no step. Ordinary phases (0-11) overlapping one another, or steps overlapping steps, are an error.

Splits: the default is the official fold 0, read from the split pickles of the release (they are plain git files
of the labels repository; a pickle is loaded without any class lookup, so it cannot run code). Folds 1-4 are split
variants where ``docs/sources/multibypass140.md`` lists both their validation and test videos (Bern); the
Strasbourg test lists were not available, so Strasbourg folds 1-4 are not offered (use the pickles' fold 0).
"""

from __future__ import annotations

import csv
import io
import pickle
import re
from pathlib import Path

from public_converters.coco import read_json
from public_converters.schema import Segment, SourceError, SourceTables, Video


FPS = 25.0
FOLD = 0
PHASE_NAMES = (
    "preparation", "gastric_pouch_creation", "omentum_division", "gastrojejunal_anastomosis", "anastomosis_test",
    "jejunal_separation", "closure_petersen_space", "jejunojejunal_anastomosis", "closure_mesenteric_defect",
    "cleaning_coagulation", "disassembling", "other_intervention", "out_of_body", "severe_index",
)  # fmt: skip
STEP_NAMES = (
    "s0_null_step", "s1_cavity_exploration", "s2_trocar_placement", "s3_retractor_placement", "s4_crura_dissection",
    "s5_his_angle_dissection", "s6_horizontal_stapling", "s7_retrogastric_dissection", "s8_vertical_stapling",
    "s9_gastric_remnant_reinforcement", "s10_gastric_pouch_reinforcement", "s11_gastric_opening",
    "s12_omental_lifting", "s13_omental_section", "s14_adhesiolysis", "s15_treitz_angle_identification",
    "s16_biliary_limb_measurement", "s17_jejunum_opening", "s18_gastrojejunal_stapling",
    "s19_gastrojejunal_defect_closing", "s20_mesenteric_opening", "s21_jejunal_section", "s22_gastric_tube_placement",
    "s23_jejunal_clamping", "s24_ink_injection", "s25_visual_assessment",
    "s26_gastrojejunal_anastomosis_reinforcement", "s27_petersen_space_exposure", "s28_petersen_space_closing",
    "s29_biliary_limb_opening", "s30_alimentary_limb_measurement", "s31_alimentary_limb_opening",
    "s32_jejunojejunal_stapling", "s33_jejunojejunal_defect_closing", "s34_jejunojejunal_anastomosis_reinforcement",
    "s35_staple_line_reinforcement", "s36_mesenteric_defect_exposure", "s37_mesenteric_defect_closing",
    "s38_anastomosis_fixation", "s39_coagulation", "s40_irrigation_aspiration", "s41_parietal_closure",
    "s42_trocar_removal", "s43_calibration", "s44_drainage_insertion", "s45_specimen_retrieval",
)  # fmt: skip
OUT_OF_BODY, SEVERE_INDEX, NULL_STEP = "out_of_body", "severe_index", "s0_null_step"
# handled by priority, never mapped to a canonical name
NOT_A_LABEL = {"phase": {OUT_OF_BODY, SEVERE_INDEX}, "step": {NULL_STEP}}
# "cleaning and coagulation" as Cholec80 names the same phase; otherwise the native words
PHASES = {n: n.replace("_", " ") for n in PHASE_NAMES[:12]} | {"cleaning_coagulation": "cleaning and coagulation"}
STEPS = {n: re.sub(r"^s\d+_", "", n).replace("_", " ") for n in STEP_NAMES[1:]}
SPLIT_FILES = {"train": f"train/1fps_100_{FOLD}.pickle", "validation": f"val/1fps_{FOLD}.pickle"}
SPLIT_FILES["test"] = f"test/1fps_{FOLD}.pickle"
FRAME_KEYS = {"Frame_id", "Original_frame_id", "Phase_gt", "Step_gt"}


def fold_variants(prefix: str, folds: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict:
    """fold k -> video -> split from the (validation, test) video numbers; the other of the 70 videos train."""
    variants = {}
    for fold, (val, test) in folds.items():
        split = {n: "validation" if n in val else "test" if n in test else "train" for n in range(1, 71)}
        variants[f"fold{fold}"] = {f"{prefix}{n:02d}": name for n, name in split.items()}
    return variants


def _vocabulary(path: Path, names: tuple[str, ...], kind: str, labels) -> dict[str, int]:
    """name -> id of tables/<kind>.csv, checked against the published table; unknown names are label misses."""
    if not path.is_file():
        raise SourceError(path, "file not found", fix="the tables/ folder of the MultiBypass140 repository")
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if not rows or [cell.strip() for cell in rows[0]] != ["id", "name"]:
        raise SourceError(path, f"header is {rows[:1]}, expected 'id, name'", row=1)
    vocabulary = {}
    for number, cells in enumerate(rows[1:], start=2):
        cells = [cell.strip() for cell in cells]
        if len(cells) != 2 or not cells[0].isdigit():
            raise SourceError(path, f"malformed row {cells}", row=number, fix="expected 'id, name'")
        ident, name = int(cells[0]), cells[1]
        if name in names and names.index(name) != ident:
            raise SourceError(path, f"{name} has id {ident}, the published table says {names.index(name)}", row=number)
        if name not in NOT_A_LABEL[kind]:
            labels.map(kind, name, path, number)
        vocabulary[name] = ident
    return vocabulary


def _intervals(path: Path, payload: dict, key: str, vocabulary: dict[str, int]) -> list[tuple[int, int, str, int]]:
    """(start frame, end frame exclusive, native name, entry index) of one list, sorted by start."""
    entries = payload.get(key)
    if not isinstance(entries, list):
        raise SourceError(path, f"no {key!r} list", fix='expected {"phases": [...], "steps": [...]}')
    found = []
    for index, entry in enumerate(entries):
        row = f"{key}[{index}]"
        try:
            start, end, name, ident = (entry[k] for k in ("start", "end", "label_name", "label_id"))
        except (KeyError, TypeError) as error:
            raise SourceError(
                path, f"entry {entry!r} lacks {error}", row=row, fix="start, end, label_name, label_id"
            ) from error
        if not all(isinstance(v, int) for v in (start, end, ident)) or not 0 <= start < end:
            raise SourceError(path, f"bad interval {entry!r}", row=row, fix="integer milliseconds, start < end")
        if name in vocabulary and vocabulary[name] != ident:
            raise SourceError(path, f"{name} has label_id {ident}, tables say {vocabulary[name]}", row=row)
        found.append((round(start * FPS / 1000), round(end * FPS / 1000), name, index))
    return sorted(found)


def _subtract(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Pieces of [start, end) outside every hole [a, b)."""
    pieces = [(start, end)] if start < end else []  # an interval under one frame (40 ms) labels no frame
    for a, b in holes:
        pieces = [(s, e) for s0, e0 in pieces for s, e in ((s0, min(e0, a)), (max(s0, b), e0)) if s < e]
    return pieces


def _segments(video_id, kind, path, intervals, holes, labels) -> list[Segment]:
    segments, previous = [], None
    for start, end, name, index in intervals:
        if name in NOT_A_LABEL[kind]:
            continue
        if previous is not None and start < previous[1]:
            raise SourceError(
                path, f"{kind} {name} overlaps {previous[2]}", row=f"{kind}s[{index}]", fix="ordinary labels must tile"
            )
        canonical = labels.map(kind, name, path, f"{kind}s[{index}]")
        segments += [Segment(video_id, kind, canonical, s, e - 1) for s, e in _subtract(start, end, holes)]
        previous = (start, end, name)
    return segments


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # plain dicts, lists, str and int need no class: refuse any
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _split_videos(path: Path, prefix: str) -> set[str]:
    """Video ids of one split pickle, after checking its documented structure."""
    if not path.is_file():
        raise SourceError(path, "file not found", fix="the official fold-0 split; clone the labels repository fully")
    try:
        payload = _PlainUnpickler(io.BytesIO(path.read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as error:
        raise SourceError(path, f"not a plain split pickle ({error})", fix="re-download it") from error
    if not isinstance(payload, dict):
        raise SourceError(path, f"holds a {type(payload).__name__}, expected a dict video -> frame list")
    for video, frames in payload.items():
        if not re.fullmatch(rf"{prefix}\d\d", str(video)) or not isinstance(frames, list):
            raise SourceError(path, f"entry {video!r} is not {prefix}NN -> list of frames", row=str(video))
        for frame in frames:
            if not isinstance(frame, dict) or not FRAME_KEYS <= set(frame):
                raise SourceError(path, f"frame {frame!r} lacks {sorted(FRAME_KEYS)}", row=str(video))
            if frame["Frame_id"] != f"{video}_{frame['Original_frame_id'] + 1:08d}":
                raise SourceError(path, f"Frame_id {frame['Frame_id']} is not Original_frame_id + 1", row=str(video))
    return set(payload)


def read_centre(root: Path, labels, centre: str, folder: str, prefix: str) -> SourceTables:
    label_dir = root / "labels" / centre / "labels_by70"
    candidates = [root / "datasets" / "MultiBypass140" / folder / "videos", root / folder / "videos"]
    video_dir = next((path for path in candidates if path.is_dir()), None)
    if video_dir is None or not label_dir.is_dir():
        missing = label_dir if video_dir else candidates[0]
        raise SourceError(missing, "folder not found", fix="point the source at the MultiBypass140 repository clone")
    phases = _vocabulary(root / "tables" / "phase.csv", PHASE_NAMES, "phase", labels)
    steps = _vocabulary(root / "tables" / "step.csv", STEP_NAMES, "step", labels)
    split_dir = root / "labels" / centre / "labels_by70_splits" / "labels"
    split_of = {}
    for split, name in SPLIT_FILES.items():
        for video in _split_videos(split_dir / name, prefix):
            if video in split_of:
                raise SourceError(split_dir / name, f"{video} is also in the {split_of[video]} split of fold {FOLD}")
            split_of[video] = split
    tables = SourceTables()
    for video_path in sorted(video_dir.glob(f"{prefix}[0-9][0-9].mp4")):
        video_id = video_path.stem
        path = label_dir / f"{video_path.name}.json"
        payload = read_json(path, fix=f"every video needs its label file in {label_dir}")
        phase_rows = _intervals(path, payload, "phases", phases)
        holes = [(start, end) for start, end, name, _ in phase_rows if name == OUT_OF_BODY]
        tables.segments += _segments(video_id, "phase", path, phase_rows, holes, labels)
        tables.segments += _segments(video_id, "step", path, _intervals(path, payload, "steps", steps), holes, labels)
        if video_id not in split_of:
            raise SourceError(split_dir, f"{video_id} is in none of the fold-{FOLD} split files", fix="re-clone")
        relative = video_path.relative_to(root).as_posix()
        tables.videos.append(Video(video_id, split_of[video_id], FPS, video_path=relative))
    if not tables.videos:
        raise SourceError(video_dir, f"no {prefix}NN.mp4 videos", fix="unzip multibypass0*.zip there")
    return tables
