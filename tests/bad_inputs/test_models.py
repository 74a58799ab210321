"""Bad input to the model-side commands (`sureon eval`, `report`, `curate`, `audit`, `shortcuts`, `export`, `push`):
each mistake is one line naming the thing and the fix, found before a model loads, and loses nothing.

The cases join the one table (``tests/bad_inputs/``) (same :class:`BadInput`, same checks). Every check they
exercise fires before any model is loaded or any question generated, so each case costs well under a second or two:
the inputs are the session's tiny models and demo benchmark, copies of them cut or emptied, a SurgiQ build of the
sample file, and, for an endpoint nothing listens at, a local port bound and closed again.
"""

import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from . import BadInput, Inputs, check_bad_input, run_cases


REPO = Path(__file__).resolve().parents[2]
SURGIQ_SAMPLE = REPO / "sample_data" / "surgiq" / "surgiq_sample.jsonl"


def closed_port_url() -> str:
    """An OpenAI-style base URL at a local port nobody listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def bench(i: Inputs) -> Path:
    """A private copy of the demo benchmark (a Sureon build whose one config is bench)."""
    copy = i.tmp / "sureon"
    if not copy.exists():
        shutil.copytree(i.fixture("bench"), copy)
    return copy


def truncated_bench(i: Inputs) -> Path:
    """The demo benchmark with its parquet shard cut in half, as an interrupted copy leaves it."""
    build = bench(i)
    (shard,) = (build / "bench").glob("*.parquet")
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    return build


def surgiq(i: Inputs, configs=("default", "shuffled")) -> Path:
    from builders.surgiq.build import BuildOptions, build_surgiq

    return build_surgiq(BuildOptions(sources=[SURGIQ_SAMPLE], out=i.tmp / "surgiq", configs=list(configs))).out


def model(i: Inputs, name: str = "tiny_qwen3_vl") -> str:
    return str(i.fixture(name))


def model_without(i: Inputs, *left_out: str) -> str:
    """A copy of the tiny causal LM without the files named (globs): an incomplete download or copy."""
    source = i.fixture("tiny_causal_lm")
    folder = i.tmp / "copied-model"
    folder.mkdir()
    for path in source.iterdir():
        if not any(path.match(pattern) for pattern in left_out):
            shutil.copy(path, folder / path.name)
    return str(folder)


def empty_folder(i: Inputs) -> str:
    folder = i.tmp / "empty-model"
    folder.mkdir()
    return str(folder)


def text_file(i: Inputs, name: str, text: str | bytes) -> str:
    path = i.tmp / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def sharded_model_missing_a_shard(i: Inputs) -> str:
    folder = Path(model_without(i, "*.safetensors"))
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-00001-of-00002.safetensors"}}')
    return str(folder)


def surgiq_run(i: Inputs, predictions: str, report: str) -> str:
    """A run folder as `sureon eval surgiq` writes it, with the files' text given."""
    folder = i.tmp / "run"
    folder.mkdir()
    (folder / "predictions.jsonl").write_text(predictions)
    (folder / "report.json").write_text(report)
    return str(folder)


def missing(i: Inputs, name: str = "no-such-model") -> str:
    return str(i.tmp / name)


def eval_sureon(*extra: str, dataset=bench, model_of=model):
    return lambda i: (
        ["eval", "sureon", "--model", model_of(i), "--dataset", str(dataset(i)), "--out", str(i.out)] + [*extra]
    )


def eval_surgiq(*extra: str, dataset=surgiq, model_of=lambda i: model(i, "tiny_causal_lm")):
    return lambda i: (
        ["eval", "surgiq", "--model", model_of(i), "--dataset", str(dataset(i)), "--out", str(i.out)] + [*extra]
    )


def guesser(i: Inputs) -> str:
    return f"model={model(i, 'tiny_causal_lm')},device=cpu,max_new_tokens=4"


def curate(*extra: str, dataset=bench, guesser_of=guesser):
    def argv(i: Inputs) -> list[str]:
        head = ["curate", "--dataset", str(dataset(i)), "--config", "bench", "--split", "test"]
        return [*head, "--guesser", guesser_of(i), "--out", str(i.out), *extra]

    return argv


def audit(*extra: str, dataset=bench, guesser_of=guesser):
    def argv(i: Inputs) -> list[str]:
        head = ["audit", "--dataset", str(dataset(i)), "--config", "bench", "--split", "test"]
        return [*head, "--guesser", guesser_of(i), "--out", str(i.out), *extra]

    return argv


def offline_hub_off(i: Inputs, token: str | None = None, endpoint: str | None = None) -> None:
    """The Hub switched on again for one case (tests run with HF_HUB_OFFLINE=1), with no token or a fake one, and
    the Hub's address where nobody listens, so nothing leaves this machine."""
    from huggingface_hub import constants

    patch = i.fixture("monkeypatch")
    patch.setattr(constants, "HF_HUB_OFFLINE", False)
    patch.setattr(constants, "HF_TOKEN_PATH", str(i.tmp / "no-token-file"))
    patch.setattr(constants, "ENDPOINT", endpoint or closed_port_url().removesuffix("/v1"))
    patch.delenv("HF_OIDC_RESOURCE", raising=False)
    if token is None:
        patch.delenv("HF_TOKEN", raising=False)
    else:
        patch.setenv("HF_TOKEN", token)


def push_without_token(i: Inputs) -> list[str]:
    offline_hub_off(i)
    return ["push", str(bench(i)), "--repo-id", "my-org/sureon"]


def push_unreachable(i: Inputs) -> list[str]:
    offline_hub_off(i, token="hf_FAKETOKENFORTHISTEST0123456789")
    return ["push", str(bench(i)), "--repo-id", "my-org/sureon"]


def adapter_folder(i: Inputs, name: str = "adapter") -> Path:
    """What PeftModel.save_pretrained writes: adapter_config.json (naming its base) and the adapter's weights."""
    folder = i.tmp / name
    folder.mkdir(parents=True)
    config = {"base_model_name_or_path": "Qwen/Qwen3-VL-8B-Instruct", "peft_type": "LORA", "r": 8}
    (folder / "adapter_config.json").write_text(json.dumps(config))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return folder


def lora_run_without_final_model(i: Inputs) -> str:
    """A LoRA run's output_dir before it saved its final model: checkpoints holding adapters only."""
    run = i.tmp / "lora-run"
    for step in (1, 2):
        adapter_folder(i, f"lora-run/checkpoint-{step}")
    return str(run)


def vision_model_without_processor(i: Inputs) -> str:
    """A copy of the tiny Qwen3-VL with its weights but without processor_config.json (model.save_pretrained only)."""
    folder = i.tmp / "vl-model"
    shutil.copytree(i.fixture("tiny_qwen3_vl"), folder, ignore=shutil.ignore_patterns("processor_config.json"))
    return str(folder)


def finished_run(i: Inputs) -> Path:
    """A finished training run's output_dir: the model, its card, training_complete.json, a checkpoint."""
    folder = Path(model_without(i))  # nothing left out
    (folder / "README.md").write_text("---\nlibrary_name: transformers\n---\n# a run\n")
    (folder / "training_complete.json").write_text('{"mixture": []}')
    (folder / "checkpoint-1").mkdir()
    (folder / "checkpoint-1" / "optimizer.pt").write_bytes(b"state")
    return folder


def unfinished_run(i: Inputs) -> str:
    """A run stopped before it finished: the Trainer's generic card and weights, no training_complete.json."""
    folder = finished_run(i)
    (folder / "training_complete.json").unlink()
    (folder / "README.md").write_text("---\nlibrary_name: transformers\ntags: [trl, sft]\n---\n# Model Card\n")
    return str(folder)


def run_with_token_file(i: Inputs) -> Path:
    folder = finished_run(i)
    (folder / "hf_token").write_text("hf_NOTAREALTOKEN")
    return folder


def notes_folder(i: Inputs) -> Path:
    """A folder of the user's own with a README.md (what the old check took for a build)."""
    folder = i.tmp / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("# my notes\n")
    (folder / "data.csv").write_text("a,b\n")
    return folder


def build_with(i: Inputs, name: str, text: str = "x") -> str:
    """A copy of the demo benchmark with one more file in it."""
    build = bench(i)
    (build / name).write_text(text)
    return str(build)


def build_without(i: Inputs, *names: str) -> str:
    """A copy of the demo benchmark without the files named (a README lost, or `cp build/*` leaving hidden files)."""
    build = bench(i)
    for name in names:
        (build / name).unlink()
    return str(build)


def surgiq_without_card(i: Inputs) -> str:
    build = surgiq(i)
    (build / "README.md").unlink()
    return str(build)


def push(folder_of, *extra: str):
    return lambda i: ["push", str(folder_of(i)), "--repo-id", "my-org/name", *extra]


NOT_JSONL = "this is not JSON\n"
SUREON_REPORT = "`sureon eval sureon` reads a Sureon build"

CASES: list[BadInput] = [
    # ---- sureon eval sureon ---------------------------------------------------------------------------------------
    BadInput(
        "eval sureon",
        "--dataset a relative path that does not exist",
        eval_sureon(dataset=lambda i: "build/sureon"),
        "build/sureon: no such folder",
    ),
    BadInput(
        "eval sureon",
        "--model a local folder that does not exist",
        eval_sureon(model_of=missing),
        "no such model folder",
    ),
    BadInput(
        "eval sureon",
        "--model a relative folder that does not exist (a Hub id offline)",
        eval_sureon(model_of=lambda i: "runs/sureon-vlm"),
        "runs/sureon-vlm: no such",
    ),
    BadInput(
        "eval sureon", "--model a folder that holds no model", eval_sureon(model_of=empty_folder), "has no config.json"
    ),
    BadInput(
        "eval sureon",
        "--model a folder with config.json but no weights",
        eval_sureon(model_of=lambda i: model_without(i, "*.safetensors")),
        "config.json but no weights",
    ),
    BadInput(
        "eval sureon",
        "--dataset a build whose parquet shard was cut",
        eval_sureon(dataset=truncated_bench),
        "has an unreadable file",
    ),
    BadInput(
        "eval sureon", "--config the build lacks", eval_sureon("--config", "db"), "has no config 'db' (it has: bench)"
    ),
    BadInput("eval sureon", "--split the build lacks", eval_sureon("--split", "train"), "has no split 'train'"),
    BadInput(
        "eval sureon",
        "--dataset a SurgiQ build",
        eval_sureon(dataset=surgiq),
        f"has no config 'bench' (it has: default, shuffled): {SUREON_REPORT}",
    ),
    BadInput(
        "eval sureon",
        "--batch-size 0",
        eval_sureon("--batch-size", "0"),
        "--batch-size: 0 is not an integer of at least 1",
    ),
    BadInput(
        "eval sureon",
        "--max-new-tokens 0",
        eval_sureon("--max-new-tokens", "0"),
        "--max-new-tokens: 0 is not an integer of at least 1",
    ),
    BadInput("eval sureon", "--limit 0", eval_sureon("--limit", "0"), "--limit: 0 is not an integer of at least 1"),
    BadInput("eval sureon", "--max-frames 0", eval_sureon("--max-frames", "0"), "--max-frames: 0 is not an integer"),
    BadInput(
        "eval sureon",
        "--base-url of an endpoint that refuses connections",
        lambda i: eval_sureon("--backend", "openai", "--base-url", closed_port_url())(i),
        "cannot connect to http://127.0.0.1:",
    ),
    BadInput(
        "eval sureon",
        "--judge-base-url of an endpoint that refuses connections",
        lambda i: eval_sureon("--judge-model", "judge", "--judge-base-url", closed_port_url())(i),
        "(--judge-base-url, or OPENAI_BASE_URL)",
    ),
    BadInput(
        "eval sureon",
        "--base-url without http://",
        eval_sureon("--backend", "openai", "--base-url", "localhost:8000/v1"),
        "not an http:// or https:// URL",
    ),
    BadInput(
        "eval sureon",
        "--out is the dataset (a run's folder, which a rerun resumes)",
        lambda i: eval_sureon()(i)[:-2] + ["--out", str(bench(i))],
        "is the input --dataset",
    ),
    # ---- sureon eval public ---------------------------------------------------------------------------------------
    BadInput(
        "eval public",
        "--benchmark the build lacks",
        lambda i: (
            ["eval", "public", "--model", model(i), "--dataset", str(bench(i))]
            + ["--benchmark", "bench-cholec80-phase-frame", "--out", str(i.out)]
        ),
        "has no benchmark bench-cholec80-phase-frame",
    ),
    BadInput(
        "eval public",
        "--benchmark that is not a bench-* config",
        lambda i: (
            ["eval", "public", "--model", model(i), "--dataset", str(bench(i))]
            + ["--benchmark", "cholec80", "--out", str(i.out)]
        ),
        "--benchmark cholec80: the public benchmarks are the bench-* configs",
    ),
    BadInput(
        "eval public",
        "--dataset a relative path that does not exist",
        lambda i: (
            ["eval", "public", "--model", model(i), "--dataset", "build/public"]
            + ["--benchmark", "bench-cholec80-phase-frame", "--out", str(i.out)]
        ),
        "build/public: no such folder",
    ),
    # ---- sureon eval surgiq ---------------------------------------------------------------------------------------
    BadInput(
        "eval surgiq",
        "--dataset a Sureon build",
        eval_surgiq(dataset=bench),
        "has no config 'default' (it has: bench): SurgiQ is read from a build of `sureon build surgiq`",
    ),
    BadInput(
        "eval surgiq",
        "--config the build lacks",
        eval_surgiq("--config", "shuffled", dataset=lambda i: surgiq(i, ["default"])),
        "has no config 'shuffled' (it has: default)",
    ),
    BadInput("eval surgiq", "--shots 4", eval_surgiq("--shots", "4"), "--shots: 4 is not an integer from 0 to 3"),
    BadInput("eval surgiq", "--bins 0", eval_surgiq("--bins", "0"), "--bins: 0 is not an integer of at least 1"),
    BadInput(
        "eval surgiq",
        "--model a local folder that does not exist",
        eval_surgiq(model_of=missing),
        "no such model folder",
    ),
    BadInput(
        "eval surgiq",
        "--model a file",
        eval_surgiq(model_of=lambda i: text_file(i, "model.safetensors", b"\0")),
        "is a file: give the model's folder",
    ),
    BadInput(
        "eval surgiq",
        "--model a sharded checkpoint missing a shard",
        eval_surgiq(model_of=sharded_model_missing_a_shard),
        "weight shards model.safetensors.index.json lists are missing",
    ),
    BadInput(
        "eval surgiq",
        "--dataset a relative path that does not exist",
        eval_surgiq(dataset=lambda i: "build/surgiq"),
        "build/surgiq: no such folder",
    ),
    # ---- sureon shortcuts surgiq ----------------------------------------------------------------------------------
    BadInput(
        "shortcuts surgiq",
        "--dataset a Sureon build",
        lambda i: ["shortcuts", "surgiq", "--dataset", str(bench(i))],
        "has no config 'default' (it has: bench)",
    ),
    BadInput(
        "shortcuts surgiq",
        "--dataset a relative path that does not exist",
        lambda i: ["shortcuts", "surgiq", "--dataset", "build/surgiq"],
        "build/surgiq: no such folder",
    ),
    # ---- sureon curate --------------------------------------------------------------------------------------------
    BadInput("curate", "--trials 0", curate("--trials", "0"), "--trials: 0 is not an integer of at least 1"),
    BadInput("curate", "--tau 0", curate("--tau", "0"), "--tau: 0 is not a number greater than 0"),
    BadInput("curate", "--temperature 0", curate("--temperature", "0"), "--temperature: 0 is not a number greater"),
    BadInput("curate", "--num-folds 1", curate("--num-folds", "1"), "--num-folds: 1 is not an integer of at least 2"),
    BadInput(
        "curate",
        "--guesser model a local folder that does not exist",
        curate(guesser_of=lambda i: f"model={missing(i)},device=cpu"),
        "no-such-model: no such model folder",
    ),
    BadInput(
        "curate",
        "--guesser model a relative folder that does not exist (a Hub id offline)",
        curate(guesser_of=lambda i: "model=runs/guesser-f0,fold=0"),
        "--guesser model=runs/guesser-f0: no such",
    ),
    BadInput(
        "curate",
        "--harden-guesser model a local folder that does not exist",
        lambda i: curate("--harden-guesser", f"model={missing(i)}")(i),
        "--harden-guesser model=",
    ),
    BadInput(
        "curate",
        "--guesser spec with an unknown key",
        curate(guesser_of=lambda i: f"{guesser(i)},temperature=0.5"),
        "unknown key 'temperature'",
    ),
    BadInput(
        "curate",
        "--guesser spec with fold=x",
        curate(guesser_of=lambda i: f"{guesser(i)},fold=x"),
        "fold=x is not an integer",
    ),
    BadInput(
        "curate",
        "--guesser endpoint that refuses connections",
        lambda i: curate(guesser_of=lambda _: f"model=m,backend=openai,base_url={closed_port_url()}")(i),
        "cannot connect to http://127.0.0.1:",
    ),
    BadInput(
        "curate",
        "--dataset a relative path that does not exist",
        curate(dataset=lambda i: "build/sureon"),
        "build/sureon: no such folder",
    ),
    BadInput(
        "curate",
        "--dataset a SurgiQ build",
        curate(dataset=surgiq),
        "has no config 'bench' (it has: default, shuffled)",
    ),
    # ---- sureon audit ---------------------------------------------------------------------------------------------
    BadInput("audit", "--trials 0", audit("--trials", "0"), "--trials: 0 is not an integer of at least 1"),
    BadInput("audit", "--max-new-tokens 0", audit("--max-new-tokens", "0"), "--max-new-tokens: 0 is not an integer"),
    BadInput(
        "audit",
        "--guesser model a local folder that does not exist",
        audit(guesser_of=lambda i: f"model={missing(i)}"),
        "no such model folder",
    ),
    BadInput(
        "audit",
        "--guesser model a folder without weights",
        audit(guesser_of=lambda i: f"model={model_without(i, '*.safetensors')}"),
        "config.json but no weights",
    ),
    BadInput(
        "audit",
        "--dataset a build whose parquet shard was cut",
        audit(dataset=truncated_bench),
        "has an unreadable file",
    ),
    # ---- sureon report --------------------------------------------------------------------------------------------
    BadInput(
        "report sureon",
        "a predictions file that does not exist",
        lambda i: ["report", "sureon", missing(i, "predictions.jsonl"), "--out", str(i.out)],
        "predictions.jsonl: no such prediction file",
    ),
    BadInput(
        "report sureon",
        "an empty predictions file",
        lambda i: ["report", "sureon", text_file(i, "predictions.jsonl", ""), "--out", str(i.out)],
        "no predictions in the file",
    ),
    BadInput(
        "report sureon",
        "a predictions file that is not JSONL",
        lambda i: ["report", "sureon", text_file(i, "predictions.jsonl", NOT_JSONL), "--out", str(i.out)],
        "predictions.jsonl:1: not valid JSON",
    ),
    BadInput(
        "report sureon",
        "a predictions file that is not text",
        lambda i: ["report", "sureon", text_file(i, "predictions.jsonl", b"\xff\xfe\x00\x81"), "--out", str(i.out)],
        "predictions.jsonl:1: not UTF-8 text",
    ),
    BadInput(
        "report sureon",
        "a run's name typed without =",
        lambda i: ["report", "sureon", "Qwen3-VL", text_file(i, "p.jsonl", NOT_JSONL), "--out", str(i.out)],
        "Qwen3-VL: no such prediction file; to name a run, write NAME=PATH",
    ),
    BadInput(
        "report sureon",
        "a name with an empty path",
        lambda i: ["report", "sureon", "Qwen3-VL=", "--out", str(i.out)],
        "write NAME=PATH",
    ),
    BadInput(
        "report sureon",
        "a run folder instead of its predictions file",
        lambda i: ["report", "sureon", surgiq_run(i, "{}\n", "{}"), "--out", str(i.out)],
        "is a folder, not a prediction file",
    ),
    BadInput(
        "report sureon",
        "--alpha 1.5",
        lambda i: ["report", "sureon", text_file(i, "p.jsonl", NOT_JSONL), "--alpha", "1.5", "--out", str(i.out)],
        "--alpha: 1.5 is not a number greater than 0.0 and at most 1.0",
    ),
    BadInput(
        "report public",
        "an empty predictions file",
        lambda i: ["report", "public", text_file(i, "predictions.jsonl", "\n"), "--out", str(i.out)],
        "predictions.jsonl: no predictions in the file",
    ),
    BadInput(
        "report public",
        "a predictions file that is not JSONL",
        lambda i: ["report", "public", text_file(i, "predictions.jsonl", NOT_JSONL), "--out", str(i.out)],
        "predictions.jsonl:1: not valid JSON",
    ),
    BadInput(
        "report public",
        "--exclude-videos without =",
        lambda i: (
            ["report", "public", text_file(i, "p.jsonl", NOT_JSONL), "--exclude-videos", "cholec80"]
            + ["--out", str(i.out)]
        ),
        "write KEY=VALUE, e.g. --exclude-videos cholec80:clip=FILE",
    ),
    BadInput(
        "report surgiq",
        "a run whose predictions are not JSONL",
        lambda i: ["report", "surgiq", surgiq_run(i, NOT_JSONL, '{"model": "m", "config": "default", "shots": 0}')],
        "predictions.jsonl:1: not valid JSON",
    ),
    BadInput(
        "report surgiq",
        "a run whose report.json is not JSON",
        lambda i: ["report", "surgiq", surgiq_run(i, "{}\n", "{")],
        "report.json: not valid JSON",
    ),
    # ---- sureon export --------------------------------------------------------------------------------------------
    BadInput(
        "export lmms-eval",
        "--out is the dataset, with --overwrite",
        lambda i: ["export", "lmms-eval", "--dataset", str(bench(i)), "--out", str(bench(i)), "--overwrite"],
        "is the input --dataset",
    ),
    BadInput(
        "export lmms-eval",
        "--dataset a relative path that does not exist",
        lambda i: ["export", "lmms-eval", "--dataset", "build/sureon", "--out", str(i.out)],
        "build/sureon: no such folder",
    ),
    BadInput(
        "export lmms-eval",
        "--max-new-tokens 0",
        lambda i: ["export", "lmms-eval", "--dataset", str(bench(i)), "--max-new-tokens", "0", "--out", str(i.out)],
        "--max-new-tokens: 0 is not an integer of at least 1",
    ),
    BadInput(
        "export lmms-eval",
        "--dataset a build whose parquet shard was cut",
        lambda i: ["export", "lmms-eval", "--dataset", str(truncated_bench(i)), "--out", str(i.out)],
        "has an unreadable file",
    ),
    BadInput(
        "export lm-eval",
        "--dataset a Sureon build",
        lambda i: ["export", "lm-eval", "--dataset", str(bench(i)), "--out", str(i.out)],
        "has neither config default nor shuffled (it has: bench)",
    ),
    BadInput(
        "export lm-eval",
        "--dataset a relative path that does not exist",
        lambda i: ["export", "lm-eval", "--dataset", "build/surgiq", "--out", str(i.out)],
        "build/surgiq: no such folder",
    ),
    BadInput(
        "export vlmevalkit",
        "--public a relative path that does not exist",
        lambda i: ["export", "vlmevalkit", "--public", "build/public", "--out", str(i.out)],
        "build/public: no such folder",
    ),
    BadInput(
        "export vlmevalkit",
        "--public a Sureon build",
        lambda i: ["export", "vlmevalkit", "--public", str(bench(i)), "--out", str(i.out)],
        "no manifest.json; is it a folder written by `sureon build public`?",
    ),
    BadInput(
        "export vlmevalkit",
        "--max-frames 0",
        lambda i: ["export", "vlmevalkit", "--dataset", str(bench(i)), "--max-frames", "0", "--out", str(i.out)],
        "--max-frames: 0 is not an integer of at least 1",
    ),
    BadInput(
        "export sft",
        "--dataset a relative path that does not exist",
        lambda i: ["export", "sft", "--format", "swift", "--dataset", "build/sureon", "--out", str(i.tmp / "o.jsonl")],
        "build/sureon: no such folder",
    ),
    BadInput(
        "export sft",
        "--config the build lacks",
        lambda i: (
            ["export", "sft", "--format", "swift", "--dataset", str(bench(i)), "--config", "dbb"]
            + ["--out", str(i.tmp / "o.jsonl")]
        ),
        "has no config 'dbb' (it has: bench)",
    ),
    # ---- sureon push ----------------------------------------------------------------------------------------------
    BadInput(
        "push",
        "offline (HF_HUB_OFFLINE=1)",
        lambda i: ["push", str(bench(i)), "--repo-id", "my-org/sureon"],
        "the Hub cannot be reached in offline mode (HF_HUB_OFFLINE is set)",
    ),
    BadInput(
        "push",
        "a folder that is not a build",
        lambda i: ["push", empty_folder(i), "--repo-id", "my-org/sureon"],
        "is no folder sureon wrote",
    ),
    BadInput(
        "push",
        "a folder that does not exist",
        lambda i: ["push", missing(i, "sureon"), "--repo-id", "my-org/sureon"],
        "no such folder to push",
    ),
    BadInput(
        "push",
        "--repo-id that is no repo id",
        lambda i: ["push", str(bench(i)), "--repo-id", "my org/sure on"],
        "is not a Hub repo id (ORG/NAME)",
    ),
    BadInput("push", "no token (not logged in)", push_without_token, "no Hugging Face token to push with"),
    BadInput("push", "the Hub cannot be reached", push_unreachable, "cannot reach the Hub at http://127.0.0.1:"),
    # ---- sureon push: what a folder is, who wrote it, what it holds -----------------------------------------------
    BadInput(
        "push",
        "a finished training run as a dataset repo",
        push(finished_run, "--repo-type", "dataset"),
        "is a training run's folder (a model: config.json, training_complete.json or checkpoints), not a dataset",
    ),
    BadInput(
        "push",
        "a build as a model repo",
        push(bench, "--repo-type", "model"),
        "is a dataset build (no config.json or weights), not a model: push it as a dataset repo",
    ),
    BadInput(
        "push",
        "an unfinished training run (no training_complete.json)",
        push(unfinished_run),
        "has no training_complete.json: an unfinished training run",
    ),
    BadInput(
        "push",
        "a build holding a credentials file",
        push(lambda i: build_with(i, "credentials.txt", "aws_secret_access_key=...")),
        "holds 1 file(s) named like credentials (credentials.txt): nothing was pushed",
    ),
    BadInput(
        "push",
        "a training run holding a token file",
        push(run_with_token_file),
        "named like credentials (hf_token)",
    ),
    BadInput(
        "push",
        "a folder with a README.md that sureon did not write",
        push(notes_folder),
        "is no folder sureon wrote",
    ),
    BadInput(
        "push",
        "a build copied without its hidden marker (cp build/*)",
        push(lambda i: build_without(i, ".sureon-output")),
        "was not written by sureon (it has no .sureon-output file",
    ),
    BadInput(
        "push",
        "a build that lost its README.md",
        push(lambda i: build_without(i, "README.md")),
        "has no README.md card (the dataset card declaring its configs)",
    ),
    # ---- the model: a LoRA adapter, a run without its final model, a model without its processor ------------------
    BadInput(
        "eval sureon",
        "--model a LoRA adapter folder",
        eval_sureon(model_of=lambda i: str(adapter_folder(i))),
        "a LoRA adapter (adapter_config.json, no model weights) of the base model Qwen/Qwen3-VL-8B-Instruct",
    ),
    BadInput(
        "eval sureon",
        "--model a LoRA run's folder whose checkpoints hold adapters",
        eval_sureon(model_of=lora_run_without_final_model),
        "its checkpoints (checkpoint-1, checkpoint-2) hold adapters, not models",
    ),
    BadInput(
        "eval sureon",
        "--model a vision-language model saved without its processor",
        eval_sureon(model_of=vision_model_without_processor),
        "a vision-language model (vision_config) but no processor files",
    ),
    BadInput(
        "eval surgiq",
        "--model a text-only model saved without its tokenizer",
        eval_surgiq(model_of=lambda i: model_without(i, "tokenizer*")),
        "a text-only model but no tokenizer files",
    ),
    BadInput(
        "curate",
        "--guesser model a LoRA adapter folder",
        curate(guesser_of=lambda i: f"model={adapter_folder(i)},device=cpu"),
        "merge_and_unload().save_pretrained(OUT)",
    ),
    # ---- the build: a Sureon build that lost its dataset card ------------------------------------------------------
    BadInput(
        "eval sureon",
        "--dataset a build that lost its README.md",
        eval_sureon(dataset=lambda i: build_without(i, "README.md")),
        "has no README.md, the dataset card that declares the build's configs",
    ),
    BadInput(
        "export lm-eval",
        "--dataset a SurgiQ build that lost its README.md",
        lambda i: ["export", "lm-eval", "--dataset", surgiq_without_card(i), "--out", str(i.out)],
        "has no README.md, the dataset card",
    ),
    # ---- caches and files sureon did not write; guessers of one name ----------------------------------------------
    BadInput(
        "audit",
        "--cache a parquet file of the --dataset build (it was cut at its last newline byte)",
        lambda i: audit("--cache", str(next((bench(i) / "bench").glob("*.parquet"))))(i),
        "lies inside the input --dataset",
    ),
    BadInput(
        "audit",
        "--cache a copy of a build's parquet file",
        lambda i: audit(
            "--cache", text_file(i, "shard.parquet", next((bench(i) / "bench").glob("*.parquet")).read_bytes())
        )(i),
        "is not a blind-scores cache sureon wrote",
    ),
    BadInput(
        "curate",
        "--cache the user's notes, their last line without a newline (it was deleted)",
        lambda i: curate("--cache", text_file(i, "notes.txt", "my notes\nthe last line, no newline"))(i),
        "notes.txt is not a blind-scores cache sureon wrote",
    ),
    BadInput(
        "audit",
        "--cache a folder (found only once the weights had loaded)",
        lambda i: audit("--cache", empty_folder(i))(i),
        "is a folder: give the path of a file",
    ),
    BadInput(
        "curate",
        "--cache a new file inside the --dataset build",
        lambda i: curate("--cache", str(bench(i) / "scores.jsonl"))(i),
        "lies inside the input --dataset",
    ),
    BadInput(
        "audit",
        "two --guesser of one name (both ran, one was kept)",
        lambda i: audit("--guesser", guesser(i))(i),
        "a second guesser named 'qwen3'",
    ),
    BadInput(
        "curate",
        "two --guesser given one name=",
        lambda i: curate("--guesser", f"{guesser(i)},name=g", guesser_of=lambda j: f"{guesser(j)},name=g")(i),
        "a second guesser named 'g'",
    ),
    BadInput(
        "curate",
        "--held-out-guesser of the --harden-guesser's name",
        lambda i: curate("--harden-guesser", guesser(i), "--held-out-guesser", guesser(i))(i),
        "a second guesser named 'qwen3' (the first: --harden-guesser model=",
    ),
    BadInput(
        "export sft",
        "--out a file of the user's, with --overwrite (it was replaced)",
        lambda i: (
            ["export", "sft", "--format", "swift", "--dataset", str(bench(i))]
            + ["--out", text_file(i, "notes.jsonl", '{"mine": true}\n'), "--overwrite"]
        ),
        "is a file sureon did not write",
    ),
    BadInput(
        "export sft",
        "--out a folder",
        lambda i: ["export", "sft", "--format", "swift", "--dataset", str(bench(i)), "--out", empty_folder(i)],
        "is a folder: give the path of a file",
    ),
    BadInput(
        "eval surgiq",
        "--dataset a build whose folder name is too long for datasets' cache files",
        eval_surgiq(dataset=lambda i: surgiq(i).rename(i.tmp / ("s" * 230))),
        "a folder name of 230 bytes is too long for `datasets`",
    ),
]


test_bad_input = run_cases(CASES)


@pytest.mark.parametrize("command", ["eval sureon", "curate"])
def test_a_refused_endpoint_fails_in_well_under_ten_seconds(command, tmp_path, request, capsys):
    """Before, the client retried a refused connection for some 45 s and then said nothing about the connection."""
    case = next(c for c in CASES if c.command == command and "refuses connections" in c.mistake)
    started = time.monotonic()
    check_bad_input(case, tmp_path, request, capsys)
    assert time.monotonic() - started < 5


def test_a_push_that_fails_never_prints_the_token(tmp_path, request, capsys, caplog):
    secret = "hf_FAKETOKENFORTHISTEST0123456789"
    case = next(c for c in CASES if c.mistake == "the Hub cannot be reached")
    check_bad_input(case, tmp_path, request, capsys)
    assert secret not in capsys.readouterr().err + caplog.text
