"""The shared COCO reading: every bad file, id, box or mask is an error naming the file and the row."""

import json

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from public_converters import coco
from public_converters.schema import SourceError


def _document() -> dict:
    """A 64x48 two-image COCO file: a box-only annotation and a polygon annotation."""
    return {
        "images": [
            {"id": 10, "file_name": "1_25.jpg", "width": 64, "height": 48},
            {"id": 11, "file_name": "1_50.jpg", "width": 64, "height": 48},
        ],
        "categories": [{"id": 1, "name": "grasper"}, {"id": 2, "name": "gallbladder"}],
        "annotations": [
            {"id": 1, "image_id": 10, "category_id": 1, "bbox": [16, 12, 32, 24]},
            {"id": 2, "image_id": 11, "category_id": 2, "bbox": [0, 0, 1, 1], "segmentation": [[8, 8, 40, 8, 40, 32]]},
        ],
    }


def _frame(image: dict, row: str) -> tuple[str, int]:
    video, frame = image["file_name"].removesuffix(".jpg").split("_")
    return video, int(frame)


def _write(tmp_path, document) -> object:
    path = tmp_path / "annotation_coco.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def _read(path):
    data = coco.load(path)
    images = coco.index_images(data, path, _frame)
    return list(coco.annotations(data, path, images, coco.index_categories(data, path)))


def test_annotations_carry_their_frame_key_image_and_category(tmp_path):
    path = _write(tmp_path, _document())
    found = _read(path)
    assert [(a.row, a.key, a.category) for a in found] == [
        ("annotations[0]", ("1", 25), "grasper"),
        ("annotations[1]", ("1", 50), "gallbladder"),
    ]
    # pixel [x, y, w, h] = (16, 12, 32, 24) in 64x48 is the middle quarter of the image
    assert coco.geometry(found[0], path, with_mask=False) == ([250.0, 250.0, 750.0, 750.0], None)


def test_box_from_the_mask_ignores_the_coco_bbox(tmp_path):
    path = _write(tmp_path, _document())
    box, rle = coco.geometry(_read(path)[1], path, with_mask=True, box_from_mask=True)
    assert rle["size"] == [48, 64]
    decoded = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()})
    assert decoded[10, 20] == 1 and decoded[40, 60] == 0 and 0 < int(np.sum(decoded)) < 32 * 24
    # triangle (8, 8)-(40, 8)-(40, 32): the box hugs the rasterised pixels (one pixel = 15.6 x 20.8 units)
    assert box == pytest.approx([8 / 64 * 1000, 8 / 48 * 1000, 40 / 64 * 1000, 32 / 48 * 1000], abs=16)
    assert box != coco.pixel_box(_read(path)[1], path)  # the COCO bbox [0, 0, 1, 1] is not used


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"images": [', r"annotation_coco.json, row 1: not valid JSON"),
        (
            '{"images": [], "annotations": []}',
            r"annotation_coco.json: not a COCO file: top-level lists \['categories'\]",
        ),
        ("[1, 2]", r"annotation_coco.json: not a COCO file"),
    ],
)
def test_a_file_that_is_not_coco_names_the_file(tmp_path, content, message):
    with pytest.raises(SourceError, match=message):
        coco.load(_write(tmp_path, content))


def test_a_missing_file_names_it_and_the_fix(tmp_path):
    with pytest.raises(SourceError, match=r"missing.json: file not found \(unpack the annotations\)"):
        coco.load(tmp_path / "missing.json", fix="unpack the annotations")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["annotations"][1].update(image_id=99), r"row annotations\[1\]: annotation on image_id 99"),
        (lambda d: d["annotations"][0].update(category_id=7), r"row annotations\[0\]: category id 7 is not"),
        (lambda d: d["images"][1].update(id=10), r"row images\[1\]: image id 10 or frame .* listed twice"),
        (lambda d: d["images"][1].update(file_name="1_25.jpg"), r"row images\[1\]: image id 11 or frame"),
        (lambda d: d["images"][0].pop("width"), r"row images\[0\]: image record without positive integer width"),
        (lambda d: d["categories"][1].update(id=1), r"row categories\[1\]: category id 1 listed twice"),
        (lambda d: d["categories"][0].update(id="1"), r"row categories\[0\]: category .* needs an integer id"),
    ],
)
def test_unknown_and_repeated_ids_name_the_file_and_row(tmp_path, change, message):
    document = _document()
    change(document)
    with pytest.raises(SourceError, match=r"annotation_coco.json, " + message):
        _read(_write(tmp_path, document))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.update(bbox=[16, 12, 32]), r"bbox \[16, 12, 32\] is not \[x, y, w, h\]"),
        (lambda a: a.update(bbox=[16, 12, "w", 24]), r"is not \[x, y, w, h\]"),
        (lambda a: a.update(segmentation=[[8, 8, 40, 8]]), r"polygon 0 has 4 coordinates"),
        (lambda a: a.pop("segmentation"), r"annotation without a segmentation"),
    ],
)
def test_a_bad_box_or_segmentation_names_the_file_and_annotation(tmp_path, change, message):
    document = _document()
    change(document["annotations"][1])
    path = _write(tmp_path, document)
    with pytest.raises(SourceError, match=r"annotation_coco.json, row annotations\[1\]: .*" + message):
        coco.geometry(_read(path)[1], path, with_mask=True)


def test_a_mask_of_another_size_than_its_image_names_the_file_and_annotation(tmp_path):
    document = _document()
    rle = mask_utils.encode(np.asfortranarray(np.ones((48, 128), dtype=np.uint8)))
    document["annotations"][1]["segmentation"] = {"size": [48, 128], "counts": rle["counts"].decode()}
    path = _write(tmp_path, document)
    with pytest.raises(SourceError, match=r"annotation_coco.json, row annotations\[1\]: mask size \[48, 128\] is not"):
        coco.geometry(_read(path)[1], path, with_mask=True)


def test_uncompressed_rle_becomes_compressed(tmp_path):
    document = _document()
    document["annotations"][1]["segmentation"] = {"size": [48, 64], "counts": [0, 48 * 10, 48 * 54]}
    path = _write(tmp_path, document)
    box, rle = coco.geometry(_read(path)[1], path, with_mask=True, box_from_mask=True)
    assert isinstance(rle["counts"], str) and box == [0.0, 0.0, 156.2, 1000.0]  # the first 10 of 64 columns
