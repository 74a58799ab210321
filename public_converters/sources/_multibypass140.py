"""MultiBypass140 (Lavanchy et al. 2024): laparoscopic Roux-en-Y gastric bypass, phases and steps, two centres.

Shared reader of ``multibypass_bern`` (BernBypass70) and ``multibypass_strasbourg`` (StrasBypass70); the Sureon paper's
Table 13 counts the centres as two sources. Layout read (``docs/sources/multibypass140.md``; the labels live in the
``CAMMA-public/MultiBypass140`` git repository, the videos in its zips; point the source at the repository clone)::

    labels/<centre>/labels_by70_splits/labels/train/1fps_100_0.pickle   fold-0 training videos, per-second labels
    labels/<centre>/labels_by70_splits/labels/{val,test}/1fps_0.pickle
    tables/phase.csv, tables/step.csv                               header "id, name"; ids 0-13 and 0-45
    datasets/MultiBypass140/<Centre>Bypass70/videos/BBP01.mp4       (or <Centre>Bypass70/videos/ at the root)

Labels: the official per-second labels, ``Phase_gt`` and ``Step_gt`` of the fold-0 split pickles (train, val and test
together hold all 70 videos of a centre; a video has the same labels in every fold's pickles, checked on the Bern
videos in both val fold 0 and test fold 1), so phases and steps agree with what the benchmarks on MultiBypass140
score. Second ``Original_frame_id`` s is video frame 25 * s and covers 25 frames (segments of period 25, the last
clipped at the video's end by the media check). The pickles keep the seconds the per-video ``labels_by70/*.mp4.json``
intervals mark ``out_of_body`` (camera outside the patient): 1,130 seconds of Bern's fold-0 validation videos, 556
of Strasbourg's, e.g. BBP03 seconds 831-844. Such seconds carry the ordinary phase and step they are nested in, and
so do they here. ``s0_null_step`` means "no step": those seconds get no step. A pickle's ``Phase_gt`` of
``out_of_body`` or ``severe_index`` (never seen in the official files) would give no phase. The JSON intervals
(milliseconds) are not read: the pickle label of second s is the JSON label at (s + 1) * 1000 ms (all 46,497 seconds
of Bern val fold 0 agree), and the JSON's finer boundaries are not what the official labels use. Unconfirmed: the
videos' frame rate (25 fps assumed, as CAMMA's other recordings).

Every video of the fold-0 pickles must be in the videos folder: one that is missing or misnamed is named by the
media check and stops the build (an unzipped part of the videos would otherwise shrink the splits without a word).

Splits: the default is the official fold 0, read from the same pickles (a pickle is loaded without any class lookup,
so it cannot run code). Folds 1-4 are split variants where ``docs/sources/multibypass140.md`` lists both their
validation and test videos (Bern); the Strasbourg test lists were not available, so Strasbourg folds 1-4 are not
offered (use the pickles' fold 0).
"""

from __future__ import annotations

import csv
import io
import pickle
import re
from pathlib import Path

from public_converters.schema import Coverage, SourceError, SourceTables, Video, read_text, segments_from_labels


FPS = 25
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
# names that label no frame: never mapped to a canonical name
NOT_A_LABEL = {"phase": {"out_of_body", "severe_index"}, "step": {"s0_null_step"}}
# "cleaning and coagulation" as Cholec80 names the same phase; otherwise the native words
PHASES = {n: n.replace("_", " ") for n in PHASE_NAMES[:12]} | {"cleaning_coagulation": "cleaning and coagulation"}
STEPS = {n: re.sub(r"^s\d+_", "", n).replace("_", " ") for n in STEP_NAMES[1:]}
SPLIT_FILES = {"train": f"train/1fps_100_{FOLD}.pickle", "validation": f"val/1fps_{FOLD}.pickle"}
SPLIT_FILES["test"] = f"test/1fps_{FOLD}.pickle"
FRAME_KEYS = {"Frame_id", "Original_frame_id", "Phase_gt", "Step_gt"}
LABEL_KEYS = {"phase": "Phase_gt", "step": "Step_gt"}


def fold_variants(prefix: str, folds: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict:
    """fold k -> video -> split from the (validation, test) video numbers; the other of the 70 videos train."""
    variants = {}
    for fold, (val, test) in folds.items():
        split = {n: "validation" if n in val else "test" if n in test else "train" for n in range(1, 71)}
        variants[f"fold{fold}"] = {f"{prefix}{n:02d}": name for n, name in split.items()}
    return variants


def _vocabulary(path: Path, names: tuple[str, ...], kind: str, labels) -> dict[int, str | None]:
    """id -> canonical name (None: labels no frame) of tables/<kind>.csv, checked against the published table;
    unknown names are label misses."""
    rows = list(csv.reader(io.StringIO(read_text(path, fix="the tables/ folder of the MultiBypass140 repository"))))
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
        vocabulary[ident] = None if name in NOT_A_LABEL[kind] else labels.map(kind, name, path, number)
    return vocabulary


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # plain dicts, lists, str and int need no class: refuse any
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _split_labels(path: Path, prefix: str, vocabularies: dict[str, dict]) -> dict[str, list[tuple[int, dict]]]:
    """video -> [(second, {kind: canonical label or None})] of one split pickle, after checking its structure."""
    if not path.is_file():
        raise SourceError(path, "file not found", fix="the official fold-0 split; clone the labels repository fully")
    try:
        payload = _PlainUnpickler(io.BytesIO(path.read_bytes())).load()
    except (pickle.UnpicklingError, EOFError, ValueError) as error:
        raise SourceError(path, f"not a plain split pickle ({error})", fix="re-download it") from error
    if not isinstance(payload, dict):
        raise SourceError(path, f"holds a {type(payload).__name__}, expected a dict video -> frame list")
    found = {}
    for video, frames in payload.items():
        if not re.fullmatch(rf"{prefix}\d\d", str(video)) or not isinstance(frames, list):
            raise SourceError(path, f"entry {video!r} is not {prefix}NN -> list of frames", row=str(video))
        seconds, previous = [], -1
        for frame in frames:
            if not isinstance(frame, dict) or not FRAME_KEYS <= set(frame):
                raise SourceError(path, f"frame {frame!r} lacks {sorted(FRAME_KEYS)}", row=str(video))
            second, row = frame["Original_frame_id"], f"{video} {frame['Frame_id']}"
            if not isinstance(second, int) or frame["Frame_id"] != f"{video}_{second + 1:08d}":
                raise SourceError(path, f"Frame_id {frame['Frame_id']} is not Original_frame_id + 1", row=row)
            if second <= previous:
                raise SourceError(path, f"second {second} after {previous}", row=row, fix="seconds must increase")
            named = {}
            for kind, key in LABEL_KEYS.items():
                if frame[key] not in vocabularies[kind]:
                    raise SourceError(path, f"{key} {frame[key]!r} is not an id of tables/{kind}.csv", row=row)
                named[kind] = vocabularies[kind][frame[key]]
            seconds.append((second, named))
            previous = second
        found[video] = seconds
    return found


def read_centre(root: Path, labels, centre: str, folder: str, prefix: str) -> SourceTables:
    candidates = [root / "datasets" / "MultiBypass140" / folder / "videos", root / folder / "videos"]
    video_dir = next((path for path in candidates if path.is_dir()), None)
    if video_dir is None:
        raise SourceError(
            candidates[0], "folder not found", fix="point the source at the MultiBypass140 repository clone"
        )
    vocabularies = {
        "phase": _vocabulary(root / "tables" / "phase.csv", PHASE_NAMES, "phase", labels),
        "step": _vocabulary(root / "tables" / "step.csv", STEP_NAMES, "step", labels),
    }
    split_dir = root / "labels" / centre / "labels_by70_splits" / "labels"
    split_of, seconds, files = {}, {}, {}
    for split, name in SPLIT_FILES.items():
        for video, labelled in _split_labels(split_dir / name, prefix, vocabularies).items():
            if video in split_of:
                raise SourceError(split_dir / name, f"{video} is also in the {split_of[video]} split of fold {FOLD}")
            split_of[video], seconds[video] = split, labelled
            files[video] = (split_dir / name).relative_to(root).as_posix()
    tables = SourceTables()
    shipped = {path.stem for path in video_dir.glob(f"{prefix}[0-9][0-9].mp4")}
    # every video of the split files, shipped or not: a missing or misnamed one is named by the media check
    for video_id in sorted(shipped | set(split_of)):
        video_path = video_dir / f"{video_id}.mp4"
        if video_id not in split_of:
            raise SourceError(split_dir, f"{video_id} is in none of the fold-{FOLD} split files", fix="re-clone")
        for kind in LABEL_KEYS:
            per_second = [(FPS * second, named[kind]) for second, named in seconds[video_id]]
            tables.segments += segments_from_labels(video_id, kind, per_second, step=FPS)
        relative = video_path.relative_to(root).as_posix()
        tables.videos.append(Video(video_id, split_of[video_id], FPS, video_path=relative))
        # a label every second: labels that stop a second or more before the video are short (a media-check warning)
        labelled = FPS * (seconds[video_id][-1][0] + 1) if seconds[video_id] else 0
        tables.coverage[video_id] = Coverage(labelled, files[video_id], "phase and step labels", FPS)
    if not tables.videos:
        raise SourceError(video_dir, f"no {prefix}NN.mp4 videos", fix="unzip multibypass0*.zip there")
    return tables
