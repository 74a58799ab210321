"""TRL's ``GRPOTrainer`` whose prompts carry their frames as SFT and evaluation encode them: images, one video per
clip (``frames_as: video``), or none, mixed in one batch.

TRL 1.16 reads image parts only (``GRPOTrainer._tokenize_prompts``; its ``images`` column), and its log-probability
pass forwards ``pixel_values`` / ``image_grid_thw`` but no ``pixel_values_videos`` / ``video_grid_thw``
(huggingface/trl#4144 is the open request; #4529 tried a Qwen3-VL video trainer and was closed unmerged). This
subclass changes three hooks and nothing else of TRL's loop (sampling, rewards, advantages, loss, logging, resume):

- ``_generate_and_score_completions``: before TRL's own, each row of the local generation batch is encoded once by
  :func:`recipes.training.chat_inputs.processor_inputs`, the encoding the SFT collator and ``sureon eval sureon``
  use (the same token ids, pixel values, grids and Qwen3-VL video metadata, never re-sampled). A prompt repeated
  over ``num_generations`` (TRL's ``RepeatSampler`` puts the copies in the batch) is encoded once and shared.
  After it, the per-row visual tensors are added to TRL's output as a list, one entry per completion, so TRL's
  ``shuffle_sequence_dict`` and ``split_tensor_dict`` permute and cut them with the rows: each micro-batch (and each
  rank, which holds its own slice of the generation batch) gets exactly its rows' frames.
- ``_tokenize_prompts``: returns those token ids and the batch's visual tensors, which TRL's transformers generation
  passes to ``generate`` (``mm_token_type_ids`` left-padded with the ids).
- ``_get_per_token_logps_and_entropies``: the policy, old-policy and reference log-probabilities of a chunk of rows
  run one forward with the chunk's own ``pixel_values`` / ``image_grid_thw`` / ``pixel_values_videos`` /
  ``video_grid_thw`` and ``mm_token_type_ids`` (the prompt's, zeros over the completion); otherwise TRL's forward,
  unchanged (labels, ``fused_lm_head``, autocast). With ``uniform_vision_calls`` (on for vision-language models, as
  in SFT) a chunk without an image or without a video gets the SFT collator's masked one-token dummy
  (:func:`recipes.training.collator.append_dummy_visual`) appended after its last column, so every rank runs the
  vision tower the same number of times in every pass and ZeRO-3's parameter gathers never wait on a rank that
  drew other modalities; the dummy columns are cut off the log-probabilities.

Generation never samples a media placeholder (``<|image_pad|>``, ``<|video_pad|>``): one in a completion would leave
the visual tokens and features out of step and stop the log-probability pass. TRL 1.16 suppresses the image pad
token with transformers only; :func:`ban_media_placeholders` bans both, as ``suppress_tokens`` for transformers and
as ``bad_words`` for vLLM. Generation under ZeRO-3 gathers the whole model first (TRL's
``ds3_gather_for_generation``, on by default), so it needs no dummy.

vLLM generation (``use_vllm``) takes text-only policies only: ``recipes/grpo.py`` refuses it for a vision-language
model before any weights load (``check_vllm`` says why: TRL 1.16 hands vLLM prompt ids whose visual tokens are
already expanded).
"""

from dataclasses import dataclass, field

import torch
from trl import GRPOTrainer

from recipes.training.chat_inputs import VISUAL_KEYS, processor_inputs
from recipes.training.collator import append_dummy_visual
from recipes.training.grpo_data import VISUALS_COLUMN


BATCH_VISUALS = "visual_inputs"  # TRL's generation batch: one entry per completion, shuffled and split with it


@dataclass
class EncodedPrompt:
    """One prompt as the model sees it: token ids, their modality types (Qwen-VL: 0 text, 1 image, 2 video) and the
    visual tensors of its frames."""

    input_ids: list[int]
    token_types: list[int] | None = None
    visual: dict[str, torch.Tensor] = field(default_factory=dict)


def encode_row(processor, row: dict) -> EncodedPrompt:
    """A GRPO row (``recipes.training.grpo_data``) -> its encoded prompt, by the one encoding of SFT and evaluation."""
    visuals = row.get(VISUALS_COLUMN) or {}
    encoded = processor_inputs(processor, [row["prompt"]], [visuals.get("images") or []], visuals.get("videos") or [])
    token_types = encoded.get("mm_token_type_ids")
    return EncodedPrompt(
        input_ids=encoded["input_ids"][0].tolist(),
        token_types=token_types[0].tolist() if token_types is not None else None,
        visual={key: encoded[key] for key in VISUAL_KEYS if key in encoded},
    )


def merge_visuals(prompts: list[EncodedPrompt]) -> dict[str, torch.Tensor]:
    """The visual tensors of several prompts as one batch (rows of pixels and grids concatenated in prompt order)."""
    merged = {}
    for key in VISUAL_KEYS:
        parts = [prompt.visual[key] for prompt in prompts if key in prompt.visual]
        if parts:
            merged[key] = torch.cat(parts)
    return merged


def token_types_for(prompts: list[EncodedPrompt], input_ids: torch.Tensor, prompt_width: int) -> torch.Tensor:
    """``mm_token_type_ids`` for rows of left-padded prompts (``prompt_width`` columns) followed by completions:
    each prompt's own types, right-aligned, and zeros over the padding and the completion."""
    types = torch.zeros_like(input_ids, dtype=torch.int)
    for row, prompt in enumerate(prompts):
        if prompt.token_types:
            width = len(prompt.token_types)
            types[row, prompt_width - width : prompt_width] = torch.tensor(prompt.token_types, dtype=torch.int)
    return types


MEDIA_PLACEHOLDERS = ("<|image_pad|>", "<|video_pad|>", "<|image|>", "<|video|>")


def media_placeholder_tokens(tokenizer) -> dict[str, int]:
    """``{token: id}`` of the media placeholders ``tokenizer`` knows (Qwen-VL: ``<|image_pad|>``,
    ``<|video_pad|>``)."""
    found = {}
    for token in MEDIA_PLACEHOLDERS:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is not None and token_id != tokenizer.unk_token_id:
            found[token] = token_id
    return found


def ban_media_placeholders(generation_kwargs: dict | None, tokenizer, backend: str) -> dict:
    """``generation_kwargs`` plus a ban on every media placeholder: ``suppress_tokens`` (ids) for transformers,
    ``bad_words`` (strings; vLLM's ``SamplingParams`` tokenises them) for vLLM; what the recipe set is kept."""
    placeholders = media_placeholder_tokens(tokenizer)
    banned = dict(generation_kwargs or {})
    if backend == "transformers":
        key, values = "suppress_tokens", list(placeholders.values())
    elif backend == "vllm":
        key, values = "bad_words", list(placeholders)
    else:
        raise ValueError(f"unknown generation backend {backend!r}: transformers or vllm")
    if values:
        banned[key] = list(dict.fromkeys([*(banned.get(key) or []), *values]))
    return banned


class VisualGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` for rows with a ``visuals`` column (see the module docstring)."""

    def __init__(self, *args, uniform_vision_calls: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.uniform_vision_calls = uniform_vision_calls
        self._batch_prompts: list[EncodedPrompt] | None = None  # the rows being generated for, in order
        self._forward_prompts: list[EncodedPrompt] | None = None  # the rows of the next log-probability pass
        if self.use_vllm:
            generation = self.vllm_generation
            generation.generation_kwargs = ban_media_placeholders(
                generation.generation_kwargs, self._tokenizer, "vllm"
            )
        elif self.generation_config is not None:
            self.generation_kwargs = ban_media_placeholders(self.generation_kwargs, self._tokenizer, "transformers")
            self.generation_config.suppress_tokens = self.generation_kwargs.get("suppress_tokens")

    def encode_batch(self, inputs: list[dict]) -> list[EncodedPrompt]:
        """Each row's encoded prompt; copies of one prompt (the group of ``num_generations``) share one encoding."""
        encoded, seen = [], {}
        for row in inputs:
            key = (row.get("question_id") or str(id(row)), repr(row["prompt"]))
            if key not in seen:
                seen[key] = encode_row(self.processing_class, row)
            encoded.append(seen[key])
        return encoded

    def _generate_and_score_completions(self, inputs):
        prompts = self.encode_batch(inputs)
        self._batch_prompts = self._forward_prompts = prompts
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._batch_prompts = self._forward_prompts = None
        output[BATCH_VISUALS] = prompts
        return output

    def _tokenize_prompts(self, prompts: list):
        encoded = self._batch_prompts
        if encoded is None or len(encoded) != len(prompts):
            raise RuntimeError("VisualGRPOTrainer: prompts reached generation without their encoded rows")
        fields = merge_visuals(encoded)
        if any(prompt.token_types for prompt in encoded):
            fields["mm_token_type_ids"] = [prompt.token_types or [0] * len(prompt.input_ids) for prompt in encoded]
        return [prompt.input_ids for prompt in encoded], None, fields

    def _compute_loss(self, model, inputs):
        self._forward_prompts = inputs.get(BATCH_VISUALS)
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._forward_prompts = None

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **image_kwargs,
    ):
        prompts = self._forward_prompts
        if prompts is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **image_kwargs,
            )  # fmt: skip
        if len(prompts) != input_ids.size(0):
            raise RuntimeError(f"VisualGRPOTrainer: {len(prompts)} encoded prompts for {input_ids.size(0)} rows")
        batch_size = batch_size or input_ids.size(0)
        prompt_width = input_ids.size(1) - logits_to_keep
        with_types = any(prompt.token_types for prompt in prompts)
        all_logps, all_entropies, all_aux_losses = [], [], []
        for start in range(0, input_ids.size(0), batch_size):
            end = min(start + batch_size, input_ids.size(0))
            chunk = prompts[start:end]
            ids, mask = input_ids[start:end], attention_mask[start:end]
            labels = ids.masked_fill(mask == 0, -100)  # only the completion tokens are scored (as TRL's)
            labels[:, :-logits_to_keep] = -100
            model_inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
            model_inputs |= {key: value.to(ids.device) for key, value in merge_visuals(chunk).items()}
            if with_types:
                model_inputs["mm_token_type_ids"] = token_types_for(chunk, ids, prompt_width)
            dummies = 0
            if self.uniform_vision_calls:
                for kind, key in (("image", "pixel_values"), ("video", "pixel_values_videos")):
                    if key not in model_inputs:
                        dummies += append_dummy_visual(model_inputs, self.processing_class, kind)
            if compute_aux_loss:
                model_inputs["output_router_logits"] = True
            with self.accelerator.autocast():
                outputs = model(**model_inputs, fused_lm_head=True)
            scored = slice(-logits_to_keep - dummies, -dummies or None)  # the completion, without the dummy columns
            all_logps.append(outputs.log_probs[:, scored])
            if compute_entropy:
                all_entropies.append(outputs.entropy[:, scored])
            if compute_aux_loss:
                all_aux_losses.append(outputs.aux_loss)
        logps = torch.cat(all_logps, dim=0)
        entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
        aux_loss = torch.stack(all_aux_losses).mean() if compute_aux_loss else None
        return logps, entropies, aux_loss
