"""Endoscapes2023: what a user checks on the normalised tables of the native-layout sample."""

import json
import shutil

import pytest

from public_converters.media import check_media
from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("endoscapes")
    sample_module("endoscapes").write(root)
    return root


@pytest.fixture(scope="module")
def tables(root):
    return normalise_source(registry()["endoscapes"], root).tables


def _frame(tables, video, index):
    return next(f for f in tables.frames if (f.video_id, f.frame_index) == (video, index))


def test_cvs_only_on_keyframes_not_the_causal_fill(tables):
    # 1_29400 carries ds [1/3, 1/3, 0] copied from the last keyframe, but is_ds_keyframe is false
    assert _frame(tables, "1", 29400).cvs is None
    assert _frame(tables, "1", 29375).cvs == pytest.approx([1 / 3, 1 / 3, 0.0], abs=1e-3)
    assert _frame(tables, "1", 29500).cvs == pytest.approx([2 / 3, 1.0, 0.0], abs=1e-3)
    cvs_frames = sorted((f.video_id, f.frame_index) for f in tables.frames if f.cvs is not None)
    assert cvs_frames == [("1", 29375), ("1", 29500), ("1", 29625), ("121", 1000), ("121", 1125), ("162", 500)]


def test_frame_indices_are_the_25fps_numbers_of_the_file_names(tables):
    assert {v.video_id: v.fps for v in tables.videos} == {"1": 25, "121": 25, "162": 25}
    assert _frame(tables, "121", 1125).image_path == "all/121_1125.jpg"


def test_boxes_from_coco_pixel_xywh(tables):
    # val frame 121_1000: tool box [0, 0, 64, 48] covers the whole 64x48 image; cystic plate at (30, 2) size 4x4
    by_label = {i.label: i for i in tables.instances if (i.video_id, i.frame_index) == ("121", 1000)}
    instrument = by_label["surgical instrument"]
    assert instrument.kind == "tool" and instrument.box == [0.0, 0.0, 1000.0, 1000.0]
    assert by_label["cystic plate"].kind == "anatomy"
    assert by_label["cystic plate"].box == pytest.approx([468.8, 41.7, 531.2, 125.0], abs=0.1)
    assert by_label["cystic plate"].mask is None


def test_seg50_rle_with_iscrowd_0_replaces_the_bbox_annotations(tables):
    instances = [i for i in tables.instances if (i.video_id, i.frame_index) == ("1", 29375)]
    assert sorted(i.label for i in instances) == ["cystic artery", "gallbladder"]  # not the BBox201 tool
    gallbladder = next(i for i in instances if i.label == "gallbladder")
    assert gallbladder.mask["size"] == [48, 64]
    assert gallbladder.box == pytest.approx([12 / 64 * 1000, 10 / 48 * 1000, 36 / 64 * 1000, 28 / 48 * 1000], abs=0.1)
    frame = _frame(tables, "1", 29375)
    assert frame.anatomy == ["cystic artery", "gallbladder"] and frame.tools == []


def test_presence_annotated_and_empty_versus_not_annotated(tables):
    empty = _frame(tables, "162", 500)  # a detection keyframe with no box: annotated, nothing present
    assert empty.tools == [] and empty.anatomy == []
    cvs_only = _frame(tables, "1", 29500)  # a CVS keyframe without boxes: presence not annotated
    assert cvs_only.tools is None and cvs_only.anatomy is None
    assert _frame(tables, "1", 29400).anatomy == ["calot triangle", "cystic duct"]


def test_official_split(tables):
    assert {v.video_id: v.split for v in tables.videos} == {"1": "train", "121": "validation", "162": "test"}
    official = registry()["endoscapes"].split_variants["official"]
    assert [official[str(n)] for n in (120, 121, 161, 162, 201)] == [
        "train",
        "validation",
        "validation",
        "test",
        "test",
    ]


def test_split_folders_are_symlinks_and_an_extraction_without_all_still_reads(root, tmp_path):
    assert (root / "train" / "1_29375.jpg").is_symlink()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)  # resolves the links into real files, as a symlink-unaware tool would
    shutil.rmtree(copy / "all")
    normalised = normalise_source(registry()["endoscapes"], copy)
    check_media(normalised)
    assert _frame(normalised.tables, "1", 29375).image_path == "train/1_29375.jpg"


def test_a_video_in_the_wrong_split_folder_is_an_error(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "val_vids.txt").write_text("121\n5\n")
    with pytest.raises(SourceError, match="val_vids.txt"):
        normalise_source(registry()["endoscapes"], copy)


def test_metadata_csv_must_agree_with_the_coco_cvs(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "all_metadata.csv"
    path.write_text(path.read_text().replace("\n1,29500,0.556,0.667,1.000,", "\n1,29500,0.556,0.000,1.000,"))
    with pytest.raises(SourceError, match=r"all_metadata.csv, row 4: CVS \[0.0, 1.0, 0.0\] disagrees"):
        normalise_source(registry()["endoscapes"], copy)


def test_split_lists_written_by_numpy_savetxt_are_read(root, tmp_path):
    # the sample's train/val lists hold "1.000000000000000000e+00", as numpy savetxt writes them; test's hold "162"
    assert (root / "train_vids.txt").read_text() == "1.000000000000000000e+00\n"
    assert (root / "test_vids.txt").read_text() == "162\n"
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "val_vids.txt").write_text("1.210000000000000000e+02\n1.500000000000000000e+00\n")
    with pytest.raises(SourceError, match=r"val_vids.txt, row 2: '1.500000000000000000e\+00' is not a whole video"):
        normalise_source(registry()["endoscapes"], copy)
    (copy / "val_vids.txt").write_text("1.210000000000000000e+02\n1.220000000000000000e+02\n")  # 122: no images
    normalise_source(registry()["endoscapes"], copy)
    (copy / "val_vids.txt").write_text("1.220000000000000000e+02\n")  # 121 has images in val/ but is not listed
    with pytest.raises(SourceError, match=r"val_vids.txt: videos \['121'\] are in val/ but not listed"):
        normalise_source(registry()["endoscapes"], copy)


def test_frames_are_keyed_by_file_name_not_by_the_coco_image_id(root, tables):
    # the release's image id is int(f"{vid}0{frame}") (1_29375.jpg -> 1029375); the reader does not decode it
    images = json.loads((root / "train" / "annotation_coco.json").read_text())["images"]
    assert {image["file_name"]: image["id"] for image in images} == {"1_29375.jpg": 1029375, "1_29400.jpg": 1029400}
    assert _frame(tables, "1", 29375).image_path == "all/1_29375.jpg"
