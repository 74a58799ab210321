"""Seg-to-box (the Sureon paper's C.2): semantic class masks -> pseudo-instances with boxes and COCO RLE masks.

Per class, one of three policies, declared per source as data (``SourceSpec.mask_policies``):

- ``single``: structures that appear once (gallbladder, uterus): the union of all components, one tight box;
- ``components``: countable things (blood pools, clips): 8-connected components, each its own pseudo-instance,
  sorted top-to-bottom then left-to-right by centroid;
- ``semantic``: large background structures (abdominal wall, liver bed): presence only, no box;
- ``instances``: instance-id masks (HeiCo's ROBUST-MIS masks, one value per instrument): each value its own instance,
  in value order.

A reader that knows more about one mask file than its labels' policies say hands seg-to-box a ``FileMask`` (a
``SemanticMask`` with two more fields) rather than a second seg-to-box: ``policy`` overrides the labels' policies for
that file (a file that shows one object, such as EndoVis2017's one mask per instrument, is ``single`` however its parts
are cut apart), and ``max_gap`` joins the ``components`` of that file whose pixels are at most that many pixels apart
(annotation seams: EndoVis2017's ground truth leaves 3-4 px unlabelled lines between the parts of one instrument).

Components smaller than ``min_fraction`` of the image (annotation specks, 0.01 % by default; the Sureon paper gives no
threshold) are not made instances; they are counted in the returned statistics, never dropped unseen.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils
from scipy import ndimage

from builders.errors import InputError
from public_converters.schema import SEG_POLICIES, Instance, SemanticMask, SourceError


EIGHT_CONNECTED = np.ones((3, 3), dtype=bool)
DEFAULT_MIN_FRACTION = 1e-4


@dataclass(frozen=True)
class FileMask(SemanticMask):
    """A mask file whose reader knows how its pixels group into objects better than the labels' policies do.

    ``policy`` (one of ``SEG_POLICIES``; None keeps each label's own) applies to every label of this file: a file
    that holds one object whose label other files share (an EndoVis2017 instrument folder's mask, of a type two
    instruments of a merged test mask may share) is ``single`` here and ``components`` there. ``max_gap`` > 0 makes
    ``components`` join the pieces of a label whose pixels are at most ``max_gap`` pixels apart (8-connected: each
    piece is grown by ``ceil(max_gap / 2)`` pixels before labelling, so an odd gap rounds up to the next even one);
    the instances keep their own pixels, never the grown ones."""

    policy: str | None = None
    max_gap: int = 0

    def __post_init__(self) -> None:
        if self.policy is not None and self.policy not in SEG_POLICIES:
            raise ValueError(f"{self.path}: seg-to-box policy {self.policy!r} is not one of {SEG_POLICIES}")
        if self.max_gap < 0:
            raise ValueError(f"{self.path}: max_gap {self.max_gap} is negative")


def load_image(path: Path, mode: str | None = None) -> Image.Image:
    """Open and fully decode an image, turning a truncated or unreadable file into an error that names it."""
    try:
        with Image.open(path) as image:
            image.load()
            return image.convert(mode) if mode else image.copy()
    except FileNotFoundError as error:
        raise SourceError(path, "file not found", fix="check the source folder is complete") from error
    except (OSError, SyntaxError, ValueError) as error:
        raise SourceError(path, f"cannot decode image ({error})", fix="re-download or re-extract this file") from error


def _is_rgb(palette: dict) -> bool:
    return any(isinstance(key, tuple) for key in palette)


def _listed(values, rgb: bool, limit: int = 8) -> str:
    """Mask values as a reader of the mask writes them: ``(R,G,B)`` triples for a colour palette, else numbers."""
    values = [int(v) for v in values]
    shown = [f"({v >> 16},{(v >> 8) & 255},{v & 255})" if rgb else str(v) for v in values[:limit]]
    return ", ".join(shown) + (f" and {len(values) - limit} more" if len(values) > limit else "")


def mask_kind(image: Image.Image) -> str:
    """What a mask file is, in its own terms: colour or grey, the type of its values, PIL's mode (``a grey mask of
    uint16 values (PIL mode I;16)``)."""
    array = np.asarray(image)
    colour = "palette" if image.mode == "P" else "colour" if array.ndim == 3 else "grey"
    return f"a {colour} mask of {array.dtype} values (PIL mode {image.mode})"


def decode_mask(path: Path, palette: dict, size: tuple[int, int] | None = None) -> tuple[np.ndarray, str]:
    """Class-value image: grey masks as (H, W) ints; RGB masks packed as ``R<<16 | G<<8 | B`` (alpha dropped); and
    the mask's :func:`mask_kind`, for the messages. A mask of more than 8 bits a channel for a colour palette is an
    error naming its values as the file stores them (its RGB conversion would be meaningless)."""
    image = load_image(path)
    kind = mask_kind(image)
    array = np.asarray(image)
    if _is_rgb(palette):
        if array.dtype.itemsize > 1:  # 16-bit grey (I;16), 32-bit integers (I) or floats (F)
            raise SourceError(
                path,
                f"{kind}, values {_listed(np.unique(array), rgb=False)}, but this source's masks are 8-bit colour "
                f"masks (palette colours {_listed(sorted(map(_pack, palette)), rgb=True)})",
                fix="the mask was re-saved in another format; use the release's file",
            )
        array = np.asarray(image.convert("RGB"), dtype=np.int32)
        values = (array[..., 0] << 16) | (array[..., 1] << 8) | array[..., 2]
    else:
        values = array[..., 0] if array.ndim == 3 else array  # grey levels stored as R=G=B (+A)
        values = values.astype(np.int32)
    if size is not None and tuple(values.shape) != tuple(size):
        raise SourceError(
            path,
            f"mask is {values.shape[1]}x{values.shape[0]}, expected {size[1]}x{size[0]}",
            fix="the mask does not belong to this frame or was resized",
        )
    return values, kind


def _pack(key) -> int:
    return (key[0] << 16) | (key[1] << 8) | key[2] if isinstance(key, tuple) else int(key)


def class_masks(values: np.ndarray, palette: dict, path: Path, kind: str = "the mask") -> dict[str, list[np.ndarray]]:
    """label -> one boolean mask per pixel value of that label, in value order. A value absent from the palette is
    an error naming the mask's ``kind`` (:func:`mask_kind`), the values found and the palette's, in the mask's own
    terms: colours for a colour palette, numbers for a grey one."""
    lookup = {_pack(key): label for key, label in palette.items()}
    present = (
        np.unique(values) if values.min() < 0 or values.max() >= 65536 else np.flatnonzero(np.bincount(values.ravel()))
    )
    unknown = [int(v) for v in present if int(v) not in lookup]
    if unknown:
        rgb = _is_rgb(palette)
        what = "colours" if rgb else "values"
        stretched = not rgb and all(v % 257 == 0 and v // 257 in lookup for v in unknown)
        raise SourceError(
            path,
            f"{kind}: {what} {_listed(unknown, rgb)} are not in the source's palette ({what} "
            f"{_listed(sorted(lookup), rgb, limit=12)})",
            fix="they are the palette's values x 257: an 8-bit mask stretched to 16 bits; use the release's 8-bit file"
            if stretched
            else "a class the reader does not know, or a mask re-saved in another format or depth",
        )
    masks: dict[str, list[np.ndarray]] = {}
    for value in present:
        label = lookup[int(value)]
        if label is not None:
            masks.setdefault(label, []).append(values == value)
    return masks


def encode_rle(mask: np.ndarray) -> dict:
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}


def tight_box(mask: np.ndarray) -> list[float]:
    """[x1, y1, x2, y2] in [0, 1000] around the mask's pixels (x2, y2 at the far pixel edge)."""
    height, width = mask.shape
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    corners = (cols[0] / width, rows[0] / height, (cols[-1] + 1) / width, (rows[-1] + 1) / height)
    return [round(float(value) * 1000, 1) for value in corners]


def components(mask: np.ndarray, min_pixels: int, max_gap: int = 0) -> tuple[list[np.ndarray], int]:
    """8-connected components ordered top-to-bottom then left-to-right by centroid; and the count of specks.

    With ``max_gap`` > 0, pieces at most ``max_gap`` pixels apart are one component (``FileMask``): the mask is grown
    by ``ceil(max_gap / 2)`` pixels, labelled, and each label cut back to the mask's own pixels. Sizes and centroids
    come from one ``bincount`` pass over the labelled pixels (scipy's per-label statistics cost several times more on
    full-size frames)."""
    if max_gap > 0:
        grown = ndimage.binary_dilation(mask, structure=EIGHT_CONNECTED, iterations=-(-max_gap // 2))
        labelled, count = ndimage.label(grown, structure=EIGHT_CONNECTED)
        labelled[~mask] = 0  # every grown component holds pixels of the mask: no label is left empty
    else:
        labelled, count = ndimage.label(mask, structure=EIGHT_CONNECTED)
    if count == 0:
        return [], 0
    flat = labelled.ravel()
    pixels = np.flatnonzero(flat)
    ids = flat[pixels]
    rows, cols = np.divmod(pixels, mask.shape[1])
    sizes = np.bincount(ids, minlength=count + 1)[1:]
    centre_rows = np.bincount(ids, weights=rows, minlength=count + 1)[1:] / sizes
    centre_cols = np.bincount(ids, weights=cols, minlength=count + 1)[1:] / sizes
    kept = sorted(
        (float(cy), float(cx), i + 1)
        for i, (cy, cx, size) in enumerate(zip(centre_rows, centre_cols, sizes, strict=True))
        if size >= min_pixels
    )
    return [labelled == i for _, _, i in kept], count - len(kept)


def instances_from_mask(
    ref: SemanticMask,
    root: Path,
    policies: dict[str, str],
    kinds: dict[str, str],
    canonical: dict[str, str],
    min_fraction: float = DEFAULT_MIN_FRACTION,
) -> tuple[list[Instance], Counter]:
    """Pseudo-instances of one mask file; ``kinds`` / ``canonical`` map the native label to tool|anatomy / name. A
    ``FileMask``'s own policy and gap win over the labels' policies."""
    path = root / ref.path
    own_policy, max_gap = getattr(ref, "policy", None), getattr(ref, "max_gap", 0)
    values, kind = decode_mask(path, ref.palette, ref.size)
    stats: Counter = Counter()
    instances: list[Instance] = []
    min_pixels = max(1, math.ceil(min_fraction * values.size - 1e-9))
    for label, value_masks in sorted(class_masks(values, ref.palette, path, kind).items()):
        policy = own_policy or policies[label]
        mask = np.logical_or.reduce(value_masks)
        kind, name = kinds[label], canonical[label]
        specks = 0
        if policy == "semantic":
            parts = [None]
        elif policy == "instances":
            parts = [part for part in value_masks if part.sum() >= min_pixels]
            specks = len(value_masks) - len(parts)
        elif policy == "single":
            parts = [mask] if mask.sum() >= min_pixels else []
            specks = 1 - len(parts)
        else:
            parts, specks = components(mask, min_pixels, max_gap)
        if specks:
            stats["specks"] += specks
        for index, part in enumerate(parts):
            box = None if part is None else tight_box(part)
            rle = None if part is None else encode_rle(part)
            instances.append(Instance(ref.video_id, ref.frame_index, kind, name, box, rle, index))
            stats[policy] += 1
    return instances, stats


def rle_from_polygons(polygons: list[list[float]], height: int, width: int) -> dict:
    """COCO polygons (flat ``[x1, y1, x2, y2, ...]`` pixel lists, one instance) -> one merged COCO RLE.

    Every polygon must be an even number of coordinates, at least six (three points): a shorter one is an error
    saying which, never dropped (pycocotools would fail on it with an IndexError or rasterise nothing)."""
    if not isinstance(polygons, list) or not polygons:
        raise InputError("no polygon (expected a list of flat [x1, y1, x2, y2, ...] lists)")
    for number, polygon in enumerate(polygons):
        if not isinstance(polygon, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in polygon
        ):
            raise InputError(f"polygon {number} is not a flat list of numbers: {str(polygon)[:60]}")
        if len(polygon) < 6 or len(polygon) % 2:
            raise InputError(
                f"polygon {number} has {len(polygon)} coordinates; a polygon needs an even number, at least 6"
            )
    rles = mask_utils.frPyObjects([[float(v) for v in polygon] for polygon in polygons], height, width)
    merged = mask_utils.merge(rles)
    return {"size": [int(s) for s in merged["size"]], "counts": merged["counts"].decode("ascii")}


def rle_from_coco(segmentation, height: int, width: int) -> dict:
    """A COCO ``segmentation`` in any of its three forms (polygons, uncompressed RLE, compressed RLE) -> RLE."""
    if isinstance(segmentation, list):
        return rle_from_polygons(segmentation, height, width)
    counts = segmentation["counts"]
    if isinstance(counts, list):  # uncompressed RLE, as iscrowd=0 files sometimes carry
        segmentation = mask_utils.frPyObjects(segmentation, height, width)
        counts = segmentation["counts"]
    return {
        "size": [int(s) for s in segmentation["size"]],
        "counts": counts.decode("ascii") if isinstance(counts, bytes) else counts,
    }


def box_of_rle(rle: dict) -> list[float] | None:
    """Tight normalised box of an RLE mask; None for an empty mask."""
    coded = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
    if mask_utils.area(coded) == 0:
        return None
    return tight_box(mask_utils.decode(coded).astype(bool))


def image_size(path: Path, fix: str = "re-download or re-extract this file") -> tuple[int, int]:
    """(width, height) from the image header alone. Readers use it to state the size a frame's masks must have, so a
    mask of the wrong size is an error naming the mask (the media check decodes every image in full later)."""
    try:
        with Image.open(path) as image:
            return image.size
    except FileNotFoundError as error:
        raise SourceError(path, "file not found", fix=fix) from error
    except (OSError, SyntaxError, ValueError) as error:
        raise SourceError(path, f"cannot read the image header ({error})", fix=fix) from error
