"""A tiny EndoVis2018 in its native layout: release 1 extracted twice into itself, release 2, ``__MACOSX`` junk, a
repaired mask, and a test sequence whose ``labels.json`` uses the RGBA schema and whose number repeats a training one.
Release 1's masks use a colour only release 2's ``labels.json`` names (the palette is their union), and release 2 names
that colour ``intestine`` where the test ``labels.json`` says ``small-intestine``, as the real releases differ."""

from pathlib import Path

import numpy as np

from public_converters.samples._common import (
    cut,
    noise_image,
    remove,
    rewrite,
    shrink,
    write_image,
    write_json,
    write_text,
)


WIDTH, HEIGHT = 64, 48
COLOURS = {
    "background-tissue": (0, 0, 0),
    "instrument-shaft": (0, 255, 0),
    "instrument-clasper": (0, 255, 255),
    "instrument-wrist": (125, 255, 12),
    "kidney-parenchyma": (255, 55, 0),
    "covered-kidney": (24, 55, 125),
    "clamps": (0, 255, 125),
    "small-intestine": (124, 155, 5),
}
RELEASE_1 = "miccai_challenge_2018_release_1/miccai_challenge_2018_release_1"
SEQUENCES = {
    f"{RELEASE_1}/seq_1": (0, 1),
    "miccai_challenge_release_2/seq_5": (0,),
    "test_data/seq_1-20180921-001/seq_1": (0,),
}


def class_mask(classes: dict[str, tuple[slice, slice]]) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
    for name, (rows, cols) in classes.items():
        mask[rows, cols] = COLOURS[name]
    return mask


def mask_for(sequence: str, frame: int) -> np.ndarray:
    return class_mask(
        {
            "kidney-parenchyma": (slice(24, 44), slice(4, 30)),
            "small-intestine": (slice(0, 12), slice(0, 64)),
            "instrument-shaft": (slice(14, 20), slice(30 + 4 * frame, 60)),
            "instrument-clasper": (slice(30, 36), slice(44, 50)),
            **({"covered-kidney": (slice(36, 46), slice(36, 44))} if "test" in sequence else {}),
        }
    )


def _labels_list(names: list[str], spelled: dict[str, str] | None = None) -> list[dict]:
    """A release's ``labels.json``; ``spelled`` gives a class the name this release uses for it."""
    spelled = spelled or {}
    return [
        {"name": spelled.get(name, name), "color": list(COLOURS[name]), "classid": i} for i, name in enumerate(names)
    ]


def write(root: Path) -> None:
    for sequence, frames in SEQUENCES.items():
        folder = root / sequence
        for frame in frames:
            name = f"frame{frame:03d}.png"
            write_image(folder / "left_frames" / name, noise_image(f"endovis2018-{sequence}-{frame}"))
            write_image(folder / "right_frames" / name, noise_image(f"endovis2018-right-{sequence}-{frame}"))
            write_image(folder / "labels" / name, mask_for(sequence, frame))
        write_text(folder / "camera_calibration.txt", f"Width: {WIDTH}\n")
    shared = ["background-tissue", "instrument-shaft", "instrument-clasper", "kidney-parenchyma"]
    write_json(root / RELEASE_1 / "labels.json", _labels_list(shared))
    release_2 = _labels_list([*shared, "small-intestine", "clamps"], {"small-intestine": "intestine"})
    write_json(root / "miccai_challenge_release_2/labels.json", release_2)
    test_classes = [
        {"name": name, "color": [*COLOURS[name], 128 if name == "background-tissue" else 255], "active": True}
        for name in COLOURS
    ]
    write_json(root / "test_data/labels.json", {"classes": test_classes})
    write_text(root / "test_data/run.py", "# evaluation script of the challenge\n")
    repaired = mask_for("seq_1", 1)
    repaired[2:8, 2:10] = COLOURS["clamps"]  # the corrected mask shows a clamp the original missed
    write_image(root / "repairs/seq_1_frame001.png", repaired)
    junk = root / "__MACOSX" / RELEASE_1 / "seq_1/labels/._frame000.png"
    write_text(junk, "AppleDouble resource fork, not a PNG")


BAD_INPUTS = {
    "missing_file": remove(f"{RELEASE_1}/seq_1/labels/frame000.png", names="seq_1/labels/frame000.png"),
    "truncated_image": cut(
        "miccai_challenge_release_2/seq_5/left_frames/frame000.png", names="seq_5/left_frames/frame000.png"
    ),
    "wrong_mask_size": shrink(
        "repairs/seq_1_frame001.png", (WIDTH * 2, HEIGHT * 2), names="repairs/seq_1_frame001.png"
    ),
    "malformed_row": rewrite(
        "miccai_challenge_release_2/labels.json",
        '"color": [',
        '"colour": [',
        names="miccai_challenge_release_2/labels.json",
    ),
    "unknown_label": rewrite(
        "test_data/labels.json", '"covered-kidney"', '"covered-kidneys"', names="test_data/labels.json"
    ),
}
