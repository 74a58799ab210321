"""The GRPO recipe: each reward on hand-made completions against hand-computed values, ``mcq_accuracy`` against the
evaluation's verdicts, and a tiny run on CPU (2 steps, 2 completions per prompt, clips as video) from an SFT run's
folder: it completes, logs every reward, writes the marker and card, resumes after a kill, gives the same rewards on
two ranks as on one, and saves a model that ``sureon eval sureon`` loads."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from huggingface_hub import ModelCard

from builders.hub import resolve_frames
from builders.prompt import answer_target
from recipes.grpo import cli, main, make_parser
from recipes.model_io.answers import parse_answer
from recipes.training.grpo_data import REFERENCE_COLUMNS, grpo_dataset, reference_columns
from recipes.training.mixture import build_mixture, parse_mixture
from recipes.training.rewards import (
    REWARDS,
    box_iou,
    format_reward,
    label_accuracy,
    matched_box_iou,
    mcq_accuracy,
    order_accuracy,
    reward_functions,
    temporal_iou,
)
from sureon.cli import main as cli_main


TINY_RECIPE = REPO / "recipes" / "tiny" / "grpo" / "config_smoke.yaml"
OPTIONS = ["Grasping the gallbladder", "Clipping the cystic duct", "Irrigating", "Suturing"]


def said(*texts: str) -> list[list[dict]]:
    """Completions as TRL passes them for conversational prompts."""
    return [[{"role": "assistant", "content": text}] for text in texts]


def columns(rows: list[dict]) -> dict[str, list]:
    return {name: [row.get(name) for row in rows] for name in REFERENCE_COLUMNS}


def mcq_row(answer: str = "B") -> dict:
    return {"question_id": "q1", "question": "What is done?", "options": OPTIONS, "answer": answer,
            "answer_format": "mcq"}  # fmt: skip


def order_row(order=("B", "C", "A", "D")) -> dict:
    question = "Order the events. A: clip the duct B: dissect the triangle C: retract D: extract"
    return {"question_id": "t1", "question": question, "answer": ",".join(order), "answer_order": list(order),
            "answer_format": "TO"}  # fmt: skip


def grounded_row(shape: str, answer, key=None) -> dict:
    return {"question_id": f"g-{shape}", "answer": json.dumps(answer), "answer_format": "json", "answer_shape": shape,
            "answer_key": key}  # fmt: skip


# --- each reward, by hand ------------------------------------------------------------------------------------------


def test_mcq_accuracy_by_hand():
    texts = ["B", "<think>A looks right, but no.</think> The answer is (B).", "A or B", "C", "", "**b.**",
             "Clipping the cystic duct", "I cannot tell."]  # fmt: skip
    rows = [mcq_row()] * len(texts)
    assert mcq_accuracy(said(*texts), **columns(rows)) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    assert mcq_accuracy(said("B"), **columns([order_row()])) == [None]


def test_order_accuracy_by_hand():
    # reference B, C, A, D; partial credit = the share of the 6 event pairs kept in order
    texts = ["B, C, A, D", "<think>maybe A first</think>B -> C -> A -> D", "C, B, A, D", "D, A, C, B", "A, B",
             "B, C"]  # fmt: skip
    rows = [order_row()] * len(texts)
    assert order_accuracy(said(*texts), **columns(rows)) == [1.0, 1.0, 5 / 6, 0.0, 0.0, 0.0]
    assert order_accuracy(said("B, C, A, D"), **columns([mcq_row()])) == [None]


def test_format_by_hand():
    mcq = ["B", "(C)", "D.", "<think>long reasoning</think>A", "The answer is B", "A or B", "E"]
    order = ["B, C, A, D", "B,C,A,D", "B -> C -> A -> D", "B, C, A"]
    label = grounded_row("label", {"phase": "calot triangle dissection"}, "phase")
    json_texts = ['{"phase": "clipping"}', '```json\n{"phase": "clipping"}\n```', '{"phase": clipping}',
                  'Sure: {"phase": "clipping"}', '{"step": "clipping"}']  # fmt: skip
    rows = [mcq_row()] * len(mcq) + [order_row()] * len(order) + [label] * len(json_texts)
    rows.append({"question_id": "sm", "answer": "Dissection, then clipping.", "answer_format": "open"})
    scores = format_reward(said(*mcq, *order, *json_texts, "Dissection."), **columns(rows))
    assert scores == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0] + [1.0, 1.0, 0.0, 0.0] + [1.0, 1.0, 0.0, 0.0, 0.0] + [None]
    assert format_reward.__name__ == "format"


def test_label_accuracy_by_hand():
    row = grounded_row("label", {"phase": "calot triangle dissection"}, "phase")
    texts = ['{"phase": "calot triangle dissection"}', '{"phase": "CalotTriangleDissection"}',
             '<think>{"phase": "preparation"}</think>{"phase": "calot_triangle_dissection"}',
             'The phase is {"phase": "calot triangle dissection"} I think', '{"phase": "clipping and cutting"}',
             '{"phase": calot}', "calot triangle dissection"]  # fmt: skip
    assert label_accuracy(said(*texts), **columns([row] * len(texts))) == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert label_accuracy(said("B"), **columns([mcq_row()])) == [None]


def boxes(*items) -> list[dict]:
    return [{"index": i, "label": label, "box": box} for i, (label, box) in enumerate(items, start=1)]


def test_box_iou_by_hand():
    reference = boxes(("grasper", [0, 0, 100, 100]), ("hook", [500, 500, 700, 700]))
    row = grounded_row("boxes", reference)
    exact = json.dumps(reference)
    # the hook box shifted by half its width: intersection 100x200 = 20000, union 2 x 40000 - 20000 = 60000 -> 1/3
    shifted = json.dumps(boxes(("hook", [600, 500, 800, 700]), ("grasper", [0, 0, 100, 100])))
    missing = json.dumps(boxes(("grasper", [0, 0, 100, 100])))  # one of two matched: (1 + 0) / 2
    extra = json.dumps(reference + [{"index": 3, "label": "clipper", "box": [0, 0, 10, 10]}])  # 2 / 3
    wrong_label = json.dumps(boxes(("clipper", [0, 0, 100, 100]), ("hook", [500, 500, 700, 700])))  # (0 + 1) / 2
    texts = [exact, shifted, missing, extra, wrong_label, "[{]", "no boxes here", "[]"]
    scores = box_iou(said(*texts), **columns([row] * len(texts)))
    assert scores == pytest.approx([1.0, (1 + 1 / 3) / 2, 0.5, 2 / 3, 0.5, 0.0, 0.0, 0.0])
    empty = grounded_row("boxes", [])
    assert box_iou(said("[]", exact), **columns([empty, empty])) == [1.0, 0.0]
    assert box_iou(said(exact), **columns([mcq_row()])) == [None]


def test_box_matching_is_one_to_one():
    """Two predictions on one reference box: only one of them is matched (a greedy per-box max would count both)."""
    reference = [{"label": "grasper", "bbox": [0, 0, 100, 100]}]
    predicted = [{"label": "grasper", "bbox": [0, 0, 100, 100]}, {"label": "Grasper", "bbox": [0, 0, 100, 50]}]
    assert matched_box_iou(predicted, reference) == 0.5


def test_temporal_iou_by_hand():
    row = grounded_row("window", {"start": 2.0, "end": 6.0})
    texts = ['{"start": 2.0, "end": 6.0}', '{"start": 4, "end": 8}', '{"start": 7, "end": 9}',
             '{"start": 6, "end": 2}', '{"begin": 2, "end": 6}', "from 2 to 6 s"]  # fmt: skip
    # [4, 8] against [2, 6]: intersection 2, union 6
    assert temporal_iou(said(*texts), **columns([row] * len(texts))) == pytest.approx([1.0, 1 / 3, 0.0, 0.0, 0.0, 0.0])


def test_rewards_are_named_as_the_recipe_names_them():
    assert sorted(REWARDS) == sorted(
        ["mcq_accuracy", "order_accuracy", "format", "label_accuracy", "box_iou", "temporal_iou"]
    )
    assert [f.__name__ for f in REWARDS.values()] == list(REWARDS)
    with pytest.raises(ValueError, match="unknown \\['accuracy'\\]"):
        reward_functions(["accuracy"])


# --- the data TRL samples ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("frames_as", ["video", "images"])
def test_prompts_are_the_evaluation_prompts_and_open_rows_are_counted_out(sureon_build, frames_as):
    from datasets import load_dataset

    from builders.prompt import format_messages
    from recipes.model_io.chat_inputs import split_visuals

    loaded, index, _ = build_mixture(parse_mixture([{"path": str(sureon_build.out), "name": "db"}]))
    dataset, checkable = grpo_dataset(loaded, index, frames_as=frames_as, max_frames=3, system_prompt="Be brief.")
    rows = load_dataset(str(sureon_build.out), "db", split="train")
    open_rows = sum(1 for r in rows if not r["options"] and not r["answer_order"])
    assert open_rows and checkable == [len(rows) - open_rows] == [len(dataset)]
    by_id = {r["question_id"]: r for r in rows}
    for sample in dataset.select(range(len(dataset))):
        record = resolve_frames(by_id[sample["question_id"]], loaded[0].media_root)
        # the evaluation's prompt at --max-frames 3: the same messages, the same frames and timestamps
        expected, images, videos = split_visuals(
            format_messages(record, frames_as=frames_as, system_prompt="Be brief.", max_frames=3)
        )
        visuals = sample["visuals"]
        assert sample["prompt"] == expected
        if frames_as == "video":
            assert visuals["images"] == [] and len(visuals["videos"]) == 1 and len(videos[0]["frames"]) == 3
            assert visuals["videos"][0]["timestamps"] == videos[0]["timestamps"]
        else:
            assert visuals["videos"] == [] and len(visuals["images"]) == len(images) == 3
        assert sample["answer"] == answer_target(record)
        assert "Options:" in json.dumps(sample["prompt"]) or record["answer_order"]
        assert answer_target(record) not in {p.get("text") for m in sample["prompt"] for p in m["content"]}
    with pytest.raises(ValueError, match="frames_as: 'frames'"):
        grpo_dataset(loaded, index, frames_as="frames")


def test_sources_without_a_checkable_reference_are_refused(sureon_build, tmp_path):
    from test_sft import text_source

    loaded, index, _ = build_mixture(parse_mixture([text_source(tmp_path)]))
    with pytest.raises(ValueError, match="GRPO needs rows with a checkable reference"):
        grpo_dataset(loaded, index)
    summaries = [{"path": str(sureon_build.out), "name": "db", "exclude_categories": ["AD", "EE", "EA", "PAD", "IAI",
                  "LAR", "SPI", "F", "TO"]}]  # fmt: skip
    loaded, index, _ = build_mixture(parse_mixture(summaries))
    with pytest.raises(ValueError, match="no row of the mixture has a checkable answer"):
        grpo_dataset(loaded, index)


def test_grounded_public_rows_carry_their_shape():
    row = {"qa_id": "x", "question": "Where are the tools?", "grounded": True, "template_id": "grounded_phase",
           "answer": '{"phase": "preparation"}', "answer_format": "json"}  # fmt: skip
    assert reference_columns(row, row["answer"])["answer_shape"] == "label"
    assert reference_columns(row, row["answer"])["answer_key"] == "phase"


# --- a tiny run ----------------------------------------------------------------------------------------------------


def tiny_config(tmp_path: Path, model: Path, build, name: str, **overrides) -> Path:
    """The shipped tiny recipe, pointed at the test's model and build."""
    config = yaml.safe_load(TINY_RECIPE.read_text())
    config |= {
        "model_name_or_path": str(model),
        "dataset_mixture": [{"path": str(build.out), "name": "db", "split": "train"}],
        "output_dir": str(tmp_path / name),
        "max_steps": 2,
        "save_steps": 1,
        **overrides,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_grpo(path: Path, *extra) -> tuple[Path, dict]:
    args = make_parser().parse_args_and_config(["--config", str(path), *extra])
    out = main(*args, recipe=str(path))
    return out, json.loads((out / "training_complete.json").read_text())


@pytest.fixture(scope="module")
def sft_folder(tiny_qwen3_vl, sureon_build, tmp_path_factory):
    """A short SFT run with a system prompt (what GRPO starts from)."""
    from recipes.sft import main as sft_main
    from recipes.sft import make_parser as sft_parser

    tmp = tmp_path_factory.mktemp("sft")
    config = {
        "model_name_or_path": str(tiny_qwen3_vl),
        "dtype": "float32",
        "dataset_mixture": [{"path": str(sureon_build.out), "name": "db"}],
        "output_dir": str(tmp / "sft"),
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "bf16": False,
        "use_cpu": True,
        "report_to": "none",
        "activation_checkpointing": False,
        "system_prompt": "You are a surgeon.",
        "save_strategy": "no",
    }
    path = tmp / "sft.yaml"
    path.write_text(json.dumps(config))
    return sft_main(*sft_parser().parse_args_and_config(["--config", str(path)]))


@pytest.fixture(scope="module")
def grpo_run(sft_folder, sureon_build, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpo")
    path = tiny_config(tmp, sft_folder, sureon_build, "grpo")
    out, summary = run_grpo(path)
    return tmp, path, out, summary


def test_tiny_run_logs_every_reward_and_writes_marker_and_card(grpo_run, sft_folder):
    _, _, out, summary = grpo_run
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [entry for entry in state["log_history"] if "reward" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    for name in ("mcq_accuracy", "order_accuracy", "format", "label_accuracy", "box_iou", "temporal_iou"):
        assert all(f"rewards/{name}/mean" in entry for entry in logged), name
    assert summary["stage"] == "grpo" and summary["global_step"] == 2
    assert summary["rewards"] == list(REWARDS) and summary["reward_weights"] == [1.0, 1.0, 0.2, 1.0, 1.0, 1.0]
    assert summary["system_prompt"] == "You are a surgeon." and summary["started_from_sft"]
    assert summary["mixture"][0]["rows_checkable"] < summary["mixture"][0]["rows_used"]
    card = ModelCard.load(out / "README.md")
    assert "grpo" in card.data.tags and "recipes/grpo.py" in card.text
    assert "| `format` | 0.2 |" in card.text and "| `mcq_accuracy` | 1.0 |" in card.text
    assert "### Stage 1" in card.text and "### Stage 2: grpo" in card.text
    checkable = summary["mixture"][0]
    assert f"({checkable['name']}) {checkable['rows_checkable']} of {checkable['rows_used']}." in card.text


def test_mcq_accuracy_agrees_with_the_evaluation_on_every_demo_prediction(grpo_run, sureon_build):
    """``sureon eval sureon`` loads the GRPO model; on every prediction it scores (plus variants of each reference
    answer a model could write), the reward equals the evaluation's verdict."""
    from datasets import load_dataset

    tmp, _, out, _ = grpo_run
    run = tmp / "eval"
    argv = ["eval", "sureon", "--model", str(out), "--dataset", str(sureon_build.out), "--mode", "visual",
            "--frames-as", "images", "--max-new-tokens", "8", "--out", str(run)]  # fmt: skip
    assert cli_main(argv) == 0
    assert json.loads((run / "summary.json").read_text())["system_prompt"] == "You are a surgeon."
    predictions = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    records = {r["question_id"]: r for r in load_dataset(str(sureon_build.out), "bench", split="test")}
    texts, rows, verdicts = [], [], []
    for prediction in predictions:
        record = records[prediction["question_id"]]
        if not record["options"]:
            continue
        target = answer_target(record)
        wrong = "A" if target != "A" else "B"
        candidates = [prediction["raw_output"], target, f"({target})", f"<think>{wrong}?</think>{target}",
                      f"{wrong} or {target}", wrong, record["options"][record["answer_index"]]]  # fmt: skip
        for position, text in enumerate(candidates):
            texts.append(text)
            rows.append(reference_columns(record, target))
            verdict = prediction["correct"] if position == 0 else parse_answer(record, text, target).correct
            verdicts.append(float(verdict))
    assert len(rows) == 7 * sum(1 for r in records.values() if r["options"])
    assert mcq_accuracy(said(*texts), **columns(rows)) == verdicts
    assert 0 < sum(verdicts) < len(verdicts)


def test_the_run_resumes_from_its_checkpoint_after_a_kill(sft_folder, sureon_build, tmp_path):
    """Killed (SIGKILL) once its first checkpoint is written, far from its last step; rerun to 6 steps, the run
    continues from its newest checkpoint and its log covers every step once."""
    killed = tiny_config(tmp_path, sft_folder, sureon_build, "killed", max_steps=1000, save_steps=1)
    out = tmp_path / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "recipes/grpo.py", "--config", str(killed)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not (out / "checkpoint-1" / "trainer_state.json").is_file():
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint before the run ended"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "training_complete.json").exists()
    saved = max(int(path.parent.name.split("-")[1]) for path in out.glob("checkpoint-*/trainer_state.json"))
    assert saved < 6, f"the killed run got to checkpoint-{saved} before the kill"
    resumed = tiny_config(tmp_path, sft_folder, sureon_build, "killed", max_steps=6, save_steps=1)
    _, summary = run_grpo(resumed)
    assert summary["resumed_from"] == str(out / f"checkpoint-{saved}")
    assert summary["global_step"] == 6
    state = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())
    assert [entry["step"] for entry in state["log_history"] if "reward" in entry] == [1, 2, 3, 4, 5, 6]


def letter_answers(model: Path) -> list:
    """``sequence_bias`` making a random tiny model answer with one option letter and end its turn: the rewards are
    then not all zero (and greedy, the completions depend on the prompt and the weights only)."""
    from recipes.model_io.modeling import load_processor, tokenizer_of

    tokenizer = tokenizer_of(load_processor(str(model)))
    letters = [tokenizer.convert_tokens_to_ids(letter) for letter in "ABCDEFG"]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [[[letter], 8.0] for letter in letters] + [[[letter, end], 50.0] for letter in letters]


def test_two_ranks_give_the_same_rewards_as_one_process(sft_folder, sureon_build, tmp_path):
    """The same global batch of prompts, answered greedily, scored on two gloo ranks and in one process."""
    from test_recipes import free_port, run_process_group

    generation = {"do_sample": False, "sequence_bias": letter_answers(sft_folder)}
    mcq_only = [{"path": str(sureon_build.out), "name": "db", "exclude_categories": ["TO", "SM"]}]
    path = tiny_config(tmp_path, sft_folder, sureon_build, "one", max_steps=1, per_device_train_batch_size=4,
                       generation_kwargs=generation, dataset_mixture=mcq_only)  # fmt: skip
    one, _ = run_grpo(path)
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", "2", "--num_machines", "1"),
        *("--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port())),
        str(REPO / "recipes" / "grpo.py"),
        *("--config", str(path), "--per_device_train_batch_size", "2", "--output_dir", str(tmp_path / "two")),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    returncode, stderr = run_process_group(command, cwd=tmp_path, env=env, timeout=420)
    assert returncode == 0, stderr[-4000:]
    two = tmp_path / "two"
    assert json.loads((two / "training_complete.json").read_text())["world_size"] == 2

    def logged(out: Path) -> dict:
        state = json.loads((out / "checkpoint-1" / "trainer_state.json").read_text())
        entry = next(entry for entry in state["log_history"] if "reward" in entry)
        return {k: v for k, v in entry.items() if k.startswith(("rewards/", "reward", "completions/"))}

    single, ranks = logged(one), logged(two)
    assert set(single) == set(ranks)
    for key, value in single.items():
        assert ranks[key] == pytest.approx(value, nan_ok=True), key
    assert single["rewards/format/mean"] == 1.0 and single["rewards/order_accuracy/mean"] is None


def test_rank_zero_pushes_after_every_rank_is_done(sft_folder, sureon_build, tmp_path, monkeypatch):
    """The upload comes after the last barrier: a rank that waited in one for an upload of any length would hit the
    process group's timeout (30 minutes by default) and abort the run mid-push."""
    import huggingface_hub
    from huggingface_hub import HfApi
    from test_sft import record_barriers

    calls = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # offline tests: the fake Hub is all
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: calls.append(("create", repo_id)))
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **kw: calls.append(("upload", kw["repo_id"])))
    record_barriers(monkeypatch, calls)
    path = tiny_config(tmp_path, sft_folder, sureon_build, "push", max_steps=1, save_strategy="no")
    out, summary = run_grpo(path, "--push_to_hub", "true", "--hub_model_id", "org/grpo", "--hub_token", "hf_x")
    kinds = [call[0] for call in calls]
    assert "barrier" in kinds and kinds[-2:] == ["create", "upload"], kinds
    assert calls[-1] == ("upload", "org/grpo") and summary["global_step"] == 1 and (out / "README.md").is_file()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_use_vllm_without_vllm_is_refused_before_any_weights_load(tiny_causal_lm, sureon_build, tmp_path):
    """A text-only policy may generate with vLLM (a vision-language one may not: tests/test_grpo_video.py), where
    vLLM is installed; here it is not, and that is one line before anything loads."""
    path = tiny_config(tmp_path, tiny_causal_lm, sureon_build, "vllm", use_vllm=True)
    with pytest.raises(ValueError, match="use_vllm: true, but vLLM is not installed"):
        run_grpo(path)
    assert not (tmp_path / "vllm").exists()


GRPO_MISTAKES = {
    "stages (an SFT key)": ({"stages": [{"name": "a"}]}, "unknown key 'stages' (not a setting of recipes/grpo.py"),
    "a misspelt reward": (
        {"reward_funcs": ["mcq_acuracy"], "reward_weights": [1.0]},
        "reward_funcs: unknown reward 'mcq_acuracy' (did you mean 'mcq_accuracy'?)",
    ),
    "reward_funcs as one string": ({"reward_funcs": "format"}, "reward_funcs: 'format' is not a list of strings"),
    "one generation": ({"num_generations": 1}, "num_generations: 1 is not an integer of at least 2"),
    "a batch GRPO cannot split": (
        {"per_device_train_batch_size": 3},
        "generation_batch_size (3) must be divisible by num_generations (2)",
    ),
    "a misspelt key": ({"max_completion_lenght": 8}, "(did you mean 'max_completion_length'?)"),
}


@pytest.mark.parametrize("mistake", list(GRPO_MISTAKES))
def test_a_grpo_recipe_mistake_is_one_line_before_anything_loads(mistake, tmp_path, capsys):
    """`python recipes/grpo.py --config RECIPE`: the recipe read strictly against GRPOConfig and its own arguments;
    each mistake is one line naming the file, exit status 2, nothing written."""
    change, says = GRPO_MISTAKES[mistake]
    config = yaml.safe_load(TINY_RECIPE.read_text()) | {"output_dir": str(tmp_path / "run")} | change
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli(["--config", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: training recipe {path}: ") and says in error and "\n" not in error, error
    assert not (tmp_path / "run").exists()


# --- generation cut per answer kind and per prompt (completion_budgets, share_prompt_prefill) -----------------------


def test_every_checkable_row_has_one_answer_kind():
    """The kinds ``completion_budgets`` name: a lettered question, an event order, each grounded JSON shape; an
    open-ended row has none."""
    from public_converters.grounded import SHAPES
    from recipes.training.arguments import ANSWER_KINDS
    from recipes.training.grpo_data import answer_kind

    assert ANSWER_KINDS == ("letter", "order", *SHAPES)
    assert answer_kind(mcq_row()) == "letter" and answer_kind(order_row()) == "order"
    assert [answer_kind(grounded_row(shape, {})) for shape in ("label", "boxes", "window")] == [
        "label",
        "boxes",
        "window",
    ]
    public = {"qa_id": "x", "grounded": True, "template_id": "grounded_tool_count", "answer": '{"count": 2}'}
    assert answer_kind(public) == "count"
    with pytest.raises(ValueError, match="sm: no checkable answer"):
        answer_kind({"question_id": "sm", "answer": "Dissection, then clipping."})


def test_each_rank_generates_whole_groups_of_the_8b_recipe():
    """TRL's RepeatSampler puts a prompt's num_generations copies side by side, and accelerate hands each rank a run
    of per_device_train_batch_size × steps_per_generation rows: at the 8B recipe's settings every rank's generation
    batch holds whole groups (4 prompts × 8 copies), so sharing a prompt's prefill saves 8 prefills in 8 there."""
    from accelerate.data_loader import BatchSamplerShard
    from torch.utils.data import BatchSampler
    from trl.trainer.utils import RepeatSampler

    from recipes.training.launch import hardware_gpus

    recipe = yaml.safe_load((REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml").read_text())
    gpus, copies = hardware_gpus(recipe["hardware"]), recipe["num_generations"]
    accumulation = recipe["global_batch_size"] // (recipe["per_device_train_batch_size"] * gpus)
    per_rank = recipe["per_device_train_batch_size"] * accumulation  # steps_per_generation defaults to accumulation
    sampler = RepeatSampler(range(1000), mini_repeat_count=copies, batch_size=per_rank * gpus // copies,
                            repeat_count=accumulation, shuffle=True, seed=recipe["seed"])  # fmt: skip
    for rank in range(gpus):
        shard = BatchSamplerShard(BatchSampler(sampler, per_rank, drop_last=False), gpus, rank, split_batches=False)
        for batch in list(shard)[: 2 * accumulation]:
            counts = {index: batch.count(index) for index in batch}
            assert len(batch) == per_rank and set(counts.values()) == {copies}, (rank, counts)
    assert per_rank // copies == 4


@pytest.fixture(scope="module")
def cut_trainer(tiny_qwen3_vl, sureon_build, tmp_path_factory):
    """The tiny recipe's trainer on the sample build, 4 completions a prompt, its cuts off (each test sets those it
    measures); and a generation batch of a lettered question and an event order, 4 copies each."""
    from recipes.training.grpo_stage import build_trainer

    tmp = tmp_path_factory.mktemp("cuts")
    path = tiny_config(tmp, tiny_qwen3_vl, sureon_build, "cuts", num_generations=4, per_device_train_batch_size=8,
                       max_frames=4, completion_budgets=None, share_prompt_prefill=False,
                       share_prompt_in_training=False)  # fmt: skip
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(path)]))["trainer"]
    trainer.model.train()  # as the training loop leaves it: TRL logs and scales the loss by the model's mode
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    rows = list(trainer.train_dataset)
    picked = [next(r for r in rows if r["options"]), next(r for r in rows if r["answer_order"])]
    return trainer, [row for row in picked for _ in range(4)]


def completions(output) -> list[list[int]]:
    pairs = zip(output["completion_ids"], output["completion_mask"], strict=True)
    return [ids[mask.bool()].tolist() for ids, mask in pairs]


def test_each_generation_cut_is_counted_and_sharing_the_prefill_changes_no_completion_reward_or_loss(cut_trainer):
    """One generation batch (2 prompts × 4 completions, clips as video) before and after each cut, from one seed,
    counted by hooks on the vision tower and the language model (benchmarks/grpo_generation.py's counter):

    - share_prompt_prefill: the vision tower sees 2 videos instead of 8 and the prefill computes 2 prompts (less
      their last token) plus one token a row; the same first-token logits (float tolerance), the same completions,
      advantages, logged rewards and loss;
    - completion_budgets: each completion is the uncut one cut at its budget (the letter's 2, the order's 6), and
      the batch stops decoding when its last row is done;
    - both: the two savings together, the budgets' completions."""
    import torch

    from benchmarks.grpo_generation import generate

    trainer, batch = cut_trainer
    budgets = {"letter": 2, "order": 6}
    settings = {"trl": {}, "shared": {"share": True}, "budgets": {"budgets": budgets},
                "both": {"budgets": budgets, "share": True}}  # fmt: skip
    runs, first_logits = {}, {}
    for name, cut in settings.items():
        logits = []  # the LM head's outputs over the whole batch: the first is the first token's

        def record(module, args, output, logits=logits):
            if len(output) == len(batch):
                logits.append(output[:, -1].clone())

        hook = trainer.model.lm_head.register_forward_hook(record)
        try:
            counts, output, _ = generate(trainer, batch, 0, budgets=cut.get("budgets"), share=cut.get("share", False))
        finally:
            hook.remove()
        first_logits[name] = logits[0]
        rewards = {key: values[-1] for key, values in trainer._metrics["train"].items() if key.startswith("reward")}
        # the loss of these completions, with the same non-zero advantages (a random policy earns no reward)
        scored = {**output, "advantages": torch.linspace(-1.0, 1.0, len(batch))}
        loss = trainer._compute_loss(trainer.model, scored).detach() if name in ("trl", "shared") else None
        runs[name] = (counts, output, rewards, loss)

    trl, shared = runs["trl"], runs["shared"]
    width = trl[1]["prompt_ids"].shape[1]
    assert (trl[0].vision_inputs, shared[0].vision_inputs) == (8, 2)
    assert shared[0].vision_patches * 4 == trl[0].vision_patches
    assert (trl[0].prefill_tokens, shared[0].prefill_tokens) == (8 * width, 2 * (width - 1) + 8)
    assert shared[0].decode_steps == trl[0].decode_steps == trl[1]["completion_ids"].shape[1] - 1
    torch.testing.assert_close(first_logits["shared"], first_logits["trl"], atol=1e-5, rtol=0)
    assert completions(shared[1]) == completions(trl[1])
    torch.testing.assert_close(shared[1]["advantages"], trl[1]["advantages"])
    assert shared[2] == pytest.approx(trl[2], nan_ok=True) and "rewards/mcq_accuracy/mean" in trl[2]
    torch.testing.assert_close(shared[3], trl[3])
    assert trl[3].abs() > 0

    cut = [budgets["letter"]] * 4 + [budgets["order"]] * 4
    expected = [ids[:budget] for ids, budget in zip(completions(trl[1]), cut, strict=True)]
    for name in ("budgets", "both"):
        counts, output, _, _ = runs[name]
        assert completions(output) == expected, name
        assert counts.generated_tokens == sum(map(len, expected)) < trl[0].generated_tokens
        assert counts.decode_steps == max(map(len, expected)) - 1 < trl[0].decode_steps
    assert runs["both"][0].prefill_tokens == shared[0].prefill_tokens and runs["both"][0].vision_inputs == 2
    assert runs["budgets"][0].prefill_tokens == trl[0].prefill_tokens


def test_a_completion_that_ends_its_answer_stops_at_its_end_of_turn(cut_trainer, tiny_qwen3_vl):
    """A policy that answers with a letter and ends its turn (``<|im_end|>``, one of TRL's eos_token_ids) gives
    completions of those 2 tokens, with the cuts or without: nothing runs on to max_completion_length."""
    from benchmarks.grpo_generation import generate
    from recipes.model_io.modeling import load_processor, tokenizer_of

    trainer, batch = cut_trainer
    end = tokenizer_of(load_processor(str(tiny_qwen3_vl))).convert_tokens_to_ids("<|im_end|>")
    assert end in trainer.eos_token_ids
    config = trainer.generation_config
    saved = (config.do_sample, config.sequence_bias)
    config.do_sample, config.sequence_bias = False, letter_answers(tiny_qwen3_vl)
    try:
        for cut in ({}, {"budgets": {"letter": 4, "order": 8}, "share": True}):
            _, output, _ = generate(trainer, batch, 0, budgets=cut.get("budgets"), share=cut.get("share", False))
            assert all(len(ids) == 2 and ids[-1] == end for ids in completions(output)), completions(output)
    finally:
        config.do_sample, config.sequence_bias = saved


def test_the_8b_budgets_are_twice_the_longest_sample_answer_and_hold_every_one(sureon_build):
    """The 8B recipe's budgets of the Sureon-DB's kinds follow their stated rule on the sample release (twice the
    longest reference answer in the stand-in tokenizer's tokens, plus the end-of-turn, rounded up to 4), and every
    reference answer of the sample build fits them; one a budget cannot hold is refused, naming the row and the fix."""
    from recipes.training.architectures import standin_processor
    from recipes.training.grpo_data import check_completion_budgets, longest_references

    recipe = yaml.safe_load((REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml").read_text())
    budgets, cap = recipe["completion_budgets"], recipe["max_completion_length"]
    tokenizer = standin_processor().tokenizer
    loaded, index, _ = build_mixture(parse_mixture([{"path": str(sureon_build.out), "name": "db"}]))
    longest = longest_references(loaded, index, tokenizer)
    assert set(longest) == {"letter", "order"}
    for kind, (needed, _) in longest.items():
        answer = needed - 1
        assert budgets[kind] == -(-(2 * answer + 1) // 4) * 4, kind
    check_completion_budgets(loaded, index, tokenizer, budgets, cap)
    needed, where = longest["order"]
    with pytest.raises(ValueError, match=f"order: {needed - 1} tokens cannot hold the reference answer of {where}"):
        check_completion_budgets(loaded, index, tokenizer, {"order": needed - 1}, cap)


def test_the_plans_grpo_rows_carry_their_answer_kind(sureon_build):
    """``sureon plan``'s measured GRPO rows name their answer kind (what the budgets bound); a synthetic clip is a
    lettered question."""
    from recipes.training.architectures import standin_processor
    from recipes.training.plan.tokens import measure_grpo_mixture, measure_grpo_synthetic

    processor, settings = standin_processor(), {"max_frames": 2}
    rows = measure_grpo_mixture(processor, [{"path": str(sureon_build.out), "name": "db"}], settings, 4, 0)
    assert rows and {row["kind"] for row in rows} <= {"letter", "order"}
    assert [row["kind"] for row in measure_grpo_synthetic(processor, settings, (64, 36))] == ["letter"]


# --- the prompt once per micro-batch in the training passes (share_prompt_in_training) -----------------------------


@pytest.fixture(scope="module")
def packing_trainer(tiny_qwen3_vl, sureon_build, tmp_path_factory):
    """The tiny recipe's trainer (the random tiny Qwen3-VL, sdpa) on a mixture of clips, images and text questions;
    and one prompt of each: a video, an image and a text prompt."""
    from test_grpo_video import mixed_config

    from recipes.training.grpo_stage import build_trainer

    tmp = tmp_path_factory.mktemp("packing")
    path = mixed_config(tmp, tiny_qwen3_vl, sureon_build, "packing")
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(path)]))["trainer"]
    trainer.model.train()  # as the training loop leaves it: TRL scales the loss by the model's mode
    trainer.current_gradient_accumulation_steps = 1
    rows = list(trainer.train_dataset)
    videos = next(r for r in rows if r["visuals"]["videos"])
    images = next(r for r in rows if r["visuals"]["images"])
    text = next(r for r in rows if not r["visuals"]["videos"] and not r["visuals"]["images"])
    return trainer, [videos, images, text]


def scored_batch(trainer, rows: list[dict], lengths: list[int], masked: tuple[int, ...] = ()) -> dict:
    """TRL's layout of scored completions for ``rows`` (each row's prompt as the trainer encodes it, left-padded;
    random completions of ``lengths`` tokens, right-padded), the rows in ``masked`` masked whole as
    ``mask_truncated_completions`` masks a completion; advantages from -1 to 1."""
    import torch

    from recipes.training.grpo_trainer import BATCH_VISUALS

    prompts = trainer.encode_batch(rows)
    generator = torch.Generator().manual_seed(0)
    width, length, count = max(len(p.input_ids) for p in prompts), max(lengths), len(rows)
    pad = trainer._tokenizer.pad_token_id
    prompt_ids, completion_ids = torch.full((count, width), pad), torch.full((count, length), pad)
    prompt_mask, completion_mask = torch.zeros_like(prompt_ids), torch.zeros_like(completion_ids)
    for row, (prompt, size) in enumerate(zip(prompts, lengths, strict=True)):
        prompt_ids[row, width - len(prompt.input_ids) :] = torch.tensor(prompt.input_ids)
        prompt_mask[row, width - len(prompt.input_ids) :] = 1
        completion_ids[row, :size] = torch.randint(10, 200, (size,), generator=generator)
        completion_mask[row, :size] = 0 if row in masked else 1
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.linspace(-1.0, 1.0, count),
        "num_items_in_batch": completion_mask.sum(),
        BATCH_VISUALS: prompts,
    }


def loss_and_gradients(trainer, batch: dict) -> dict:
    """TRL's ``_compute_loss`` of one micro-batch, backward: its per-token log-probabilities and entropies, its loss,
    every parameter's gradient, and what the pass computed (benchmarks/grpo_generation.py's counter)."""
    from benchmarks.grpo_generation import counting_passes

    recorded = []
    score = type(trainer)._get_per_token_logps_and_entropies

    def recording(model, *args, **kwargs):
        recorded.append(score(trainer, model, *args, **kwargs))
        return recorded[-1]

    trainer._get_per_token_logps_and_entropies = recording  # an instance attribute over the class's method
    trainer.model.zero_grad(set_to_none=True)
    try:
        with counting_passes(trainer.model) as counts:
            loss = trainer._compute_loss(trainer.model, batch)
    finally:
        del trainer._get_per_token_logps_and_entropies
    loss.backward()
    ((logps, entropies, _),) = recorded
    gradients = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
    return {"logps": logps.detach(), "entropies": entropies.detach(), "loss": loss.detach(), "gradients": gradients,
            "counts": counts}  # fmt: skip


@pytest.mark.parametrize("checkpointing", [False, True], ids=["checkpointing off", "checkpointing on"])
def test_the_prompt_once_per_micro_batch_gives_trls_log_probabilities_loss_and_gradients(
    packing_trainer, checkpointing, monkeypatch
):
    """One micro-batch of 3 completions each of a video, an image and a text prompt, interleaved, of 1 to 7 tokens,
    one masked whole (as mask_truncated_completions masks one): with share_prompt_in_training the policy's pass runs
    each prompt once (the vision tower sees the clip and the image once, not 3 times; the language model computes
    each prompt less its last token once, then each completion's branch) and gives TRL's per-token
    log-probabilities, entropies, loss and every parameter's gradient (float32, within float rounding), with
    activation checkpointing off and on."""
    import torch

    trainer, (video, image, text) = packing_trainer
    order = [video, image, text, video, text, image, video, image, text]
    lengths = [5, 3, 1, 4, 6, 2, 7, 2, 3]
    batch = scored_batch(trainer, order, lengths, masked=(7,))
    if checkpointing:
        trainer.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    try:
        runs = {}
        for share in (False, True):
            monkeypatch.setattr(trainer, "share_prompt_in_training", share)
            runs[share] = loss_and_gradients(trainer, batch)
    finally:
        trainer.model.activation_checkpointing_disable()
    trl, packed = runs[False], runs[True]
    torch.testing.assert_close(packed["logps"], trl["logps"], atol=1e-5, rtol=0)
    mask = batch["completion_mask"].bool()
    assert (trl["logps"][~mask] == 0).all() and mask.sum() == sum(lengths) - 2
    torch.testing.assert_close(packed["entropies"][mask], trl["entropies"][mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(packed["loss"], trl["loss"], atol=1e-6, rtol=1e-5)
    assert trl["loss"].abs() > 0 and packed["gradients"].keys() == trl["gradients"].keys()
    for name, gradient in trl["gradients"].items():
        torch.testing.assert_close(packed["gradients"][name], gradient, atol=1e-6, rtol=1e-4, msg=name)
    assert any(g.abs().sum() > 0 for n, g in trl["gradients"].items() if ".visual." in n)  # through the prompt too

    prompts = batch["visual_inputs"]
    before, after = trl["counts"], packed["counts"]
    assert (before.vision_inputs, after.vision_inputs) == (6, 2)  # 3 clips and 3 images; each once
    assert before.vision_patches == 3 * after.vision_patches
    width = batch["prompt_ids"].shape[1] + batch["completion_ids"].shape[1]
    assert before.llm_positions == len(order) * width
    scored = batch["completion_mask"].sum(1).tolist()  # each branch: the prompt's last token and all but the last
    packed_lengths = [
        len(prompt.input_ids) - 1 + sum(max(n, 1) for p, n in zip(prompts, scored, strict=True) if p is prompt)
        for prompt in (prompts[0], prompts[1], prompts[2])
    ]
    assert after.llm_positions == 3 * max(packed_lengths) < before.llm_positions / 2


def test_grouping_a_prompts_completions_leaves_the_steps_gradient_as_it_is(packing_trainer, monkeypatch):
    """A generation batch of 2 prompts × 4 completions, split into 2 micro-batches of one optimizer step (dapo, the
    recipe's loss: normalised by the step's tokens; steps_per_generation = accumulation = 2): TRL's ``_prepare_inputs``
    shuffles the rows, mixing the prompts; with share_prompt_in_training the same shuffle is followed by grouping,
    each micro-batch one prompt's 4 completions, packed. The step's summed loss and every gradient are TRL's, and the
    random stream after the split is the same (generation samples as it would have)."""
    import torch

    trainer, (video, image, _) = packing_trainer
    batch = scored_batch(trainer, [video] * 4 + [image] * 4, [3, 5, 2, 4, 1, 6, 3, 2])
    monkeypatch.setattr(trainer.args, "steps_per_generation", 2)
    monkeypatch.setattr(trainer, "current_gradient_accumulation_steps", 2)
    monkeypatch.setattr(trainer, "_generate_and_score_completions", lambda inputs: dict(batch))
    steps = {}
    for share in (False, True):
        monkeypatch.setattr(trainer, "share_prompt_in_training", share)
        trainer._step, trainer._buffered_inputs = 0, None
        torch.manual_seed(3)
        trainer._prepare_inputs([{}] * 8)
        after_split = torch.random.get_rng_state()
        trainer.model.zero_grad(set_to_none=True)
        total = 0.0
        for micro_batch in trainer._buffered_inputs:
            loss = trainer._compute_loss(trainer.model, micro_batch)
            loss.backward()
            total += loss.detach()
        prompts = [{id(p) for p in micro_batch["visual_inputs"]} for micro_batch in trainer._buffered_inputs]
        gradients = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
        steps[share] = (after_split, prompts, total, gradients)
    (trl_rng, trl_prompts, trl_loss, trl_gradients), (rng, prompts, loss, gradients) = steps[False], steps[True]
    assert any(len(ids) == 2 for ids in trl_prompts) and all(len(ids) == 1 for ids in prompts)
    assert torch.equal(rng, trl_rng)
    torch.testing.assert_close(loss, trl_loss, atol=1e-6, rtol=1e-5)
    assert gradients.keys() == trl_gradients.keys()
    for name, gradient in trl_gradients.items():
        torch.testing.assert_close(gradients[name], gradient, atol=1e-6, rtol=1e-4, msg=name)
