"""MultiBypass140 (Bern and Strasbourg): the official per-second labels of the split pickles (out-of-body seconds
kept) become 25-fps segments clipped at the video's end, fold splits."""

import collections
import pickle
import shutil

import pytest

from public_converters.media import check_media
from public_converters.normalise import normalise_source
from public_converters.samples._multibypass140 import OUT_OF_BODY_SECONDS, edit_pickle
from public_converters.schema import Segment
from public_converters.sources._multibypass140 import PHASE_NAMES, STEP_NAMES
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def bern(tmp_path_factory):
    root = tmp_path_factory.mktemp("multibypass_bern")
    sample_module("multibypass_bern").write(root)
    return root


def _label_at(tables, video, kind, frame):
    found = [
        s.label
        for s in tables.segments
        if (s.video_id, s.kind) == (video, kind) and s.start_frame <= frame <= s.end_frame
    ]
    return found[0] if len(found) == 1 else None


def test_phases_and_steps_are_the_official_per_second_labels_out_of_body_seconds_included(bern):
    tables = normalise_source(registry()["multibypass_bern"], bern).tables
    segments = [s for s in tables.segments if s.video_id == "BBP01"]
    # second s is frame 25 * s and covers 25 frames; second 1 is out of body in the JSON and keeps its labels
    assert [s for s in segments if s.kind == "phase"] == [
        Segment("BBP01", "phase", "preparation", 0, 49, 25),
        Segment("BBP01", "phase", "gastric pouch creation", 50, 124, 25),
    ]
    assert [s for s in segments if s.kind == "step"] == [  # s0_null_step (second 0) is no step
        Segment("BBP01", "step", "cavity exploration", 25, 49, 25),
        Segment("BBP01", "step", "crura dissection", 50, 124, 25),
    ]
    for second in OUT_OF_BODY_SECONDS:  # camera outside the patient: the surgery's phase and step, as officially
        at = 25 * second
        assert (_label_at(tables, "BBP01", "phase", at), _label_at(tables, "BBP01", "step", at)) == (
            "preparation",
            "cavity exploration",
        )
    labels = {s.label for s in tables.segments}
    assert not labels & {"out of body", "severe index", "null step", "s0_null_step", "severe_index"}
    # every second of every pickle agrees with the segments
    phases, steps = registry()["multibypass_bern"].labels["phase"], registry()["multibypass_bern"].labels["step"]
    split_dir = bern / "labels/bern/labels_by70_splits/labels"
    downloaded = {v.video_id for v in tables.videos}
    checked = 0
    for path in sorted(split_dir.rglob("*.pickle")):
        for video, frames in pickle.loads(path.read_bytes()).items():
            for frame in frames if video in downloaded else []:
                at = 25 * frame["Original_frame_id"]
                assert _label_at(tables, video, "phase", at) == phases[PHASE_NAMES[frame["Phase_gt"]]]
                assert _label_at(tables, video, "step", at) == steps.get(STEP_NAMES[frame["Step_gt"]])
                checked += 1
    assert checked == 15


def test_the_last_second_is_clipped_at_the_end_of_a_video_that_is_not_a_whole_number_of_seconds(bern):
    normalised = check_media(normalise_source(registry()["multibypass_bern"], bern))
    video = next(v for v in normalised.tables.videos if v.video_id == "BBP01")
    assert video.total_frames == 110
    ends = {s.kind: s.end_frame for s in normalised.tables.segments if s.video_id == "BBP01"}
    assert ends == {"phase": 109, "step": 109}


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


def test_a_label_id_outside_the_tables_names_the_pickle_and_the_frame(bern, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    edit_pickle("labels/bern/labels_by70_splits/labels/val/1fps_0.pickle", "BBP03", 3, Step_gt=46)(root)
    with pytest.raises(ValueError, match="1fps_0.pickle, row BBP03 BBP03_00000004: Step_gt 46 is not an id"):
        normalise_source(registry()["multibypass_bern"], root)


def test_seconds_out_of_order_are_an_error(bern, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(bern, root)
    edit_pickle(
        "labels/bern/labels_by70_splits/labels/val/1fps_0.pickle",
        "BBP03",
        3,
        Original_frame_id=1,
        Frame_id="BBP03_00000002",
    )(root)
    with pytest.raises(ValueError, match="second 1 after 2"):
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
