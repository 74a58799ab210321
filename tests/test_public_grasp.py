"""GraSP: original frame numbers as time base, 1-based instruments and actions, 0-based phases and steps."""

import json
import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def grasp_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("grasp")
    sample_module("grasp").write(root)
    return root


@pytest.fixture(scope="module")
def tables(grasp_root):
    return normalise_source(registry()["grasp"], grasp_root).tables


def test_frame_rates_and_official_splits(tables):
    videos = {v.video_id: v for v in tables.videos}
    assert {v: (videos[v].fps, videos[v].split) for v in videos} == {
        "CASE001": (45.0, "train"),
        "CASE007": (45.0, "train"),
        "CASE041": (30.0, "test"),
    }
    assert (videos["CASE001"].width, videos["CASE001"].height) == (64, 48)


def test_fold_variant_holds_out_one_training_fold(grasp_root):
    tables = normalise_source(registry()["grasp"], grasp_root, split_variant="fold2").tables
    assert {v.video_id: v.split for v in tables.videos} == {
        "CASE001": "train",
        "CASE007": "validation",
        "CASE041": "test",
    }


def test_frames_keyed_by_nine_digit_original_frame_number(tables):
    frame = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("CASE001", 68))
    assert frame.image_path == "GraSP_30fps/frames/CASE001/000000068.jpg"
    assert frame.phase is None  # a short-term keyframe between two 1-fps long-term keyframes
    empty = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("CASE007", 45))
    assert empty.tools == [] and empty.phase == "developing the space of retzius"
    unannotated = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("CASE007", 0))
    assert unannotated.tools is None


def test_one_based_instruments_and_actions(tables):
    found = {(i.video_id, i.frame_index, i.label): i for i in tables.instances}
    assert set(found) == {
        ("CASE001", 68, "grasper"),
        ("CASE001", 90, "bipolar forceps"),
        ("CASE001", 90, "grasper"),
        ("CASE041", 60, "monopolar curved scissors"),
    }
    # category 7 = Laparoscopic Grasper, actions [4, 5] = Grasp, Hold; COCO [x, y, w, h] = (2, 3, 20, 10) in 64x48
    grasper = found[("CASE001", 68, "grasper")]
    assert grasper.actions == ["grasp", "hold"]
    assert grasper.box == [31.2, 62.5, 343.8, 270.8]
    assert grasper.mask["size"] == [48, 64]
    assert found[("CASE041", 60, "monopolar curved scissors")].actions == ["cut", "pull"]
    frame = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("CASE001", 90))
    assert frame.tools == ["bipolar forceps", "grasper"] and frame.actions == ["cauterize", "still"]


def test_zero_based_phases_and_steps_become_segments_in_original_frames(tables):
    phases = [
        (s.label, s.start_frame, s.end_frame) for s in tables.segments if (s.video_id, s.kind) == ("CASE001", "phase")
    ]
    # keyframes every 45 frames (1 fps of a 45-fps original): phase ids 0, 0, 1, 1, 1, 2
    assert phases == [
        ("idle", 0, 89),
        ("left pelvic isolated lymphadenectomy", 90, 224),
        ("right pelvic isolated lymphadenectomy", 225, 269),
    ]
    steps = [
        (s.label, s.start_frame, s.end_frame) for s in tables.segments if (s.video_id, s.kind) == ("CASE041", "step")
    ]
    assert steps[0] == ("cut prostate", 0, 59) and steps[-1] == ("tie suture", 120, 149)


def test_case_outside_the_official_lists_is_an_error(grasp_root, tmp_path):
    root = tmp_path / "grasp"
    shutil.copytree(grasp_root, root)
    path = root / "GraSP_30fps/annotations/grasp_short-term_fold1.json"
    data = json.loads(path.read_text())
    data["images"][0]["video_name"] = "CASE099"
    path.write_text(json.dumps(data))
    with pytest.raises(SourceError, match="grasp_short-term_fold1.json.*CASE099"):
        normalise_source(registry()["grasp"], root)
