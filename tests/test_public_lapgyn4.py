"""LapGyn4: class folders become actions / anatomy / instrument counts; the split is per case (patient level)."""

import shutil

import pytest

from public_converters.normalise import normalise_source
from public_converters.schema import SourceError
from public_converters.sources._itec import hashed_split
from public_converters.spec import registry, sample_module


@pytest.fixture
def root(tmp_path):
    sample_module("lapgyn4").write(tmp_path)
    return tmp_path


def _frames(root):
    tables = normalise_source(registry()["lapgyn4"], root).tables
    return tables, {f.image_path.removeprefix("LapGyn4_v1.2/"): f for f in tables.frames}


def test_class_folders_become_frame_labels(root):
    _, frames = _frames(root)
    coagulation = frames["Surgical_Actions/Coagulation/c_1_v_1_f_10.jpg"]
    assert (coagulation.video_id, coagulation.frame_index, coagulation.actions) == (
        "Surgical_Actions_c1_v1",
        10,
        ["coagulation"],
    )
    assert coagulation.anatomy is None and coagulation.tools is None
    # one file under two action folders is one frame with both actions
    both = frames["Surgical_Actions/Coagulation/c_1_v_1_f_11.jpg"]
    assert both.actions == ["coagulation", "suction irrigation"]
    assert "Surgical_Actions/Suction_Irrigation/c_1_v_1_f_11.jpg" not in frames
    assert frames["Surgical_Actions/Cutting_HF/c_4_v_2_f_7.jpg"].actions == ["high-frequency cutting"]
    assert frames["Anatomical_Structures/Oviduct/c_2_v_1_f_30.jpg"].anatomy == ["fallopian tube"]
    ovary = frames["Actions_on_Anatomy/Suturing_Ovary/c_2_v_1_f_5.jpg"]
    assert (ovary.actions, ovary.anatomy) == (["suturing"], ["ovary"])
    other = frames["Actions_on_Anatomy/Suturing_Other/c_4_v_1_f_9.jpg"]
    assert (other.actions, other.anatomy) == (["suturing"], None)  # "Other" names no structure


def test_instrument_count_becomes_box_less_instances(root):
    tables, frames = _frames(root)
    counted = {path: frame for path, frame in frames.items() if path.startswith("Instrument_Count/")}
    assert [frame.frame_index for frame in counted.values()] == [0, 1, 2]  # running index, sorted by count then name
    per_frame = {}
    for instance in tables.instances:
        assert (instance.video_id, instance.kind, instance.label, instance.box) == (
            "Instrument_Count",
            "tool",
            "surgical instrument",
            None,
        )
        per_frame[instance.frame_index] = per_frame.get(instance.frame_index, 0) + 1
    for path, frame in counted.items():
        count = int(path.split("/")[1])
        assert per_frame.get(frame.frame_index, 0) == count
        assert frame.tools == (["surgical instrument"] if count else [])


def test_split_is_per_case_across_subsets(root):
    tables, _ = _frames(root)
    splits = {v.video_id: v.split for v in tables.videos}
    assert splits["Instrument_Count"] == "train"  # no case in its names: never held out
    by_case = {}
    for video_id, split in splits.items():
        if video_id != "Instrument_Count":
            case = video_id.split("_c")[1].split("_v")[0]
            assert split == hashed_split("lapgyn4", case)
            by_case.setdefault(case, set()).add(split)
    assert all(len(found) == 1 for found in by_case.values())
    assert set(splits.values()) == {"train", "validation", "test"}  # the sample's cases 1, 4, 2


def test_root_may_be_the_release_folder_itself(root):
    tables = normalise_source(registry()["lapgyn4"], root / "LapGyn4_v1.2").tables
    assert any(f.image_path == "Anatomical_Structures/Uterus/c_1_v_3_f_2.jpg" for f in tables.frames)


def test_actions_on_anatomy_folder_must_name_a_structure(root):
    base = root / "LapGyn4_v1.2/Actions_on_Anatomy"
    shutil.move(base / "Suturing_Ovary", base / "Suturing")
    with pytest.raises(SourceError, match="'Suturing' is not <Action>_<Structure>"):
        normalise_source(registry()["lapgyn4"], root)


def test_instrument_count_folders_are_numbers(root):
    base = root / "LapGyn4_v1.2/Instrument_Count"
    shutil.move(base / "3", base / "three")
    with pytest.raises(SourceError, match="three: Instrument_Count class folders are instrument counts"):
        normalise_source(registry()["lapgyn4"], root)
