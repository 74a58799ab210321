"""EndoVis2017: one label folder per instrument (names vary per sequence), parts folded into the instrument type,
one box per instrument across the real masks' 3-4 px seams, merged type masks for the test set, split-keyed ids."""

import numpy as np
import pytest

from public_converters.normalise import normalise_source
from public_converters.samples._common import write_image
from public_converters.seg_to_box import FileMask, components, instances_from_mask
from public_converters.sources.endovis2017 import MERGED_MASK, TOOLS, TYPE_PALETTE, instrument_type
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


def test_a_frame_with_three_instruments_whose_parts_are_parted_by_seams_gives_three_boxes(tables):
    # train_seq_1 frame 0: three instrument folders, each mask's shaft, wrist and tip parted by 3-4 px unlabelled
    # lines (as in the real ground truth); boxing connected regions gave 9 boxes, one per part
    found = _instances(tables, "train_seq_1", 0)
    assert sorted((i.label, i.box) for i in found) == [
        ("bipolar forceps", [0.0, 375.0, 687.5, 500.0]),
        ("other instrument", [0.0, 666.7, 687.5, 791.7]),
        ("prograsp forceps", [0.0, 83.3, 687.5, 208.3]),
    ]
    frame = next(f for f in tables.frames if (f.video_id, f.frame_index) == ("train_seq_1", 0))
    assert len(frame.tools) == len(found) == 3


def test_merged_test_masks_close_seams_but_keep_instruments_of_one_type_apart(tables):
    found = _instances(tables, "test_seq_1", 225)  # two prograsp forceps and a bipolar forceps, each with seams
    assert len(found) == 3
    (bipolar,) = [i.box for i in found if i.label == "bipolar forceps"]
    assert bipolar == [156.2, 333.3, 781.2, 500.0]  # columns 10-49 across both seams


def test_pieces_at_most_max_gap_apart_join_wider_gaps_do_not():
    mask = np.zeros((5, 24), dtype=bool)
    mask[1:4, 0:4] = mask[1:4, 8:11] = mask[1:4, 16:19] = True  # gaps of 4 and 5 columns
    assert len(components(mask, 1)[0]) == 3
    joined, specks = components(mask, 1, max_gap=4)
    assert (len(joined), specks) == (2, 0)
    assert joined[0].sum() == 12 + 9 and not joined[0][:, 4:8].any()  # the instance keeps its own pixels only


def _merged_boxes(tmp_path, mask: np.ndarray) -> list[tuple[str, list[float]]]:
    """(tool, box) of a merged type map read as the reader reads the test labels (``MERGED_MASK``)."""
    write_image(tmp_path / "frame225.png", mask)
    ref = FileMask("test_seq_1", 225, "frame225.png", TYPE_PALETTE, mask.shape, **MERGED_MASK)
    kinds = dict.fromkeys(TOOLS, "tool")
    policies = dict.fromkeys(TOOLS, "components")
    instances, _ = instances_from_mask(ref, tmp_path, policies, kinds, TOOLS)
    return [(i.label, i.box) for i in instances]


def test_a_merged_map_gives_one_box_per_instrument_across_3_to_4_px_seams(tmp_path):
    """Real merged masks part one instrument's shaft, wrist and claspers by 3-4 px: a real frame of 3 instruments gave
    4 boxes with pieces at most 2 px apart joined, 3 with at most 4 px. Two instruments of one type 6 px apart (and
    an occluded instrument's pieces ~15 px apart) stay separate."""
    mask = np.zeros((60, 100), dtype=np.uint8)
    mask[5:15, 0:30] = 2  # prograsp forceps: shaft 0-29, a 4-px seam, claspers 34-49
    mask[5:15, 34:50] = 2
    mask[5:15, 56:90] = 2  # a second prograsp forceps, 6 px to the right of the first
    mask[30:40, 0:40] = 1  # bipolar forceps: shaft 0-39, a 3-px seam, wrist 43-59
    mask[30:40, 43:60] = 1
    assert _merged_boxes(tmp_path, mask) == [
        ("bipolar forceps", [0.0, 500.0, 600.0, 666.7]),
        ("prograsp forceps", [0.0, 83.3, 500.0, 250.0]),
        ("prograsp forceps", [560.0, 83.3, 900.0, 250.0]),
    ]
    mask[50:58, 0:20] = mask[50:58, 35:60] = 1  # an occluded bipolar: two pieces 15 px apart, two boxes
    assert [label for label, _ in _merged_boxes(tmp_path, mask)].count("bipolar forceps") == 3


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
