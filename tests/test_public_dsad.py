"""DSAD: what a user checks on the normalised tables of the native-layout sample."""

import shutil

import numpy as np
import pytest
from PIL import Image

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("dsad")
    sample_module("dsad").write(root)
    return root


@pytest.fixture(scope="module")
def tables(root):
    return normalise_source(registry()["dsad"], root).tables


def _frame(tables, video, index):
    return next(f for f in tables.frames if (f.video_id, f.frame_index) == (video, index))


def _instances(tables, video, index):
    return {i.label: i for i in tables.instances if (i.video_id, i.frame_index) == (video, index)}


def test_a_surgery_is_a_video_numbered_across_its_structure_folders(tables):
    frames = [(f.frame_index, f.image_path) for f in tables.frames if f.video_id == "03"]
    assert frames == [(0, "abdominal_wall/03/image00.png"), (1, "liver/03/image00.png"), (2, "liver/03/image01.png")]
    assert all(v.fps is None and (v.width, v.height) == (64, 48) for v in tables.videos)


def test_policies_single_box_for_organs_presence_only_for_the_abdominal_wall(tables):
    wall = _instances(tables, "03", 0)["abdominal wall"]
    assert wall.box is None and wall.mask is None
    liver = _instances(tables, "03", 1)["liver"]  # a 1-bit mask (values 0/1): rectangle x 10-30, y 5-15
    assert liver.box == pytest.approx([156.2, 104.2, 468.8, 312.5], abs=0.1)
    assert liver.mask["size"] == [48, 64]


def test_weak_labels_give_presence_in_every_accepted_layout(tables):
    assert _frame(tables, "03", 0).anatomy == ["abdominal wall", "colon"]  # header with 12 columns (uterus)
    assert _frame(tables, "03", 2).anatomy == ["liver", "stomach"]  # no header: the paper's 11 columns
    assert _frame(tables, "01", 1).anatomy == ["colon", "small intestine"]  # header with 11 columns


def test_multilabel_masks_parse_structure_names_with_underscores(tables):
    assert sorted(_instances(tables, "07", 0)) == ["abdominal wall", "stomach"]
    assert _instances(tables, "07", 0)["stomach"].box == pytest.approx([125.0, 166.7, 437.5, 500.0], abs=0.1)
    assert _frame(tables, "07", 1).anatomy == []  # annotated, nothing visible
    assert not _instances(tables, "07", 1)


def test_split_is_by_surgery(tables):
    assert {v.video_id: v.split for v in tables.videos} == {"01": "train", "03": "validation", "07": "test"}
    assert len(registry()["dsad"].split_variants["kolbinger2023"]) == 32


def test_weak_labels_without_an_image_column_are_refused(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "colon/01/weak_labels.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line.split(",", 1)[1] for line in lines) + "\n")
    with pytest.raises(SourceError, match="no image column"):
        normalise_source(registry()["dsad"], copy)


def test_a_grey_level_outside_the_binary_palette_is_an_error(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    mask = np.zeros((48, 64), dtype=np.uint8)
    mask[:10, :10] = 128
    Image.fromarray(mask).save(copy / "colon/01/mask00.png")
    with pytest.raises(
        SourceError, match=r"colon/01/mask00.png: a grey mask of uint8 values \(PIL mode L\): values 128 are not in"
    ):
        normalise_source(registry()["dsad"], copy)


def test_weak_labels_numbered_from_1_do_not_shift_silently(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    path = copy / "colon/01/weak_labels.csv"
    path.write_text(path.read_text().replace("image01.png", "image02.png").replace("image00.png", "image01.png"))
    with pytest.raises(SourceError, match=r"colon/01/weak_labels.csv: rows for images \[2\]"):
        normalise_source(registry()["dsad"], copy)
