"""Planning at the real size: the shipped Qwen3-VL-8B architecture on the meta device, ``sureon plan``'s token counts
against the collator, its model-state figures against DeepSpeed's estimators, its activation estimate against the
tensors a real forward pass saves, and ``benchmarks/gpu_sft.py`` end to end (``--tiny`` on CPU, the 8B on a GPU)."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO
from PIL import Image
from recipe_runs import tiny_recipe

from recipes.training.architectures import (
    PUBLISHED_PARAMETERS,
    architecture_config,
    build_model,
    standin_processor,
    write_architecture,
)
from recipes.training.collator import SFTCollator
from recipes.training.mixture import build_mixture, parse_mixture
from recipes.training.modeling import apply_pixel_caps, load_processor
from recipes.training.plan.command import plan_recipe
from recipes.training.plan.flops import matmul_parameters, training_flops
from recipes.training.plan.memory import activation_bytes, deepspeed_estimate, model_state_bytes
from recipes.training.plan.parameters import largest_layer_parameters, parameter_counts
from recipes.training.plan.recipe import lora_settings
from recipes.training.plan.tokens import measure_mixture
from sureon.cli import main as cli_main


QWEN = "Qwen/Qwen3-VL-8B-Instruct"
RECIPE_8B = REPO / "recipes" / "qwen3-vl-8b" / "sft" / "config_sureon_vlm.yaml"


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


@pytest.mark.parametrize("form", ["absolute", "./", "../", "existing parent"])
def test_missing_local_data_is_refused_at_once_never_looked_up_on_the_hub(tmp_path, monkeypatch, capsys, form):
    """A path that looks local is never a Hub id: no `datasets` or Hub call (each would retry ~30 s online)."""
    import datasets
    import huggingface_hub

    def no_hub(*args, **kwargs):
        raise AssertionError(f"looked up on the Hub: {args}")

    monkeypatch.setattr(datasets, "load_dataset", no_hub)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_hub)
    (tmp_path / "work" / "data").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    path = {"absolute": str(tmp_path / "nope"), "./": "./nope", "../": "../nope", "existing parent": "data/nope"}[form]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"model_name_or_path": QWEN, "dataset_mixture": [{"path": path, "name": "db"}]}))
    assert cli_main(["plan", "--config", str(recipe)]) == 2
    error = capsys.readouterr().err.strip()
    assert f"its data {path} does not exist" in error and "--synthetic-frames" in error and "\n" not in error
    with pytest.raises(FileNotFoundError, match="not a Hub id"):  # the training mixture refuses it the same way
        build_mixture(parse_mixture([{"path": path}]))


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


def test_sureon_plan_prints_the_grpo_table(capsys):
    argv = ["plan", "--config", str(RECIPE_GRPO), "--synthetic-frames", "768x432"]
    assert cli_main(argv) == 0
    printed = capsys.readouterr().out
    assert "GRPO: 8 completions per prompt of at most 256 tokens" in printed and "no reference model" in printed
    assert "| GRPO memory per GPU (GB) |" in printed and "generated per GPU at a time by transformers" in printed


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
