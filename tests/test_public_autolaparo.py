"""AutoLaparo: 1-based 1-fps phases on the 25-fps timeline, motion clips as laparoscope actions, grey-level masks."""

import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def autolaparo_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("autolaparo")
    sample_module("autolaparo").write(root)
    return root


@pytest.fixture(scope="module")
def tables(autolaparo_root):
    return normalise_source(registry()["autolaparo"], autolaparo_root).tables


def _frame(tables, video_id, frame_index):
    return next(f for f in tables.frames if (f.video_id, f.frame_index) == (video_id, frame_index))


def test_official_splits_for_videos_and_clips(tables):
    assert {v.video_id: v.split for v in tables.videos} == {
        "video01": "train",
        "video15": "test",
        "clip001": "train",
        "clip228": "test",
    }
    assert all(v.fps == 25 for v in tables.videos)


def test_one_based_phase_rows_become_25_fps_segments(tables):
    phases = [(s.label, s.start_frame, s.end_frame) for s in tables.segments if s.video_id == "video01"]
    # label_01.txt: seconds 1-4 phase 1, 5-9 phase 2, 10-12 phase 3; row k is video frame 25 * (k - 1)
    assert phases == [
        ("preparation", 0, 99),
        ("dividing ligament and peritoneum", 100, 224),
        ("dividing uterine vessels and ligament", 225, 299),
    ]
    assert _frame(tables, "video01", 100).phase == "dividing ligament and peritoneum"
    assert {f.frame_index for f in tables.frames if f.video_id == "video15"} == set(range(0, 275, 25))


def test_zero_based_motion_labels_are_laparoscope_actions_after_the_observed_window(tables):
    actions = {s.video_id: (s.label, s.start_frame, s.end_frame) for s in tables.segments if s.kind == "action"}
    assert actions == {
        "clip001": ("laparoscope zooming in", 125, 249),
        "clip228": ("laparoscope static", 125, 249),
    }


def test_grey_level_masks_merge_tool_parts_and_keep_the_uterus_single(tables):
    found = [(i.video_id, i.frame_index, i.label, i.box) for i in tables.instances]
    # 1-based frame 001 of clip 001 is frame 0; the 20/40 manipulator and shaft are one grasper
    assert ("clip001", 0, "grasper", [78.1, 104.2, 218.8, 416.7]) in found
    hooks = [box for video, frame, label, box in found if label == "electrocautery hook"]
    assert len(hooks) == 2  # two separate components
    uterus = [box for video, frame, label, box in found if label == "uterus"]
    assert uterus == [[468.8, 520.8, 718.8, 833.3]]  # two pieces, one box around both
    assert _frame(tables, "clip001", 124).tools == ["vessel sealer"]
    empty = _frame(tables, "clip228", 49)
    assert (empty.tools, empty.anatomy) == ([], [])


def test_task_folders_are_optional_but_one_is_needed(autolaparo_root, tmp_path):
    root = tmp_path / "autolaparo"
    shutil.copytree(autolaparo_root / "AutoLaparo_Task1", root / "AutoLaparo_Task1")
    tables = normalise_source(registry()["autolaparo"], root).tables
    assert sorted(v.video_id for v in tables.videos) == ["video01", "video15"]
    with pytest.raises(SourceError, match="no AutoLaparo_Task1/2/3 folder"):
        registry()["autolaparo"].read(tmp_path, registry()["autolaparo"].mapper())


def test_non_contiguous_seconds_are_an_error(autolaparo_root, tmp_path):
    root = tmp_path / "autolaparo"
    shutil.copytree(autolaparo_root, root)
    path = root / "AutoLaparo_Task1/labels/label_01.txt"
    path.write_text(path.read_text().replace("\n5\t2\n", "\n6\t2\n", 1))
    with pytest.raises(SourceError, match="label_01.txt, row 6: second 6, expected 5"):
        normalise_source(registry()["autolaparo"], root)
