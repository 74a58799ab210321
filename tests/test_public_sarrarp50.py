"""SAR-RARP50 on its native-layout sample: 10 Hz action ids on the 60-fps frame index become action segments,
halved operations keep the operation's split, background ("Other") is no action, folder and split must agree."""

import shutil

import pytest

from public_converters.media import check_media
from public_converters.normalise import normalise_source
from public_converters.samples._common import replace_in_file
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sarrarp50")
    sample_module("sarrarp50").write(root)
    return root


@pytest.fixture(scope="module")
def tables(sample):
    return normalise_source(registry()["sarrarp50"], sample).tables


@pytest.fixture
def copy(sample, tmp_path):
    shutil.copytree(sample, tmp_path / "sarrarp50")
    return tmp_path / "sarrarp50"


def test_video_ids_halves_and_official_split(tables):
    videos = {v.video_id: v for v in tables.videos}
    assert {vid: v.split for vid, v in videos.items()} == {
        "video_03": "train",  # folder video_3: the number is parsed, the id padded
        "video_11_1": "train",
        "video_11_2": "train",  # both halves of operation 11 share its split
        "video_41": "test",
    }
    assert videos["video_11_1"].fps == 60
    assert videos["video_11_1"].video_path == "train1/video_11_1/video_left.avi"
    assert videos["video_03"].video_path == "train2/video_3/video_left.avi"


def test_action_segments_on_the_60fps_frame_index(tables):
    segments = [(s.label, s.start_frame, s.end_frame) for s in tables.segments if s.video_id == "video_11_1"]
    assert segments == [
        # frames 0-17 are "Other" (background): no segment
        ("picking up the needle", 18, 47),  # samples at 18..42, each covering 6 frames
        ("positioning the needle tip", 48, 71),
        ("pushing the needle through the tissue", 72, 125),  # the last sample (frame 120) covers 6 frames too
    ]
    assert {s.kind for s in tables.segments} == {"action"}


def test_the_last_sample_is_clipped_at_the_end_of_the_video(sample):
    fitted = check_media(normalise_source(registry()["sarrarp50"], sample)).tables
    ends = {s.video_id: s.end_frame for s in fitted.segments}  # the last segment of each video
    # 125 and 110 frames: the last sample's 6 frames are clipped; video_11_2 ends on background
    assert ends == {"video_11_1": 124, "video_11_2": 71, "video_03": 89, "video_41": 109}
    assert {v.video_id: v.total_frames for v in fitted.videos} == {
        "video_03": 90,
        "video_11_1": 125,
        "video_11_2": 100,
        "video_41": 110,
    }


def test_frames_carry_the_10hz_actions(tables):
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert frames["video_11_1", 6].actions == []  # zero-padded "000000006,0": background
    assert frames["video_11_1", 18].actions == ["picking up the needle"]
    assert frames["video_03", 84].actions == ["returning or dropping the needle"]
    assert sum(f.video_id == "video_41" for f in tables.frames) == 19  # (110 - 1) // 6 + 1 rows


def test_frame_index_must_step_by_six(copy):
    replace_in_file(copy / "train2/video_3/action_discrete.txt", "\n12,1\n", "\n13,1\n")
    with pytest.raises(SourceError, match="action_discrete.txt, row 3: frame 13 where 12 was expected"):
        normalise_source(registry()["sarrarp50"], copy)


def test_folder_must_agree_with_the_official_split(copy):
    shutil.move(copy / "test/video_41", copy / "train2/video_41")
    with pytest.raises(SourceError, match="video 41 sits in train2/ but the official split says test"):
        normalise_source(registry()["sarrarp50"], copy)


def test_a_video_found_twice_is_refused(copy):
    shutil.copytree(copy / "train2/video_3", copy / "train1/video_03")
    with pytest.raises(SourceError, match="video_03 also found at"):
        normalise_source(registry()["sarrarp50"], copy)
