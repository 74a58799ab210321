"""What every ``sureon eval`` command that generates text shares: the backend options and the backend they build,
the system prompt a model was trained with, and result files written atomically."""

import argparse
import json
import os
from pathlib import Path

from recipes.evaluation.inference import BACKENDS, make_backend


def add_backend_arguments(parser: argparse.ArgumentParser, *, unit: str, max_new_tokens: int, device_help: str):
    """The transformers / vLLM / OpenAI-compatible options (``unit``: what one generate call batches)."""
    parser.add_argument("--backend", choices=BACKENDS, default="transformers")
    parser.add_argument("--revision", help="model revision (transformers, vllm)")
    parser.add_argument("--frames-as", choices=["auto", "images", "video"], default="auto", help="transformers only")
    parser.add_argument("--batch-size", type=int, default=8, help=f"{unit} per generate call (transformers)")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--dtype", default="auto", help="auto, bfloat16, float16 or float32")
    parser.add_argument("--attn-implementation", help="default: flash_attention_2 when installed on GPU, else sdpa")
    parser.add_argument("--device", help=device_help)
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm")
    parser.add_argument("--max-model-len", type=int, help="vllm")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    parser.add_argument("--max-concurrency", type=int, default=16, help="requests in flight (openai backend, judge)")
    parser.add_argument("--max-retries", type=int, default=6, help="retries per request (openai backend, judge)")
    parser.add_argument(
        "--generation-params", type=json.loads, default={}, help="extra request fields, e.g. '{\"seed\": 0}'"
    )


def add_system_prompt_arguments(parser: argparse.ArgumentParser) -> None:
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument(
        "--system-prompt",
        help="system message of every prompt (default: the one the model was trained with, read from the "
        "training_complete.json stored with its weights; none for other models)",
    )
    prompt.add_argument(
        "--no-system-prompt", action="store_true", help="evaluate without a system message, even if trained with one"
    )


def backend_from_args(args, max_frames: int):
    """The backend :func:`add_backend_arguments` describes, for prompts of up to ``max_frames`` frames."""
    if args.backend == "transformers":
        options = {
            "revision": args.revision,
            "dtype": args.dtype,
            "attn_implementation": args.attn_implementation,
            "device": args.device,
            "frames_as": args.frames_as,
            "batch_size": args.batch_size,
        }
    elif args.backend == "vllm":
        options = {
            "revision": args.revision,
            "dtype": args.dtype,
            "tensor_parallel_size": args.tensor_parallel_size,
            "max_model_len": args.max_model_len,
            "max_images": max(max_frames, 1),
        }
    else:
        options = {
            "base_url": args.base_url,
            "api_key": os.environ.get(args.api_key_env),
            "cache": args.out / "llm_cache.sqlite",
            "max_concurrency": args.max_concurrency,
            "max_retries": args.max_retries,
            "params": args.generation_params,
        }
    return make_backend(args.backend, args.model, max_new_tokens=args.max_new_tokens, **options)


def system_prompt_of(args) -> str | None:
    """``--system-prompt``, else (unless ``--no-system-prompt``) the one recorded with local or Hub weights; an
    endpoint's model name has no weights to read, so it gets one only when given."""
    from recipes.training.modeling import resolve_system_prompt

    weights = None if args.backend == "openai" else args.model
    return resolve_system_prompt(
        weights, override=args.system_prompt, disabled=args.no_system_prompt, revision=args.revision
    )


COUNT_OPTIONS = {
    "limit": "leave --limit out to evaluate every question",
    "max_new_tokens": "an answer needs at least one generated token",
}


def check_counts(**values: int | None) -> None:
    """Refuse a count option below 1 before anything is loaded or written (``--limit 0`` would otherwise mean
    "everything", ``--max-new-tokens 0`` an empty answer to every question); ``None`` is an option left out."""
    for name, value in values.items():
        if value is not None and value < 1:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{flag} {value}: give a positive number ({COUNT_OPTIONS[name]})")


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
