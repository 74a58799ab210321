"""EndoVis2018: RGB class masks decoded with the union of the releases' palettes, repairs applied, split-keyed ids."""

import pytest

from public_converters.normalise import normalise_source
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("endovis2018")
    sample_module("endovis2018").write(root)
    return root


@pytest.fixture(scope="module")
def tables(root):
    return normalise_source(registry()["endovis2018"], root).tables


def _labels(tables, video, frame):
    return sorted(i.label for i in tables.instances if i.video_id == video and i.frame_index == frame)


def test_train_and_test_sequences_of_the_same_number_are_different_videos(tables):
    assert {v.video_id: v.split for v in tables.videos} == {
        "train_seq_1": "train",
        "train_seq_5": "train",
        "test_seq_1": "test",
    }
    assert [(f.video_id, f.frame_index) for f in tables.frames] == [
        ("test_seq_1", 0),
        ("train_seq_1", 0),
        ("train_seq_1", 1),
        ("train_seq_5", 0),
    ]
    test_frame = next(f for f in tables.frames if f.video_id == "test_seq_1")
    assert test_frame.image_path == "test_data/seq_1-20180921-001/seq_1/left_frames/frame000.png"


def test_the_repaired_mask_replaces_the_release_mask(tables):
    assert "clamp" in _labels(tables, "train_seq_1", 1)
    assert "clamp" not in _labels(tables, "train_seq_1", 0)


def test_palette_is_the_union_and_policies_apply(tables):
    # release 1's labels.json does not list small-intestine; release 2's does
    frame = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("train_seq_1", 0))
    assert frame.anatomy == ["kidney parenchyma", "small intestine"]
    assert frame.tools == ["instrument clasper", "instrument shaft"]
    by_label = {i.label: i for i in tables.instances if (i.video_id, i.frame_index) == ("train_seq_1", 0)}
    assert by_label["small intestine"].box is None  # semantic
    assert by_label["kidney parenchyma"].box == [62.5, 500.0, 468.8, 916.7]  # single
    assert by_label["instrument shaft"].box == [468.8, 291.7, 937.5, 416.7]
    # the test labels.json (RGBA colours) adds covered-kidney
    assert "covered kidney" in _labels(tables, "test_seq_1", 0)


def test_common_validation_variant(root):
    tables = normalise_source(registry()["endovis2018"], root, split_variant="validation-2-5-9-15").tables
    assert {v.video_id: v.split for v in tables.videos}["train_seq_5"] == "validation"
