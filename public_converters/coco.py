"""COCO-style annotation files, read one way for every source that ships them (Endoscapes, GraSP, GynSurg).

Readers keep what is peculiar to their release (how an image record names its video and frame, extra keys such as
Endoscapes' ``ds`` or GraSP's ``actions``); this module does what COCO files share: loading with errors that name
the file, indexing ``images`` and category lists by id, checking every annotation points at a known image and
category, and turning an annotation into a [0, 1000] box (from the pixel ``[x, y, w, h]`` or from its mask) and a
COCO RLE mask whose size must be the image's. Every error is a ``SourceError`` naming the file and the row
(``images[3]``, ``annotations[12]``); nothing is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import NamedTuple

from public_converters.schema import SourceError, finite_number, normalise_box, read_text
from public_converters.seg_to_box import box_of_rle, rle_from_coco


COCO_LISTS = ("images", "annotations", "categories")


class Annotation(NamedTuple):
    """One validated annotation: its row (``annotations[i]``), the record, its image's key and record, its category."""

    row: str
    record: dict
    key: Hashable
    image: dict
    category: str | None


def read_json(path: Path, fix: str = "re-download or re-extract this file") -> object:
    """Any JSON annotation file; a missing or unparsable file is an error naming it (and the line)."""
    text = read_text(path, fix)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SourceError(path, f"not valid JSON ({error})", row=error.lineno, fix=fix) from error


def load(path: Path, lists: tuple[str, ...] = COCO_LISTS, fix: str = "re-download or re-extract this file") -> dict:
    """A COCO file: a JSON object holding the given top-level lists."""
    data = read_json(path, fix)
    missing = [key for key in lists if not isinstance(data, dict) or not isinstance(data.get(key), list)]
    if missing:
        raise SourceError(path, f"not a COCO file: top-level lists {missing} missing", fix=f"expected lists {lists}")
    return data


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def index_categories(data: dict, path: Path, key: str = "categories") -> dict[int, str]:
    """id -> native name of one category list (``categories``, or GraSP's ``actions_categories`` ...)."""
    if not isinstance(data.get(key), list):
        raise SourceError(path, f"no {key!r} list", fix="the file must carry its category list")
    names: dict[int, str] = {}
    for index, category in enumerate(data[key]):
        row = f"{key}[{index}]"
        if not isinstance(category, dict) or not _is_int(category.get("id")) or "name" not in category:
            raise SourceError(path, f"category {str(category)[:80]} needs an integer id and a name", row=row)
        if category["id"] in names:
            raise SourceError(path, f"category id {category['id']} listed twice", row=row)
        names[category["id"]] = str(category["name"])
    return names


def index_images(
    data: dict, path: Path, frame_of: Callable[[dict, str], Hashable], required: tuple[str, ...] = ()
) -> dict[int, tuple[Hashable, dict]]:
    """image id -> (frame key, record). Every record needs an integer id, positive integer width and height and the
    ``required`` keys; ``frame_of(record, row)`` derives the source's frame key (and raises for a bad name). An id or
    a frame key listed twice is an error."""
    images: dict[int, tuple[Hashable, dict]] = {}
    keys: set = set()
    for index, image in enumerate(data["images"]):
        row = f"images[{index}]"
        if not isinstance(image, dict) or not _is_int(image.get("id")):
            raise SourceError(path, f"image record {str(image)[:80]} has no integer id", row=row)
        if not all(_is_int(image.get(side)) and image[side] > 0 for side in ("width", "height")):
            raise SourceError(path, "image record without positive integer width and height", row=row)
        missing = [key for key in required if key not in image]
        if missing:
            raise SourceError(path, f"image record lacks {missing}", row=row)
        key = frame_of(image, row)
        if image["id"] in images or key in keys:
            raise SourceError(path, f"image id {image['id']} or frame {key} listed twice", row=row)
        images[image["id"]] = (key, image)
        keys.add(key)
    return images


def annotations(
    data: dict,
    path: Path,
    images: dict[int, tuple[Hashable, dict]],
    categories: dict[int, str] | None = None,
    category_keys: tuple[str, ...] = ("category_id",),
) -> Iterator[Annotation]:
    """The file's annotations, each on a known image and (where ``categories`` is given) of a known category, read
    from the first of ``category_keys`` the record holds."""
    for index, record in enumerate(data["annotations"]):
        row = f"annotations[{index}]"
        if not isinstance(record, dict) or record.get("image_id") not in images:
            image_id = record.get("image_id") if isinstance(record, dict) else None
            raise SourceError(path, f"annotation on image_id {image_id!r}, which is not in images[]", row=row)
        category = None
        if categories is not None:
            value = next((record[key] for key in category_keys if key in record), None)
            if not _is_int(value) or value not in categories:
                raise SourceError(path, f"category id {value!r} is not in the file's category list", row=row)
            category = categories[value]
        key, image = images[record["image_id"]]
        yield Annotation(row, record, key, image, category)


def pixel_box(annotation: Annotation, path: Path) -> list[float]:
    """The COCO pixel ``bbox`` ``[x, y, w, h]`` -> [x1, y1, x2, y2] in [0, 1000] of the annotation's image. NaN,
    infinity (JSON ``NaN`` / ``Infinity`` parse) or a negative width or height is an error naming the row; a corner
    slightly outside the image is clipped to it, as annotation tools write them."""
    bbox = annotation.record.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, int | float) for v in bbox)):
        raise SourceError(path, f"bbox {bbox!r} is not [x, y, w, h] (four numbers)", row=annotation.row)
    x, y = (finite_number(v, path, annotation.row, f"bbox {name}") for name, v in zip("xy", bbox[:2], strict=True))
    w, h = (
        finite_number(v, path, annotation.row, f"bbox {name}", minimum=0)
        for name, v in zip(("width", "height"), bbox[2:], strict=True)
    )
    return normalise_box(x, y, x + w, y + h, annotation.image["width"], annotation.image["height"])


def mask(annotation: Annotation, path: Path) -> dict:
    """The ``segmentation`` (polygons, RLE or uncompressed RLE) as COCO RLE; its size must be the image's."""
    segmentation = annotation.record.get("segmentation")
    height, width = annotation.image["height"], annotation.image["width"]
    if not segmentation:
        raise SourceError(path, "annotation without a segmentation", row=annotation.row)
    try:
        rle = rle_from_coco(segmentation, height, width)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise SourceError(path, f"segmentation is not COCO RLE or polygons ({error})", row=annotation.row) from error
    if rle["size"] != [height, width]:
        raise SourceError(
            path,
            f"mask size {rle['size']} is not the image's {[height, width]}",
            row=annotation.row,
            fix="the mask does not belong to this image or was resized",
        )
    return rle


def geometry(annotation: Annotation, path: Path, *, with_mask: bool, box_from_mask: bool = False):
    """(box, mask) of an instance: the box from the pixel ``bbox``, or (where the source's boxes are not trusted)
    the tight box of the mask (None for an empty mask); the mask when asked for, else None."""
    rle = mask(annotation, path) if with_mask or box_from_mask else None
    box = box_of_rle(rle) if box_from_mask else pixel_box(annotation, path)
    return box, rle if with_mask else None
