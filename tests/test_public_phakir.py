"""PhaKIR on its native-layout sample: phases split at cuts, masks every 25th frame in 1000-frame buckets, seg-to-box
of the class-colour masks, and loud errors where an unconfirmed format fact does not hold."""

import shutil

import numpy as np
import pytest

from public_converters.normalise import normalise_source
from public_converters.samples._common import replace_in_file, write_image
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("phakir")
    sample_module("phakir").write(root)
    return root


@pytest.fixture(scope="module")
def tables(sample):
    return normalise_source(registry()["phakir"], sample).tables


@pytest.fixture
def copy(sample, tmp_path):
    shutil.copytree(sample, tmp_path / "phakir")
    return tmp_path / "phakir"


def test_videos_splits_and_sizes(tables):
    videos = {v.video_id: v for v in tables.videos}
    assert sorted(videos) == ["Video_01", "Video_07"]
    first = videos["Video_01"]
    assert (first.fps, first.total_frames, first.width, first.height) == (25, 80, 64, 48)
    assert first.video_path == "Video_01.mp4"
    assert {v.split for v in tables.videos} == {"train"}  # both are public (challenge training) videos
    assert videos["Video_07"].total_frames == 1030


def test_phase_segments_are_split_at_the_cut(tables):
    segments = [(s.video_id, s.label, s.start_frame, s.end_frame) for s in tables.segments]
    assert segments == [
        ("Video_01", "preparation", 0, 29),
        ("Video_01", "calot triangle dissection", 30, 59),
        ("Video_01", "calot triangle dissection", 60, 79),  # Video_01_Cuts.csv lists frame 60
        ("Video_07", "calot triangle dissection", 0, 399),
        ("Video_07", "clipping and cutting", 400, 699),
        ("Video_07", "gallbladder dissection", 700, 1029),
    ]


def test_frames_every_25th_with_bucketed_images(tables):
    by_video = {}
    for frame in tables.frames:
        by_video.setdefault(frame.video_id, []).append(frame)
    assert [f.frame_index for f in by_video["Video_01"]] == [0, 25, 50, 75]
    assert len(by_video["Video_07"]) == 42
    late = {f.frame_index: f for f in by_video["Video_07"]}[1000]
    assert late.image_path == "Frames/Video_07/1000/frame_001000.png"
    assert late.phase == "gallbladder dissection"


def test_masks_become_tool_instances(tables):
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert frames["Video_01", 0].tools == []  # an empty mask: annotated, no instrument
    assert frames["Video_01", 25].tools == ["electrocautery hook", "grasper"]
    assert frames["Video_01", 50].tools == ["grasper"]
    assert "drainage" in frames["Video_07", 1025].tools  # the organisers' dummy Drainage colour (255, 0, 0)
    graspers = [i for i in tables.instances if (i.video_id, i.frame_index, i.label) == ("Video_01", 25, "grasper")]
    # two separate jaws -> two components, top one first; boxes in [0, 1000] of the 64x48 frame
    assert [i.instance_id for i in graspers] == [0, 1]
    assert graspers[0].box == [62.5, 104.2, 312.5, 312.5]
    assert graspers[1].box == [625.0, 625.0, 937.5, 833.3]
    assert graspers[0].mask["size"] == [48, 64]


def test_numeric_phase_column_is_refused(copy):
    replace_in_file(copy / "Video_01/Video_01_Phases.csv", "\n0,Preparation\n", "\n0,0\n")
    with pytest.raises(SourceError, match=r"Video_01_Phases.csv, row 2: phase is the number 0, expected a phase name"):
        normalise_source(registry()["phakir"], copy)


def test_per_instance_colours_stop_seg_to_box(copy):
    path = copy / "Video_01/Video_01_Masks/0/frame_000050.png"
    pixels = np.zeros((48, 64, 3), dtype=np.uint8)
    pixels[5:15, 4:20] = (255, 130, 1)  # a colour outside the class table, e.g. an instance-coded grasper
    write_image(path, pixels)
    colour_mask = r"a colour mask of uint8 values \(PIL mode RGB\)"
    with pytest.raises(SourceError, match=rf"frame_000050.png: {colour_mask}: colours \(255,130,1\) are not in the"):
        normalise_source(registry()["phakir"], copy)


def test_mask_off_the_25_frame_grid_is_refused(copy):
    shutil.copy(
        copy / "Video_01/Video_01_Masks/0/frame_000025.png", copy / "Video_01/Video_01_Masks/0/frame_000030.png"
    )
    with pytest.raises(SourceError, match="frame_000030.png: mask at frame 30; expected every 25th frame"):
        normalise_source(registry()["phakir"], copy)


def test_missing_frames_folder_says_how_to_extract(copy):
    shutil.rmtree(copy / "Frames")
    with pytest.raises(SourceError, match="split_video_in_frames.py"):
        normalise_source(registry()["phakir"], copy)


def test_annotations_next_to_the_videos_are_read(copy):
    for path in sorted((copy / "Video_07").iterdir()):
        path.rename(copy / path.name)
    (copy / "Video_07").rmdir()
    tables = normalise_source(registry()["phakir"], copy).tables
    assert sum(f.video_id == "Video_07" for f in tables.frames) == 42
