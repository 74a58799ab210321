"""EndoVis2018: RGB class masks decoded with the union of the releases' palettes, repairs applied, split-keyed ids."""

import json
import re
import shutil

import pytest

from public_converters.items import image_items
from public_converters.normalise import normalise_source
from public_converters.samples._common import noise_image, write_image
from public_converters.schema import SourceError
from public_converters.sources.endovis2018 import LabelsEndEarly, native_name
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


@pytest.mark.parametrize("name", ["small-intestine", "intestine", "small intestine", "Small_Intestine"])
def test_every_spelling_of_the_intestine_is_the_one_label(name):
    assert native_name(name) == "small-intestine"


def test_a_release_that_names_the_colour_intestine_reads_as_small_intestine(root, tables):
    release_2 = json.loads((root / "miccai_challenge_release_2/labels.json").read_text())
    # release 2 names colour (124, 155, 5) "intestine", the test labels.json "small-intestine": no conflict
    assert {c["name"] for c in release_2 if c["color"] == [124, 155, 5]} == {"intestine"}
    assert "small intestine" in _labels(tables, "train_seq_5", 0)


TEST_SEQ_1 = "test_data/seq_1-20180921-001/seq_1"


def test_labels_one_frame_short_of_the_frames_warn_and_keep_the_frame_unlabelled(root, tmp_path):
    """Test sequence 3 of the release: 250 left frames, 249 label masks. A named warning with both counts, the last
    frame kept without labels and counted (frames in = labelled + unlabelled), nothing else lost."""
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    write_image(copy / TEST_SEQ_1 / "left_frames/frame001.png", noise_image("endovis2018-short"))
    normalised = normalise_source(registry()["endovis2018"], copy)
    warned = normalised.info()["warnings"][LabelsEndEarly.__name__]
    assert warned["count"] == 1
    assert re.search(
        r"seq_1/labels: 1 label masks for 2 left frames; frame001\.\.frame001", warned["cases"][0]["message"]
    )
    tables = normalised.tables
    frames = [f for f in tables.frames if f.video_id == "test_seq_1"]
    assert [(f.frame_index, f.tools) for f in frames] == [(0, ["instrument clasper", "instrument shaft"]), (1, None)]
    assert _labels(tables, "test_seq_1", 1) == []
    assert normalised.info()["read_counts"] == {f"left frames after the last label mask: {TEST_SEQ_1}/labels": 1}
    items, skipped = image_items(normalised)
    assert len(items) + sum(skipped.values()) == len(tables.frames) == 5
    assert skipped["frame without annotations"] == 1


def test_a_label_missing_before_the_last_one_is_still_an_error(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "miccai_challenge_2018_release_1/miccai_challenge_2018_release_1/seq_1/labels/frame000.png").unlink()
    with pytest.raises(SourceError, match=r"seq_1/labels/frame000.png: file not found"):
        normalise_source(registry()["endovis2018"], copy)
