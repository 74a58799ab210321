"""The synthetic world (builders/sureon/world/): a release in the official layout whose answers lie in the frames.

What a user relies on: the release builds with `sureon build sureon`; each answer is drawn into its clip (read back
from the built frames, so a frame/label misalignment anywhere between the world and the build fails here); the
planted shortcuts are where the ground truth says and nowhere else; two worlds with the same settings are
byte-identical.
"""

import hashlib
import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from builders.errors import InputError
from builders.options import LETTERS
from builders.sureon.categories import BY_CODE
from builders.sureon.world.config import SHORTCUT_KINDS, SPLITS, WorldConfig
from builders.sureon.world.planning import plan_world, procedure_prior
from builders.sureon.world.truth import read_shortcuts, row_kind
from builders.sureon.world.videos import segment_frames
from builders.sureon.world.vocabulary import (
    ALL_CODES,
    COLOURS,
    ELABORATION,
    INSTRUMENTS,
    MCQ_CODES,
    NARRATION_CUE,
    NARRATOR_REMARK,
    PHASES,
    VOCABULARY,
)
from builders.sureon.world.write import write_world
from sureon.cli import main as sureon


SMALL = {
    "videos": {"train": 6, "validation": 2, "test": 3},
    "questions_per_video": {"train": 10, "validation": 10, "test": 10},
    "shortcuts": {
        "train": {"length": 0.18, "position": 0.18, "narrated": 0.18, "wording": 0.18, "procedure": 0.18},
        "validation": {"length": 0.5},
    },
}


@pytest.fixture(scope="module")
def small_world(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    summary = write_world(out, WorldConfig.from_dict(SMALL))
    return out, summary


@pytest.fixture(scope="module")
def built(small_world, tmp_path_factory):
    out, _ = small_world
    build = tmp_path_factory.mktemp("world_build") / "build"
    code = sureon(
        [
            "build",
            "sureon",
            "--release",
            str(out / "release"),
            "--videos",
            str(out / "videos"),
            "--out",
            str(build),
            "--configs",
            "bench",
            "train_all",
            "validation",
            "--max-frames",
            "4",
            "--min-frames",
            "4",
            "--no-blur",  # the world has no text or face to blur; blurring is for real frames
            "--cache-dir",
            str(build.parent / "cache"),
        ]
    )
    assert code == 0
    return build


def rows(build, config):
    """The config's records with their frames as images (the training configs store them as files)."""
    from datasets import load_dataset
    from PIL import Image

    from builders.hub import resolve_frames

    split = {"bench": "test", "train_all": "train"}.get(config, config)
    records = [resolve_frames(r, build) for r in load_dataset(str(build), config, split=split)]
    return [r | {"frames": [Image.open(f) if isinstance(f, str) else f for f in r["frames"]]} for r in records]


def digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_two_worlds_with_the_same_settings_are_byte_identical(small_world, tmp_path):
    out, _ = small_world
    again = tmp_path / "again"
    write_world(again, WorldConfig.from_dict(SMALL))
    assert digest(out) == digest(again)
    other = tmp_path / "other"
    write_world(other, WorldConfig.from_dict(SMALL | {"seed": 1}), videos=False)
    assert (other / "release" / "data" / "train-00000-of-00001.parquet").read_bytes() != (
        out / "release" / "data" / "train-00000-of-00001.parquet"
    ).read_bytes()


def test_the_release_builds_with_every_category_and_the_option_counts_of_the_release(built):
    bench, train = rows(built, "bench"), rows(built, "train_all")
    assert len(bench) == 30 and len(train) == 60
    assert {r["category"] for r in train} == set(ALL_CODES)
    for record in bench + train:
        if record["category"] in MCQ_CODES:
            assert len(record["options"]) == (7 if record in bench else 4)
            assert record["options"][record["answer_index"]] == record["answer"]
        elif record["category"] == "TO":
            assert sorted(record["answer_order"]) == ["A", "B", "C"]
        assert len(record["frames"]) == 4


def mean_colour(frame):
    pixels = np.asarray(frame.convert("RGB")).reshape(-1, 3).astype(float)
    bright = pixels[pixels.max(axis=1) > 100]  # the square, not the dark field
    return bright.mean(axis=0) if len(bright) else None


def nearest_colour(rgb):
    return int(np.argmin([np.abs(np.array(c) - rgb).sum() for c in COLOURS]))


def test_each_answer_is_in_its_frames(built):
    """Read the answer back from the built frames: the colour for EE, the phase order for TO, the next phase for F,
    the square's travel for AD."""
    checked = Counter()
    for record in rows(built, "bench") + rows(built, "train_all"):
        code, frames = record["category"], record["frames"]
        truth = record["answer"].split(ELABORATION)[0]
        if code == "EE":
            assert INSTRUMENTS[nearest_colour(mean_colour(frames[1]))] == truth
        elif code == "TO":
            events = dict(re.findall(r"([ABC]): (.+?)(?= [ABC]: |$)", record["question"]))
            shown = []
            for frame in frames:
                phase = PHASES[nearest_colour(mean_colour(frame))].lower()
                if not shown or shown[-1] != phase:
                    shown.append(phase)
            assert [events[letter] for letter in record["answer_order"]] == shown
        elif code == "F":
            last = nearest_colour(mean_colour(frames[-1]))
            assert truth == PHASES[(last + 1) % 7]
        elif code == "AD" and truth in ("Retracting to the right", "Retracting to the left"):
            xs = [np.nonzero(np.asarray(f.convert("RGB")).max(axis=(0, 2)) > 100)[0].mean() for f in frames]
            assert (xs[-1] > xs[0]) == (truth == "Retracting to the right")
        else:
            continue
        checked[code] += 1
    assert min(checked[c] for c in ("EE", "TO", "F")) >= 3


def test_shortcuts_are_planted_where_the_ground_truth_says(small_world):
    out, summary = small_world
    truth = read_shortcuts(out)
    import pyarrow.parquet as pq

    by_id = {}
    for split in SPLITS:
        for row in pq.read_table(out / "release" / "data" / f"{split}-00000-of-00001.parquet").to_pylist():
            by_id[row["question_id"]] = row | {"split": split}
    assert set(by_id) == set(truth)
    counts = summary["counts"]
    mcq_train = sum(counts["train"]["categories"][c] for c in MCQ_CODES)
    assert counts["train"]["shortcuts"] == {k: round(0.18 * mcq_train) for k in SHORTCUT_KINDS}
    assert counts["test"]["shortcuts"] == {}
    for qid, kind in truth.items():
        row = by_id[qid]
        correct = [o for o in row["options"] if o["correct"]]
        long_option = any(ELABORATION in o["text"] for o in row["options"])
        assert long_option == (kind == "length"), qid
        assert (NARRATOR_REMARK.split(":")[0] in row["question"]) == (kind == "wording"), qid
        assert row["question"].startswith(NARRATION_CUE) == (kind == "narrated"), qid
        if kind in ("position", "narrated"):
            assert correct[0]["letter"] == "A"
        if kind == "procedure":
            code = next(c.code for c in BY_CODE.values() if c.slug == row["category"])
            prior = procedure_prior(WorldConfig.from_dict(SMALL), row["procedure"].lower(), code)
            assert correct[0]["text"] == VOCABULARY[code][prior]
        if kind is None and row["options"]:
            assert len({len(o["text"]) > 40 for o in row["options"]}) == 1  # no option stands out by length


def test_decoys_and_clips_of_another_answer_are_where_the_settings_say(tmp_path):
    """A decoy row's longer option is a distractor (a hardened benchmark's row); with ``shortcut_clips: other`` on
    the training split a planted row's clip there shows another answer (read back from its drawn frames), a plain
    row's its own, and a planted benchmark row (the test split, left at ``answer``) its own; set per kind, only that
    kind's clips show another answer (or a share of them)."""
    settings = WorldConfig.from_dict(
        {
            "categories": ["EE", "F"],
            "option_order": "vocabulary",
            "options": {"train": 7, "validation": 7, "test": 7},
            "videos": {"train": 4, "validation": 1, "test": 4},
            "questions_per_video": {"train": 10, "validation": 2, "test": 10},
            "shortcuts": {"train": {"length": 0.5}, "test": {"length": 0.1}},
            "decoys": {"test": {"length": 0.4, "narrated": 0.2}},
            "shortcut_clips": {"train": "other"},
        }
    )
    summary = write_world(tmp_path, settings, videos=False)
    assert summary["counts"]["test"]["decoys"] == {"length": 16, "narrated": 8}
    assert summary["counts"]["train"]["decoys"] == {}
    truth = [json.loads(line) for line in (tmp_path / "shortcuts.jsonl").read_text().splitlines()]
    decoys = {t["question_id"]: t["decoy"] for t in truth if t["decoy"]}
    assert len(decoys) == 24 and not any(t["decoy"] and t["shortcut"] for t in truth)
    import pyarrow.parquet as pq

    for row in pq.read_table(tmp_path / "release" / "data" / "test-00000-of-00001.parquet").to_pylist():
        long_options = [o for o in row["options"] if ELABORATION in o["text"]]
        correct = next(o for o in row["options"] if o["correct"])
        assert row["question"].startswith(NARRATION_CUE) == (decoys.get(row["question_id"]) == "narrated"), row
        if decoys.get(row["question_id"]) == "length":
            assert len(long_options) == 1 and not long_options[0]["correct"], row
        elif decoys.get(row["question_id"]) == "narrated":
            assert correct["letter"] != "A" and not long_options, row  # worded from the narration, not at A
        elif read_shortcuts(tmp_path)[row["question_id"]] is None:
            assert not long_options
    for q in plan_world(settings):
        if q.code != "EE":
            continue
        frame = next(segment_frames(settings, q, 4))
        shown = nearest_colour(mean_colour(Image.fromarray(frame)))
        assert (shown != q.answer_index) == (q.shortcut is not None and q.split == "train"), q.question_id
    assert any(q.shortcut and q.split == "test" for q in plan_world(settings))
    by_kind = replace(
        settings,
        shortcuts={"train": {"length": 0.4, "narrated": 0.3}},
        shortcut_clips={"train": {"narrated": "other", "length": 0.5}},
    )
    another = Counter()
    for q in plan_world(by_kind):
        if q.code == "EE" and q.split == "train":
            shown = nearest_colour(mean_colour(Image.fromarray(next(segment_frames(by_kind, q, 4)))))
            another[q.shortcut, shown != q.answer_index] += 1
    assert another[None, True] == 0 and another["narrated", False] == 0 and another["narrated", True] > 0
    assert another["length", True] > 0 and another["length", False] > 0, another  # a share of the kind's rows
    with pytest.raises(ValueError, match="decoys.test"):
        WorldConfig.from_dict({"shortcuts": {"test": {"length": 0.8}}, "decoys": {"test": 0.3}})
    with pytest.raises(ValueError, match="decoys.test: unknown kind"):
        WorldConfig.from_dict({"decoys": {"test": {"position": 0.3}}})
    with pytest.raises(ValueError, match="shortcut_clips"):
        WorldConfig.from_dict({"shortcut_clips": "none"})
    with pytest.raises(ValueError, match="shortcut_clips"):
        WorldConfig.from_dict({"shortcut_clips": {"training": "other"}})
    with pytest.raises(ValueError, match="shortcut_clips"):
        WorldConfig.from_dict({"shortcut_clips": {"train": {"lenght": "other"}}})
    with pytest.raises(ValueError, match="shortcut_clips"):
        WorldConfig.from_dict({"shortcut_clips": {"train": {"length": 1.5}}})
    with pytest.raises(InputError, match="decoys.test: a share or a mapping"):
        WorldConfig.from_dict({"decoys": {"test": {"length": "a lot"}}})
    # a world written before decoys had kinds records ``"decoy": true``: read back as a length decoy
    assert [row_kind(e) for e in ({"shortcut": None, "decoy": True}, {"shortcut": None, "decoy": False})] == [
        "length decoy",
        "plain",
    ]


def test_a_position_row_in_the_vocabularys_order_moves_no_option(tmp_path):
    """In the vocabulary's order a ``position`` row asks for the word at its letter, and every option stays where the
    vocabulary puts it (moving the answer would also move the others), with four options as with seven."""
    for count in (4, 7):
        settings = WorldConfig.from_dict(
            {
                "categories": ["EE"],
                "option_order": "vocabulary",
                "options": {"train": count, "validation": count, "test": count},
                "videos": {"train": 4, "validation": 1, "test": 1},
                "shortcuts": {"train": {"position": 0.5}},
                "position_letter": "B",
            }
        )
        write_world(tmp_path / str(count), settings, videos=False)
        truth = read_shortcuts(tmp_path / str(count))
        import pyarrow.parquet as pq

        rows = pq.read_table(tmp_path / str(count) / "release" / "data" / "train-00000-of-00001.parquet").to_pylist()
        planted = [row for row in rows if truth[row["question_id"]] == "position"]
        assert planted
        for row in rows:
            indices = [VOCABULARY["EE"].index(o["text"]) for o in row["options"]]
            assert indices == sorted(indices) and len(indices) == count
        assert all(row["options"][1]["correct"] and row["answer"] == VOCABULARY["EE"][1] for row in planted)


def test_answer_positions_are_shuffled_by_a_seeded_rng(small_world):
    out, _ = small_world
    import pyarrow.parquet as pq

    test_rows = pq.read_table(out / "release" / "data" / "test-00000-of-00001.parquet").to_pylist()
    letters = Counter(o["letter"] for r in test_rows for o in r["options"] if o["correct"])
    assert len(letters) >= 4, letters
    assert set(letters) <= set(LETTERS[:7])


def test_bad_settings_are_refused_with_the_key_to_fix():
    with pytest.raises(ValueError, match="unknown kind"):
        WorldConfig.from_dict({"shortcuts": {"train": {"verbosity": 0.5}}})
    with pytest.raises(ValueError, match="sum to at most 1"):
        WorldConfig.from_dict({"shortcuts": {"train": {"length": 0.7, "wording": 0.6}}})
    with pytest.raises(ValueError, match="unknown key"):
        WorldConfig.from_dict({"colours": 3})
    with pytest.raises(ValueError, match="categories"):
        WorldConfig.from_dict({"categories": ["XX"]})


def test_the_command_writes_a_world_and_its_settings_file_remakes_it(tmp_path, capsys):
    out = tmp_path / "w"
    argv = [
        "world",
        "--out",
        str(out),
        "--no-videos",
        "--videos-per-split",
        "train=4",
        "validation=1",
        "test=2",
        "--shortcut",
        "train:wording=0.5",
    ]
    assert sureon(argv) == 0
    summary = json.loads((out / "world.json").read_text())
    assert summary["config"]["shortcuts"]["train"] == {"wording": 0.5}
    assert "train: 48 questions over 4 videos" in capsys.readouterr().out
    again = tmp_path / "again"
    assert sureon(["world", "--out", str(again), "--no-videos", "--config", str(out / "world.json")]) == 0
    assert (again / "shortcuts.jsonl").read_bytes() == (out / "shortcuts.jsonl").read_bytes()
