"""HeiChole: 25-fps integer phases, category instruments and actions as segments, case-insensitive exact names."""

import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import Segment
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("heichole")
    sample_module("heichole").write(root)
    return root


def _segments(tables, video, kind):
    return [s for s in tables.segments if s.video_id == video and s.kind == kind]


def test_phases_tools_and_actions_become_segments(root):
    tables = normalise_source(registry()["heichole"], root).tables
    assert _segments(tables, "Hei-Chole1", "phase") == [
        Segment("Hei-Chole1", "phase", "preparation", 0, 29),
        Segment("Hei-Chole1", "phase", "calot triangle dissection", 30, 74),
    ]
    assert _segments(tables, "Hei-Chole1", "tool") == [
        Segment("Hei-Chole1", "tool", "grasper", 0, 74),
        Segment("Hei-Chole1", "tool", "clip applier", 40, 74),
    ]
    assert _segments(tables, "Hei-Chole1", "action") == [
        Segment("Hei-Chole1", "action", "grasp", 10, 49),
        Segment("Hei-Chole1", "action", "hold", 50, 74),
    ]


def test_lower_case_copies_are_read_and_segment_videos_are_not_videos(root):
    videos = normalise_source(registry()["heichole"], root).tables.videos
    assert [(v.video_id, v.video_path, v.total_frames, v.split) for v in videos] == [
        ("Hei-Chole1", "Videos/Full/Hei-Chole1.mp4", 75, "train"),
        ("Hei-Chole10", "Videos/Full/hei-chole10.mp4", 80, "train"),
    ]


def test_an_instrument_file_with_another_column_layout_is_refused(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "Annotations/Instrument/Hei-Chole1_Annotation_Instrument.csv"
    path.write_text("".join(f"{frame}," + ",".join(["0"] * 21) + "\n" for frame in range(75)))
    with pytest.raises(ValueError, match=r"Hei-Chole1_Annotation_Instrument.csv, row 1: .* 22 cells .*7 binary"):
        normalise_source(registry()["heichole"], copy)


def test_one_row_per_second_is_read_at_its_step_and_clipped_to_the_video(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "Annotations/Action/Hei-Chole1_Annotation_Action.csv"
    path.write_text("0,1,0,0,0\n25,1,0,0,0\n50,0,0,1,0\n")
    tables = normalise_source(registry()["heichole"], copy).tables
    assert _segments(tables, "Hei-Chole1", "action") == [
        Segment("Hei-Chole1", "action", "grasp", 0, 49, 25),
        Segment("Hei-Chole1", "action", "cut", 50, 74, 25),
    ]
    path.write_text("0,1,0,0,0\n25,1,0,0,0\n60,0,0,1,0\n")
    with pytest.raises(ValueError, match="frame 60 after 25: the step is not 25"):
        normalise_source(registry()["heichole"], copy)


def test_image_branch_frames_are_labelled_from_the_segments(root):
    from public_converters.schema import Frame, frames_from_segments

    tables = normalise_source(registry()["heichole"], root).tables
    first = [f for f in tables.frames if f.video_id == "Hei-Chole1"]
    assert first == [Frame("Hei-Chole1", 0, phase="preparation", actions=[], tools=["grasper"])]  # one per 25 s
    (later,) = frames_from_segments("Hei-Chole1", tables.segments, [45])
    assert (later.phase, later.tools, later.actions) == (
        "calot triangle dissection",
        ["clip applier", "grasper"],
        ["grasp"],
    )
