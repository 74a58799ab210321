"""Planning at the real size: the shipped Qwen3-VL-8B architecture on the meta device, ``sureon plan``'s token counts
against the collator, its model-state figures against DeepSpeed's estimators, its activation estimate against the
tensors a real forward pass saves, and ``benchmarks/gpu_sft.py`` end to end (``--tiny`` on CPU, the 8B on a GPU)."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO
from PIL import Image
from recipe_runs import tiny_recipe

from recipes.model_io.modeling import apply_pixel_caps, load_processor
from recipes.training.architectures import (
    PUBLISHED_PARAMETERS,
    architecture_config,
    build_model,
    standin_processor,
    write_architecture,
)
from recipes.training.collator import SFTCollator
from recipes.training.mixture import build_mixture, parse_mixture
from recipes.training.plan.command import plan_recipe
from recipes.training.plan.flops import matmul_parameters, training_flops
from recipes.training.plan.memory import activation_bytes, deepspeed_estimate, model_state_bytes
from recipes.training.plan.parameters import largest_layer_parameters, parameter_counts
from recipes.training.plan.recipe import lora_settings
from recipes.training.plan.tokens import measure_mixture
from sureon.cli import main as cli_main


QWEN = "Qwen/Qwen3-VL-8B-Instruct"
RECIPE_8B = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"


@pytest.fixture(scope="module", autouse=True)
def one_loader_timing():
    """Each synthetic row's CPU encoded once, not three times: no test here reads the timing's noise, only what the
    plan derives from it."""
    from recipes.training.plan import tokens

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "SYNTHETIC_TIMINGS", 1)
        yield


@pytest.fixture(scope="module")
def meta_8b():
    return build_model(architecture_config(QWEN), device="meta")


@pytest.fixture(scope="module")
def plan_8b():
    """The shipped Sureon-VLM recipe planned on synthetic 768x432 frames (its data is not built in tests)."""
    return plan_recipe(RECIPE_8B, num_gpus=4, synthetic_frames=(768, 432))[0]


def test_the_shipped_config_is_the_published_architecture():
    config = architecture_config(QWEN)
    text, vision = config.text_config, config.vision_config
    assert (text.num_hidden_layers, text.hidden_size, text.num_attention_heads, text.num_key_value_heads) == (
        36,
        4096,
        32,
        8,
    )
    assert text.vocab_size == 151_936 and text.intermediate_size == 12_288 and text.head_dim == 128
    assert (vision.depth, vision.hidden_size, vision.deepstack_visual_indexes) == (27, 1152, [8, 16, 24])
    assert (vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size) == (16, 2, 2)
    assert vision.out_hidden_size == text.hidden_size and not config.tie_word_embeddings


def test_the_meta_8b_model_has_the_published_parameter_count_and_no_memory(meta_8b):
    tensors = list(meta_8b.parameters()) + list(meta_8b.buffers())
    assert tensors and all(tensor.is_meta for tensor in tensors)
    total = sum(p.numel() for p in meta_8b.parameters())
    assert abs(total - PUBLISHED_PARAMETERS[QWEN]) / PUBLISHED_PARAMETERS[QWEN] < 0.01, total


def test_parameter_groups_follow_the_freezing_rules(meta_8b):
    full = parameter_counts(meta_8b, set())
    frozen = parameter_counts(meta_8b, {"vision_tower"})
    assert set(full) == {"vision_tower", "projector", "llm"}
    assert frozen["vision_tower"] == {"trainable": 0, "frozen": full["vision_tower"]["trainable"]}
    assert frozen["llm"] == full["llm"] and frozen["projector"] == full["projector"]
    assert not meta_8b.model.visual.pos_embed.weight.requires_grad  # the leaky one (LlamaFactory PR 10139)
    lora = parameter_counts(meta_8b, set(), {"r": 64, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]})
    # Per layer r x (in + out) for q (4096 -> 4096), k and v (4096 -> 1024), o (4096 -> 4096): 36 layers.
    assert lora["adapters"]["trainable"] == 36 * 64 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    assert all(group["trainable"] == 0 for name, group in lora.items() if name != "adapters")


@pytest.mark.parametrize("num_gpus", [1, 4, 8])
def test_model_states_equal_deepspeeds_estimators(meta_8b, num_gpus):
    total = sum(p.numel() for p in meta_8b.parameters())
    largest = largest_layer_parameters(meta_8b)
    assert largest == 151_936 * 4096  # the embedding (and the untied lm_head)
    for strategy in ("zero2", "zero3"):
        ours = model_state_bytes(strategy, total, 0, num_gpus, largest_layer=largest)
        assert ours == deepspeed_estimate(strategy, total, num_gpus, largest)


def test_the_plan_reports_deepspeeds_figures_and_what_freezing_saves(plan_8b, meta_8b):
    total = sum(p.numel() for p in meta_8b.parameters())
    largest = largest_layer_parameters(meta_8b)
    for strategy in ("zero2", "zero3"):
        memory = plan_8b["memory"][strategy]
        assert memory["source"] == "DeepSpeed estimator"
        assert memory["model_states"] == deepspeed_estimate(strategy, total, 4, largest)
    vision = plan_8b["parameters"]["vision_tower"]["trainable"]
    frozen = model_state_bytes("zero3", total - vision, vision, 4, largest_layer=largest)
    assert plan_8b["memory"]["zero3"]["model_states"] - frozen == 16 * vision // 4
    # Qwen3-VL-8B full fine-tuning with checkpointing fits 4x H200 under ZeRO-3 (the recipe's setting) ...
    assert plan_8b["memory"]["zero3"]["fits"]
    # ... and checkpointing is what makes the activations fit.
    activations = plan_8b["activations"]
    assert activations["longest row, checkpointing on"] * 3 < activations["longest row, checkpointing off"]


def test_synthetic_clip_tokens_follow_qwen3_vl_patching(plan_8b):
    clip = next(row for row in plan_8b["tokens"] if row["source"].startswith("synthetic clip"))
    # 768x432 -> 768x448 (multiples of 32): 24 x 14 merged tokens per frame pair, 4 pairs for 8 frames.
    assert clip["visual_tokens"]["p100"] == 4 * 24 * 14
    assert clip["vision_patches"]["p100"] == 4 * 4 * 24 * 14
    assert clip["tokens"]["p100"] > clip["visual_tokens"]["p100"]


def test_plan_token_counts_equal_what_the_collator_produces(tmp_path, tiny_qwen3_vl, sureon_build):
    settings = {"frames_as": "video", "max_frames": 8, "video_max_pixels": 8 * 48 * 48}
    mixture = [{"path": str(sureon_build.out), "name": "db", "split": "train"}]
    processor = apply_pixel_caps(load_processor(str(tiny_qwen3_vl)), None, settings["video_max_pixels"])
    counts = measure_mixture(processor, mixture, settings, samples=10_000, seed=0)
    loaded, index, _ = build_mixture(parse_mixture(mixture), seed=0)
    collator = SFTCollator(processor, loaded, frames_as="video", max_frames=8)
    assert len(counts) == len(index) > 3
    for position, count in enumerate(counts):
        batch = collator([index[position]])
        assert count["tokens"] == int(batch["attention_mask"].sum())
        assert count["vision_patches"] == int(batch["video_grid_thw"].prod(dim=1).sum())
        assert count["visual_tokens"] == int((batch["input_ids"] == processor.video_token_id).sum())
    plan = plan_recipe(tiny_recipe(tmp_path, tiny_qwen3_vl, sureon_build), samples=10_000, seed=0)[0]
    assert plan["tokens"][0]["tokens"]["p100"] == max(count["tokens"] for count in counts)
    assert plan["processor_note"] is None  # the checkpoint's own processor was on disk


def test_the_plan_counts_the_rows_a_recipes_max_length_refuses(tmp_path, tiny_qwen3_vl, sureon_build, capsys):
    """max_length reaches the plan as it reaches the collator: the rows longer than it are counted as refused, the
    memory is planned on the others, and a bound that refuses every row is one line."""
    unbounded = plan_recipe(tiny_recipe(tmp_path, tiny_qwen3_vl, sureon_build), samples=10_000, seed=0)[0]
    assert unbounded["max_length"] is None
    lengths = sorted(count["tokens"] for count in measure_for_plan(tiny_qwen3_vl, sureon_build))
    bound = lengths[len(lengths) // 2]
    recipe = tiny_recipe(tmp_path, tiny_qwen3_vl, sureon_build, max_length=bound)
    plan = plan_recipe(recipe, samples=10_000, seed=0)[0]
    over = sum(1 for length in lengths if length > bound)
    assert plan["max_length"] == {
        "value": bound,
        "rows_over": over,
        "rows_measured": len(lengths),
        "share": over / len(lengths),
    }
    assert plan["tokens"][0]["tokens"]["p100"] == lengths[-1]  # the table shows every measured row
    assert plan["throughput"]["median_tokens"] <= bound  # memory and speed planned on the rows that train
    assert cli_main(["plan", "--config", recipe]) == 0
    assert f"max_length {bound}: {over} of the {len(lengths)} rows measured" in capsys.readouterr().out
    too_short = tiny_recipe(tmp_path, tiny_qwen3_vl, sureon_build, max_length=lengths[0] - 1)
    assert cli_main(["plan", "--config", too_short]) == 2
    assert f"max_length {lengths[0] - 1} refuses every one of the {len(lengths)} rows" in capsys.readouterr().err


def measure_for_plan(model, build) -> list[dict]:
    """The rows of tiny_recipe's mixture as the plan measures them."""
    settings = {"frames_as": "video", "max_frames": 8, "video_max_pixels": 8 * 48 * 48}
    mixture = [{"path": str(build.out), "name": "db", "split": "train"}]
    processor = apply_pixel_caps(load_processor(str(model)), None, settings["video_max_pixels"])
    return measure_mixture(processor, mixture, settings, samples=10_000, seed=0)


def saved_activation_bytes(model, **inputs) -> int:
    """Bytes autograd keeps for backward (each storage once, the weights excluded) in one training step."""
    saved = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(**inputs).loss.backward()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(size for pointer, size in saved.items() if pointer not in weights)


@pytest.mark.parametrize("frozen", [set(), {"vision_tower"}], ids=["full", "frozen-vision"])
def test_activation_estimate_matches_what_a_forward_pass_saves(frozen):
    """The estimate against the bytes autograd really keeps, for the 8B's layer types scaled down (bf16, sdpa, no
    checkpointing): a text-only batch, and a batch with a 320x224 image through the vision tower."""
    processor = standin_processor()
    tokenizer = processor.tokenizer
    text = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 768, "vocab_size": 1024}
    text |= {"num_attention_heads": 2, "num_key_value_heads": 1, "bos_token_id": None, "eos_token_id": 2}
    vision = {"depth": 2, "hidden_size": 128, "intermediate_size": 512, "num_heads": 2, "out_hidden_size": 256}
    config = architecture_config(QWEN, text=text, vision={**vision, "deepstack_visual_indexes": [0]})
    for key, token in (("image_token_id", "<|image_pad|>"), ("vision_start_token_id", "<|vision_start|>")):
        setattr(config, key, tokenizer.convert_tokens_to_ids(token))
    config.vision_end_token_id = tokenizer.convert_tokens_to_ids("<|vision_end|>")
    torch.manual_seed(0)
    model = build_model(config, device="cpu", dtype=torch.bfloat16, attn_implementation="sdpa")
    parameter_counts(model, frozen)

    input_ids = torch.randint(10, 1000, (1, 256))
    measured = saved_activation_bytes(model, input_ids=input_ids, labels=input_ids)
    estimate = activation_bytes(config, 256, 0, checkpointing=False, frozen=frozen, transient=False, attention="sdpa")
    assert 0.8 < estimate / measured < 1.25, ("text", estimate, measured)

    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (224, 320, 3), dtype=np.uint8))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which tool is visible?"}]}]
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    encoded = processor(text=[prompt], images=[image], return_tensors="pt")
    encoded["pixel_values"] = encoded["pixel_values"].to(torch.bfloat16)
    measured = saved_activation_bytes(model, **encoded, labels=encoded["input_ids"])
    tokens, patches = encoded["input_ids"].shape[1], int(encoded["image_grid_thw"].prod())
    estimate = activation_bytes(
        config, tokens, patches, checkpointing=False, frozen=frozen, transient=False, attention="sdpa"
    )
    assert 0.8 < estimate / measured < 1.25, ("image", estimate, measured)


def test_sureon_plan_prints_the_table_and_writes_json(tmp_path, tiny_qwen3_vl, sureon_build, capsys):
    out = tmp_path / "plan.json"
    recipe = tiny_recipe(tmp_path, tiny_qwen3_vl, sureon_build, freeze_vision_tower=True)
    assert cli_main(["plan", "--config", recipe, "--num-gpus", "2", "--gpu-memory", "80", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    for text in ("tokens p50 / p90 / p99 / max", "vision_tower", "zero2", "zero3", "fsdp", "checkpointing off", "MFU"):
        assert text in printed
    plan = json.loads(out.read_text())[0]
    assert plan["frozen"] == ["vision_tower"] and plan["parameters"]["vision_tower"]["trainable"] == 0
    assert plan["memory"]["zero3"]["source"] == "formula"  # frozen parameters: DeepSpeed's estimator does not apply


def test_plan_without_built_data_says_how_to_proceed(tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump({"model_name_or_path": QWEN, "dataset_mixture": [{"path": str(tmp_path / "missing")}]})
    )
    assert cli_main(["plan", "--config", str(recipe)]) == 2
    assert "--synthetic-frames" in capsys.readouterr().err


def test_a_weightless_checkpoint_folder_loads_its_processor_and_config(tmp_path):
    folder = write_architecture(QWEN, tmp_path / "qwen", processor=standin_processor())
    processor = load_processor(str(folder))
    config = json.loads((folder / "config.json").read_text())
    assert config["text_config"]["num_hidden_layers"] == 36 and not list(folder.glob("*.safetensors"))
    assert config["video_token_id"] == processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")


def run_benchmark(tmp_path, *extra, timeout=560):
    out = tmp_path / "bench.json"
    command = [sys.executable, str(REPO / "benchmarks" / "gpu_sft.py"), *extra, "--json", str(out)]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, json.loads(out.read_text())


def test_gpu_benchmark_tiny_runs_on_cpu_and_prints_every_figure(tmp_path):
    printed, figures = run_benchmark(tmp_path, "--tiny", "--steps", "1", "--batch-size", "2")
    variants = ("checkpointing on", "checkpointing off", "frozen vision")
    for variant in variants:
        line = next(line for line in printed.splitlines() if line.startswith(variant))
        for figure in ("samples/s", "tokens/s", "peak memory", "TFLOPS", "MFU"):
            assert figure in line, line
    assert "ratio checkpointing off / checkpointing on" in printed
    assert [r["variant"] for r in figures["results"]] == list(variants)
    for result in figures["results"]:
        assert result["samples_per_second"] > 0 and result["tokens_per_second"] > result["samples_per_second"]
        assert result["peak_memory_gb"] > 0 and 0 < result["mfu"] < 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_benchmark_8b_on_a_gpu(tmp_path):
    printed, figures = run_benchmark(tmp_path, "--steps", "2")
    assert all(0 < result["mfu"] < 1 for result in figures["results"]), printed


def test_a_file_that_is_not_a_yaml_recipe_is_refused_in_one_line(capsys):
    assert cli_main(["plan", "--config", str(REPO / "README.md")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: training recipe {REPO / 'README.md'}: not YAML (line ") and "\n" not in error


@pytest.mark.parametrize("form", ["absolute", "./", "../", "existing parent", "build/ of a fresh checkout"])
def test_missing_local_data_is_refused_at_once_never_looked_up_on_the_hub(tmp_path, monkeypatch, capsys, form):
    """A path that looks local is never a Hub id: no `datasets` or Hub call (each would retry ~30 s online), and the
    message names the command that builds it. ``build/nope`` where no build/ folder exists yet (a fresh checkout) is
    local by the project's folder convention, although `build/nope` is a valid Hub id."""
    import datasets
    import huggingface_hub

    def no_hub(*args, **kwargs):
        raise AssertionError(f"looked up on the Hub: {args}")

    monkeypatch.setattr(datasets, "load_dataset", no_hub)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    (tmp_path / "work" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    path = {
        "absolute": str(tmp_path / "nope"),
        "./": "./nope",
        "../": "../nope",
        "existing parent": "data/nope",
        "build/ of a fresh checkout": "build/nope",
    }[form]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"model_name_or_path": QWEN, "dataset_mixture": [{"path": path, "name": "db"}]}))
    assert cli_main(["plan", "--config", str(recipe)]) == 2
    error = capsys.readouterr().err.strip()
    assert f"its data {path} does not exist" in error and "--synthetic-frames" in error and "\n" not in error
    assert f"`sureon build sureon --out {path} ...`" in error  # `db` is a Sureon config
    # the training mixture refuses it the same way
    with pytest.raises(FileNotFoundError, match=f"not a Hub id.*sureon build sureon --out {re.escape(path)}"):
        build_mixture(parse_mixture([{"path": path, "name": "db"}]))


def test_a_hub_id_stays_a_hub_id_where_build_outputs_and_results_are_local(tmp_path, monkeypatch):
    """The project's folders are local before they exist; an ``owner/name`` id is still read from the Hub."""
    from builders.hub import looks_local

    monkeypatch.chdir(tmp_path)  # a fresh checkout: none of the folders exists yet
    assert [looks_local(path) for path in ("build/sureon", "outputs/Sureon-VLM-8B", "results/qwen3vl")] == [True] * 3
    assert not any(looks_local(hub_id) for hub_id in ("my-org/sureon", "aleperez24/sureon", QWEN, "builds/sureon"))


def test_lora_throughput_counts_the_frozen_llm_at_4_flops_per_parameter(meta_8b):
    """LoRA freezes the LLM, but gradients pass through it to the adapters: 2 forward + 2 for the input gradients
    (no weight gradients), the rule the module states, plus 6 per adapter parameter; figures from the published
    dimensions, by hand."""
    layers, hidden, kv, intermediate, vocab, rank, tokens = 36, 4096, 8 * 128, 12288, 151936, 16, 1000
    per_layer = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * intermediate
    llm = layers * per_layer + hidden * vocab  # the untied lm_head
    adapters = (
        layers
        * rank
        * (2 * (hidden + hidden) + 2 * (hidden + kv) + 2 * (hidden + intermediate) + (intermediate + hidden))
    )
    attention = 2 * layers * hidden * tokens * tokens
    text_only = {"tokens": tokens, "vision_patches": 0, "visual_tokens": 0, "windows": []}
    matmuls = matmul_parameters(meta_8b)
    assert matmuls["llm"] + matmuls["lm_head"] == llm and matmuls["lm_head"] == hidden * vocab
    lora = {"r": rank, "targets": lora_settings({"use_peft": True})["targets"]}  # all-linear
    assert parameter_counts(meta_8b, set(), lora)["adapters"]["trainable"] == adapters
    flops = training_flops(meta_8b.config, matmuls, text_only, frozen=set(), lora=True, adapters=adapters)
    assert flops == 4 * llm * tokens + 4 * attention + 6 * adapters * tokens


# --- GRPO recipes ---------------------------------------------------------------------------------------------------

RECIPE_GRPO = REPO / "recipes" / "qwen3-vl-8b" / "grpo" / "config_sureon_grpo.yaml"


def grpo_variant(tmp_path, **changes) -> str:
    recipe = yaml.safe_load(RECIPE_GRPO.read_text()) | {"model_name_or_path": QWEN, **changes}
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


def test_the_grpo_recipe_plans_its_sft_base_with_transformers_generation(tmp_path, meta_8b):
    """The 8B GRPO recipe generates with transformers (vLLM cannot take its frames with TRL 1.16): under ZeRO-3 the
    whole model is gathered for generation beside the KV cache and prefill, and it still fits 4 H200s. A text-only
    policy may colocate vLLM: its pool is planned beside training."""
    plan = plan_recipe(RECIPE_GRPO, num_gpus=4, synthetic_frames=(768, 432))[0]
    assert "planned as Qwen/Qwen3-VL-8B-Instruct" in plan["processor_note"]
    grpo, total = plan["grpo"], sum(p.numel() for p in meta_8b.parameters())
    assert grpo["reference_model"] is False and grpo["beta"] == 0
    assert grpo["generation"] == "transformers" and grpo["vllm"] is None
    # 36 layers x (8 KV heads x 128) x keys and values x bf16
    assert grpo["kv_cache_per_token"] == 36 * 1024 * 2 * 2
    assert grpo["generation_batch_per_gpu"] == 4 * 8 and grpo["sequence_tokens"] == grpo["prompt_tokens_p99"] + 256
    assert grpo["kv_cache"] == grpo["kv_cache_per_token"] * 32 * grpo["sequence_tokens"]
    assert plan["memory"]["zero3"]["generation"] == grpo["kv_cache"] + grpo["prefill"] + 2 * total
    assert plan["memory"]["zero3"]["fits"]
    colocated = plan_recipe(
        grpo_variant(tmp_path, use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3),
        num_gpus=4,
        synthetic_frames=(768, 432),
    )[0]
    vllm = colocated["grpo"]["vllm"]
    assert vllm["pool"] == int(0.3 * 141 * 1e9) and vllm["weights"] == 2 * total and vllm["holds_a_generation_batch"]
    for strategy, memory in colocated["memory"].items():
        assert memory["reference_model"] == 0 and memory["generation"] == 0
        parts = memory["model_states"] + memory["activations"] + memory["reserved"] + memory["vllm_pool"]
        assert memory["total"] == parts, strategy


def test_grpo_reference_model_generation_and_vllm_share(tmp_path, meta_8b):
    total = sum(p.numel() for p in meta_8b.parameters())
    kl = plan_recipe(grpo_variant(tmp_path, beta=0.04, use_vllm=False), synthetic_frames=(768, 432))[0]
    memory, grpo = kl["memory"], kl["grpo"]
    assert grpo["reference_model"] and grpo["generation"] == "transformers" and grpo["vllm"] is None
    assert memory["zero2"]["reference_model"] == 2 * total  # replicated
    assert memory["zero3"]["reference_model"] == 2 * total // 4  # sharded like the policy
    assert memory["zero2"]["generation"] == grpo["kv_cache"] + grpo["prefill"]
    assert memory["zero3"]["generation"] == grpo["kv_cache"] + grpo["prefill"] + 2 * total  # weights gathered
    colocate = {"use_vllm": True, "vllm_mode": "colocate"}
    greedy = plan_recipe(
        grpo_variant(tmp_path, **colocate, vllm_gpu_memory_utilization=0.9), synthetic_frames=(768, 432)
    )
    assert not any(memory["fits"] for memory in greedy[0]["memory"].values())
    small = plan_recipe(
        grpo_variant(tmp_path, **colocate, vllm_gpu_memory_utilization=0.1), synthetic_frames=(768, 432)
    )
    assert not small[0]["grpo"]["vllm"]["holds_a_generation_batch"] and not small[0]["memory"]["zero3"]["fits"]
    asleep = grpo_variant(tmp_path, **colocate, vllm_gpu_memory_utilization=0.9, vllm_enable_sleep_mode=True)
    assert plan_recipe(asleep, synthetic_frames=(768, 432))[0]["memory"]["zero3"]["fits"]


def test_sureon_plan_prints_the_grpo_table(capsys, tmp_path):
    out = tmp_path / "plan.json"
    argv = ["plan", "--config", str(RECIPE_GRPO), "--synthetic-frames", "768x432", "--rows", "70000"]
    assert cli_main([*argv, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "GRPO: 8 completions per prompt of at most 256 tokens" in printed and "no reference model" in printed
    assert "| GRPO memory per GPU (GB) |" in printed and "generated per GPU at a time by transformers" in printed
    # the time per step, as the JSON names it: per stage, a sample being a prompt
    plan = json.loads(out.read_text())[0]
    time = plan["time"]
    assert {"step_seconds", "samples_per_step", "epoch_hours", "terms"} <= set(time)
    assert time["epoch_hours"] == pytest.approx(-(-70000 // time["samples_per_step"]) * time["step_seconds"] / 3600)
    assert "padding" in plan and "loader" in plan  # none for GRPO's prompts: encoded in the trainer, never padded
    assert (
        "| term | seconds per step | source | how |" in printed and "| decode: the host's work per step |" in printed
    )
    assert f"an epoch of 70,000 prompts (--rows): {time['steps_per_epoch']:,} steps" in printed
    assert "these are predictions until benchmarks/gpu_grpo.py has measured them on a GPU" in printed


def test_grpo_prompts_are_counted_as_the_grpo_trainer_encodes_them(tmp_path):
    """A GRPO recipe's tokens are its prompts as ``VisualGRPOTrainer`` encodes them (clips as one video, the SFT
    recipe's pixel caps), and its generation memory follows from them: video tokens merge frame pairs, so the same
    clip as tagged images costs more tokens and a larger KV cache and prefill."""
    from recipes.training.grpo_data import grpo_row
    from recipes.training.grpo_trainer import encode_row
    from recipes.training.plan.tokens import synthetic_clip_row

    video = plan_recipe(RECIPE_GRPO, num_gpus=4, synthetic_frames=(768, 432))[0]
    images = plan_recipe(grpo_variant(tmp_path, frames_as="images"), num_gpus=4, synthetic_frames=(768, 432))[0]
    processor = apply_pixel_caps(standin_processor(), 602112, 6422528)
    encoded = encode_row(processor, grpo_row(synthetic_clip_row(0, (768, 432), 8), frames_as="video", max_frames=8))
    (t, h, w) = encoded.visual["video_grid_thw"][0].tolist()
    assert t == 4  # 8 frames in temporal patches of 2
    counted, grpo = video["tokens"][0], video["grpo"]
    assert counted["tokens"]["p100"] == len(encoded.input_ids) == grpo["prompt_tokens_p99"]
    assert counted["visual_tokens"]["p100"] == t * h * w // 4 == grpo["prompt_visual_tokens_p99"]
    assert grpo["frames_as"] == "video" and images["grpo"]["frames_as"] == "images"
    assert images["grpo"]["prompt_visual_tokens_p99"] > 1.5 * grpo["prompt_visual_tokens_p99"]
    assert images["grpo"]["kv_cache"] > grpo["kv_cache"] and images["grpo"]["prefill"] > grpo["prefill"] > 0


# --- time per step (recipes/training/plan/timing.py) ----------------------------------------------------------------

RECIPE_GRPO_BEFORE = REPO / "tests" / "plan_fixtures" / "config_sureon_grpo_before.yaml"
SOURCES = {"measured", "formula", "assumed"}


@pytest.fixture(scope="module")
def grpo_before_and_after():
    """The 8B GRPO recipe as it was before issue 50 (a copy of it from git history) and as shipped, each planned on
    4 H200s on synthetic 768x432 frames: one command each, as docs/training/planning.md prints them."""
    return {
        name: plan_recipe(path, num_gpus=4, synthetic_frames=(768, 432))[0]
        for name, path in (("before", RECIPE_GRPO_BEFORE), ("after", RECIPE_GRPO))
    }


def terms_of(plan: dict) -> dict[str, float]:
    return {term["name"]: term["seconds"] for term in plan["time"]["terms"]}


def test_the_step_is_the_sum_of_named_terms_each_with_its_source(plan_8b, grpo_before_and_after):
    for plan in (plan_8b, *grpo_before_and_after.values()):
        time = plan["time"]
        assert time["terms"] and all({"name", "seconds", "source"} <= set(term) for term in time["terms"])
        assert {term["source"] for term in time["terms"]} <= SOURCES
        assert time["step_seconds"] == pytest.approx(sum(term["seconds"] for term in time["terms"]), rel=1e-12)
        assert time["step_seconds"] > 0 and time["hardware"]["gpu"] == "H200"
    # SFT: a step of the global batch, checkpointing's recompute named (the recipe checkpoints), no data: no epoch
    sft = plan_8b["time"]
    assert sft["samples_per_step"] == plan_8b["global_batch"] == 64 and sft["epoch_hours"] is None
    assert terms_of(plan_8b)["activation checkpointing's recompute"] > 0
    # beside it, as the issue names them: the padding share as configured and the loader's cores
    assert 0 <= plan_8b["padding"]["share"] < 1 and plan_8b["padding"]["grouped"]  # the recipe groups by length
    assert {"cpu_seconds_per_sample", "cores_needed"} <= set(plan_8b["loader"])
    assert plan_8b["loader"]["cores_needed"] == pytest.approx(
        plan_8b["loader"]["cpu_seconds_per_sample"] * sft["samples_per_second"]
    )
    # GRPO: a sample is a prompt, 128 completions a step in groups of 8
    assert grpo_before_and_after["before"]["time"]["samples_per_step"] == 128 / 8


def test_todays_grpo_recipe_still_plans_and_each_cut_of_the_new_one_moves_its_terms(grpo_before_and_after):
    """Before: ZeRO-3 (the model gathered for generation, decode synced over the ranks), every completion may run to
    256 tokens, the prompt prefilled once per completion. After (the shipped recipe): ZeRO-2, completions cut at
    their kind's budget (a multiple-choice letter here), the prefill once per prompt: the plan's terms move as each
    cut says, and a prompt costs less."""
    before, after = grpo_before_and_after["before"], grpo_before_and_after["after"]
    old, new = before["time"]["grpo"], after["time"]["grpo"]
    assert before["time"]["strategy"] == "zero3" and after["time"]["strategy"] == "zero2"
    assert "ZeRO-3 gather of the model for generation" in terms_of(before)
    assert "ZeRO-3 gather of the model for generation" not in terms_of(after)
    assert old["synced_decode"] and not new["synced_decode"]
    assert old["decode_steps"] == old["completion_width"] == 256
    budget = yaml.safe_load(RECIPE_GRPO.read_text())["completion_budgets"]["letter"]
    assert new["decode_steps"] == new["completion_width"] == budget  # the synthetic rows are lettered options
    assert old["prefills_per_generation_batch"] == 32 and new["prefills_per_generation_batch"] == 32 // 8
    for name in ("vision tower (generation)", "prefill (generation)"):
        assert terms_of(before)[name] == pytest.approx(8 * terms_of(after)[name])
    decode = "decode: the host's work per step"
    assert terms_of(before)[decode] == pytest.approx(256 / budget * terms_of(after)[decode])
    per_prompt = {
        name: plan["time"]["step_seconds"] / plan["time"]["samples_per_step"]
        for name, plan in (("before", before), ("after", after))
    }
    # the training passes take each prompt once per micro-batch of its 8 completions, not once per completion
    assert not old["share_prompt_in_training"] and new["share_prompt_in_training"]
    assert (
        new["training_prompts_per_micro_batch"] == 1
        and new["training_sequence_tokens"] < old["training_sequence_tokens"]
    )
    training = ("training forward and backward", "activation checkpointing's recompute")
    for name in training:
        assert terms_of(before)[name] > 7 * terms_of(after)[name], name
    # the goal: a prompt at least 3x cheaper on the recipe's 4 H200s, the same rewards and group size
    assert per_prompt["before"] >= 3 * per_prompt["after"]


@pytest.fixture(scope="module")
def grpo_prompt():
    """One synthetic 8-frame 768x432 clip as the GRPO trainer encodes it, at the 8B recipe's pixel caps."""
    from recipes.training.plan.tokens import measure_grpo_synthetic

    processor = apply_pixel_caps(standin_processor(), 602112, 6422528)
    return measure_grpo_synthetic(processor, {"frames_as": "video", "max_frames": 8}, (768, 432))[0]


def grpo_time_of(meta_8b, prompt, rows=None, strategy="zero3", **settings):
    from recipes.training.plan.timing import grpo_time, hardware_figures

    total = sum(p.numel() for p in meta_8b.parameters())
    base = {"num_generations": 8, "max_completion_length": 256, "per_device_train_batch_size": 4}
    return grpo_time(
        meta_8b.config,
        matmul_parameters(meta_8b),
        base | settings,
        prompt_row=prompt,
        rows=rows or [prompt],
        per_device_batch=4,
        accumulation=8,
        num_gpus=4,
        strategy=strategy,
        total_parameters=total,
        trainable=total,
        frozen=set(),
        lora=False,
        adapters=0,
        checkpointing=True,
        hardware=hardware_figures("4× NVIDIA H200 141 GB"),
        assumed_mfu=0.4,
    )


def test_grpo_decode_steps_follow_the_budgets_of_the_kinds_a_batch_holds(meta_8b, grpo_prompt):
    """With budgets, a batch decodes until its longest completion ends: the largest budget among its prompts, whose
    expectation follows the kinds' shares; the width training pads to is a rank's own (4 prompts), the decode every
    rank's (16). A kind without a budget keeps max_completion_length; rows without a kind plan the largest budget."""
    from recipes.training.plan.timing import expected_longest

    assert expected_longest([4, 100], [3, 1], 1) == pytest.approx(0.75 * 4 + 0.25 * 100)
    assert expected_longest([4, 100], [3, 1], 4) == pytest.approx(4 + 96 * (1 - 0.75**4))
    rows = [{**grpo_prompt, "kind": "letter"}] * 3 + [{**grpo_prompt, "kind": "boxes"}]
    budgets = {"letter": 4, "boxes": 100}
    cut = grpo_time_of(meta_8b, grpo_prompt, rows, completion_budgets=budgets)["grpo"]
    assert cut["decode_steps"] == pytest.approx(expected_longest([4, 100], [3, 1], 16))
    assert cut["completion_width"] == pytest.approx(expected_longest([4, 100], [3, 1], 4))
    unbudgeted = grpo_time_of(meta_8b, grpo_prompt, rows, completion_budgets={"letter": 4})["grpo"]
    assert unbudgeted["decode_steps"] == pytest.approx(expected_longest([4, 256], [3, 1], 16))
    kindless = {key: value for key, value in grpo_prompt.items() if key != "kind"}
    no_kinds = grpo_time_of(meta_8b, kindless, completion_budgets=budgets)["grpo"]
    assert no_kinds["decode_steps"] == no_kinds["completion_width"] == 100


def test_grpo_prefill_sharing_and_the_strategy_move_only_their_own_terms(meta_8b, grpo_prompt):
    """share_prompt_prefill divides the vision tower's and the prefill's terms by the copies of a prompt on a rank and
    leaves the decode alone; ZeRO-2 drops the gather of the model for generation and the synced decode, but not the
    decode steps: a rank that ends first waits at TRL's gather of the rewards, so the step still waits for the
    longest completion of every rank."""
    today = grpo_time_of(meta_8b, grpo_prompt)
    shared = grpo_time_of(meta_8b, grpo_prompt, share_prompt_prefill=True)
    zero2 = grpo_time_of(meta_8b, grpo_prompt, strategy="zero2")
    for name in ("vision tower (generation)", "prefill (generation)"):
        assert terms_of({"time": today})[name] == pytest.approx(8 * terms_of({"time": shared})[name])
    for name in ("decode (memory-bound)", "training forward and backward"):
        assert terms_of({"time": today})[name] == terms_of({"time": shared})[name] == terms_of({"time": zero2})[name]
    assert today["grpo"]["synced_decode"] and not zero2["grpo"]["synced_decode"]
    assert today["grpo"]["decode_steps"] == zero2["grpo"]["decode_steps"] == 256
    assert "ZeRO-3 gather of the model for generation" not in terms_of({"time": zero2})
    assert "ZeRO-2 communication" in terms_of({"time": zero2})
    ungathered = grpo_time_of(meta_8b, grpo_prompt, ds3_gather_for_generation=False)
    assert terms_of({"time": ungathered})["ZeRO-3 gathers in every decode step (ds3_gather_for_generation false)"] > (
        terms_of({"time": today})["ZeRO-3 gather of the model for generation"] * 200
    )
    # The old policy's pass once generation and the optimizer step are out of step; the reference's with a KL term.
    assert "old policy's log-probabilities" not in terms_of({"time": today})
    misaligned = grpo_time_of(meta_8b, grpo_prompt, num_iterations=2)
    assert "old policy's log-probabilities" in terms_of({"time": misaligned})
    assert "reference model's log-probabilities" in terms_of({"time": grpo_time_of(meta_8b, grpo_prompt, beta=0.04)})


def test_grpo_prompts_once_per_micro_batch_move_only_the_training_passes(meta_8b, grpo_prompt):
    """share_prompt_in_training: a rank's rows grouped by prompt and cut into micro-batches, each micro-batch one
    packed sequence per distinct prompt (the prompt once less its last token, then each completion with it, to its
    own length): the training terms and the old policy's and reference's passes are the packed sequences' FLOPs,
    generation's terms stay as they were."""
    from recipes.training.plan.timing import forward_flops, prompts_per_micro_batch, training_flops

    # 32 rows in groups of 8: micro-batches of 4 hold one prompt, of 8 one, of 16 two; groups of 6 straddle them
    assert [prompts_per_micro_batch(batch, 32, 8) for batch in (4, 8, 16)] == [1, 1, 2]
    assert prompts_per_micro_batch(4, 24, 6) == pytest.approx(8 / 6)
    settings = {"completion_budgets": {"letter": 4}, "beta": 0.04, "num_iterations": 2}
    today = grpo_time_of(meta_8b, grpo_prompt, **settings)
    shared = grpo_time_of(meta_8b, grpo_prompt, share_prompt_in_training=True, **settings)
    for name in ("vision tower (generation)", "prefill (generation)", "decode (memory-bound)"):
        assert terms_of({"time": shared})[name] == terms_of({"time": today})[name], name
    grpo, config, matmuls = shared["grpo"], meta_8b.config, matmul_parameters(meta_8b)
    packed = {**grpo_prompt, "tokens": grpo_prompt["tokens"] - 1 + 4 * 4, "labelled": 4 * 4}
    assert grpo["training_prompts_per_micro_batch"] == 1 and grpo["training_sequence_tokens"] == packed["tokens"]
    rate = 0.4 * 989e12
    # one packed prompt per micro-step, 8 micro-steps a step (per GPU), 8 of them over a generation batch
    trained = terms_of({"time": shared})["training forward and backward"]
    assert trained == pytest.approx(8 * training_flops(config, matmuls, packed, frozen=set()) / rate)
    batches = 8 / (8 * 2)  # accumulation / (steps_per_generation × num_iterations)
    for name in ("old policy's log-probabilities", "reference model's log-probabilities"):
        assert terms_of({"time": shared})[name] == pytest.approx(
            batches * 8 * forward_flops(config, matmuls, packed) / rate
        )
        assert terms_of({"time": today})[name] > 3 * terms_of({"time": shared})[name]
    assert terms_of({"time": today})["training forward and backward"] > 3 * trained


def test_sft_time_counts_padding_and_checkpointing_and_reads_the_hardware(meta_8b, grpo_prompt):
    from recipes.training.plan.timing import hardware_figures, recipe_gpu, sft_time

    total = sum(p.numel() for p in meta_8b.parameters())
    row = {**grpo_prompt, "labelled": 8}

    def step(share, checkpointing=True, hardware="4× NVIDIA H200 141 GB"):
        return sft_time(
            meta_8b.config,
            matmul_parameters(meta_8b),
            [row],
            per_device_batch=4,
            accumulation=4,
            num_gpus=4,
            padding_share=share,
            frozen=set(),
            lora=False,
            adapters=0,
            checkpointing=checkpointing,
            strategy="zero3",
            total_parameters=total,
            trainable=total,
            hardware=hardware_figures(hardware),
            assumed_mfu=0.4,
        )

    unpadded, padded = step(0.0), step(0.25, checkpointing=False)
    assert "padding" not in terms_of({"time": unpadded}) and "activation checkpointing's recompute" not in terms_of(
        {"time": padded}
    )
    # a quarter of the tokens padding: the LLM's linear layers run over a third more tokens per row (16 rows a GPU)
    padding = terms_of({"time": padded})["padding"]
    llm_per_token = 6 * matmul_parameters(meta_8b)["llm"] * 16 / (0.4 * 989e12)
    assert padding == pytest.approx(llm_per_token * row["tokens"] / 3, rel=0.01)
    h100, h200 = step(0.0, hardware="1× NVIDIA H100 80GB HBM3"), unpadded
    assert hardware_figures("1× NVIDIA H100 80GB HBM3")["hbm_tbps"] == 3.35
    assert terms_of({"time": h100})["optimizer step"] > terms_of({"time": h200})["optimizer step"]
    assert recipe_gpu("4× NVIDIA H100 PCIe") is None and recipe_gpu("8× H200 (DeepSpeed ZeRO-3)").name == "H200"
    given = hardware_figures("4× NVIDIA H200 141 GB", hbm_tbps=4.0, interconnect_gbps=400)
    assert (given["hbm_tbps"], given["interconnect_gbps"], given["peak_tflops"]) == (4.0, 400, 989.0)
    assert "--hbm-tbps" in given["source"]
