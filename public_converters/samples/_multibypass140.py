"""Tiny MultiBypass140 centres in the repository-plus-zips layout: three 25-fps videos of 110 frames (4.4 s, so the
last labelled second runs past the end) per centre, and the fold-0 split pickles with their per-second labels."""

import pickle
from pathlib import Path

from public_converters.samples._common import (
    Damage,
    cut,
    misname_video,
    not_utf8,
    remove,
    remove_video,
    rewrite,
    write_text,
    write_video,
)
from public_converters.sources._multibypass140 import PHASE_NAMES, STEP_NAMES


FPS = 25
FRAMES = 110
# second -> (phase, step) as the pickles hold them. Second 1 lies inside an out_of_body interval of the release's
# JSON: the official pickles keep such seconds, with the ordinary phase and step they are nested in.
SECONDS = {
    0: ("preparation", "s0_null_step"),
    1: ("preparation", "s1_cavity_exploration"),
    2: ("gastric_pouch_creation", "s4_crura_dissection"),
    3: ("gastric_pouch_creation", "s4_crura_dissection"),
    4: ("gastric_pouch_creation", "s4_crura_dissection"),
}
OUT_OF_BODY_SECONDS = (1,)
SPLIT_FILES = {"train": "train/1fps_100_0.pickle", "val": "val/1fps_0.pickle", "test": "test/1fps_0.pickle"}


def _frames(video: str) -> list[dict]:
    """The 1-fps frame list of one video as the pickles hold it."""
    number = int(video[3:])
    return [
        {
            "Frame_id": f"{video}_{second + 1:08d}",
            "Original_frame_id": second,
            "Phase_gt": PHASE_NAMES.index(phase),
            "Step_gt": STEP_NAMES.index(step),
            "unique_id": number * 10_000_000_000 + second,
        }
        for second, (phase, step) in SECONDS.items()
    ]


def split_pickle(centre: str, split: str) -> str:
    return f"labels/{centre}/labels_by70_splits/labels/{SPLIT_FILES[split]}"


def write_centre(root: Path, centre: str, folder: str, splits: dict[str, list[str]]) -> None:
    """``splits``: fold-0 split -> videos, each downloaded (a video the split files list must be there)."""
    write_text(root / "tables/phase.csv", "id, name\n" + "".join(f"{i},{n}\n" for i, n in enumerate(PHASE_NAMES)))
    write_text(root / "tables/step.csv", "id, name\n" + "".join(f"{i},{n}\n" for i, n in enumerate(STEP_NAMES)))
    for split, videos in splits.items():
        path = root / split_pickle(centre, split)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps({video: _frames(video) for video in videos}))
    for video in (video for videos in splits.values() for video in videos):
        write_video(root / "datasets/MultiBypass140" / folder / "videos" / f"{video}.mp4", FRAMES, FPS)


def edit_pickle(relative: str, video: str, second: int, **changes) -> Damage:
    """Change one frame of a split pickle (a value no table defines, a broken frame id)."""

    def damage(root: Path) -> str:
        path = root / relative
        payload = pickle.loads(path.read_bytes())
        frame = next(f for f in payload[video] if f["Original_frame_id"] == second)
        frame.update(changes)
        path.write_bytes(pickle.dumps(payload))
        return Path(relative).name

    return damage


def drop_seconds(relative: str, video: str, keep: int) -> Damage:
    """Keep only a video's first ``keep`` seconds in a split pickle (labels that stop before the video does)."""

    def damage(root: Path) -> str:
        path = root / relative
        payload = pickle.loads(path.read_bytes())
        payload[video] = payload[video][:keep]
        path.write_bytes(pickle.dumps(payload))
        return Path(relative).name

    return damage


def warned_inputs(centre: str, video: str) -> dict:
    """``video``: a fold-0 training video, whose labels stop after 3 of its 5 seconds."""
    return {"short_annotation": drop_seconds(split_pickle(centre, "train"), video, 3)}


def bad_inputs(centre: str, folder: str, videos: list[str]) -> dict:
    """``videos``: a fold-0 training video and the validation video."""
    first, second = videos
    return {
        "missing_file": remove(split_pickle(centre, "val")),
        "truncated_image": cut(f"datasets/MultiBypass140/{folder}/videos/{first}.mp4", 0.3),
        "malformed_row": edit_pickle(split_pickle(centre, "val"), second, 2, Phase_gt=14),
        "unknown_label": rewrite("tables/phase.csv", "gastric_pouch_creation", "gastric_pouch_creatoin"),
        "not_utf8": not_utf8("tables/step.csv"),
        "missing_video": remove_video(f"datasets/MultiBypass140/{folder}/videos/{second}.mp4"),
        "misnamed_video": misname_video(
            f"datasets/MultiBypass140/{folder}/videos/{second}.mp4", f"{second.lower()}.mp4"
        ),
    }
