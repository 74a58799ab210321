"""What every ``sureon eval`` command that generates text shares: the backend options and the backend they build,
a model preset applied under the explicit flags, the system prompt a model was trained with, the settings a run
records, and result files written atomically.

Options a preset may set (``recipes/evaluation/presets.py``) have a sentinel default, :class:`Default`, so that a flag
typed on the command line is told apart from the built-in value even when the two are equal: after
:func:`resolve_settings`, each such option holds the typed value, else the preset's, else the built-in default.
Request parameters merge key by key: the preset's, then each ``--request-param``.
"""

import argparse
import json
import os

from builders.arguments import non_negative_int, positive_int
from builders.errors import InputError
from builders.prompt import frame_protocol
from recipes.evaluation.inference import BACKENDS, MAX_TOKENS_FIELDS, make_backend
from recipes.evaluation.presets import FRAMES_AS, SETTINGS, check_request_params, load_all, load_preset, render_list


class Default:
    """An option's built-in value, as the parser leaves it when the flag is not given (never typed by a user)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return str(self.value)


def request_param(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> ``(key, value)``: VALUE as JSON when it parses (``high`` stays a string, ``0.5`` a number,
    ``null`` drops the field, ``{"a": 1}`` an object), else as the string typed."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: write KEY=VALUE, e.g. reasoning_effort=high")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    try:
        check_request_params({key: value}, "--request-param")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return key, value


class ListPresets(argparse.Action):
    """``--list-presets``: print the presets and exit before the required options are checked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(render_list(load_all()))
        parser.exit(0)


def add_backend_arguments(parser: argparse.ArgumentParser, *, unit: str, max_new_tokens: int, device_help: str):
    """The transformers / vLLM / OpenAI-compatible options (``unit``: what one generate call batches)."""
    parser.add_argument(
        "--preset", help="a model preset: a name from --list-presets or a YAML file (explicit flags override it)"
    )
    parser.add_argument("--list-presets", action=ListPresets, help="list the model presets and exit")
    parser.add_argument("--backend", choices=BACKENDS, default=Default("transformers"))
    parser.add_argument("--revision", default=Default(None), help="model revision (transformers, vllm)")
    parser.add_argument(
        "--frames-as",
        choices=FRAMES_AS,
        default=Default("auto"),
        help="a clip as one video with its timestamps (as training encodes it) or as images; auto: video where the "
        "checkpoint's processor takes video (transformers, vllm), images for an endpoint (openai: give video for a "
        "vLLM server)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=8, help=f"{unit} per generate call (transformers)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=Default(max_new_tokens))
    parser.add_argument(
        "--max-frames",
        type=positive_int,
        default=Default(None),
        help="show at most this many of each clip's stored frames, evenly spaced (the frames training keeps under "
        "the same max_frames); default: every frame the build stored (the Sureon paper's protocol: up to 8). A run "
        "below the protocol is labelled as such in summary.json and the reports",
    )
    parser.add_argument("--dtype", default=Default("auto"), help="auto, bfloat16, float16 or float32")
    parser.add_argument("--attn-implementation", help="default: flash_attention_2 when installed on GPU, else sdpa")
    parser.add_argument("--device", help=device_help)
    parser.add_argument("--tensor-parallel-size", type=positive_int, default=1, help="vllm")
    parser.add_argument("--max-model-len", type=positive_int, help="vllm")
    parser.add_argument(
        "--base-url", default=Default(None), help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)"
    )
    parser.add_argument(
        "--api-key-env", default=Default("OPENAI_API_KEY"), help="environment variable holding the key"
    )
    parser.add_argument(
        "--max-concurrency", type=positive_int, default=16, help="requests in flight (openai backend, judge)"
    )
    parser.add_argument(
        "--max-retries", type=non_negative_int, default=6, help="retries per request (openai backend, judge)"
    )
    parser.add_argument(
        "--request-param",
        dest="request_params",
        action="append",
        type=request_param,
        default=[],
        metavar="KEY=VALUE",
        help="a field merged into every chat-completions body (openai backend; repeatable): VALUE is JSON when it "
        "parses, else a string; null drops a field, e.g. reasoning_effort=high, temperature=null",
    )
    parser.add_argument(
        "--max-tokens-field",
        choices=MAX_TOKENS_FIELDS,
        default=Default("max_tokens"),
        help="the body field carrying --max-new-tokens (openai backend; OpenAI's reasoning models need "
        "max_completion_tokens)",
    )


def add_judge_request_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--judge-request-param",
        dest="judge_request_params",
        action="append",
        type=request_param,
        default=[],
        metavar="KEY=VALUE",
        help="a field merged into every judge request body (repeatable; as --request-param)",
    )


def resolve_settings(args) -> argparse.Namespace:
    """Fill every preset-able option: the typed flag, else ``--preset``'s value, else the built-in default; merge the
    request parameters (preset first, then each flag). Idempotent: a resolved namespace is returned unchanged."""
    if getattr(args, "resolved_settings", False):
        return args
    preset = load_preset(args.preset) if getattr(args, "preset", None) else None
    overrides = []
    for dest in SETTINGS:
        value = getattr(args, dest, None)
        given = value is not None and not isinstance(value, Default)  # --model has no default: None when not given
        if preset is not None and given and value != preset[dest]:
            overrides.append(dest)
        if not given:
            builtin = value.value if isinstance(value, Default) else value
            value = preset[dest] if preset is not None and preset[dest] is not None else builtin
        setattr(args, dest, value)
    typed = dict(args.request_params)  # the (key, value) pairs of --request-param; the last of a key wins
    preset_params = preset["request_params"] if preset is not None else {}
    overrides += [
        f"request_params.{key}" for key in typed if key in preset_params and typed[key] != preset_params[key]
    ]
    args.request_params = preset_params | typed
    args.judge_request_params = dict(getattr(args, "judge_request_params", None) or [])
    if preset is not None:
        if getattr(args, "model_name", None) is None:
            args.model_name = preset.name
        if args.system_prompt is None and not args.no_system_prompt and preset["system_prompt"] is not None:
            args.system_prompt = preset["system_prompt"]
    if not args.model:
        raise InputError("no model: give --model (a local path, Hub id or endpoint model name) or --preset")
    args.preset_data, args.overrides, args.resolved_settings = preset, overrides, True
    return args


def run_settings(args, stored_frames: int | None = None) -> dict:
    """What a run records in summary.json and its report shows: the preset, the settings it ran with, the options
    typed on the command line that replaced a preset value, and (given the most frames a clip of the data holds)
    the frames it showed against the benchmark's protocol (:func:`builders.prompt.frame_protocol`)."""
    resolve_settings(args)
    preset = args.preset_data
    settings = {
        "preset": preset.name if preset else None,
        "preset_file": str(preset.path) if preset else None,
        "paper_row": preset["paper_row"] if preset else None,
        "unconfirmed_id": preset["unconfirmed"] if preset else None,
    }
    settings |= {dest: getattr(args, dest) for dest in SETTINGS}
    settings["request_params"] = args.request_params
    settings["overrides"] = args.overrides
    if stored_frames is not None:
        settings["frames"] = frame_protocol(args.max_frames, stored_frames)
    if getattr(args, "judge_model", None):
        judge = {"model": args.judge_model, "base_url": args.judge_base_url}
        settings["judge"] = judge | {"request_params": args.judge_request_params}
    return settings


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
    """The backend :func:`add_backend_arguments` describes, for prompts of up to ``max_frames`` frames as stored;
    ``--max-frames`` (the preset's or the user's) shows at most that many of them (:func:`builders.prompt.
    select_frames`, the frames training chose under the same ``max_frames``)."""
    resolve_settings(args)
    if args.max_frames is not None and args.max_frames < 1:
        raise InputError(f"--max-frames {args.max_frames}: give a positive number (leave it out to show every frame)")
    if args.max_frames is not None:
        max_frames = min(max_frames, args.max_frames)
    if args.request_params and args.backend != "openai":
        raise InputError(
            f"--request-param / a preset's request_params reach only the openai backend, not {args.backend}: "
            "drop them or use --backend openai"
        )
    if args.backend == "transformers":
        options = {
            "revision": args.revision,
            "dtype": args.dtype,
            "attn_implementation": args.attn_implementation,
            "device": args.device,
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
        args.out.mkdir(parents=True, exist_ok=True)  # the endpoint's reply cache lives in the run's folder
        options = {
            "base_url": args.base_url,
            "api_key": os.environ.get(args.api_key_env),
            "cache": args.out / "llm_cache.sqlite",
            "max_concurrency": args.max_concurrency,
            "max_retries": args.max_retries,
            "params": args.request_params,
            "max_tokens_field": args.max_tokens_field,
        }
    options |= {"max_new_tokens": args.max_new_tokens, "frames_as": args.frames_as}
    return make_backend(args.backend, args.model, **options)


def check_sources(args) -> None:
    """Before the data or a model loads: the model a local backend would load is there (a local-looking path that
    does not exist, or a folder without a model, is one line), and an endpoint answers at all (the model's with
    ``--backend openai``, the judge's), so a mistake costs milliseconds, not a dataset load and a minute of
    retries."""
    from builders.llm import check_endpoint
    from recipes.model_io.model_folder import check_model_path

    resolve_settings(args)
    if args.backend == "openai":
        check_endpoint(args.base_url)
    else:
        check_model_path(args.model, "--model", args.revision)
    if getattr(args, "judge_model", None):
        check_endpoint(args.judge_base_url, option="--judge-base-url")


def system_prompt_of(args) -> str | None:
    """``--system-prompt``, else (unless ``--no-system-prompt``) the one recorded with local or Hub weights; an
    endpoint's model name has no weights to read, so it gets one only when given."""
    from recipes.model_io.modeling import resolve_system_prompt

    weights = None if args.backend == "openai" else args.model
    return resolve_system_prompt(
        weights, override=args.system_prompt, disabled=args.no_system_prompt, revision=args.revision
    )


def contamination_of(args, config: str | None, split: str, question_ids, id_field: str = "question_id") -> list[dict]:
    """The sources the evaluated weights were trained on that are the rows being scored, warned about at once
    (:mod:`recipes.evaluation.contamination`); none for an endpoint's model name, which has no weights to read."""
    if args.backend == "openai":
        return []
    from recipes.evaluation.contamination import find_contamination, warn

    findings = find_contamination(args.model, args.revision, str(args.dataset), config, split, question_ids, id_field)
    warn(args.model_name or args.model, findings)
    return findings


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
            raise InputError(f"{flag} {value}: give a positive number ({COUNT_OPTIONS[name]})")
