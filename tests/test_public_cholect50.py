"""CholecT50: what a user checks on the normalised tables of the native-layout sample."""

import json
import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import Segment, SourceError
from public_converters.sources.cholect50 import SPLITS
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("cholect50")
    sample_module("cholect50").write(root)
    return root


@pytest.fixture(scope="module")
def tables(sample):
    return normalise_source(registry()["cholect50"], sample).tables


def test_phase_segments_follow_the_sparse_frame_keys_and_fix_the_typo(tables):
    segments = [s for s in tables.segments if s.video_id in ("VID01", "VID02")]
    assert segments == [
        Segment("VID01", "phase", "preparation", 0, 2),
        Segment("VID01", "phase", "calot triangle dissection", 3, 5),  # "carlot-triangle-dissection" in the file
        Segment("VID02", "phase", "clipping and cutting", 0, 2),
        Segment("VID02", "phase", "clipping and cutting", 6, 6),  # keys 3-5 are absent: the run is broken
        Segment("VID02", "phase", "gallbladder dissection", 7, 7),
    ]
    assert [f.frame_index for f in tables.frames if f.video_id == "VID02"] == [0, 1, 2, 6, 7]
    assert {f.phase for f in tables.frames if f.video_id == "VID103"} >= {"gallbladder retraction"}  # "extraction"


def test_frames_are_the_1fps_pngs_and_videos_count_unlabelled_ones(tables):
    videos = {v.video_id: v for v in tables.videos}
    assert {v.fps for v in videos.values()} == {1.0}
    assert videos["VID01"].total_frames == 8  # labels on 0-5, two more PNGs after them
    assert videos["VID103"].total_frames == 14  # three-digit id, keys 10-12 and one more PNG
    frame = next(f for f in tables.frames if f.video_id == "VID103" and f.frame_index == 11)
    assert frame.image_path == "videos/VID103/000011.png"


def test_boxes_are_converted_from_normalised_xywh_and_shared_boxes_are_one_instance(tables):
    at = {(i.frame_index, i.label): i for i in tables.instances if i.video_id == "VID01"}
    assert at[(2, "grasper")].box == [500.0, 250.0, 750.0, 750.0]  # x, y, w, h = .5, .25, .25, .5
    frame3 = [i for i in tables.instances if i.video_id == "VID01" and i.frame_index == 3]
    assert sorted((i.label, i.box) for i in frame3) == [
        ("electrocautery hook", [0.0, 600.0, 450.0, 1000.0]),
        ("grasper", [500.0, 250.0, 750.0, 750.0]),  # two triplets of one grasper, one box
    ]
    assert not [i for i in tables.instances if i.video_id != "VID01"]  # -1 boxes give presence only


def test_null_and_empty_triplets_give_presence_but_no_relation(tables):
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert frames[("VID01", 0)].tools == []  # a row of -1 ids: annotated, no tool
    assert frames[("VID01", 1)].tools == ["grasper"]  # grasper,null_verb,null_target
    relations = {(r.video_id, r.frame_index): [] for r in tables.relations}
    for r in tables.relations:
        relations[(r.video_id, r.frame_index)].append((r.instrument, r.verb, r.target))
    assert ("VID01", 0) not in relations and ("VID01", 1) not in relations
    assert relations[("VID01", 3)] == [
        ("electrocautery hook", "dissect", "cystic duct"),
        ("grasper", "grasp", "liver"),
        ("grasper", "retract", "gallbladder"),
    ]
    assert relations[("VID103", 12)] == [("grasper", "grasp", "specimen bag")]
    assert frames[("VID103", 11)].tools == ["bipolar forceps", "irrigator"]


def test_official_split_variants(sample):
    def splits(variant):
        normalised = normalise_source(registry()["cholect50"], sample, split_variant=variant)
        return {v.video_id: v.split for v in normalised.tables.videos}

    # the loader's default: fold 1 test, validation = last 5 of the concatenated training folds
    assert splits(None) == {"VID01": "validation", "VID02": "test", "VID103": "train"}
    assert splits("cholect50") == {"VID01": "train", "VID02": "train", "VID103": "train"}
    assert splits("cholect50-challenge") == {"VID01": "train", "VID02": "train", "VID103": "test"}
    assert splits("cholect45-crossval-fold1")["VID103"] == "unused"  # the T50-only videos are not in T45


@pytest.mark.parametrize("fold", range(1, 6))
def test_crossval_folds_partition_the_videos(fold):
    for release, count in (("cholect50", 50), ("cholect45", 45)):
        assignment = SPLITS[f"{release}-crossval-fold{fold}"]
        counts = {
            split: sum(1 for s in assignment.values() if s == split) for split in ("train", "validation", "test")
        }
        assert len(assignment) == count
        assert counts == {"train": count - count // 5 - 5, "validation": 5, "test": count // 5}
    tests = [v for k in range(1, 6) for v, s in SPLITS[f"cholect50-crossval-fold{k}"].items() if s == "test"]
    assert sorted(tests) == sorted(SPLITS["cholect50"])  # every video is tested exactly once


def test_a_triplet_id_that_contradicts_its_ids_is_an_error(sample, tmp_path):
    root = tmp_path / "t50"
    shutil.copytree(sample, root)
    path = root / "labels" / "VID02.json"
    data = json.loads(path.read_text())
    data["annotations"]["6"][0][0] = 13  # grasper,pack,gallbladder, but the row says retract
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match=r"VID02\.json, row 6: triplet 13 does not match"):
        normalise_source(registry()["cholect50"], root)


def test_labels_without_their_frame_folder_are_an_error(sample, tmp_path):
    root = tmp_path / "t50"
    shutil.copytree(sample, root)
    shutil.rmtree(root / "videos" / "VID103")
    with pytest.raises(SourceError, match=r"videos/VID103: frame folder not found"):
        normalise_source(registry()["cholect50"], root)
