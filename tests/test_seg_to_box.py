"""Seg-to-box policies (the Sureon paper's C.2) on masks built to exercise each one."""

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_utils

from public_converters.schema import SemanticMask, SourceError
from public_converters.seg_to_box import box_of_rle, instances_from_mask, rle_from_polygons


PALETTE = {0: None, 1: "gallbladder", 2: "blood", 3: "abdominal wall", 4: "clip"}
POLICIES = {"gallbladder": "single", "blood": "components", "abdominal wall": "semantic", "clip": "components"}
KINDS = {"gallbladder": "anatomy", "blood": "anatomy", "abdominal wall": "anatomy", "clip": "tool"}
CANONICAL = {label: label for label in KINDS}


def scene() -> np.ndarray:
    """100x50 (w x h): a two-part gallbladder, two blood pools (the lower one more to the left), an abdominal wall
    strip, and a speck of clip smaller than the speck threshold."""
    mask = np.zeros((50, 100), dtype=np.uint8)
    mask[5:15, 10:20] = 1
    mask[30:40, 60:80] = 1  # second part of the same gallbladder
    mask[2:6, 70:90] = 2  # upper blood pool, right
    mask[40:48, 5:25] = 2  # lower blood pool, left
    mask[0:50, 95:100] = 3
    return mask


def convert(tmp_path, pixels, palette=PALETTE, size=None, min_fraction=1e-4):
    Image.fromarray(pixels).save(tmp_path / "mask.png")
    ref = SemanticMask("v1", 7, "mask.png", palette, size)
    return instances_from_mask(ref, tmp_path, POLICIES, KINDS, CANONICAL, min_fraction)


def test_each_policy_on_its_class(tmp_path):
    instances, stats = convert(tmp_path, scene())
    by_label = {}
    for instance in instances:
        by_label.setdefault(instance.label, []).append(instance)
    (gallbladder,) = by_label["gallbladder"]  # two parts -> one union box
    assert gallbladder.box == [100.0, 100.0, 800.0, 800.0]
    blood = by_label["blood"]  # two pools -> two boxes, top first
    assert [b.box for b in blood] == [[700.0, 40.0, 900.0, 120.0], [50.0, 800.0, 250.0, 960.0]]
    assert [b.instance_id for b in blood] == [0, 1]
    (wall,) = by_label["abdominal wall"]  # presence only
    assert wall.box is None and wall.mask is None
    assert stats == {"single": 1, "components": 2, "semantic": 1}


def test_masks_are_coco_rle_of_exactly_the_pixels(tmp_path):
    pixels = scene()
    instances, _ = convert(tmp_path, pixels)
    gallbladder = next(i for i in instances if i.label == "gallbladder")
    decoded = mask_utils.decode({"size": gallbladder.mask["size"], "counts": gallbladder.mask["counts"].encode()})
    assert (decoded.astype(bool) == (pixels == 1)).all()
    assert box_of_rle(gallbladder.mask) == gallbladder.box


def test_components_are_eight_connected_and_specks_are_counted(tmp_path):
    pixels = np.zeros((50, 100), dtype=np.uint8)
    pixels[10, 10] = pixels[11, 11] = 4  # diagonal neighbours: one clip under 8-connectivity
    pixels[30:34, 50:54] = 4
    instances, stats = convert(tmp_path, pixels, min_fraction=3 / 5000)
    assert len(instances) == 1 and instances[0].box == [500.0, 600.0, 540.0, 680.0]
    assert stats["specks"] == 1  # the 2-pixel diagonal clip is below 3 pixels, counted, not silently lost


def test_rgb_palettes_and_unknown_values(tmp_path):
    rgb = np.zeros((10, 10, 3), dtype=np.uint8)
    rgb[2:4, 2:4] = (255, 0, 0)
    palette = {(0, 0, 0): None, (255, 0, 0): "blood"}
    instances, _ = convert(tmp_path, rgb, palette)
    assert [i.label for i in instances] == ["blood"]
    rgb[0, 0] = (9, 9, 9)
    with pytest.raises(SourceError, match=r"mask\.png.*\(9,9,9\)"):
        convert(tmp_path, rgb, palette)


def test_a_mask_of_the_wrong_size_names_the_file(tmp_path):
    with pytest.raises(SourceError, match=r"mask\.png: mask is 100x50, expected 200x100"):
        convert(tmp_path, scene(), size=(100, 200))


def test_truncated_mask_names_the_file(tmp_path):
    Image.fromarray(scene()).save(tmp_path / "mask.png")
    data = (tmp_path / "mask.png").read_bytes()
    (tmp_path / "mask.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"mask\.png: cannot decode image"):
        instances_from_mask(SemanticMask("v1", 0, "mask.png", PALETTE), tmp_path, POLICIES, KINDS, CANONICAL)


def test_polygons_become_one_rle():
    rle = rle_from_polygons([[0, 0, 10, 0, 10, 10, 0, 10], [20, 20, 30, 20, 30, 30]], 40, 40)
    assert box_of_rle(rle)[0] == 0.0 and box_of_rle(rle)[2] >= 750.0


@pytest.mark.parametrize(
    ("polygons", "message"),
    [
        ([], "no polygon"),
        ([[0, 0, 10, 0, 10, 10], [20, 20, 30, 20]], "polygon 1 has 4 coordinates"),  # not dropped: an error
        ([[0, 0, 10, 0, 10]], "polygon 0 has 5 coordinates"),
        ([[0, 0, 10, 0, "10", 10]], "polygon 0 is not a flat list of numbers"),
    ],
)
def test_polygons_of_fewer_than_three_points_are_a_clear_error(polygons, message):
    with pytest.raises(ValueError, match=message):
        rle_from_polygons(polygons, 40, 40)


def test_instance_id_masks_keep_touching_instruments_apart(tmp_path):
    pixels = np.zeros((20, 40), dtype=np.uint8)
    pixels[5:15, 5:20] = 2
    pixels[5:15, 20:35] = 1  # touches instance 2: one component, two instruments
    Image.fromarray(pixels).save(tmp_path / "instances.png")
    ref = SemanticMask("v1", 0, "instances.png", {0: None, 1: "instrument", 2: "instrument"})
    found, stats = instances_from_mask(
        ref, tmp_path, {"instrument": "instances"}, {"instrument": "tool"}, {"instrument": "surgical instrument"}
    )
    assert [i.box for i in found] == [[500.0, 250.0, 875.0, 750.0], [125.0, 250.0, 500.0, 750.0]]  # value order
    assert stats == {"instances": 2}
