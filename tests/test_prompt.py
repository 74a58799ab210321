"""The one prompt formatter: visual and blind prompts differ only in the frames; option order never drifts."""

import json
import os
import subprocess
import sys

import pytest

from builders.prompt import answer_target, format_messages, question_text
from builders.sureon.release import read_release


@pytest.fixture(scope="module")
def records():
    from conftest import SAMPLE_RELEASE

    release = read_release(SAMPLE_RELEASE)
    return {r["question_id"]: r for split in release.splits.values() for r in split.records}


def with_frames(record, n=8):
    step = (record["end"] - record["start"]) / n
    return dict(
        record,
        frames=[f"frame{i}" for i in range(n)],
        frame_timestamps=[record["start"] + step * (i + 0.5) for i in range(n)],
    )


def texts(messages):
    return [c["text"] for m in messages for c in m["content"] if c["type"] == "text"]


@pytest.mark.parametrize("qid", ["sureon_test_0030", "sureon_test_0036", "sureon_test_0040", "sureon_train_0014"])
def test_visual_and_blind_prompts_are_identical_except_frames(records, qid):
    record = with_frames(records[qid])
    visual = format_messages(record)
    blind = format_messages(record, blind=True)
    content = visual[0]["content"]
    images = [c for c in content if c["type"] == "image"]
    assert [c["image"] for c in images] == record["frames"]
    tags = [c["text"] for c in content if c["type"] == "text" and c["text"].startswith("\nFrame at ")]
    assert len(tags) == len(images) == 8
    assert texts(blind) == [t for t in texts(visual) if t not in tags]
    assert all(c["type"] == "text" for c in blind[0]["content"])
    video = format_messages(record, frames_as="video")[0]["content"]
    assert [c["type"] for c in video] == ["text", "video", "text"]
    assert video[1]["timestamps"] == record["frame_timestamps"]
    assert texts(format_messages(record, frames_as="video")) == texts(blind)


def test_prompt_layout_time_range_frame_tags_question_options(records):
    record = with_frames(records["sureon_test_0030"])
    content = format_messages(record)[0]["content"]
    assert content[0]["text"] == "Clip: 00:00:02.50 to 00:00:10.50 of the source video."
    assert content[1]["text"] == "\nFrame at 00:00:03.00: "
    assert content[-1]["text"].startswith("\nQuestion: ")
    body = content[-1]["text"].strip().splitlines()
    assert body[0] == "Question: What action is being performed?"
    assert body[1] == "Options:"
    assert [line[:3] for line in body[2:9]] == ["A. ", "B. ", "C. ", "D. ", "E. ", "F. ", "G. "]
    assert body[2 + record["answer_index"]] == f"{'ABCDEFG'[record['answer_index']]}. {record['answer']}"
    assert body[-1] == "Answer with the letter of the correct option."


def test_answer_targets_and_instructions(records):
    mcq, ordering, summary = records["sureon_test_0030"], records["sureon_test_0036"], records["sureon_test_0040"]
    assert answer_target(mcq) == "ABCDEFG"[mcq["answer_index"]]
    assert answer_target(ordering) == "B,C,A"
    assert answer_target(summary) == summary["answer"]
    assert question_text(ordering).endswith("chronological order, separated by commas.")
    assert "Options:" not in question_text(summary)
    messages = format_messages(mcq, with_answer=True, system_prompt="You are a surgeon.")
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[-1]["content"][0]["text"] == answer_target(mcq)


def test_frames_and_timestamps_must_pair_up(records):
    record = with_frames(records["sureon_test_0030"])
    record["frame_timestamps"] = record["frame_timestamps"][:-1]
    with pytest.raises(ValueError, match="8 frames but 7 timestamps"):
        format_messages(record)


def test_option_order_is_identical_across_processes(tmp_path):
    """Seeded orders come from sha256 of the question id, never from Python's salted hash()."""
    script = (
        "import json; from builders.options import options_from_pool;"
        "print(json.dumps([options_from_pool('Gallbladder', ['Spleen', 'Liver', 'Uterus', 'Kidney'], f'q{i}')"
        " for i in range(20)]))"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
    assert len({tuple(order) for order in outputs[0]}) > 5  # it does shuffle
