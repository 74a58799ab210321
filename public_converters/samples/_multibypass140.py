"""Tiny MultiBypass140 centres in the repository-plus-zips layout: three 4-second 25-fps videos per centre with
millisecond phase/step intervals (unsorted, out_of_body and severe_index nested) and the fold-0 split pickles."""

import pickle
from pathlib import Path

from public_converters.samples._common import cut, remove, rewrite, write_json, write_text, write_video
from public_converters.sources._multibypass140 import PHASE_NAMES, STEP_NAMES


FPS = 25
SECONDS = 4
# label name, start ms, end ms; deliberately not sorted by start, as in the release
PHASES = [
    ("gastric_pouch_creation", 1600, 4000),
    ("preparation", 0, 1600),
    ("out_of_body", 400, 800),
    ("severe_index", 2000, 2400),
]
STEPS = [("s1_cavity_exploration", 400, 1600), ("s0_null_step", 0, 400), ("s4_crura_dissection", 1600, 4000)]


def _entries(rows, names) -> list[dict]:
    return [{"start": s, "end": e, "label_name": name, "label_id": names.index(name)} for name, s, e in rows]


def _label_at(rows, names, ms: int) -> int | None:
    ids = [names.index(name) for name, s, e in rows if s <= ms < e and name not in ("out_of_body", "severe_index")]
    return ids[0] if ids else None


def _frames(video: str) -> list[dict]:
    """The 1-fps frame list of one video as the pickles hold it (out-of-body seconds left out)."""
    frames = []
    for second in range(SECONDS):
        if any(s <= second * 1000 < e for name, s, e in PHASES if name == "out_of_body"):
            continue
        frame_id = f"{video}_{second + 1:08d}"
        phase, step = _label_at(PHASES, PHASE_NAMES, second * 1000), _label_at(STEPS, STEP_NAMES, second * 1000)
        frames.append({"Frame_id": frame_id, "Original_frame_id": second, "Phase_gt": phase, "Step_gt": step})
    return frames


def write_centre(root: Path, centre: str, folder: str, splits: dict[str, list[str]]) -> None:
    """``splits``: fold-0 split -> videos; the last training video is listed but not downloaded, as can happen."""
    write_text(root / "tables/phase.csv", "id, name\n" + "".join(f"{i},{n}\n" for i, n in enumerate(PHASE_NAMES)))
    write_text(root / "tables/step.csv", "id, name\n" + "".join(f"{i},{n}\n" for i, n in enumerate(STEP_NAMES)))
    split_dir = root / "labels" / centre / "labels_by70_splits" / "labels"
    files = {"train": "train/1fps_100_0.pickle", "val": "val/1fps_0.pickle", "test": "test/1fps_0.pickle"}
    for split, videos in splits.items():
        path = split_dir / files[split]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps({video: _frames(video) for video in videos}))
    downloaded = [video for videos in splits.values() for video in videos][:-1]
    for video in downloaded:
        write_video(root / "datasets/MultiBypass140" / folder / "videos" / f"{video}.mp4", FPS * SECONDS, FPS)
        payload = {"phases": _entries(PHASES, PHASE_NAMES), "steps": _entries(STEPS, STEP_NAMES)}
        write_json(root / "labels" / centre / "labels_by70" / f"{video}.mp4.json", payload)


def bad_inputs(centre: str, folder: str, videos: list[str]) -> dict:
    first, second = videos[0], videos[1]
    labels = f"labels/{centre}/labels_by70"
    return {
        "missing_file": remove(f"{labels}/{second}.mp4.json"),
        "truncated_image": cut(f"datasets/MultiBypass140/{folder}/videos/{first}.mp4", 0.3),
        "malformed_row": rewrite(f"{labels}/{second}.mp4.json", '"end": 1600', '"end": -1600'),
        "unknown_label": rewrite(f"{labels}/{first}.mp4.json", "gastric_pouch_creation", "gastric_pouch_creatoin"),
    }
