"""HeiCo: 25-fps phases with the Exception phase left unlabelled, ROBUST-MIS frames and instance masks, three
procedures from one HeiCo/ folder."""

import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import Segment
from public_converters.spec import registry, sample_module


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("heico")
    sample_module("heico_proctocolectomy").write(root)
    return root


def test_phases_exception_is_no_phase(root):
    tables = normalise_source(registry()["heico_proctocolectomy"], root).tables
    assert [s for s in tables.segments if s.video_id == "proctocolectomy_1"] == [
        Segment("proctocolectomy_1", "phase", "preparation and orientation at abdomen", 0, 29),
        Segment("proctocolectomy_1", "phase", "dissection of lymph nodes and blood vessels", 30, 59),
    ]  # frames 60-74 are phase 13, "Exception"
    assert {(v.video_id, v.fps, v.total_frames, v.split) for v in tables.videos} == {
        ("proctocolectomy_1", 25, 75, "train"),
        ("proctocolectomy_2", 25, 75, "train"),
    }


def test_segmentation_frames_and_instances(root):
    tables = normalise_source(registry()["heico_proctocolectomy"], root).tables
    frames = {(f.video_id, f.frame_index): f for f in tables.frames}
    assert sorted(frames) == [("proctocolectomy_1", 12), ("proctocolectomy_1", 40), ("proctocolectomy_2", 30)]
    assert frames["proctocolectomy_1", 12].tools == ["surgical instrument"]
    assert frames["proctocolectomy_1", 12].phase == "preparation and orientation at abdomen"
    assert frames["proctocolectomy_1", 40].tools == []  # no instrument_instances.png: no instrument visible
    assert all(f.anatomy is None for f in tables.frames)  # instrument masks say nothing about anatomy
    assert frames["proctocolectomy_2", 30].image_path == "Proctocolectomy/2/Instrument segmentations/30/raw.png"
    boxes = {(i.video_id, i.frame_index, i.instance_id): i.box for i in tables.instances}
    # mask value 1: rows 5-14, cols 4-19 of a 64x48 mask; value 2: rows 30-44, cols 40-59 (ids in value order)
    assert boxes == {
        ("proctocolectomy_1", 12, 0): [62.5, 104.2, 312.5, 312.5],
        ("proctocolectomy_1", 12, 1): [625.0, 625.0, 937.5, 937.5],
        ("proctocolectomy_2", 30, 0): [125.0, 208.3, 468.8, 833.3],
    }
    assert all(i.mask["size"] == [48, 64] for i in tables.instances)


def test_procedure_folders_match_case_insensitively(tmp_path):
    sample_module("heico_rectal_resection").write(tmp_path)
    (tmp_path / "Rectal Resection").rename(tmp_path / "Rectal resection")
    tables = normalise_source(registry()["heico_rectal_resection"], tmp_path).tables
    assert [v.video_path for v in tables.videos] == [
        "Rectal resection/1/Rectal Resection_1.avi",
        "Rectal resection/2/Rectal Resection_2.avi",
    ]


def test_a_frame_folder_past_the_video_is_an_error(root, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    shutil.copytree(copy / "Proctocolectomy/1/12", copy / "Proctocolectomy/1/90")
    with pytest.raises(ValueError, match="1/90: frame 90 is past the video's 75 labelled frames"):
        normalise_source(registry()["heico_proctocolectomy"], copy)


def test_each_procedure_reads_only_its_folder(root):
    with pytest.raises(ValueError, match="Sigmoid Resection: folder not found"):
        normalise_source(registry()["heico_sigmoid_resection"], root)
