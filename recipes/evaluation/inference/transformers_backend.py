"""The ``transformers`` backend: local batched ``generate`` (left padding, greedy, a fresh ``GenerationConfig`` so a
checkpoint's sampling defaults never apply).

Frames go to the processor as one video per question (``frames_as="video"``, the default when the processor has a
video processor) with ``video_metadata`` and ``do_sample_frames=False``, so the processor neither re-samples them nor
invents their timestamps; or as interleaved images. Inputs are encoded as training encodes them
(:func:`recipes.model_io.chat_inputs.encode_prompts`). Apart from the vLLM and OpenAI-compatible backends because it
is the one built on the project's own model loading and input encoding (the code training uses): it reads a
checkpoint's config to refuse what it cannot serve and decodes the generated token ids itself.
"""

from builders.errors import InputError
from recipes.evaluation.inference.generation import choose_frames_as, weights_identity
from recipes.model_io.chat_inputs import encode_prompts


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
        from recipes.model_io.modeling import load_processor, resolve_dtype

        reason = unservable_reason(model, revision)
        if reason:
            raise InputError(reason)
        self.processor = load_processor(model, revision=revision, padding_side="left")
        self.name_or_path = model
        self.dtype = resolve_dtype(dtype)
        self.attn_implementation = attn_implementation
        self.device = device
        self._model = None
        self.frames_as = choose_frames_as(self.processor, frames_as, model)
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

            from recipes.model_io.modeling import load_model

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
        (:func:`recipes.model_io.chat_inputs.encode_prompts`); the frames were chosen by the prompt formatter."""
        return encode_prompts(self.processor, conversations)

    def generate(self, conversations: list[list[dict]]) -> list[str]:
        import torch
        from transformers import GenerationConfig

        from recipes.model_io.modeling import tokenizer_of

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

        from recipes.model_io.modeling import tokenizer_of

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
