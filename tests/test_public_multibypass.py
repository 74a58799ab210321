"""MultiBypass140 (Bern and Strasbourg): millisecond intervals to 25-fps segments, overlap priority, fold splits."""

import collections
import pickle
import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.samples._common import replace_in_file
from public_converters.schema import Segment
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def bern(tmp_path_factory):
    root = tmp_path_factory.mktemp("multibypass_bern")
    sample_module("multibypass_bern").write(root)
    return root


def test_out_of_body_wins_and_severe_index_and_null_step_are_not_labels(bern):
    tables = normalise_source(registry()["multibypass_bern"], bern).tables
    segments = [s for s in tables.segments if s.video_id == "BBP01"]
    # preparation 0-1600 ms with out_of_body 400-800 ms nested: frames 10-19 get no phase and no step
    assert [s for s in segments if s.kind == "phase"] == [
        Segment("BBP01", "phase", "preparation", 0, 9),
        Segment("BBP01", "phase", "preparation", 20, 39),
        Segment("BBP01", "phase", "gastric pouch creation", 40, 99),
    ]
    assert [s for s in segments if s.kind == "step"] == [
        Segment("BBP01", "step", "cavity exploration", 20, 39),
        Segment("BBP01", "step", "crura dissection", 40, 99),
    ]
    labels = {s.label for s in tables.segments}
    assert not labels & {"out of body", "severe index", "null step", "s0_null_step", "severe_index"}


def test_fold0_split_comes_from_the_release_pickles_and_folds_1_to_4_from_the_notes(bern):
    spec = registry()["multibypass_bern"]
    splits = {v.video_id: v.split for v in normalise_source(spec, bern).tables.videos}
    assert splits == {"BBP01": "train", "BBP02": "test", "BBP03": "validation"}  # BBP70 listed, not downloaded
    fold1 = {v.video_id: v.split for v in normalise_source(spec, bern, split_variant="fold1").tables.videos}
    assert fold1 == {"BBP01": "train", "BBP02": "test", "BBP03": "test"}
    assert sum(split == "train" for split in spec.split_variants["fold4"].values()) == 40
    assert not registry()["multibypass_strasbourg"].split_variants  # test lists unknown: fold 0 from pickles only


def test_video_is_25_fps_and_read_from_the_zip_layout(bern):
    videos = normalise_source(registry()["multibypass_bern"], bern).tables.videos
    assert {v.fps for v in videos} == {25.0}
    assert videos[0].video_path == "datasets/MultiBypass140/BernBypass70/videos/BBP01.mp4"


def test_overlapping_ordinary_phases_are_an_error(bern, tmp_path):

    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    path = root / "labels/bern/labels_by70/BBP01.mp4.json"
    path.write_text(path.read_text().replace('"start": 1600', '"start": 1000', 1))
    with pytest.raises(ValueError, match="overlaps"):
        normalise_source(registry()["multibypass_bern"], root)


def test_a_pickle_that_needs_a_class_is_refused(bern, tmp_path):

    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    path = root / "labels/bern/labels_by70_splits/labels/val/1fps_0.pickle"
    path.write_bytes(pickle.dumps(collections.OrderedDict(BBP03=[])))
    with pytest.raises(ValueError, match="1fps_0.pickle.*refusing to load collections.OrderedDict"):
        normalise_source(registry()["multibypass_bern"], root)


def test_a_video_in_two_splits_is_an_error(bern, tmp_path):

    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    train = root / "labels/bern/labels_by70_splits/labels/train/1fps_100_0.pickle"
    train.write_bytes(pickle.dumps({"BBP01": [], "BBP03": []}))
    with pytest.raises(ValueError, match="BBP03 is also in the train split"):
        normalise_source(registry()["multibypass_bern"], root)


def test_an_interval_shorter_than_a_frame_labels_nothing(bern, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    path = root / "labels/bern/labels_by70/BBP01.mp4.json"
    block = '"start": 0,\n   "end": 400,\n   "label_name": "s0_null_step",\n   "label_id": 0'
    short = '"start": 0,\n   "end": 10,\n   "label_name": "s2_trocar_placement",\n   "label_id": 2'
    replace_in_file(path, block, short)
    steps = [s for s in normalise_source(registry()["multibypass_bern"], root).tables.segments if s.kind == "step"]
    assert [s.label for s in steps if s.video_id == "BBP01"] == ["cavity exploration", "crura dissection"]
