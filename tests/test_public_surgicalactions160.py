"""SurgicalActions160: each clip of a 1-based class folder is one Video with one action segment over all its frames."""

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture
def root(tmp_path):
    sample_module("surgicalactions160").write(tmp_path)
    return tmp_path


def test_each_clip_is_a_video_with_one_segment_over_its_frames(root):
    tables = normalise_source(registry()["surgicalactions160"], root).tables
    videos = {v.video_id: v for v in tables.videos}
    assert sorted(videos) == ["01_01", "01_09", "07_08", "16_02"]  # c_16_v_02.mp4 gets the NN_MM id
    assert videos["16_02"].video_path == "SurgicalActions160/16_endobag-out/c_16_v_02.mp4"
    assert {v.fps for v in tables.videos} == {25.0}
    segments = {s.video_id: (s.kind, s.label, s.start_frame, s.end_frame) for s in tables.segments}
    assert segments == {
        "01_01": ("action", "abdominal access", 0, 29),
        "01_09": ("action", "abdominal access", 0, 19),
        "07_08": ("action", "coagulation", 0, 24),
        "16_02": ("action", "endobag-out", 0, 34),
    }
    assert all(videos[v].total_frames == end + 1 for v, (*_, end) in segments.items())
    assert not tables.frames


def test_split_variants(root):
    spec = registry()["surgicalactions160"]
    assert {v.split for v in normalise_source(spec, root).tables.videos} == {"train"}
    held_out = normalise_source(spec, root, split_variant="by-clip-number").tables
    assert {v.video_id: v.split for v in held_out.videos} == {
        "01_01": "train",
        "01_09": "test",
        "07_08": "validation",
        "16_02": "train",
    }
    # class-balanced: every class holds out the same clip numbers
    for number in range(1, 17):
        splits = [spec.split_variants["by-clip-number"][f"{number:02d}_{clip:02d}"] for clip in range(1, 11)]
        assert splits.count("train") == 7 and splits.count("validation") == 1 and splits.count("test") == 2


def test_root_may_be_the_release_folder_itself(root):
    tables = normalise_source(registry()["surgicalactions160"], root / "SurgicalActions160").tables
    assert tables.videos[0].video_path == "01_abdominal_access/01_01.mp4"


def test_folder_id_must_match_the_readme_numbering(root):
    base = root / "SurgicalActions160"
    (base / "07_coagulation").rename(base / "06_coagulation")
    with pytest.raises(SourceError, match="06_coagulation.*README numbers 'coagulation' 07"):
        normalise_source(registry()["surgicalactions160"], root)


def test_clip_class_must_match_its_folder(root):
    folder = root / "SurgicalActions160/07_coagulation"
    (folder / "07_08.mp4").rename(folder / "08_08.mp4")
    with pytest.raises(SourceError, match="08_08.mp4: class 8 in the name, 7 by its folder"):
        normalise_source(registry()["surgicalactions160"], root)


def test_both_namings_of_one_clip_are_an_error(root):
    folder = root / "SurgicalActions160/01_abdominal_access"
    (folder / "c_1_v_1.mp4").write_bytes((folder / "01_01.mp4").read_bytes())
    with pytest.raises(SourceError, match="clip 01_01 also named"):
        normalise_source(registry()["surgicalactions160"], root)
