"""Bad input to the launch scripts ``recipes/sft.py`` and ``recipes/grpo.py``: a training run never writes into or over
what it reads (the base model, a build, the SFT run GRPO starts from, a folder of the user's), never runs another
run than the recipe says (a setting it would ignore, a key written twice, the benchmark as training data, a visual
run on a build without frames, a half-written checkpoint), and each mistake is one line before any weights load.

The cases join the one table (``tests/bad_inputs/``): each runs the script's ``cli`` in this process on a small
recipe of the session's tiny Qwen3-VL and sample build (private copies where the case points the run at them), and
the table checks the exit status, the message, that no ``--output_dir`` is left behind and that every input, the
recipe's model and builds included, is unchanged by hash.
"""

import json
import shutil

import yaml

from builders.outputs import MARKER

from . import BadInput, Inputs, run_cases


def tiny_recipe(i: Inputs, **changes) -> dict:
    """A recipe of the tiny model on the sample build's Sureon-DB, as the tests' runs train it."""
    recipe = {
        "model_name_or_path": str(i.fixture("tiny_qwen3_vl")),
        "dtype": "float32",
        "dataset_mixture": [{"path": str(i.fixture("sureon_build").out), "name": "db", "split": "train"}],
        "frames_as": "video",
        "max_frames": 4,
        "output_dir": str(i.tmp / "run"),
        "max_steps": 1,
        "per_device_train_batch_size": 1,
        "bf16": False,
        "use_cpu": True,
        "report_to": "none",
        "activation_checkpointing": False,
    }
    recipe.update(changes)
    return {key: value for key, value in recipe.items() if value is not None}


def launch(*extra: str, text: str | None = None, **changes):
    """``--config RECIPE [extra ...]`` with the tiny recipe changed by ``changes`` (each value a function of the
    case's inputs, or a value), or the recipe's ``text`` as it stands."""

    def argv(i: Inputs) -> list[str]:
        path = i.tmp / "recipe.yaml"
        if text is not None:
            path.write_text(text.format(**tiny_recipe(i)))
        else:
            values = {key: value(i) if callable(value) else value for key, value in changes.items()}
            path.write_text(yaml.safe_dump(tiny_recipe(i, **values), sort_keys=False))
        return ["--config", str(path), *(arg(i) if callable(arg) else arg for arg in extra)]

    return argv


def model_copy(i: Inputs) -> str:
    copy = i.tmp / "model"
    if not copy.exists():
        shutil.copytree(i.fixture("tiny_qwen3_vl"), copy)
    return str(copy)


def build_copy(i: Inputs) -> str:
    copy = i.tmp / "sureon"
    if not copy.exists():
        shutil.copytree(i.fixture("sureon_build").out, copy)
    return str(copy)


def sft_run(i: Inputs) -> str:
    """A finished SFT run's folder (what GRPO starts from): the tiny model, its record and the run's marker."""
    run = i.tmp / "sft-run"
    if not run.exists():
        shutil.copytree(i.fixture("tiny_qwen3_vl"), run)
        (run / MARKER).write_text("written by a training run\n")
        (run / "training_complete.json").write_text(json.dumps({"name": None, "mixture": []}))
    return str(run)


def users_folder(i: Inputs) -> str:
    folder = i.tmp / "my-notes"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text("my notes, not a training run\n")
    return str(folder)


def half_written_checkpoint(i: Inputs) -> str:
    """A checkpoint a killed save left: its weights, no optimizer, no trainer_state.json."""
    checkpoint = i.tmp / "earlier" / "checkpoint-200"
    checkpoint.mkdir(parents=True)
    shutil.copy(i.fixture("tiny_qwen3_vl") / "model.safetensors", checkpoint / "model.safetensors")
    return str(checkpoint)


def lora_adapter(i: Inputs) -> str:
    """What ``PeftModel.save_pretrained`` writes: an adapter's config and weights, no config.json."""
    folder = i.tmp / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "Qwen/Qwen3-VL-8B-Instruct"}))
    shutil.copy(i.fixture("tiny_qwen3_vl") / "model.safetensors", folder / "adapter_model.safetensors")
    return str(folder)


def model_without_processor(i: Inputs) -> str:
    """A model saved without its processor: config.json and weights only."""
    folder = i.tmp / "weights-only"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(i.fixture("tiny_qwen3_vl") / name, folder / name)
    return str(folder)


def bench_mixture(i: Inputs) -> list[dict]:
    return [{"path": str(i.fixture("bench")), "name": "bench", "split": "test"}]


def annotation_only_build(i: Inputs) -> list[dict]:
    """The sample release built without videos, keeping every question (``--on-missing-video annotation-only``)."""
    from builders.sureon.build import BuildOptions, build_sureon

    from . import SAMPLE_RELEASE

    out = i.tmp / "annotation-only"
    build_sureon(BuildOptions(release=SAMPLE_RELEASE, out=out, configs=["db"], on_missing_video="annotation-only"))
    return [{"path": str(out), "name": "db", "split": "train"}]


SFT, GRPO = "recipes/sft.py", "recipes/grpo.py"

CASES = [
    # -- never write into or over an input
    BadInput(
        SFT,
        "output_dir is the base model",
        launch("--output_dir", model_copy, model_name_or_path=model_copy),
        "is the input model_name_or_path",
    ),
    BadInput(
        SFT,
        "output_dir is a dataset build of the mixture",
        launch("--output_dir", build_copy, dataset_mixture=lambda i: [{"path": build_copy(i), "name": "db"}]),
        "is the input dataset_mixture[0]",
    ),
    BadInput(
        SFT,
        "output_dir lies inside the build",
        launch(
            "--output_dir",
            lambda i: build_copy(i) + "/run",
            dataset_mixture=lambda i: [{"path": build_copy(i), "name": "db"}],
        ),
        "lies inside the input dataset_mixture[0]",
    ),
    BadInput(
        SFT, "output_dir is a folder of the user's", launch("--output_dir", users_folder), "no training run of sureon"
    ),
    BadInput(
        SFT, "output_dir is a file", launch("--output_dir", lambda i: model_copy(i) + "/config.json"), "is a file"
    ),
    BadInput(
        GRPO,
        "output_dir is the SFT run it starts from",
        launch(
            "--output_dir",
            sft_run,
            model_name_or_path=sft_run,
            reward_funcs=["mcq_accuracy"],
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "is the input model_name_or_path",
    ),
    # -- never another run than the recipe says
    BadInput(SFT, "LoRA settings without use_peft", launch(lora_r=8, lora_alpha=16), "without use_peft: true"),
    BadInput(
        SFT, "--lora_r on the command line without --use_peft", launch("--lora_r", "8"), "--lora_r without use_peft"
    ),
    BadInput(
        SFT,
        "a key written twice",
        launch(text="learning_rate: 1.0e-4\nmodel_name_or_path: {model_name_or_path}\nlearning_rate: 1.0e-5\n"),
        "'learning_rate' is written twice (lines 1 and 3)",
    ),
    BadInput(SFT, "the benchmark as training data", launch(dataset_mixture=bench_mixture), "is evaluation data"),
    BadInput(
        GRPO,
        "the benchmark as GRPO data",
        launch(
            dataset_mixture=bench_mixture,
            reward_funcs=["mcq_accuracy"],
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "is evaluation data",
    ),
    BadInput(
        SFT,
        "transformers 4's group_by_length key",
        launch(group_by_length=True),
        "(transformers 5 replaced it: write 'train_sampling_strategy: group_by_length')",
    ),
    BadInput(
        SFT,
        "a visual recipe on an annotation-only build",
        launch(dataset_mixture=annotation_only_build),
        "rows have no frames",
    ),
    BadInput(
        SFT,
        "resume_from_checkpoint is half-written",
        launch(resume_from_checkpoint=half_written_checkpoint),
        "is incomplete (no trainer_state.json",
    ),
    # -- every model, mixture and build check before any weights load
    BadInput(
        SFT,
        "a mixture config the build lacks",
        launch(dataset_mixture=lambda i: [{"path": str(i.fixture("sureon_build").out), "name": "bench_typo"}]),
        "has no config 'bench_typo' (it has:",
    ),
    BadInput(
        SFT,
        "a mixture split the build lacks",
        launch(
            dataset_mixture=lambda i: [{"path": str(i.fixture("sureon_build").out), "name": "db", "split": "tran"}]
        ),
        "has no split 'tran'",
    ),
    BadInput(
        SFT,
        "a mixture path that does not exist",
        launch(dataset_mixture=lambda i: [{"path": str(i.tmp / "build" / "sureon"), "name": "db"}]),
        "no such folder",
    ),
    BadInput(SFT, "the model is a LoRA adapter folder", launch(model_name_or_path=lora_adapter), "a LoRA adapter"),
    BadInput(
        GRPO,
        "the model has no processor files",
        launch(
            model_name_or_path=model_without_processor,
            reward_funcs=["mcq_accuracy"],
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "but no processor files",
    ),
    # -- the recipe's global batch, not another (recipes.training.launch)
    BadInput(
        SFT,
        "global_batch_size beside gradient_accumulation_steps",
        launch(global_batch_size=4, gradient_accumulation_steps=2),
        "global_batch_size and gradient_accumulation_steps both set the accumulation",
    ),
    BadInput(
        SFT,
        "--gradient_accumulation_steps beside the recipe's global batch",
        launch("--gradient_accumulation_steps", "2", global_batch_size=4),
        "and the command line: global_batch_size and gradient_accumulation_steps both set",
    ),
    BadInput(
        GRPO,
        "a global batch the per-device batch cannot split",
        launch(global_batch_size=5, reward_funcs=["mcq_accuracy"], num_generations=2, per_device_train_batch_size=2),
        "global_batch_size 5 is not a multiple of per_device_train_batch_size 2 × 1 rank(s)",
    ),
    # -- generation cut as the recipe says, or not at all (recipes.training.grpo_data.check_completion_budgets)
    BadInput(
        GRPO,
        "a completion budget a reference answer does not fit",
        launch(completion_budgets={"order": 5}, num_generations=2, per_device_train_batch_size=2),
        "order: 5 tokens cannot hold the reference answer of",
    ),
    BadInput(
        GRPO,
        "a completion budget above max_completion_length",
        launch(
            completion_budgets={"letter": 16},
            max_completion_length=8,
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "letter: 16 is above max_completion_length (8)",
    ),
    BadInput(
        GRPO,
        "a completion budget of an unknown answer kind",
        launch(completion_budgets={"letters": 4}, num_generations=2, per_device_train_batch_size=2),
        "completion_budgets: unknown answer kinds ['letters']",
    ),
    BadInput(
        GRPO,
        "generation cuts with continuous batching",
        launch(
            share_prompt_prefill=True,
            use_transformers_continuous_batching=True,
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "share_prompt_prefill with use_transformers_continuous_batching: true",
    ),
    # -- the prompt once per micro-batch in training, where that leaves the step's gradient as it is (check_data)
    BadInput(
        GRPO,
        "the training passes' packed prompts with flash-attention",
        launch(
            share_prompt_in_training=True,
            attn_implementation="flash_attention_2",
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "attn_implementation flash_attention_2 takes no 4-D mask, which the packed pass needs",
    ),
    BadInput(
        GRPO,
        "the training passes' grouped prompts with a loss normalised per micro-batch",
        launch(share_prompt_in_training=True, loss_type="bnpo", num_generations=2, per_device_train_batch_size=2),
        "loss_type bnpo divides each micro-batch's loss by its own tokens",
    ),
    BadInput(
        GRPO,
        "the training passes' grouped prompts with a generation batch over several steps",
        launch(
            share_prompt_in_training=True,
            steps_per_generation=2,
            num_generations=2,
            per_device_train_batch_size=2,
        ),
        "steps_per_generation 2 is not the accumulation (1)",
    ),
]

test_bad_input = run_cases(CASES)
