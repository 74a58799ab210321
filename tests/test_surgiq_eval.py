"""SurgiQ scoring on tiny models: equal to a plain per-label reference, one forward per question, resumable,
deterministic, few-shot pool excluded, and the CLI's outputs agree with its predictions."""

import json
import math
import re

import numpy as np
import pytest
import torch
from conftest import REPO

from builders.prompt import ANSWER_CUE, surgiq_prompt
from builders.surgiq.build import BuildOptions, build_surgiq
from recipes.evaluation.surgiq.evaluate import load_surgiq
from recipes.evaluation.surgiq.scoring import (
    FEWSHOT_POOL_SIZE,
    LabelScorer,
    ScoreCache,
    fewshot_pool,
    render_prompts,
    score_prompts,
)
from recipes.model_io.modeling import load_model, load_processor, tokenizer_of
from recipes.training.tiny_models import build_tiny_causal_lm, build_tiny_qwen3_vl
from sureon.cli import main as cli_main


SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "lm")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_surgiq(BuildOptions(sources=[SAMPLE], out=tmp_path_factory.mktemp("surgiq") / "surgiq")).out


@pytest.fixture(scope="module")
def records(dataset):
    return load_surgiq(str(dataset), "default", "test")


@pytest.fixture(scope="module")
def lm(tiny_lm):
    model = load_model(str(tiny_lm))
    return model, tokenizer_of(load_processor(str(tiny_lm)))


def reference_label_logprobs(model, tokenizer, prompt: str) -> dict[str, dict[str, float]]:
    """Unbatched, unpadded: for each label variant, one forward over prompt + label and the label's log-probability."""
    prompt_ids = tokenizer(prompt)["input_ids"]
    result: dict[str, dict[str, float]] = {}
    for letter in "ABCD":
        for variant in (letter, " " + letter):
            label = tokenizer.encode(variant, add_special_tokens=False)
            assert len(label) == 1
            with torch.no_grad():
                logits = model(torch.tensor([prompt_ids + label])).logits[0, len(prompt_ids) - 1].double()
            result.setdefault(letter, {})[variant] = float(torch.log_softmax(logits, -1)[label[0]])
    return result


class ForwardCounter:
    """Counts a model's forward calls and the questions (batch rows) they carry, inside a ``with`` block."""

    def __init__(self, model):
        self.model, self.calls, self.rows = model, 0, 0

    def count(self, module, args, kwargs):
        self.calls += 1
        self.rows += kwargs["input_ids"].shape[0]

    def __enter__(self):
        self.handle = self.model.register_forward_pre_hook(self.count, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def test_scores_equal_a_plain_forward_per_label_with_both_variants(lm, records, tmp_path):
    model, tokenizer = lm
    subset = records[::3]  # prompts of different lengths, left-padded together in batches of 4
    prompts = render_prompts(subset, [])
    scorer = LabelScorer(model, tokenizer)
    scores, _ = score_prompts(scorer, [r["id"] for r in subset], prompts, ScoreCache(tmp_path / "c.jsonl"), "fp", 4)
    assert len({len(ids) for ids in scorer.encode(prompts)}) > 5
    space_wins = plain_wins = 0
    for record, prompt in zip(subset, prompts, strict=True):
        reference = reference_label_logprobs(model, tokenizer, prompt)
        expected = [max(reference[letter].values()) for letter in "ABCD"]
        np.testing.assert_allclose(scores[record["id"]], expected, atol=2e-5, rtol=0)
        for letter in "ABCD":
            plain, spaced = reference[letter][letter], reference[letter][" " + letter]
            space_wins += spaced > plain + 1e-4
            plain_wins += plain > spaced + 1e-4
    assert space_wins and plain_wins  # the max really picks between the two variants


def test_prompt_ends_with_the_answer_cue_and_letters_options(records):
    prompt = surgiq_prompt(records[0])
    assert prompt.endswith(f"\nD. {records[0]['options'][3]}\n{ANSWER_CUE}")
    assert f"Question: {records[0]['question']}" in prompt


@pytest.mark.parametrize("batch_size", [1, 4])
def test_exactly_one_forward_pass_per_question(lm, records, tmp_path, batch_size):
    model, tokenizer = lm
    scorer = LabelScorer(model, tokenizer)
    with ForwardCounter(model) as counter:
        ids = [r["id"] for r in records]
        score_prompts(scorer, ids, render_prompts(records, []), ScoreCache(tmp_path / "c.jsonl"), "fp", batch_size)
    assert counter.rows == len(records)
    assert counter.calls == math.ceil(len(records) / batch_size)


def test_a_killed_run_resumes_without_rescoring_and_matches_a_fresh_run(lm, records, tmp_path, monkeypatch):
    model, tokenizer = lm
    ids, prompts = [r["id"] for r in records], render_prompts(records, [])
    fresh, _ = score_prompts(
        LabelScorer(model, tokenizer), ids, prompts, ScoreCache(tmp_path / "fresh.jsonl"), "fp", 4
    )

    scorer = LabelScorer(model, tokenizer)
    real_score, calls = scorer.score_ids, []

    def dies_on_the_third_batch(batch):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(len(batch))
        return real_score(batch)

    monkeypatch.setattr(scorer, "score_ids", dies_on_the_third_batch)
    cache_file = tmp_path / "resume.jsonl"
    with pytest.raises(KeyboardInterrupt):
        score_prompts(scorer, ids, prompts, ScoreCache(cache_file), "fp", 4)
    with cache_file.open("a") as handle:
        handle.write('{"key": "cut sh')  # a crash mid-write leaves a partial line
    assert len(ScoreCache(cache_file).entries) == 8
    assert cache_file.read_text().endswith("}\n")  # the partial line is cut off on opening

    with ForwardCounter(model) as counter:
        resumed, batches = score_prompts(LabelScorer(model, tokenizer), ids, prompts, ScoreCache(cache_file), "fp", 4)
    assert batches == counter.calls == math.ceil(len(ids) / 4) - 2
    assert resumed == fresh  # same batches, same floats
    again, batches = score_prompts(LabelScorer(model, tokenizer), ids, prompts, ScoreCache(cache_file), "fp", 4)
    assert batches == 0 and again == fresh
    _, batches = score_prompts(LabelScorer(model, tokenizer), ids, prompts, ScoreCache(cache_file), "other", 4)
    assert batches == math.ceil(len(ids) / 4)  # another model fingerprint never reuses these scores


def test_fewshot_pool_is_fixed_and_shown_with_answers(records, dataset):
    pool = fewshot_pool(records)
    assert len(pool) == FEWSHOT_POOL_SIZE
    assert [r["id"] for r in fewshot_pool(list(reversed(records)))] == [r["id"] for r in pool]
    shuffled = load_surgiq(str(dataset), "shuffled", "test")
    assert [r["id"] for r in fewshot_pool(shuffled)] == [r["id"] for r in pool]
    prompt = render_prompts([records[-1]], pool[:2])[0]
    for demo in pool[:2]:
        assert f"Question: {demo['question']}" in prompt
        assert f"{ANSWER_CUE} {'ABCD'[demo['answer_index']]}\n\n" in prompt
    assert pool[2]["question"] not in prompt and prompt.endswith(ANSWER_CUE)


def test_cli_eval_outputs_agree_with_predictions_and_rerun_is_identical(tiny_lm, dataset, records, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["eval", "surgiq", "--model", str(tiny_lm), "--dataset", str(dataset), "--out", str(out)]
    assert cli_main([*argv, "--batch-size", "4"]) == 0
    assert "8 batch(es) scored, 0 question(s) from the cache" in capsys.readouterr().out
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    report = json.loads((out / "report.json").read_text())
    assert [p["id"] for p in predictions] == [r["id"] for r in records]
    for p, record in zip(predictions, records, strict=True):
        scores = list(p["scores"].values())
        assert p["prediction"] == "ABCD"[int(np.argmax(scores))]
        assert p["correct"] == (p["prediction"] == "ABCD"[record["answer_index"]])
        assert sum(p["probabilities"].values()) == pytest.approx(1)
        assert p["confidence"] == pytest.approx(max(p["probabilities"].values()))
    assert report["accuracy"] == pytest.approx(np.mean([p["correct"] for p in predictions]))
    assert sum(g["n"] for g in report["per_type"].values()) == len(records) == report["num_questions"]
    for domain, group in report["per_domain"].items():
        members = [p["correct"] for p in predictions if p["domain"] == domain]
        assert group == {"n": len(members), "accuracy": pytest.approx(np.mean(members))}
    assert report["calibration"]["n_bins"] == 10 and "ECE" in (out / "report.md").read_text()
    assert report["labels"] == {x: [x, " " + x] for x in "ABCD"}
    assert (out / "reliability.png").stat().st_size > 1000
    first = {name: (out / name).read_bytes() for name in ("predictions.jsonl", "report.json", "report.md")}

    assert cli_main([*argv, "--batch-size", "4"]) == 0
    assert f"0 batch(es) scored, {len(records)} question(s) from the cache" in capsys.readouterr().out
    assert {name: (out / name).read_bytes() for name in first} == first


def test_cli_fewshot_excludes_the_pool_from_scoring(tiny_lm, dataset, records, tmp_path):
    out = tmp_path / "fewshot"
    argv = ["eval", "surgiq", "--model", str(tiny_lm), "--dataset", str(dataset), "--out", str(out), "--shots", "2"]
    assert cli_main([*argv, "--config", "shuffled"]) == 0
    report = json.loads((out / "report.json").read_text())
    pool = [r["id"] for r in fewshot_pool(records)]
    assert report["fewshot_pool"] == pool and report["demonstrations"] == pool[:2]
    assert report["excluded_from_scoring"] == sorted(pool)
    scored = [json.loads(line)["id"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert scored == [r["id"] for r in records if r["id"] not in pool]


def test_chat_template_wraps_the_prompt_once(lm, records, tmp_path):
    model, tokenizer = lm
    prompts = render_prompts(records[:3], [], tokenizer)
    assert all(p.startswith("<|im_start|>user\n") and p.endswith("<|im_start|>assistant\n") for p in prompts)
    scorer = LabelScorer(model, tokenizer, chat_template=True)
    scores, _ = score_prompts(scorer, [r["id"] for r in records[:3]], prompts, ScoreCache(tmp_path / "c"), "fp", 2)
    reference = reference_label_logprobs(model, tokenizer, prompts[0])
    np.testing.assert_allclose(
        scores[records[0]["id"]], [max(reference[x].values()) for x in "ABCD"], atol=2e-5, rtol=0
    )


@pytest.mark.parametrize("chat_template", [False, True])
def test_a_vision_language_model_scores_text_only(tmp_path, records, chat_template):
    path = build_tiny_qwen3_vl(tmp_path / "vl")
    model, processor = load_model(str(path)), load_processor(str(path))
    tokenizer = tokenizer_of(processor)
    prompts = render_prompts(records[:5], [], processor if chat_template else None)
    assert prompts[0].startswith("<|im_start|>user\nThe following") == chat_template
    scorer = LabelScorer(model, tokenizer, chat_template=chat_template)
    scores, _ = score_prompts(scorer, [r["id"] for r in records[:5]], prompts, ScoreCache(tmp_path / "c"), "fp", 5)
    for record, prompt in zip(records[:5], prompts, strict=True):
        reference = reference_label_logprobs(model, tokenizer, prompt)
        np.testing.assert_allclose(scores[record["id"]], [max(reference[x].values()) for x in "ABCD"], atol=2e-5)


def split_tokenizer(tokenizer, piece: str = "ĠC"):
    """The same tokenizer without the merge that makes ``piece`` one token (byte-level: " C" becomes " " + "C")."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    merges = state["model"]["merges"]
    state["model"]["merges"] = [m for m in merges if "".join(m if isinstance(m, list) else m.split(" ")) != piece]
    assert len(state["model"]["merges"]) == len(merges) - 1
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        eos_token=tokenizer.eos_token,
        pad_token=tokenizer.pad_token,
    )


def continuation_logprobs(model, tokenizer, prompt: str) -> dict[str, dict[str, float]]:
    """Unbatched, unpadded: each label variant's log-probability as the prompt's continuation, however many tokens."""
    prompt_ids = tokenizer(prompt)["input_ids"]
    result: dict[str, dict[str, float]] = {}
    for letter in "ABCD":
        for variant in (letter, " " + letter):
            label = tokenizer.encode(variant, add_special_tokens=False)
            with torch.no_grad():
                logits = model(torch.tensor([prompt_ids + label])).logits[0].double()
            logprobs = torch.log_softmax(logits, -1)
            total = sum(float(logprobs[len(prompt_ids) - 1 + k, token]) for k, token in enumerate(label))
            result.setdefault(letter, {})[variant] = total
    return result


def test_a_label_variant_split_into_two_tokens_is_scored_as_its_whole_continuation(lm, records, tmp_path):
    model, tokenizer = lm
    split = split_tokenizer(tokenizer)
    assert len(split.encode(" C", add_special_tokens=False)) == 2
    assert all(len(split.encode(v, add_special_tokens=False)) == 1 for v in ("A", " A", "B", " B", "C", "D", " D"))
    scorer = LabelScorer(model, split)
    assert all(set(variants) == {x, " " + x} for x, variants in zip("ABCD", scorer.labels.values(), strict=True))
    subset = records[:6]
    prompts = render_prompts(subset, [])
    with ForwardCounter(model) as counter:
        scores, batches = score_prompts(
            scorer, [r["id"] for r in subset], prompts, ScoreCache(tmp_path / "c.jsonl"), "fp", 4
        )
    assert counter.calls == 2 * batches == 4  # one pass for the one-token variants, one for " C"
    for record, prompt in zip(subset, prompts, strict=True):
        reference = continuation_logprobs(model, split, prompt)
        np.testing.assert_allclose(scores[record["id"]], [max(reference[x].values()) for x in "ABCD"], atol=2e-5)


class BigramLM(torch.nn.Module):
    """A causal LM whose next token depends on the last one only: after anything ``first`` is likely, after ``first``
    ``second`` is; every other token is equally unlikely."""

    def __init__(self, vocab_size: int, first: int, second: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocab_size, vocab_size)
        torch.nn.init.zeros_(self.table.weight)
        with torch.no_grad():
            self.table.weight[:, first] = 10.0
            self.table.weight[first, :] = 0.0
            self.table.weight[first, second] = 12.0

    @property
    def device(self):
        return self.table.weight.device

    def forward(self, input_ids, attention_mask=None, logits_to_keep=0, use_cache=False):
        logits = self.table(input_ids)
        return type("Output", (), {"logits": logits[:, -logits_to_keep:] if logits_to_keep else logits})()


def test_a_split_variant_gets_its_real_probability_so_the_argmax_is_not_biased(lm, records, tmp_path):
    """The model puts nearly all its mass on " C" (two tokens here); scoring only one-token variants would miss it."""
    _, tokenizer = lm
    split = split_tokenizer(tokenizer)
    space, c = split.encode(" C", add_special_tokens=False)
    model = BigramLM(len(split), space, c)
    scores, _ = score_prompts(
        LabelScorer(model, split),
        [r["id"] for r in records],
        render_prompts(records, []),
        ScoreCache(tmp_path / "c"),
        "fp",
        8,
    )
    assert all(int(np.argmax(scores[r["id"]])) == 2 for r in records)
    assert all(scores[r["id"]][2] > math.log(0.5) for r in records)


def test_with_the_chat_template_a_model_trained_with_a_system_prompt_is_scored_with_it(
    tiny_lm, dataset, records, tmp_path, capsys
):
    import shutil

    model = tmp_path / "trained"
    shutil.copytree(tiny_lm, model)
    system = "You are a senior surgical examiner."
    (model / "training_complete.json").write_text(json.dumps({"system_prompt": system, "blind": True}))
    argv = ["eval", "surgiq", "--model", str(model), "--dataset", str(dataset), "--limit", "4", "--chat-template"]
    runs = {"trained": [], "override": ["--system-prompt", "Answer."], "none": ["--no-system-prompt"]}
    reports = {}
    for name, extra in runs.items():
        assert cli_main([*argv, *extra, "--out", str(tmp_path / "runs" / name)]) == 0
        reports[name] = json.loads((tmp_path / "runs" / name / "report.json").read_text())
    assert [reports[name]["system_prompt"] for name in runs] == [system, "Answer.", None]
    tokenizer = load_processor(str(model))
    expected = render_prompts(records[:4], [], tokenizer, system)
    assert expected[0].startswith(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nThe following")
    scorer = LabelScorer(load_model(str(model)), tokenizer, chat_template=True)
    scores, _ = score_prompts(scorer, [r["id"] for r in records[:4]], expected, ScoreCache(tmp_path / "c"), "fp", 4)
    trained = {
        p["id"]: p
        for p in map(json.loads, (tmp_path / "runs" / "trained" / "predictions.jsonl").read_text().splitlines())
    }
    for record in records[:4]:
        np.testing.assert_allclose(list(trained[record["id"]]["scores"].values()), scores[record["id"]], atol=1e-6)
    without = [
        json.loads(line)["scores"]
        for line in (tmp_path / "runs" / "none" / "predictions.jsonl").read_text().splitlines()
    ]
    assert without != [trained[r["id"]]["scores"] for r in records[:4]]  # the system turn reached the model
    capsys.readouterr()
    assert cli_main([*argv[:-1], "--system-prompt", "x", "--out", str(tmp_path / "plain")]) == 2
    assert "--system-prompt needs --chat-template" in capsys.readouterr().err


# ---- two ranks ----------------------------------------------------------------------------------------------------


def test_each_rank_scores_its_batches_of_the_one_plan(lm, records, tmp_path):
    from recipes.evaluation.ranks import Ranks

    model, tokenizer = lm
    ids, prompts = [r["id"] for r in records], render_prompts(records, [])
    fresh, _ = score_prompts(LabelScorer(model, tokenizer), ids, prompts, ScoreCache(tmp_path / "one.jsonl"), "fp", 4)
    shares = []
    for rank in (0, 1):
        cache = ScoreCache(tmp_path / f"rank-{rank}.jsonl")
        shares.append(score_prompts(LabelScorer(model, tokenizer), ids, prompts, cache, "fp", 4, ranks=Ranks(rank, 2)))
    (first, first_batches), (second, second_batches) = shares
    assert (first_batches, second_batches) == (
        4,
        4,
    )  # 30 questions in 8 batches of 4: batches 0, 2, 4, 6 and 1, 3, 5, 7
    assert not first.keys() & second.keys() and first | second == fresh  # the same floats as one process


@pytest.mark.slow  # two launched ranks, ~15 CPU s; the split itself is checked in-process above
def test_two_gloo_ranks_resume_their_logs_and_write_the_one_process_outputs(tiny_lm, dataset, tmp_path):
    import os
    import socket
    import subprocess
    import sys

    from recipe_runs import one_thread

    from builders.jsonl_log import header_line
    from recipes.evaluation.surgiq.evaluate import main

    argv = ["--model", str(tiny_lm), "--dataset", str(dataset), "--batch-size", "4"]
    with one_thread():  # as each rank computes
        assert main([*argv, "--out", str(tmp_path / "one")]) == 0
    logged = (tmp_path / "one" / "scores" / "rank-0-of-1.jsonl").read_text().splitlines(keepends=True)[1:]
    two = tmp_path / "two"
    (two / "scores").mkdir(parents=True)
    # the log holds the batches in plan order, 4 scores each: batch 0 in the one cache file of a run from before
    # sharding, and rank 1 of a killed two-rank run with its batch 1 whole and batch 3 cut short mid-write
    (two / "scores_cache.jsonl").write_text(header_line("surgiq-label-scores") + "".join(logged[0:4]))
    (two / "scores" / "rank-1-of-2.jsonl").write_text(
        header_line("surgiq-label-scores") + "".join(logged[4:8]) + logged[12][:30]
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", port]
    command += ["--module", "recipes.evaluation.surgiq.evaluate", *argv, "--out", str(two)]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("predictions.jsonl", "report.json", "report.md"):
        assert (two / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), name
    assert "6 batch(es) scored, 8 question(s) from the cache" in done.stdout  # batches 2, 4, 6 and 3, 5, 7
    assert re.search(r"2 ranks: rank 0 3 batch\(es\) in [\d.]+ s, rank 1 3 batch\(es\)", done.stdout)
