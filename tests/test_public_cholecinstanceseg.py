"""CholecInstanceSeg: what a user checks on the normalised tables of the native-layout sample."""

import shutil

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from public_converters.normalise import normalise_source
from public_converters.samples._common import resize_image
from public_converters.schema import SourceError
from public_converters.sources.cholecinstanceseg import SPLITS
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("cholecinstanceseg")
    sample_module("cholecinstanceseg").write(root)
    return root


@pytest.fixture(scope="module")
def tables(sample):
    return normalise_source(registry()["cholecinstanceseg"], sample).tables


def _pixels(instance) -> np.ndarray:
    rle = {"size": instance.mask["size"], "counts": instance.mask["counts"].encode("ascii")}
    return mask_utils.decode(rle).astype(bool)


def test_polygons_sharing_a_group_id_are_one_instance(tables):
    frame = [i for i in tables.instances if i.video_id == "VID01_t50_full" and i.frame_index == 1]
    graspers = sorted((i for i in frame if i.label == "grasper"), key=lambda i: i.instance_id)
    assert [i.instance_id for i in graspers] == [1, 2]  # group_id 1 (two polygons) and group_id 2
    assert graspers[0].box == [62.5, 83.3, 625.0, 812.5]  # spans both parts: x 4..40, y 4..39 of 64x48
    pixels = _pixels(graspers[0])
    assert pixels[10, 10] and pixels[33, 35] and not pixels[25, 25]  # two parts, nothing between them
    assert graspers[1].box == [781.2, 41.7, 968.8, 208.3]
    assert sorted(i.label for i in frame) == ["electrocautery hook", "grasper", "grasper"]


def test_sequences_are_videos_with_a_running_index_and_their_split(tables):
    videos = {v.video_id: (v.split, v.fps, v.total_frames, v.width, v.height) for v in tables.videos}
    assert videos == {
        "VID01_t50_full": ("train", None, 3, 64, 48),
        "VID03_t80_sparse": ("validation", None, 3, 64, 48),
        "VID09_seg8k": ("test", None, 2, 64, 48),
    }
    t80 = [(f.frame_index, f.image_path, f.tools) for f in tables.frames if f.video_id == "VID03_t80_sparse"]
    assert t80 == [
        (0, "val/VID03_t80_sparse/img_dir/t80_VID03_000000.png", []),
        (1, "val/VID03_t80_sparse/img_dir/t80_VID03_000030.png", ["clip applier"]),
        (2, "val/VID03_t80_sparse/img_dir/t80_VID03_000060.png", ["scissors", "snare"]),
    ]


def test_a_frame_without_its_size_is_rasterised_at_its_image_size(sample, tmp_path):
    root = tmp_path / "cis"
    shutil.copytree(sample, root)
    resize_image(root / "test/VID09_seg8k/img_dir/seg8k_video09_28660.png", (80, 60))  # its JSON states no size
    tables = normalise_source(registry()["cholecinstanceseg"], root).tables
    grasper = next(i for i in tables.instances if i.video_id == "VID09_seg8k" and i.frame_index == 0)
    assert grasper.mask["size"] == [60, 80]
    empty = next(f for f in tables.frames if f.video_id == "VID01_t50_full" and f.frame_index == 2)
    assert empty.tools == []  # no shapes and no size: annotated, no tool


def test_the_official_split_table_covers_every_sequence():
    official = SPLITS["official"]
    partitions = {}
    for sequence in official:
        partition = sequence.split("_", 1)[1]
        partitions[partition] = partitions.get(partition, 0) + 1
    assert partitions == {"seg8k": 17, "t50_full": 15, "t50_sparse": 35, "t80_sparse": 28}
    assert [official[s] for s in ("VID09_seg8k", "VID23_t50_full", "VID03_t80_sparse", "VID111_t50_sparse")] == [
        "test",
        "validation",
        "validation",
        "train",
    ]


def test_a_sequence_in_the_wrong_split_folder_is_an_error(sample, tmp_path):
    root = tmp_path / "cis"
    shutil.copytree(sample, root)
    shutil.move(root / "val/VID03_t80_sparse", root / "train/VID03_t80_sparse")
    with pytest.raises(SourceError, match="VID03_t80_sparse: sequence is under train, the official split says"):
        normalise_source(registry()["cholecinstanceseg"], root)


def test_annotations_without_img_dir_name_the_missing_folder(sample, tmp_path):
    root = tmp_path / "cis"
    shutil.copytree(sample, root)
    shutil.rmtree(root / "test/VID09_seg8k/img_dir")
    with pytest.raises(SourceError, match=r"VID09_seg8k/img_dir: folder not found"):
        normalise_source(registry()["cholecinstanceseg"], root)


def test_a_file_of_another_video_is_an_error(sample, tmp_path):
    root = tmp_path / "cis"
    shutil.copytree(sample, root)
    ann = root / "train/VID01_t50_full/ann_dir"
    (ann / "t50_VID01_000002.json").rename(ann / "t50_VID02_000002.json")
    with pytest.raises(SourceError, match=r"t50_VID02_000002\.json: file name does not fit VID01_t50_full"):
        normalise_source(registry()["cholecinstanceseg"], root)
