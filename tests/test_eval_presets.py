"""Model presets, request parameters, reasoning fields and the Table 3 report over several runs.

The presets are the shipped YAML files; the endpoint runs go to a local chat-completions server that records every
request body, on the demo benchmark built as `make demo` builds it.
"""

import argparse
import json

import pytest
import yaml
from fake_chat_server import FakeChatServer, Reply, last_user_text

from recipes.evaluation import runner
from recipes.evaluation.inference import OpenAIBackend
from recipes.evaluation.presets import SETTINGS, load_all, load_preset
from recipes.evaluation.public.evaluate import make_parser as public_parser
from recipes.evaluation.runner import Default, backend_from_args, request_param, resolve_settings, run_settings
from recipes.evaluation.sureon.evaluate import make_parser as sureon_parser
from recipes.evaluation.sureon.report_statistics import PAPER_TABLE3, load_paper_table3
from sureon.cli import main as cli_main


TABLE3_MODELS = {
    "Qwen3VL-8B-I",
    "Qwen3VL-32B-T",
    "Gemma 4",
    "Molmo2",
    "MedGemma 1.5",
    "MedGRPO",
    "GPT-5.1 (high)",
    "Gemini 3.1 Pro",
}


def read_predictions(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


# ---- presets ----------------------------------------------------------------------------------------------------


def test_every_preset_resolves_to_a_complete_argument_set(tmp_path):
    presets = load_all()
    assert {p["paper_row"] for p in presets} == TABLE3_MODELS  # one preset per evaluated model of Table 3
    paper_models = {row["model"] for row in load_paper_table3()["rows"]}
    for preset in presets:
        assert preset["paper_row"] in paper_models  # the report can set our run beside the printed row
        assert preset["source"] and preset["description"] and preset["max_frames"] == 8  # the Sureon paper's D.1
        for parser, extra in (
            (sureon_parser(), []),
            (public_parser(), ["--benchmark", "bench-cholec80-phase-frame"]),
        ):
            argv = ["--preset", preset.name, "--dataset", "d", "--out", str(tmp_path), *extra]
            args = resolve_settings(parser.parse_args(argv))
            for dest in SETTINGS:
                value = getattr(args, dest)
                assert not isinstance(value, Default), (preset.name, dest)
                if preset[dest] is not None:
                    assert value == preset[dest], (preset.name, dest)
            assert args.model_name == preset.name and args.request_params == preset["request_params"]
            settings = run_settings(args)
            assert settings["preset"] == preset.name and settings["paper_row"] == preset["paper_row"]
            assert settings["overrides"] == [] and settings["model"] == preset["model"]
            json.dumps(settings)  # goes into summary.json as is
        if preset["backend"] == "openai":  # builds without a download: check what it would send
            backend = backend_from_args(args, max_frames=8)
            assert isinstance(backend, OpenAIBackend) and backend.params == preset["request_params"]
            assert backend.client.base_url == preset["base_url"].rstrip("/")
            assert backend.max_tokens_field == preset["max_tokens_field"]
        else:  # local weights: check the options the backend is built with, without downloading them
            built = {}
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(runner, "make_backend", lambda name, model, built=built, **kw: built.update(kw) or name)
                assert backend_from_args(args, max_frames=8) == preset["backend"]
            assert (built["revision"], built["dtype"], built["frames_as"]) == (
                preset["revision"],
                preset["dtype"],
                preset["frames_as"],
            )
            assert built["max_new_tokens"] == preset["max_new_tokens"]
            # a build holding more frames than the preset shows: the preset's 8, evenly spaced, the protocol's count
            frames = run_settings(args, stored_frames=9)["frames"]
            assert (frames["frames_shown"], frames["at_protocol"]) == (8, True), preset.name
    thinking = {p.name: p["max_new_tokens"] for p in presets if p.name in ("qwen3-vl-32b-thinking", "gpt-5.1-high")}
    assert min(thinking.values()) >= 16384
    gpt = load_preset("gpt-5.1-high")
    assert gpt["request_params"] == {"reasoning_effort": "high", "temperature": None}
    assert gpt["max_tokens_field"] == "max_completion_tokens"
    assert load_preset("gemini-3.1-pro")["request_params"]["reasoning_effort"] == "high"


def test_an_explicit_flag_overrides_the_preset_even_at_the_built_in_value(tmp_path):
    base = ["--preset", "qwen3-vl-32b-thinking", "--dataset", "d", "--out", str(tmp_path)]
    args = resolve_settings(sureon_parser().parse_args(base))
    assert (args.max_new_tokens, args.frames_as, args.backend) == (32768, "images", "transformers")
    typed = resolve_settings(sureon_parser().parse_args([*base, "--max-new-tokens", "512", "--frames-as", "auto"]))
    assert (typed.max_new_tokens, typed.frames_as) == (512, "auto")  # 512 and auto are also the built-in defaults
    assert run_settings(typed)["overrides"] == ["frames_as", "max_new_tokens"]
    plain = resolve_settings(sureon_parser().parse_args(["--model", "m", "--dataset", "d", "--out", str(tmp_path)]))
    assert (plain.max_new_tokens, plain.frames_as, plain.model_name, plain.max_frames) == (512, "auto", None, None)
    gpt = ["--preset", "gpt-5.1-high", "--dataset", "d", "--out", str(tmp_path), "--request-param", "seed=7"]
    args = resolve_settings(sureon_parser().parse_args([*gpt, "--request-param", "reasoning_effort=low"]))
    assert args.request_params == {"reasoning_effort": "low", "temperature": None, "seed": 7}
    assert run_settings(args)["overrides"] == ["request_params.reasoning_effort"]
    with pytest.raises(ValueError, match="no model"):
        resolve_settings(sureon_parser().parse_args(["--dataset", "d", "--out", str(tmp_path)]))


@pytest.mark.parametrize("backend", ["vllm", "openai"])
def test_frames_as_reaches_the_vllm_and_openai_backends(backend, tmp_path, monkeypatch):
    """vLLM, offline or served, takes a clip as the one video SFT trains on and the transformers backend shows, so
    --frames-as is every backend's: it reaches the backend and the run records it (summary.json's own frames_as is
    the backend's reading of auto)."""
    argv = ["--model", "m", "--backend", backend, "--dataset", "d", "--out", str(tmp_path), "--frames-as", "video"]
    args = resolve_settings(sureon_parser().parse_args(argv))
    built = {}
    monkeypatch.setattr(runner, "make_backend", lambda name, model, **options: built.update(options) or name)
    assert backend_from_args(args, max_frames=8) == backend
    assert built["frames_as"] == "video" and run_settings(args)["frames_as"] == "video"
    transformers = resolve_settings(sureon_parser().parse_args(["--model", "m", "--dataset", "d", "--out", "o"]))
    assert run_settings(transformers)["frames_as"] == "auto"


def test_list_presets_prints_every_preset_without_other_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["eval", "sureon", "--list-presets"])
    assert exit_info.value.code == 0
    listing = capsys.readouterr().out
    for preset in load_all():
        assert preset.name in listing and preset["model"] in listing
    assert "UII-AI/Qwen2.5-VL-7B-MedGRPO (unconfirmed id)" in listing


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.update(max_new_token=4), "unknown key 'max_new_token'"),
        (lambda p: p.update(max_new_tokens="many"), "key 'max_new_tokens' must be an integer, got 'many'"),
        (lambda p: p.update(unconfirmed="no"), "key 'unconfirmed' must be true or false"),
        (lambda p: p.pop("model"), r"missing key\(s\) model"),
        (lambda p: p.update(backend="tgi"), "key 'backend' must be one of transformers, vllm, openai"),
        (lambda p: p.update(request_params={"messages": []}), "request_params: request parameter 'messages' is set"),
        (lambda p: p.update(max_frames=0), "key 'max_frames' must be at least 1"),
    ],
)
def test_a_bad_preset_names_its_file_and_key(tmp_path, edit, message, capsys):
    values = yaml.safe_load(load_preset("gpt-5.1-high").path.read_text())
    edit(values)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(ValueError, match=rf"mine\.yaml: {message}"):
        load_preset(str(path))
    argv = [
        "eval",
        "sureon",
        "--preset",
        str(path),
        "--dataset",
        str(tmp_path / "sureon"),
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mine.yaml" in err and not (tmp_path / "out").exists()


def test_request_param_values_are_json_when_they_parse():
    assert request_param("reasoning_effort=high") == ("reasoning_effort", "high")
    assert request_param("seed=0") == ("seed", 0)
    assert request_param("temperature=null") == ("temperature", None)
    assert request_param('extra_body={"google": {"thinking_config": {"thinking_budget": 128}}}')[1] == {
        "google": {"thinking_config": {"thinking_budget": 128}}
    }
    assert request_param("stop=a=b") == ("stop", "a=b")
    for bad in ("reasoning_effort", "=high", "model=gpt", "stream=true"):
        with pytest.raises(argparse.ArgumentTypeError):
            request_param(bad)


# ---- request parameters and reasoning on a local endpoint ---------------------------------------------------------


def endpoint_script(body, index):
    if body["model"] == "fake-judge":
        return Reply(content=json.dumps({"reason": "same steps", "verdict": "correct"}))
    question = last_user_text(body)
    usage = {"prompt_tokens": 100, "completion_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 30}}
    if "Which structure is visible?" in question:  # the reasoning names C, the answer is empty: unparseable
        return Reply(raw=completion_with_reasoning("", "Thinking... so the answer is (C).", usage, body))
    if "Summarize" in question:
        return Reply(raw=completion_with_reasoning("Mobilize, expose, divide.", "Steps first.", usage, body))
    if "Order these events" in question:
        return Reply(raw=completion_with_reasoning("B, C, A", "A cannot be first.", usage, body))
    return Reply(raw=completion_with_reasoning("Answer: (B)", "Weighing the options, C looks right.", usage, body))


def completion_with_reasoning(content: str, reasoning: str, usage: dict, body: dict) -> str:
    message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return json.dumps(
        {"id": "x", "object": "chat.completion", "model": body["model"], "choices": [choice]} | {"usage": usage}
    )


def endpoint_argv(bench, out, server, *extra):
    argv = ["eval", "sureon", "--model", "fake-vlm", "--backend", "openai", "--dataset", str(bench), "--out", str(out)]
    return [*argv, "--base-url", server.url, "--api-key-env", "NO_SUCH_KEY_VAR", *extra]


def test_request_params_reach_every_eval_and_judge_body_and_key_the_caches(bench, tmp_path):
    out = tmp_path / "run"
    params = ["--request-param", "reasoning_effort=high", "--request-param", "temperature=null"]
    params += ["--max-tokens-field", "max_completion_tokens", "--max-new-tokens", "4096"]
    judge = ["--judge-model", "fake-judge", "--judge-request-param", "reasoning_effort=low"]
    with FakeChatServer(endpoint_script) as server:
        judge += ["--judge-base-url", server.url, "--judge-api-key-env", "NO_SUCH_KEY_VAR"]
        assert cli_main(endpoint_argv(bench, out, server, *params, *judge)) == 0
        generation = [b for b in server.requests if b["model"] == "fake-vlm"]
        judged = [b for b in server.requests if b["model"] == "fake-judge"]
        assert len(generation) == 22 and len(judged) == 2
        for body in generation:
            assert body["reasoning_effort"] == "high" and body["max_completion_tokens"] == 4096
            assert "temperature" not in body and "max_tokens" not in body
        for body in judged:
            assert body["reasoning_effort"] == "low" and body["temperature"] == 0.0
            assert body["response_format"]["type"] == "json_schema" and body["max_tokens"] == 512
        asked = len(server.requests)
        assert cli_main(endpoint_argv(bench, out, server, *params, *judge)) == 0  # same parameters: all cached
        assert len(server.requests) == asked
        changed = [p if p != "reasoning_effort=high" else "reasoning_effort=medium" for p in params]
        assert cli_main(endpoint_argv(bench, out, server, *changed, *judge)) == 0  # a new parameter: asked again
        again = [b for b in server.requests[asked:] if b["model"] == "fake-vlm"]
        assert len(again) == 22 and {b["reasoning_effort"] for b in again} == {"medium"}
        assert not [b for b in server.requests[asked:] if b["model"] == "fake-judge"]  # same summaries, same judge
    summary = json.loads((out / "summary.json").read_text())
    assert summary["generation"].items() >= {"generated": 22, "cached": 0}.items()
    settings = summary["run_settings"]
    assert settings["request_params"] == {"reasoning_effort": "medium", "temperature": None}
    assert settings["judge"] == {
        "model": "fake-judge",
        "base_url": server.url,
        "request_params": {"reasoning_effort": "low"},
    }


def test_reasoning_is_kept_beside_the_answer_and_never_scored(bench, tmp_path):
    out = tmp_path / "reasoning"
    with FakeChatServer(endpoint_script) as server:
        assert cli_main(endpoint_argv(bench, out, server)) == 0
        (out / "predictions.jsonl").unlink()
        (out / "llm_cache.sqlite").unlink()  # the generation log alone must restore reasoning and usage
        asked = len(server.requests)
        assert cli_main(endpoint_argv(bench, out, server)) == 0
        assert len(server.requests) == asked
    predictions = read_predictions(out)
    mcq = [p for p in predictions if p["answer_format"] == "mcq"]
    empty = [p for p in mcq if p["raw_output"] == ""]
    assert len(empty) == 2 and all(p["parsed"] is None and p["correct"] is False for p in empty)
    assert {p["reasoning"] for p in empty} == {"Thinking... so the answer is (C)."}  # kept, not read as C
    answered = [p for p in mcq if p["raw_output"]]
    assert {p["parsed"] for p in answered} == {"B"} and {p["reasoning"] for p in answered} == {
        "Weighing the options, C looks right."
    }
    assert all(p["correct"] == (p["answer"] == "B") for p in answered)
    assert {p["parsed"] for p in predictions if p["category"] == "TO"} == {"B,C,A"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["generation"].items() >= {"generated": 0, "cached": 22}.items()
    assert summary["token_usage"] == {
        "fake-vlm": {"replies": 22, "prompt_tokens": 2200, "completion_tokens": 880, "reasoning_tokens": 660}
    }


# ---- Table 3 from several runs -----------------------------------------------------------------------------------


def test_table3_report_sets_each_run_beside_its_paper_row(bench, tmp_path, capsys):
    with FakeChatServer(endpoint_script) as server:
        preset = yaml.safe_load(load_preset("gpt-5.1-high").path.read_text()) | {"base_url": server.url}
        preset_file = tmp_path / "gpt-5.1-local.yaml"
        preset_file.write_text(yaml.safe_dump(preset))
        gpt = tmp_path / "gpt"
        argv = ["eval", "sureon", "--preset", str(preset_file), "--dataset", str(bench), "--out", str(gpt)]
        assert cli_main([*argv, "--api-key-env", "NO_SUCH_KEY_VAR", "--max-new-tokens", "64"]) == 0
        other = tmp_path / "other"
        assert cli_main([*endpoint_argv(bench, other, server), "--model-name", "my-model", "--mode", "visual"]) == 0
        bodies = [b for b in server.requests if b["model"] == "gpt-5.1"]
    assert {(b["reasoning_effort"], b["max_completion_tokens"], "temperature" in b) for b in bodies} == {
        ("high", 64, False)
    }
    report = tmp_path / "report"
    args = ["report", "sureon", str(gpt / "predictions.jsonl"), str(other / "predictions.jsonl"), "--out", str(report)]
    assert cli_main([*args, "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    markdown = (report / "report.md").read_text()
    assert (
        "| Model | Eval | numbers from | μ | AD | EE | EA | PAD | IAI | LAR | SPI | F | TO | SM (llmj) |" in markdown
    )
    lines = markdown.splitlines()
    start = lines.index(
        "| GPT-5.1 (high) | visual | paper | 46.8 ±5.7 | 57.1 | 54.0 | 38.2 | 37.9 | 61.3 | 46.0 "
        "| 45.2 | 25.8 | 52.9 | 29.3 |"
    )
    assert lines[start + 2].startswith("|  | MG | paper | +21.1 | +40.0 |")
    ours = [cell.strip() for cell in lines[start + 3].strip("|").split("|")]  # our run right after the paper's
    summary = json.loads((gpt / "summary.json").read_text())
    assert ours[:3] == ["gpt-5.1-local", "visual", "ours"] and ours[3].startswith(
        f"{summary['modes']['visual']['mu']:.1f} ±"
    )
    per_category = summary["modes"]["visual"]["per_category"]
    assert ours[4:13] == [f"{per_category[c]['accuracy']:.1f}" for c in ours_columns()]
    assert lines[start + 5].startswith("|  | MG | ours | ")
    assert any(line.startswith("| my-model | visual | ours |") for line in lines)  # no preset: after the paper's rows
    assert lines.index(next(line for line in lines if line.startswith("| my-model |"))) > lines.index(
        next(line for line in lines if line.startswith("| Sureon-VLM |"))
    )
    assert "| Random |  | paper | 14.6 |" in markdown and "| Human | visual | paper | 64.9 ±5.3 |" in markdown
    assert "| gpt-5.1-local | gpt-5.1-local | GPT-5.1 (high) | gpt-5.1 |" in markdown  # the runs table
    assert 'reasoning_effort="high", temperature=null' in markdown and "max_new_tokens" in markdown
    assert "| GPT-5.1 (high) | visual | paper |" in printed  # the terminal shows the same table
    data = json.loads((report / "report.json").read_text())
    assert data["runs"]["gpt-5.1-local"]["overrides"] == ["max_new_tokens", "api_key_env"]
    assert cli_main([*args, "--out", str(tmp_path / "plain"), "--no-paper", "--resamples", "200"]) == 0
    assert "| paper |" not in (tmp_path / "plain" / "report.md").read_text()
    assert PAPER_TABLE3.is_file()


def test_the_human_baseline_follows_the_papers_human_row(tmp_path):
    from recipes.evaluation.sureon.report_rendering import table3
    from recipes.evaluation.sureon.report_statistics import build_report, load_models

    def rows(model, mode, flip):
        return [
            {"question_id": f"q{i}", "model": model, "mode": mode, "category": "AD", "answer_format": "mcq"}
            | {"num_options": 7, "parsed": "A", "correct": (i % 2 == 0) != flip, "scored_by": "accuracy"}
            for i in range(4)
        ]

    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in rows("m", "visual", False) + rows("m", "blind", True)))
    human = tmp_path / "human.jsonl"
    human.write_text("".join(json.dumps(r) + "\n" for r in rows("rater", "visual", True)))
    models, human_name = load_models([str(run)], str(human))
    report = build_report(models, human_name, n_resamples=100, paper=load_paper_table3())
    table = [line for line in table3(report).splitlines() if line.startswith("|")]
    paper_human = table.index(next(line for line in table if line.startswith("| Human | visual | paper |")))
    assert table[paper_human + 1].startswith("| Human | visual | ours | 50.0 ±")
    assert table[-3].startswith("| m | visual | ours | 50.0 ±") and table[-1].startswith("|  | MG | ours | +0.0 |")


def ours_columns():
    return ["AD", "EE", "EA", "PAD", "IAI", "LAR", "SPI", "F", "TO"]


def test_the_public_report_lists_each_runs_preset(tmp_path):
    """`sureon report public` reads the summary.json beside a predictions file, as `sureon eval public` writes it."""
    run = tmp_path / "molmo2"
    run.mkdir()
    argv = ["--preset", "molmo2-8b", "--dataset", "d", "--out", str(run), "--benchmark", "bench-cholec80-phase-frame"]
    args = resolve_settings(public_parser().parse_args(argv))
    row = {"model": "molmo2-8b", "benchmark": "cholec80", "task": "phase", "input_mode": "frame", "video_id": "v1"}
    row |= {"frame_index": 0, "reference": "Preparation", "prediction": "Preparation", "raw_output": "{}"}
    (run / "predictions.jsonl").write_text(json.dumps(row) + "\n")
    (run / "summary.json").write_text(json.dumps({"model": "molmo2-8b", "run_settings": run_settings(args)}))
    assert cli_main(["report", "public", str(run / "predictions.jsonl"), "--out", str(tmp_path / "report")]) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Runs (from each run's summary.json)" in markdown
    assert "| molmo2-8b | molmo2-8b | Molmo2 | allenai/Molmo2-8B | — | transformers | images, ≤ 8 | 1024 |" in markdown
