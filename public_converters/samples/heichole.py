"""A tiny HeiChole: Hei-Chole1 and Hei-Chole10 (a prefix trap), 3 s and 3.2 s at 25 fps, and Hei-Chole16, 2 s at 50
fps (as videos 16-20, 23 and 24 are); headerless phase CSVs with a row per frame, instrument / action CSVs with a row
per frame (Hei-Chole1, Hei-Chole16) or per second (Hei-Chole10); instrument files 8 cells wide (frame + 7
categories) and, for Hei-Chole16, 22 wide as in the release (frame + 21 category slots: 0-6 the categories, 7-19
reserved, 20 an undefined instrument shaft); Hei-Chole10's files in the lower-case spelling some copies use; a
skill-rated ``_Calot`` segment video that the reader must not take for a video, and Hei-Chole1's skill files, one line
of 5 integers each (depth perception, bimanual dexterity, efficiency, tissue handling, difficulty) for the Calot and
dissection segments and the whole operation, told apart by name."""

from pathlib import Path

from public_converters.samples._common import (
    cut,
    cut_lines,
    misname_video,
    not_utf8,
    remove,
    remove_video,
    rewrite,
    write_text,
    write_video,
)


FPS = 25
# video -> (file stem as written, [(phase id, frames)], frame step of the instrument and action rows, fps, instrument
# file width)
VIDEOS = {
    "Hei-Chole1": ("Hei-Chole1", [(0, 30), (1, 45)], 1, FPS, 8),
    # 80 frames with one instrument/action row per second: the last row's second runs past the video's end
    "Hei-Chole10": ("hei-chole10", [(1, 25), (2, 20), (3, 35)], FPS, FPS, 8),
    "Hei-Chole16": ("Hei-Chole16", [(0, 40), (1, 60)], 1, 50, 22),
}


def _tools(frame: int, width: int = 8) -> list[int]:
    """Grasper throughout, clipper from frame 40, stapler never; in the 22-cell file the reserved slots 7-19 are 0
    and the undefined instrument shaft (slot 20) is seen from frame 90."""
    categories = [1, int(frame >= 40), 0, 0, 0, 0, 0]
    return categories if width == 8 else [*categories, *[0] * 13, int(frame >= 90)]


def _actions(frame: int) -> list[int]:
    """Grasp from frame 10 to 49, hold from 50."""
    return [int(10 <= frame < 50), int(frame >= 50), 0, 0]


def _csv(rows) -> str:
    return "".join(",".join(str(value) for value in row) + "\n" for row in rows)


def write(root: Path) -> None:
    for stem, phases, step, fps, width in VIDEOS.values():
        lower = stem.islower()
        frames = sum(count for _, count in phases)
        write_video(root / "Videos" / "Full" / f"{stem}.mp4", frames, fps)
        ids = [phase for phase, count in phases for _ in range(count)]
        names = {kind: f"{stem}_Annotation_{kind}.csv" for kind in ("Phase", "Instrument", "Action")}
        if lower:
            names = {kind: name.lower() for kind, name in names.items()}
        notes = root / "Annotations"
        write_text(notes / "Phase" / names["Phase"], _csv((frame, phase) for frame, phase in enumerate(ids)))
        sampled = range(0, frames, step)
        write_text(notes / "Instrument" / names["Instrument"], _csv((f, *_tools(f, width)) for f in sampled))
        write_text(notes / "Action" / names["Action"], _csv((f, *_actions(f)) for f in sampled))
    write_video(root / "Videos" / "Full" / "Hei-Chole1_Calot.mp4", 10, FPS)
    for segment, scores in (("_Calot", "3,4,3,4,2"), ("_Dissection", "4,4,3,3,2"), ("", "3,4,3,4,2")):
        write_text(root / "Annotations" / "Skill" / f"Hei-Chole1{segment}_Skill.csv", scores + "\n")


BAD_INPUTS = {
    "missing_file": remove(
        "Annotations/Action/hei-chole10_annotation_action.csv", names="Hei-Chole10_Annotation_Action.csv"
    ),
    "truncated_image": cut("Videos/Full/Hei-Chole1.mp4", 0.3),
    "malformed_row": rewrite(
        "Annotations/Instrument/Hei-Chole1_Annotation_Instrument.csv", "\n12,1,0,", "\n12,1,0,0,"
    ),
    "unknown_label": rewrite("Annotations/Phase/hei-chole10_annotation_phase.csv", "\n70,3\n", "\n70,9\n"),
    "not_utf8": not_utf8("Annotations/Action/Hei-Chole1_Annotation_Action.csv"),
    # the instrument and action rows run on past the phases: the error names the phase file
    "short_annotation": cut_lines("Annotations/Phase/Hei-Chole1_Annotation_Phase.csv", 40),
    "missing_video": remove_video("Videos/Full/Hei-Chole16.mp4"),
    # names are matched without case (copies differ), so the near miss is another extension
    "misnamed_video": misname_video("Videos/Full/Hei-Chole16.mp4", "Hei-Chole16.mkv"),
}
