"""CholecSeg8k: watershed grey levels decoded as decimals, Cholec80 frame numbers kept, seg-to-box policies."""

import pytest

from public_converters.normalise import normalise_source
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("cholecseg8k")
    sample_module("cholecseg8k").write(root)
    return normalise_source(registry()["cholecseg8k"], root).tables


def _instances(tables, frame, label):
    return [i for i in tables.instances if i.video_id == "video01" and i.frame_index == frame and i.label == label]


def test_frames_keep_the_cholec80_frame_numbers_and_scheikl_split(tables):
    assert [(f.video_id, f.frame_index) for f in tables.frames] == [("video01", 80), ("video01", 81), ("video12", 400)]
    assert tables.frames[0].image_path == "video01/video01_00080/frame_80_endo.png"
    assert {v.video_id: (v.split, v.fps, v.width, v.height) for v in tables.videos} == {
        "video01": ("train", 25, 64, 48),
        "video12": ("test", 25, 64, 48),
    }


@pytest.mark.parametrize("frame", [80, 81])  # frame 81's mask is RGBA
def test_seg_to_box_policies(tables, frame):
    (gallbladder,) = _instances(tables, frame, "gallbladder")  # two parts -> one union box
    assert gallbladder.box == [125.0, 83.3, 468.8, 291.7]
    upper, lower = _instances(tables, frame, "blood")  # two pools, top first
    assert upper.box == [156.2, 416.7, 218.8, 500.0] and upper.instance_id == 0
    assert lower.box == [312.5, 708.3, 437.5, 833.3] and lower.instance_id == 1
    (wall,) = _instances(tables, frame, "abdominal wall")
    assert wall.box is None and wall.mask is None  # semantic: presence only
    (grasper,) = _instances(tables, frame, "grasper")
    assert grasper.kind == "tool" and grasper.mask["size"] == [48, 64]


def test_presence_comes_from_the_masks_and_unlabelled_values_are_not_classes(tables):
    by_frame = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert by_frame["video01", 80].tools == ["grasper"]
    assert by_frame["video12", 400].tools == []  # annotated, no tool visible
    assert by_frame["video12", 400].anatomy == ["abdominal wall", "blood", "gallbladder", "liver"]
