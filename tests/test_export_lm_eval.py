"""`sureon export lm-eval`: the SurgiQ tasks render our prompt, score like our scorer, and, run by lm-eval on the
tiny causal LM, give the same per-question predictions and accuracy as `sureon eval surgiq`."""

import importlib.util
import json
import math

import pytest
from conftest import REPO

from builders.surgiq.build import BuildOptions, build_surgiq
from recipes.evaluation.surgiq.evaluate import load_surgiq
from recipes.evaluation.surgiq.scoring import (
    FEWSHOT_POOL_SIZE,
    LabelScorer,
    fewshot_pool,
    predictions_from_scores,
    render_prompts,
)
from recipes.export import lm_eval as export
from recipes.export.task_files import FunctionTag, load_task_yaml
from recipes.model_io.modeling import load_model, load_processor, tokenizer_of
from sureon.cli import main as cli_main


SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return build_surgiq(BuildOptions(sources=[SAMPLE], out=tmp_path_factory.mktemp("surgiq") / "surgiq")).out


@pytest.fixture(scope="module")
def tasks(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "lm_tasks"
    assert cli_main(["export", "lm-eval", "--dataset", str(dataset), "--out", str(out)]) == 0
    return out


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def load_utils(tasks):
    spec = importlib.util.spec_from_file_location("exported_utils", tasks / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("config", ["default", "shuffled"])
@pytest.mark.parametrize("shots", [0, 1, 2, 3])
def test_task_prompts_and_questions_are_those_of_sureon_eval_surgiq(tasks, dataset, config, shots):
    records = load_surgiq(str(dataset), config, "test")
    pool = fewshot_pool(records) if shots else []
    scored = [r for r in records if r not in pool]
    rows = read_rows(tasks / "data" / f"surgiq_{config}_{shots}shot.jsonl")
    assert [row["id"] for row in rows] == [r["id"] for r in scored]
    utils = load_utils(tasks)
    assert [utils.doc_to_text(row) for row in rows] == render_prompts(scored, pool[:shots])
    manifest = json.loads((tasks / "manifest.json").read_text())
    entry = next(t for t in manifest["tasks"] if t["task"] == f"surgiq_{config}_{shots}shot")
    assert entry["read"] == len(records) == entry["scored"] + len(entry["excluded_from_scoring"])
    assert len(entry["excluded_from_scoring"]) == (FEWSHOT_POOL_SIZE if shots else 0)


def test_task_yaml_points_at_the_exported_functions_and_data(tasks):
    template = load_task_yaml(tasks / export.TEMPLATE)
    utils = load_utils(tasks)
    functions = [template[key] for key in ("doc_to_text", "doc_to_choice", "doc_to_target", "process_results")]
    functions.append(template["metric_list"][-1]["aggregation"])
    assert all(isinstance(name, FunctionTag) and callable(getattr(utils, name)) for name in functions)
    assert utils.process_results is export.process_results  # the project's function, not a copy
    assert template["output_type"] == "multiple_choice" and template["target_delimiter"] == ""
    assert [m["metric"] for m in template["metric_list"]] == ["acc", "acc_space_only", "brier", "ece"]
    task = load_task_yaml(tasks / "surgiq_shuffled_2shot.yaml")
    assert task["include"] == export.TEMPLATE and task["task"] == "surgiq_shuffled_2shot"
    assert task["dataset_kwargs"]["data_files"]["test"] == str(tasks / "data" / "surgiq_shuffled_2shot.jsonl")
    assert "surgiq_default_0shot" in (tasks / "README.md").read_text()


def test_process_results_equals_our_scorer_on_the_tiny_model(tasks, tiny_causal_lm, dataset):
    """lm-eval hands eight continuation log-likelihoods; with the scorer's own per-variant numbers they must give the
    scorer's prediction, confidence and correctness."""
    import torch

    model = load_model(str(tiny_causal_lm))
    tokenizer = tokenizer_of(load_processor(str(tiny_causal_lm)))
    scorer = LabelScorer(model, tokenizer)
    rows = read_rows(tasks / "data" / "surgiq_default_2shot.jsonl")
    utils = load_utils(tasks)
    for row in rows[:6]:
        prompt_ids = scorer.encode([utils.doc_to_text(row)])[0]
        with torch.no_grad():
            logits = model(torch.tensor([prompt_ids])).logits[0, -1].double()
        logprobs = torch.log_softmax(logits, -1)
        choice_ids = [tokenizer.encode(choice, add_special_tokens=False) for choice in utils.doc_to_choice(row)]
        assert all(len(ids) == 1 for ids in choice_ids)
        results = [(float(logprobs[ids[0]]), False) for ids in choice_ids]
        reference = predictions_from_scores([row], {row["id"]: scorer.score_ids([prompt_ids])[0].tolist()})[0]
        metrics = utils.process_results(row, results)
        ours = export.prediction(row, [r[0] for r in results])
        assert ours["prediction"] == reference["prediction"]
        assert math.isclose(ours["confidence"], reference["confidence"], rel_tol=1e-5)
        assert metrics["acc"] == float(reference["correct"])
        assert metrics["ece"] == (ours["confidence"], reference["correct"])


def test_plain_label_win_counts_for_us_but_not_for_stock_scoring():
    row = {"id": "q", "answer_index": 1, "domain": "general_surgery", "question_type": "diagnosis"}
    # plain A..D, then " A".." D": the plain "B" is the best label; the space-prefixed variants favour "C"
    lls = [-5.0, -0.5, -4.0, -6.0, -3.0, -2.5, -1.0, -3.5]
    metrics = export.process_results(row, [(ll, False) for ll in lls])
    assert metrics["acc"] == 1.0 and metrics["acc_space_only"] == 0.0
    assert metrics["brier"] == pytest.approx(
        sum((p - (i == 1)) ** 2 for i, p in enumerate(_softmax([-3, -0.5, -1, -3.5])))
    )
    assert export.ece([(0.9, True), (0.9, False)]) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="expected 8 choice scores"):
        export.process_results(row, [(ll, False) for ll in lls[:4]])


def _softmax(values):
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def test_export_refuses_to_overwrite_an_existing_folder(tasks, dataset, tmp_path, capsys):
    assert cli_main(["export", "lm-eval", "--dataset", str(dataset), "--out", str(tasks)]) == 2
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.parametrize(("config", "shots"), [("default", 0), ("default", 2), ("shuffled", 0)])
def test_lm_eval_run_gives_the_predictions_of_sureon_eval_surgiq(
    tasks, dataset, tiny_causal_lm, tmp_path, config, shots
):
    """The exported task run by lm-eval itself (dev extra) on the tiny causal LM, against `sureon eval surgiq`."""
    pytest.importorskip("lm_eval", reason="lm-eval is in the dev extra")
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    run = tmp_path / "ours"
    argv = ["eval", "surgiq", "--model", str(tiny_causal_lm), "--dataset", str(dataset), "--out", str(run)]
    assert cli_main([*argv, "--config", config, "--shots", str(shots), "--batch-size", "4"]) == 0
    ours = {p["id"]: p for p in read_rows(run / "predictions.jsonl")}
    report = json.loads((run / "report.json").read_text())

    name = export.task_name(config, shots)
    results = simple_evaluate(
        model="hf",
        model_args=f"pretrained={tiny_causal_lm},dtype=float32,device=cpu",
        tasks=[name],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        batch_size=8,
        log_samples=True,
    )
    samples = results["samples"][name]
    theirs = {s["doc"]["id"]: export.prediction(s["doc"], [r[0] for r in s["filtered_resps"]]) for s in samples}
    assert set(theirs) == set(ours)
    assert {i: p["prediction"] for i, p in theirs.items()} == {i: p["prediction"] for i, p in ours.items()}
    for question_id, prediction in theirs.items():
        assert prediction["confidence"] == pytest.approx(ours[question_id]["confidence"], abs=1e-4)
    assert results["results"][name]["acc,none"] == pytest.approx(report["accuracy"])
    assert {s["doc"]["id"]: s["acc"] for s in samples} == {i: float(p["correct"]) for i, p in ours.items()}


def test_the_module_describes_multi_token_labels_as_our_scorer_treats_them(tiny_causal_lm):
    """It used to say a label variant of several tokens is dropped by our scorer: it is scored whole, as lm-eval
    scores a multi-token continuation, so that is no longer a difference between the two."""
    from test_surgiq_eval import split_tokenizer

    from recipes.evaluation.surgiq.scoring import label_token_ids

    split = split_tokenizer(tokenizer_of(load_processor(str(tiny_causal_lm))))
    assert len(label_token_ids(split)["C"][" C"]) == 2  # kept, with both of its tokens
    text = " ".join(export.__doc__.split())
    assert "dropped" not in text
    assert "A label variant the tokenizer splits into several tokens is scored alike by both" in text
