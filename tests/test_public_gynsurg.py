"""GynSurg: action clips (each its own Video) and COCO polygons (instances with masks and boxes)."""

import json

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.sources._itec import hashed_split
from public_converters.spec import registry, sample_module


@pytest.fixture
def root(tmp_path):
    sample_module("gynsurg").write(tmp_path)
    return tmp_path


def _tables(root):
    return normalise_source(registry()["gynsurg"], root).tables


def test_action_clips_are_videos_with_one_segment(root):
    tables = _tables(root)
    clips = {v.video_id: v for v in tables.videos if v.video_path}
    assert sorted(clips) == [
        "clip_Coagulation_V12_00_01_03",  # ':' in the file name, '_' in the id
        "clip_Needle_passing_V12_00_01_05",
        "clip_Rest_V40_00_10_00",
    ]  # the Bleeding side-effect set is not read
    coagulation = clips["clip_Coagulation_V12_00_01_03"]
    assert coagulation.video_path == "GynSurg_Action_3sec/GynSurg_action_dataset/Coagulation/V12_00:01:03.mp4"
    assert (coagulation.fps, coagulation.total_frames) == (30.0, 90)
    segments = {s.video_id: (s.kind, s.label, s.start_frame, s.end_frame) for s in tables.segments}
    assert segments == {
        "clip_Coagulation_V12_00_01_03": ("action", "coagulation", 0, 89),
        "clip_Needle_passing_V12_00_01_05": ("action", "needle passing", 0, 89),
        "clip_Rest_V40_00_10_00": ("action", "idle", 0, 89),
    }
    # clips of one source video (the name's first token) share a split
    assert clips["clip_Coagulation_V12_00_01_03"].split == clips["clip_Needle_passing_V12_00_01_05"].split
    assert clips["clip_Rest_V40_00_10_00"].split == hashed_split("gynsurg", "clip:V40")


def test_polygons_become_instances_with_masks_and_boxes(root):
    tables = _tables(root)
    graspers = [i for i in tables.instances if i.label == "grasper"]
    assert [(i.video_id, i.frame_index, i.instance_id) for i in graspers] == [
        ("INSSEG_01-0.mp4_", 120, 0),
        ("INSSEG_01-0.mp4_", 120, 1),
    ]
    # polygon (2,30)-(20,46) in a 64x48 image: box in [0, 1000] at the lower left
    assert graspers[0].box == pytest.approx([31.2, 625.0, 312.5, 958.3], abs=0.2)
    assert graspers[1].box == pytest.approx([625.0, 41.7, 937.5, 250.0], abs=0.2)
    mask = mask_utils.decode({"size": graspers[0].mask["size"], "counts": graspers[0].mask["counts"].encode()})
    assert mask.shape == (48, 64) and mask[38, 10] == 1 and mask[5, 50] == 0
    assert int(np.sum(mask)) == pytest.approx(18 * 16, rel=0.2)
    labels = {(i.kind, i.label) for i in tables.instances}
    assert ("tool", "vessel sealer") in labels and ("anatomy", "fallopian tube") in labels  # "fallopian_tube"
    assert ("anatomy", "other organ") in labels


def test_frames_presence_and_index_from_the_file_name(root):
    frames = {(f.video_id, f.frame_index): f for f in _tables(root).frames}
    assert sorted(frames) == [
        ("GANSEG_01-0.mp4_", 60),
        ("INSSEG_01-0.mp4_", 120),
        ("INSSEG_01-0.mp4_", 150),
        ("INSSEG_02-0.mp4_", 30),
    ]
    assert frames[("INSSEG_01-0.mp4_", 150)].tools == ["thread", "vessel sealer"]
    assert frames[("INSSEG_01-0.mp4_", 150)].anatomy is None  # instruments.json says nothing about anatomy
    assert frames[("INSSEG_02-0.mp4_", 30)].tools == []  # listed, no polygon: annotated and absent
    anatomy = frames[("GANSEG_01-0.mp4_", 60)]
    assert (anatomy.tools, anatomy.anatomy) == (None, ["fallopian tube", "other organ", "uterus"])
    assert anatomy.image_path == "ganseg/GANSEG_01/0.mp4_/frame_000060.jpg"


def test_image_videos_split_by_folder_and_carry_the_size(root):
    videos = {v.video_id: v for v in _tables(root).videos if not v.video_path}
    for video_id, video in videos.items():
        assert video.split == hashed_split("gynsurg", "images:" + video_id)
        assert (video.width, video.height, video.fps) == (64, 48, 30)


def test_absolute_image_paths_are_cut_to_the_image_folder(root):
    path = root / "instruments.json"
    data = json.loads(path.read_text())
    for image in data["images"]:
        image["path"] = "/home/itec/sahar/Domain_Adaptation/Lap_Segmentation_1/" + image["path"]
    path.write_text(json.dumps(data))
    frames = _tables(root).frames
    assert "insseg/INSSEG_01/0.mp4_/frame_000120.jpg" in {f.image_path for f in frames}


def test_annotation_with_unknown_category_id_names_the_row(root):
    path = root / "instruments.json"
    data = json.loads(path.read_text())
    data["annotations"][2]["category_id"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match=r"instruments.json, row annotations\[2\]"):
        _tables(root)


def test_a_colon_name_and_its_underscore_copy_are_one_clip(root):
    folder = root / "GynSurg_Action_3sec/GynSurg_action_dataset/Coagulation"
    (folder / "V12_00_01_03.mp4").write_bytes((folder / "V12_00:01:03.mp4").read_bytes())
    with pytest.raises(SourceError, match="the same clip as"):
        _tables(root)


def test_an_image_listed_twice_is_an_error(root):
    path = root / "instruments.json"
    data = json.loads(path.read_text())
    data["images"].append(dict(data["images"][0], id=7))
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match=r"instruments.json, row images\[3\]: image id 7 or frame .* listed twice"):
        _tables(root)
