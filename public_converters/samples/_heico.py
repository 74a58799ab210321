"""A tiny HeiCo procedure in the complete-dataset layout: two 3-second 25-fps .avi surgeries with headerless phase
files (surgery 1 ends in phase 13, "Exception"), ROBUST-MIS frame folders directly under the surgery (surgery 1: a
frame with two instrument instances, a frame without a mask = no instrument) and under "Instrument segmentations/"
(surgery 2), plus the files the reader must leave alone (device CSV, 10s_video.zip, Synapse manifests)."""

from pathlib import Path

import numpy as np

from public_converters.samples._common import (
    cut,
    cut_lines,
    misname_video,
    noise_image,
    not_utf8,
    remove,
    remove_video,
    rewrite,
    shrink,
    write_image,
    write_text,
    write_video,
)


FPS = 25
FRAMES = 75
PHASES = {1: [(0, 30), (1, 30), (13, 15)], 2: [(4, 40), (12, 35)]}
# surgery -> frame folder (relative to the surgery folder) -> instance boxes (row0, row1, col0, col1) or None
SEGMENTED = {
    1: {"12": [(5, 15, 4, 20), (30, 45, 40, 60)], "40": None},
    2: {"Instrument segmentations/30": [(10, 40, 8, 30)]},
}


def _instances(boxes) -> np.ndarray:
    mask = np.zeros((48, 64), dtype=np.uint8)
    for value, (r0, r1, c0, c1) in enumerate(boxes, start=1):
        mask[r0:r1, c0:c1] = value
    return mask


def write_procedure(root: Path, type_name: str) -> None:
    write_text(root / "SYNAPSE_METADATA_MANIFEST.tsv", "path\tid\n")
    folder = root / type_name
    write_text(folder / "SYNAPSE_METADATA_MANIFEST.tsv", "path\tid\n")
    for number, phases in PHASES.items():
        surgery = folder / str(number)
        write_video(surgery / f"{type_name}_{number}.avi", FRAMES, FPS)
        ids = [phase for phase, count in phases for _ in range(count)]
        write_text(surgery / f"{type_name}_{number}_Phase.csv", "".join(f"{f},{p}\n" for f, p in enumerate(ids)))
        write_text(surgery / f"{type_name}_{number}_Device.csv", "".join(f"{f},1,0,23.5\n" for f in range(FRAMES)))
        for frame_dir, boxes in SEGMENTED[number].items():
            write_image(surgery / frame_dir / "raw.png", noise_image(f"{type_name}/{number}/{frame_dir}"))
            (surgery / frame_dir / "10s_video.zip").write_bytes(b"PK\x05\x06" + bytes(18))
            if boxes is not None:
                write_image(surgery / frame_dir / "instrument_instances.png", _instances(boxes))


def bad_inputs(type_name: str) -> dict:
    phases_1, phases_2 = f"{type_name}/1/{type_name}_1_Phase.csv", f"{type_name}/2/{type_name}_2_Phase.csv"
    return {
        "missing_file": remove(phases_2),
        "truncated_image": cut(f"{type_name}/1/12/raw.png", 0.5, names="1/12/raw.png"),
        "wrong_mask_size": shrink(
            f"{type_name}/2/Instrument segmentations/30/instrument_instances.png",
            names="30/instrument_instances.png",
        ),
        "malformed_row": rewrite(phases_1, "\n5,0\n", "\n5,0,7\n"),
        "unknown_label": rewrite(phases_2, "\n50,12\n", "\n50,15\n"),
        "not_utf8": not_utf8(phases_2),
        "missing_video": remove_video(f"{type_name}/2/{type_name}_2.avi"),
        "misnamed_video": misname_video(f"{type_name}/2/{type_name}_2.avi", f"{type_name}_2.mp4"),
    }


def warned_inputs(type_name: str) -> dict:
    """Surgery 1's phase file cut after frame 44 of its 75 (past its segmented frames 12 and 40)."""
    return {"short_annotation": cut_lines(f"{type_name}/1/{type_name}_1_Phase.csv", 45)}
