"""A tiny SAR-RARP50 in its native layout: four 60-fps recordings with 10 Hz action files.

Quirks exercised: a halved operation (``video_11_1`` / ``video_11_2``), an unpadded folder number (``video_3``),
zero-padded frame indices in one action file, background ("Other", id 0) runs, and the train1/train2/test folders.
"""

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


FPS = 60
# folder -> (frame count, [(action id, number of 10-Hz samples)], zero-padded frame index)
VIDEOS = {
    "train1/video_11_1": (125, [(0, 3), (1, 5), (2, 4), (3, 9)], True),
    "train1/video_11_2": (100, [(4, 6), (5, 6), (0, 5)], False),
    "train2/video_3": (90, [(1, 4), (6, 6), (7, 5)], False),
    "test/video_41": (110, [(0, 2), (3, 8), (4, 9)], False),
}


def write(root: Path) -> None:
    for folder, (frames, runs, padded) in VIDEOS.items():
        actions = [action for action, count in runs for _ in range(count)]
        assert len(actions) == (frames - 1) // 6 + 1, folder  # the toolkit's row count for a video of this length
        write_video(root / folder / "video_left.avi", frames, FPS)
        rows = [f"{6 * i:09d},{a}" if padded else f"{6 * i},{a}" for i, a in enumerate(actions)]
        write_text(root / folder / "action_discrete.txt", "\n".join(rows) + "\n")


BAD_INPUTS = {
    "missing_file": remove("train2/video_3/action_discrete.txt", names="video_3/action_discrete.txt"),
    "truncated_image": cut("test/video_41/video_left.avi", 0.3, names="video_41/video_left.avi"),
    "malformed_row": rewrite(
        "train1/video_11_2/action_discrete.txt", "\n12,4\n", "\n12,4,1\n", names="video_11_2/action_discrete.txt"
    ),
    "unknown_label": rewrite(
        "test/video_41/action_discrete.txt", "\n18,3\n", "\n18,9\n", names="video_41/action_discrete.txt"
    ),
    "not_utf8": not_utf8("train2/video_3/action_discrete.txt", names="video_3/action_discrete.txt"),
    "missing_video": remove_video("train1/video_11_2/video_left.avi"),
    "misnamed_video": misname_video("test/video_41/video_left.avi", "Video_Left.mp4"),
}
# video_41's action file cut after 10 of its 19 rows (frames 0-59 of 110)
WARNED_INPUTS = {
    "short_annotation": cut_lines("test/video_41/action_discrete.txt", 10, names="video_41/action_discrete.txt")
}
