"""A tiny EndoVis2017 in its native layout: training sequences 1, 4 and 7 with their differing label-folder names
(``Maryland_...``, ``Other_labels`` with the probe value, ``..._Left_labels`` suffixes, folders without ``_labels``),
test images of sequences 1 and 9, and the later test-labels release nested twice, with and without ``gt/``. As in the
real ground truth, unlabelled lines of 3-4 px part an instrument's shaft, wrist and tip, in the instrument folders and
in the merged test masks alike."""

from pathlib import Path

import numpy as np

from public_converters.samples._common import cut, noise_image, remove, rename, shrink, write_image, write_json


WIDTH, HEIGHT = 64, 48
TRAINING = {
    "instrument_1_4_training/instrument_dataset_1": (
        ["Left_Prograsp_Forceps_labels", "Maryland_Bipolar_Forceps_labels", "Other_labels"],
        (0, 1),
    ),
    "instrument_1_4_training/instrument_dataset_4": (
        ["Large_Needle_Driver_Left_labels", "Large_Needle_Driver_Right_labels"],
        (0,),
    ),
    "instrument_5_8_training/instrument_dataset_7": (["Left_Bipolar_Forceps", "Right_Vessel_Sealer"], (0,)),
}
TESTING = {
    "instrument_1_4_testing/instrument_dataset_1": (225,),
    "instrument_9_10_testing/instrument_dataset_9": (0,),
}
TEST_LABELS = {
    "instrument_2017_test/instrument_2017_test/instrument_dataset_1/gt": (225,),
    "instrument_2017_test/instrument_2017_test/instrument_dataset_9": (0,),
}


def instrument_mask(slot: int, frame: int, value_of_tip: int = 30) -> np.ndarray:
    """One instrument coming in from the left edge, columns 0-43: shaft 10 (0-25), a 3-px unlabelled seam, wrist 20
    (29-32), a 4-px seam, tip (claspers 30 or probe 40, 37-43)."""
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    top = 4 + 14 * slot
    if frame == 1 and slot == 0:  # the instrument left the view
        return mask
    mask[top : top + 6, 0:26] = 10
    mask[top : top + 6, 29:33] = 20
    mask[top : top + 6, 37:44] = value_of_tip
    return mask


def type_mask() -> np.ndarray:
    """Merged test labels: two prograsp forceps (type 2) apart and a bipolar forceps (type 1), each cut by 3-4 px
    unlabelled seams between its parts, as on the real merged masks."""
    mask = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
    mask[2:10, 2:30] = 2
    mask[2:10, 16:19] = 0  # 3-px seam
    mask[30:40, 34:62] = 2
    mask[30:40, 49:53] = 0  # 4-px seam
    mask[16:24, 10:50] = 1
    mask[16:24, 25:28] = 0  # 3-px seam
    mask[16:24, 40:44] = 0  # 4-px seam
    return mask


def write(root: Path) -> None:
    for sequence, (folders, frames) in TRAINING.items():
        for frame in frames:
            name = f"frame{frame:03d}.png"
            for view in ("left_frames", "right_frames"):
                write_image(root / sequence / view / name, noise_image(f"endovis2017-{sequence}-{view}-{frame}"))
            for slot, folder in enumerate(folders):
                tip = 40 if folder == "Other_labels" else 30
                pixels = instrument_mask(slot, frame, tip)
                if folder == "Right_Vessel_Sealer":  # some ground-truth PNGs carry three channels
                    pixels = np.dstack([pixels] * 3)
                write_image(root / sequence / "ground_truth" / folder / name, pixels)
    for part in ("instrument_1_4_training", "instrument_5_8_training"):
        write_json(root / part / "mappings.json", {"Shaft": 10, "Wrist": 20, "Claspers": 30, "Probe": 40})
    for sequence, frames in TESTING.items():
        for frame in frames:
            write_image(
                root / sequence / f"left_frames/frame{frame:03d}.png", noise_image(f"endovis2017-{sequence}-{frame}")
            )
    for folder, frames in TEST_LABELS.items():
        for frame in frames:
            write_image(root / folder / f"TypeSegmentation/frame{frame:03d}.png", type_mask())
            write_image(
                root / folder / f"BinarySegmentation/frame{frame:03d}.png", (type_mask() > 0).astype(np.uint8) * 255
            )


GROUND_TRUTH_7 = "instrument_5_8_training/instrument_dataset_7/ground_truth"

BAD_INPUTS = {
    "missing_file": remove(
        "instrument_1_4_training/instrument_dataset_1/ground_truth/Other_labels/frame001.png",
        names="Other_labels/frame001.png",
    ),
    "truncated_image": cut(
        "instrument_9_10_testing/instrument_dataset_9/left_frames/frame000.png",
        names="instrument_dataset_9/left_frames/frame000.png",
    ),
    "wrong_mask_size": shrink(
        f"{GROUND_TRUTH_7}/Left_Bipolar_Forceps/frame000.png",
        (WIDTH, HEIGHT // 2),
        names=f"{GROUND_TRUTH_7}/Left_Bipolar_Forceps/frame000.png",
    ),
    "malformed_row": rename(
        "instrument_1_4_training/instrument_dataset_4/ground_truth/Large_Needle_Driver_Left_labels/frame000.png",
        "frame0.png",
        names="Large_Needle_Driver_Left_labels/frame0.png",
    ),
    "unknown_label": rename(f"{GROUND_TRUTH_7}/Right_Vessel_Sealer", "Right_Harmonic_Ace_labels"),
}
