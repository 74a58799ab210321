"""A tiny Cholec80 in its native layout: two 25-fps videos (40.4 s and 40 s) with phase (25 fps) and tool (1 fps)
files; ``write_endovis_ml`` writes the same videos with their annotations in the shape of the EndovisML visualiser's
copy (github.com/Cardio-AI/endovis-ml ``src/assets/``), and ``write_tmrnet`` with the headerless phase files that
phase-recognition repositories ship for the test videos (YuemingJin/TMRNet ``code/eval/matlab-phase/gt-phase/``) beside
the release's tool files."""

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
from public_converters.sources.cholec80 import PHASES, TOOL_COLUMNS


FPS = 25
# (video, [(phase, frames)], tools present per second as column indices)
VIDEOS = {
    # 1,010 frames: the last 1-fps tool sample (frame 1000) covers a second that runs past the video's end
    "video01": [("Preparation", 300), ("CalotTriangleDissection", 400), ("ClippingCutting", 310)],
    "video41": [("CalotTriangleDissection", 250), ("GallbladderDissection", 450), ("GallbladderPackaging", 300)],
}


def _tools_at(second: int) -> set[int]:
    return {0} | ({2} if 10 <= second < 25 else set()) | ({4} if second >= 28 else set())


def _per_frame(phases: list[tuple[str, int]]) -> list[str]:
    return [name for name, count in phases for _ in range(count)]


def _write_release_tools(root: Path, video: str, total: int) -> None:
    """The release's tool file: tab-separated with its header, one row a second, one sample past the end as in the
    real files."""
    tool_rows = []
    for frame in range(0, total + 1, FPS):
        present = _tools_at(frame // FPS)
        tool_rows.append("\t".join([str(frame), *("1" if i in present else "0" for i in range(len(TOOL_COLUMNS)))]))
    header = "\t".join(("Frame", *TOOL_COLUMNS))
    write_text(root / "tool_annotations" / f"{video}-tool.txt", header + "\n" + "\n".join(tool_rows) + "\n")


def write(root: Path) -> None:
    for video, phases in VIDEOS.items():
        per_frame = _per_frame(phases)
        write_video(root / "videos" / f"{video}.mp4", len(per_frame), FPS)
        rows = [f"{frame}\t{name}" for frame, name in enumerate(per_frame)]
        write_text(root / "phase_annotations" / f"{video}-phase.txt", "Frame\tPhase\n" + "\n".join(rows) + "\n")
        _write_release_tools(root, video, len(per_frame))


def write_tmrnet(root: Path) -> None:
    """The phase files as TMRNet ships them (``gt-phase/video41-phase.txt``: no header, ``frame<TAB>phase_id`` on
    frames 0, 25, 50, ..., ids 0-6 in ``PHASES`` order, LF line endings and a final newline), the release's names;
    TMRNet ships no tool files, so the release's are beside them."""
    ids = {name: i for i, name in enumerate(PHASES)}
    for video, phases in VIDEOS.items():
        per_frame = _per_frame(phases)
        write_video(root / "videos" / f"{video}.mp4", len(per_frame), FPS)
        rows = [f"{frame}\t{ids[per_frame[frame]]}" for frame in range(0, len(per_frame), FPS)]
        write_text(root / "phase_annotations" / f"{video}-phase.txt", "\n".join(rows) + "\n")
        _write_release_tools(root, video, len(per_frame))


# EndovisML's copy: tool rows running past the last phase row (2-39 samples in 57 of its 60 videos) and, in its
# video12, two tool rows repeated with the same values after the rows they repeat
ENDOVIS_ML_TAIL = {"video01": 3, "video41": 2}
ENDOVIS_ML_REPEATED = {"video41": (300, 325)}


def write_endovis_ml(root: Path) -> None:
    """The copy's files exactly as it ships them: comma-separated, LF line endings and a final newline, the release's
    file names; ``Frame,Phase`` with phase ids 0-6 (``PHASES`` order) on frames 0, 25, 50, ...; tools at 1 fps."""
    ids = {name: i for i, name in enumerate(PHASES)}
    for video, phases in VIDEOS.items():
        per_frame = _per_frame(phases)
        total = len(per_frame)
        write_video(root / "videos" / f"{video}.mp4", total, FPS)
        rows = [f"{frame},{ids[per_frame[frame]]}" for frame in range(0, total, FPS)]
        write_text(root / "phase_annotations" / f"{video}-phase.txt", "Frame,Phase\n" + "\n".join(rows) + "\n")
        last = FPS * (len(rows) - 1)
        frames = list(range(0, last + FPS * ENDOVIS_ML_TAIL[video] + 1, FPS))
        repeated = ENDOVIS_ML_REPEATED.get(video, ())
        if repeated:
            at = frames.index(repeated[-1]) + 1
            frames[at:at] = repeated
        tool_rows = [
            ",".join([str(f), *("1" if i in _tools_at(f // FPS) else "0" for i in range(len(TOOL_COLUMNS)))])
            for f in frames
        ]
        header = ",".join(("Frame", *TOOL_COLUMNS))
        write_text(root / "tool_annotations" / f"{video}-tool.txt", header + "\n" + "\n".join(tool_rows) + "\n")


BAD_INPUTS = {
    "missing_file": remove("tool_annotations/video41-tool.txt"),
    "truncated_image": cut("videos/video01.mp4", 0.3),
    "malformed_row": rewrite("phase_annotations/video01-phase.txt", "\n12\tPreparation\n", "\n12\tPreparation\t7\n"),
    "unknown_label": rewrite("phase_annotations/video41-phase.txt", "GallbladderPackaging", "GallbladerPackaging", 5),
    "not_utf8": not_utf8("tool_annotations/video01-tool.txt"),
    "missing_video": remove_video("videos/video41.mp4"),
    "misnamed_video": misname_video("videos/video41.mp4", "VIDEO41.MP4"),
}
# video01's phase file cut at a line boundary: 300 of its 1,010 frames (the issue's case; tool rows past them are
# clipped and counted, the clips cover the labelled 12 s, and the build warns with the file's name)
WARNED_INPUTS = {"short_annotation": cut_lines("phase_annotations/video01-phase.txt", 1 + 300)}
