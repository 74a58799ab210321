"""EndoVis2017: one label folder per instrument (names vary per sequence), parts folded into the instrument type,
merged type masks for the test set, split-keyed ids."""

import pytest

from public_converters.normalise import normalise_source
from public_converters.sources.endovis2017 import instrument_type
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("endovis2017")
    sample_module("endovis2017").write(root)
    return root


@pytest.fixture(scope="module")
def tables(root):
    return normalise_source(registry()["endovis2017"], root).tables


def _instances(tables, video, frame):
    return [i for i in tables.instances if (i.video_id, i.frame_index) == (video, frame)]


@pytest.mark.parametrize(
    ("folder", "native"),
    [
        ("Left_Prograsp_Forceps_labels", "Prograsp Forceps"),
        ("Large_Needle_Driver_Right_labels", "Large Needle Driver"),
        ("Prograsp_Forceps", "Prograsp Forceps"),
        ("Right_Vessel_Sealer", "Vessel Sealer"),
        ("Maryland_Bipolar_Forceps_labels", "Maryland Bipolar Forceps"),
        ("Other_labels", "Other"),
    ],
)
def test_folder_name_variants_give_the_instrument_type(folder, native):
    assert instrument_type(folder) == native


def test_training_and_test_parts_are_separate_videos_with_native_frame_numbers(tables):
    assert {v.video_id: v.split for v in tables.videos} == {
        "train_seq_1": "train",
        "train_seq_4": "train",
        "train_seq_7": "train",
        "test_seq_1": "test",
        "test_seq_9": "test",
    }
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert (
        frames["test_seq_1", 225].image_path == "instrument_1_4_testing/instrument_dataset_1/left_frames/frame225.png"
    )
    assert frames["train_seq_1", 0].tools == ["bipolar forceps", "other instrument", "prograsp forceps"]
    assert frames["train_seq_1", 1].tools == ["bipolar forceps", "other instrument"]  # the prograsp left the view


def test_an_instrument_folder_gives_one_box_around_all_its_parts(tables):
    by_label = {i.label: i for i in _instances(tables, "train_seq_1", 0)}
    # Maryland bipolar (slot 1): shaft, wrist and claspers over rows 18-23, columns 0-43
    assert by_label["bipolar forceps"].box == [0.0, 375.0, 687.5, 500.0]
    assert by_label["other instrument"].box == [0.0, 666.7, 687.5, 791.7]  # probe value 40 included
    drivers = [i for i in _instances(tables, "train_seq_4", 0) if i.label == "large needle driver"]
    assert len(drivers) == 2  # left and right folders of one type


def test_merged_test_type_masks_split_into_components(tables):
    for video, frame in (("test_seq_1", 225), ("test_seq_9", 0)):  # with and without the gt/ level
        found = _instances(tables, video, frame)
        prograsp = [i.box for i in found if i.label == "prograsp forceps"]
        assert prograsp == [[31.2, 41.7, 468.8, 208.3], [531.2, 625.0, 968.8, 833.3]]  # top first
        assert [i.label for i in found if i.label != "prograsp forceps"] == ["bipolar forceps"]


def test_unseen_variant_keeps_only_the_new_recordings_for_testing(root):
    tables = normalise_source(registry()["endovis2017"], root, split_variant="unseen-9-10").tables
    splits = {v.video_id: v.split for v in tables.videos}
    assert splits["test_seq_1"] == "unused" and splits["test_seq_9"] == "test"
