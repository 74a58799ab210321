"""HeiChole: integer phases per frame of each video at its own rate (25 or 50 fps, read from the video), category
instruments (8- or 22-cell files) and actions as segments, case-insensitive exact names, skill files checked for
their one-line shape."""

import re
import shutil

import pytest

from public_converters.media import check_media
from public_converters.normalise import normalise_source
from public_converters.schema import Segment, SourceError
from public_converters.sources.heichole import SHAFT_ROWS, SKILL_FILES
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
        ("Hei-Chole16", "Videos/Full/Hei-Chole16.mp4", 100, "train"),
    ]


def test_the_frame_rate_is_each_videos_own(root):
    """Videos 16-20, 23 and 24 are 50 fps: the labels are per frame at that rate, so 25 must not be assumed."""
    tables = normalise_source(registry()["heichole"], root).tables
    assert {v.video_id: v.fps for v in tables.videos} == {"Hei-Chole1": 25, "Hei-Chole10": 25, "Hei-Chole16": 50}


def test_the_releases_22_cell_instrument_file_reads_as_the_7_categories(root):
    """Hei-Chole16's file: frame + 21 category slots (0-6 the categories, 7-19 reserved, 20 an undefined shaft)."""
    normalised = normalise_source(registry()["heichole"], root)
    assert (
        (root / "Annotations/Instrument/Hei-Chole16_Annotation_Instrument.csv")
        .read_text()
        .startswith("0,1,0,0,0,0,0,0," + "0," * 13 + "0\n")
    )
    assert _segments(normalised.tables, "Hei-Chole16", "tool") == [
        Segment("Hei-Chole16", "tool", "grasper", 0, 99),
        Segment("Hei-Chole16", "tool", "clip applier", 40, 99),
    ]
    assert normalised.info()["read_counts"] == {SHAFT_ROWS: 10, SKILL_FILES: 3}  # frames 90-99: no tool label


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (
            ["1"] * 31,  # the _Instrument_Detailed.csv layout
            r"Hei-Chole1_Annotation_Instrument.csv, row 1: instrument rows have 32 cells; the widths read are 8 "
            + r"\(frame \+ the 7 categories\); 22 \(frame \+ 21 category slots",
        ),
        (
            ["1", "0", "0", "0", "0", "0", "0", "1", *["0"] * 13],  # a 1 in reserved slot 7
            r"Hei-Chole1_Annotation_Instrument.csv, row 1: column 9 \(category slot 7\) is '1'; slots 7-19 are res",
        ),
    ],
)
def test_an_instrument_file_of_another_layout_is_refused(root, tmp_path, cells, message):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "Annotations/Instrument/Hei-Chole1_Annotation_Instrument.csv"
    path.write_text("".join(f"{frame}," + ",".join(cells) + "\n" for frame in range(75)))
    with pytest.raises(SourceError, match=message):
        normalise_source(registry()["heichole"], copy)


def test_skill_files_of_one_line_of_five_integers_are_checked_and_counted(root):
    """Hei-Chole1's Calot, Dissection and whole-operation skill files: checked, counted, and no label (no QA asks)."""
    assert (root / "Annotations/Skill/Hei-Chole1_Calot_Skill.csv").read_text() == "3,4,3,4,2\n"
    normalised = normalise_source(registry()["heichole"], root)
    assert normalised.info()["read_counts"][SKILL_FILES] == 3  # the Hei-Chole1_Calot.mp4 segment video is no skill
    assert {s.kind for s in normalised.tables.segments} == {"phase", "tool", "action"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3,4,3,4\n", r"row 1: skill row '3,4,3,4' is not 5 comma-separated integers \(depth perception, bimanual"),
        ("3,4,3.5,4,2\n", r"row 1: skill row '3,4,3.5,4,2' is not 5 comma-separated integers"),
        ("3;4;3;4;2\n", r"row 1: skill row '3;4;3;4;2' is not 5"),
        ("3,4,3,4,2\n4,4,3,3,2\n", r"row 2: 2 lines; a skill file is one line of 5 integers"),
        ("\n", r"_Dissection_Skill.csv: 0 lines; a skill file is one line of 5 integers"),
    ],
)
def test_a_skill_file_of_another_shape_is_refused_in_one_line(root, tmp_path, text, message):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "Annotations/Skill/Hei-Chole1_Dissection_Skill.csv"
    path.write_text(text)
    with pytest.raises(SourceError, match=message) as error:
        normalise_source(registry()["heichole"], copy)
    assert str(error.value).startswith(str(path)) and len(str(error.value).splitlines()) == 1


def test_a_missing_and_an_unreadable_video_are_named_together_and_stop_the_build(root, tmp_path):
    """The reader reads each video's rate from its header, so a missing or unreadable video cannot be read there:
    both are left to the media check, which names them in one error (the labels are never skipped without it)."""
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "Videos/Full/Hei-Chole16.mp4").unlink()
    (copy / "Videos/Full/Hei-Chole10.mp4").write_bytes(bytes(range(256)) * 8)
    normalised = normalise_source(registry()["heichole"], copy)
    assert normalised.warnings == {}  # no longer a warning that builds the rest
    with pytest.raises(SourceError) as error:
        check_media(normalised)
    message = str(error.value)
    assert message.splitlines()[0].endswith("2 media problems:")
    assert re.search(r"Hei-Chole10\.mp4: cannot read the video header", message)
    assert "Videos/Full/Hei-Chole16.mp4: not found, and Hei-Chole16 is annotated: add the video" in message


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
