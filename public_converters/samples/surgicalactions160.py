"""A tiny SurgicalActions160 in its native layout: four short 25-fps clips in three 1-based class folders, one named
by the README's ``c_<class>_v_<video>.mp4`` convention instead of the tree's ``NN_MM.mp4``."""

from pathlib import Path

from public_converters.samples._common import cut, remove, rename, write_text, write_video


FPS = 25
# relative path -> frames
CLIPS = {
    "01_abdominal_access/01_01.mp4": 30,
    "01_abdominal_access/01_09.mp4": 20,
    "07_coagulation/07_08.mp4": 25,
    "16_endobag-out/c_16_v_02.mp4": 35,
}


def write(root: Path) -> None:
    base = root / "SurgicalActions160"
    write_text(base / "README.txt", "SurgicalActions160\n16 classes, 10 clips each\n")
    for relative, frames in CLIPS.items():
        write_video(base / relative, frames, FPS)


BAD_INPUTS = {
    "missing_file": remove("SurgicalActions160/07_coagulation/07_08.mp4", names="07_coagulation"),
    "truncated_image": cut("SurgicalActions160/01_abdominal_access/01_09.mp4", 0.3),
    "malformed_row": rename("SurgicalActions160/01_abdominal_access/01_01.mp4", "01_x1.mp4"),
    "unknown_label": rename("SurgicalActions160/07_coagulation", "07_coagulaton"),
    "misnamed_video": rename("SurgicalActions160/01_abdominal_access/01_09.mp4", "01_09.avi"),
}
