"""A tiny Cholec80 in its native layout: two 25-fps videos (40.4 s and 40 s) with phase (25 fps) and tool (1 fps)
files."""

from pathlib import Path

from public_converters.samples._common import cut, remove, rewrite, write_text, write_video
from public_converters.sources.cholec80 import TOOL_COLUMNS


FPS = 25
# (video, [(phase, frames)], tools present per second as column indices)
VIDEOS = {
    # 1,010 frames: the last 1-fps tool sample (frame 1000) covers a second that runs past the video's end
    "video01": [("Preparation", 300), ("CalotTriangleDissection", 400), ("ClippingCutting", 310)],
    "video41": [("CalotTriangleDissection", 250), ("GallbladderDissection", 450), ("GallbladderPackaging", 300)],
}


def _tools_at(second: int) -> set[int]:
    return {0} | ({2} if 10 <= second < 25 else set()) | ({4} if second >= 28 else set())


def write(root: Path) -> None:
    for video, phases in VIDEOS.items():
        total = sum(count for _, count in phases)
        write_video(root / "videos" / f"{video}.mp4", total, FPS)
        rows = [f"{frame}\t{name}" for frame, name in enumerate(n for n, count in phases for _ in range(count))]
        write_text(root / "phase_annotations" / f"{video}-phase.txt", "Frame\tPhase\n" + "\n".join(rows) + "\n")
        tool_rows = []
        for frame in range(0, total + 1, FPS):  # one sample past the end, as in the real files
            present = _tools_at(frame // FPS)
            tool_rows.append(
                "\t".join([str(frame), *("1" if i in present else "0" for i in range(len(TOOL_COLUMNS)))])
            )
        header = "\t".join(("Frame", *TOOL_COLUMNS))
        write_text(root / "tool_annotations" / f"{video}-tool.txt", header + "\n" + "\n".join(tool_rows) + "\n")


BAD_INPUTS = {
    "missing_file": remove("tool_annotations/video41-tool.txt"),
    "truncated_image": cut("videos/video01.mp4", 0.3),
    "malformed_row": rewrite("phase_annotations/video01-phase.txt", "\n12\tPreparation\n", "\n12\tPreparation\t7\n"),
    "unknown_label": rewrite("phase_annotations/video41-phase.txt", "GallbladderPackaging", "GallbladerPackaging", 5),
}
