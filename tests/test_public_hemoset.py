"""HemoSet: what a user checks on the normalised tables of the native-layout sample."""

import pytest

from public_converters.normalise import normalise_source
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hemoset")
    sample_module("hemoset").write(root)
    return root


@pytest.fixture(scope="module")
def tables(root):
    return normalise_source(registry()["hemoset"], root).tables


def _blood(tables, pig, frame):
    return [i for i in tables.instances if (i.video_id, i.frame_index) == (pig, frame)]


def test_pigs_are_videos_and_frame_numbers_come_from_the_file_names(tables):
    assert [v.video_id for v in tables.videos] == ["pig1", "pig10", "pig2"]
    assert all(v.fps is None and (v.width, v.height) == (64, 48) for v in tables.videos)
    frames = [(f.video_id, f.frame_index, f.image_path) for f in tables.frames if f.video_id != "pig1"]
    assert frames == [
        ("pig10", 60, "pig10/imgs/000060.png"),
        ("pig10", 90, "pig10/imgs/000090.png"),
        ("pig2", 0, "pig2/imgs/imgs/000000.png"),  # the nested extraction
        ("pig2", 30, "pig2/imgs/imgs/000030.png"),
    ]


def test_separate_blood_pools_are_separate_instances_top_to_bottom(tables):
    pools = _blood(tables, "pig1", 0)  # RGB #800000 masks: pools at (4, 4) 10x8 and (40, 30) 12x10
    assert [p.instance_id for p in pools] == [0, 1]
    assert pools[0].box == pytest.approx([62.5, 83.3, 218.8, 250.0], abs=0.1)
    assert pools[1].box == pytest.approx([625.0, 625.0, 812.5, 833.3], abs=0.1)
    assert all(p.kind == "anatomy" and p.label == "blood" and p.mask["size"] == [48, 64] for p in pools)


def test_every_mask_encoding_decodes_to_blood(tables):
    voc = _blood(tables, "pig2", 0)  # palette PNG, index 1
    assert len(voc) == 1 and voc[0].box == pytest.approx([0.0, 625.0, 468.8, 1000.0], abs=0.1)
    assert len(_blood(tables, "pig10", 90)) == 1  # grey 255


def test_blood_masks_give_boxes_but_no_presence_claims(tables):
    """A blood-only mask says nothing of the other structures in view: no anatomy presence list is set from it."""
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert frames[("pig10", 60)].anatomy is None and not _blood(tables, "pig10", 60)
    assert frames[("pig10", 90)].anatomy is None and _blood(tables, "pig10", 90)


def test_no_official_split_but_a_third_party_pig_split(root, tables):
    assert {v.split for v in tables.videos} == {"train"}
    variant = normalise_source(registry()["hemoset"], root, split_variant="third-party").tables
    assert {v.video_id: v.split for v in variant.videos} == {"pig1": "train", "pig10": "test", "pig2": "validation"}
