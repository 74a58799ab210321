"""TRL's ``GRPOTrainer`` whose prompts carry their frames as SFT and evaluation encode them: images, one video per
clip (``frames_as: video``), or none, mixed in one batch.

TRL 1.16 reads image parts only (``GRPOTrainer._tokenize_prompts``; its ``images`` column), and its log-probability
pass forwards ``pixel_values`` / ``image_grid_thw`` but no ``pixel_values_videos`` / ``video_grid_thw``
(huggingface/trl#4144 is the open request; #4529 tried a Qwen3-VL video trainer and was closed unmerged). This
subclass changes three hooks for the frames, and the cuts the recipe asks for (after them) two more, nothing else
of TRL's loop (sampling, rewards, advantages, loss, logging, resume):

- ``_generate_and_score_completions``: before TRL's own, each row of the local generation batch is encoded once by
  :func:`recipes.model_io.chat_inputs.processor_inputs`, the encoding the SFT collator and ``sureon eval sureon``
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

Two cuts of transformers generation, each off unless the recipe asks (docs/training/grpo.md), both inside the
``generate`` call TRL's ``_generate_single_turn`` makes (TRL's padding, EOS masking, ZeRO-3 gathering and sampling
stay its own):

- ``completion_budgets``: each row stops once it holds its answer kind's budget of new tokens
  (:class:`BudgetStop`, a per-row stopping criterion), or earlier at its own end-of-turn; the batch ends when every
  row has. A row stopped by its budget is cut there, as TRL cuts a completion at ``max_completion_length``: nothing
  is forced into it, so TRL counts it as clipped (``completions/clipped_ratio``) and the loss scores only tokens
  the policy sampled.
- ``share_prompt_prefill``: the copies of a prompt in the batch (TRL's ``RepeatSampler`` puts a prompt's
  ``num_generations`` copies together, on one rank) run one prefill, the vision tower included, over all but the
  prompt's last token; each copy then gets its own copy of that KV cache and ``generate`` goes on from it
  (:func:`shared_prefill_inputs`). The completions are drawn as TRL draws them: the same generation config, one
  ``torch.multinomial`` over the whole batch per step in the same row order, so the same seed gives the same
  completions wherever the float rounding of the logits does not move a draw (tests/test_grpo.py compares them).

One cut of the training passes, off unless the recipe asks (``share_prompt_in_training``; in
``_prepare_inputs`` and ``_get_per_token_logps_and_entropies``): the policy's
log-probability and loss pass, and the old-policy and reference passes when TRL runs them, take each prompt once
per chunk of rows instead of once per completion (:func:`pack_by_prompt`). A chunk's rows become one packed sequence
per distinct prompt: the prompt less its last token, then for each of its completions in the chunk a branch of that
last token and the completion (less its own last token, which predicts nothing scored); a 4-D attention mask lets
each branch see the prompt and itself only, causally, and each branch's positions continue the prompt's (Qwen3-VL's
3-D rotary positions, as ``generate`` gives them). Each completion token is then computed from the same context, at
the same position, as in TRL's pass, so the log-probabilities, the loss and the gradients are TRL's within float
rounding (tests/test_grpo.py). It needs an attention that takes a 4-D mask (``sdpa``, ``eager``; flash-attention
takes none). For a micro-batch to hold several completions of a prompt, TRL's shuffle of the generation batch
(``_prepare_inputs``) is followed by a stable grouping of each prompt's rows (:func:`group_by_prompt`): the same
random draw, each prompt's rows side by side. An optimizer step's gradient does not depend on that grouping when
the loss normalises by a constant over the step (``dapo``, ``cispo``, ``vespo``, ``dr_grpo``) or by rows of
micro-batches of one size (``grpo``, ``sapo``, ``luspo``) and the step is one generation batch
(``steps_per_generation`` equals the accumulation); ``recipes/grpo.py`` refuses the settings where it would.
"""

from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from trl import GRPOTrainer

from recipes.model_io.chat_inputs import VISUAL_KEYS, processor_inputs
from recipes.training.collator import append_dummy_visual
from recipes.training.grpo_data import VISUALS_COLUMN, answer_kind


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


class BudgetStop(StoppingCriteria):
    """Ends each row of a ``generate`` batch once it holds its own number of new tokens (its answer kind's budget)."""

    def __init__(self, budgets: list[int], prompt_width: int):
        self.budgets = torch.tensor(budgets)
        self.prompt_width = prompt_width

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        return input_ids.shape[1] - self.prompt_width >= self.budgets.to(input_ids.device)


def prompt_groups(prompts: list[EncodedPrompt]) -> list[int]:
    """For each row, the number of its prompt among the batch's distinct prompts (in order of first appearance):
    copies share one ``EncodedPrompt`` (:meth:`VisualGRPOTrainer.encode_batch`)."""
    numbers: dict[int, int] = {}
    return [numbers.setdefault(id(prompt), len(numbers)) for prompt in prompts]


def shared_prefill_inputs(model, inputs: dict, groups: list[int]) -> dict:
    """``generate``'s inputs for a batch whose rows repeat prompts, with the prefill done once per distinct prompt.

    ``inputs`` hold every row's left-padded ``input_ids`` / ``attention_mask`` / ``mm_token_type_ids`` and the visual
    tensors of the distinct prompts only, in the order of ``groups``' numbers. One forward of the distinct prompts
    (vision tower included) fills a KV cache over all but their last token, with the positions ``generate`` itself
    would give them (``_prepare_position_ids_for_generation``: Qwen-VL's 3-D rotary positions); each row gets its own
    copy of its prompt's cache (``Cache.reorder_cache``: an ``index_select``). ``generate`` then runs only the last
    prompt token of each row before sampling, with the same positions, mask and token types as in TRL's call."""
    rows = torch.tensor(groups, device=inputs["input_ids"].device)
    first = [groups.index(number) for number in range(max(groups) + 1)]
    per_row = {key: inputs[key] for key in ("input_ids", "attention_mask", "mm_token_type_ids") if key in inputs}
    distinct = {key: value[first] for key, value in per_row.items()}
    visual = {key: value for key, value in inputs.items() if key in VISUAL_KEYS}
    positions = model._prepare_position_ids_for_generation(
        distinct["input_ids"], {key: value for key, value in {**distinct, **visual}.items() if key != "input_ids"}
    )
    prefill = {key: value[:, :-1] for key, value in distinct.items()}
    cache = model(**prefill, **visual, position_ids=positions[..., :-1], use_cache=True, logits_to_keep=1).cache
    cache.reorder_cache(rows)
    batch_dim = 1 if positions.ndim == 3 else 0  # Qwen-VL: (4, batch, length); text models: (batch, length)
    others = {key: value for key, value in inputs.items() if key not in per_row and key not in VISUAL_KEYS}
    return {**others, **per_row, "position_ids": positions.index_select(batch_dim, rows), "cache": cache}


@contextmanager
def cut_generation(model, budgets: list[int] | None, groups: list[int] | None):
    """``model.generate`` (what TRL's ``_generate_single_turn`` calls) with the recipe's cuts for one batch: each row
    stopped at its budget (``budgets``), the prefill shared by the rows of a prompt (``groups``)."""
    generate = model.generate

    def cut_generate(**inputs):
        stopping = StoppingCriteriaList(inputs.pop("stopping_criteria", None) or [])
        if budgets is not None:
            stopping.append(BudgetStop(budgets, inputs["input_ids"].shape[1]))
        if groups is not None:
            inputs = shared_prefill_inputs(model, inputs, groups)
        return generate(**inputs, stopping_criteria=stopping)

    model.generate = cut_generate  # an instance attribute over the class's method, for this batch only
    try:
        yield
    finally:
        del model.generate


# Attention implementations that take the 4-D mask of a packed chunk (transformers' ``sdpa`` and ``eager``); flash-
# attention takes only padding, and flex-attention a block mask.
PACKED_ATTENTION = ("sdpa", "eager")
PROMPT_SEGMENT, PADDING_SEGMENT = 0, -1  # a packed position's segment: the prompt, padding, or its branch (1, 2, ...)


def group_by_prompt(batch: dict) -> dict:
    """A generation batch (TRL's output, one entry per completion) with each prompt's rows side by side: prompts in
    the order of their first row, rows in their order within a prompt (a stable sort), every per-row value moved as
    TRL's ``shuffle_sequence_dict`` moves it. Rows share a prompt when they share its :class:`EncodedPrompt`."""
    prompts = batch.get(BATCH_VISUALS)
    if prompts is None:
        return batch
    groups = prompt_groups(prompts)
    order = sorted(range(len(groups)), key=groups.__getitem__)

    def moved(value):
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[torch.tensor(order, device=value.device)]
        return [value[i] for i in order]

    return {key: moved(value) for key, value in batch.items()}


@contextmanager
def shuffle_grouped_by_prompt():
    """TRL's ``_prepare_inputs`` with each prompt's rows brought together after its shuffle of the generation batch
    (:func:`group_by_prompt`): the same random permutation drawn (the same random stream after it), then grouped, so
    that ``split_tensor_dict``'s micro-batches hold several completions of a prompt."""
    from trl.trainer import grpo_trainer as trl_grpo

    shuffle = trl_grpo.shuffle_sequence_dict
    trl_grpo.shuffle_sequence_dict = lambda batch: group_by_prompt(shuffle(batch))
    try:
        yield
    finally:
        trl_grpo.shuffle_sequence_dict = shuffle


@dataclass
class PackedChunk:
    """A chunk of rows packed one sequence per distinct prompt (:func:`pack_by_prompt`): the model's inputs, each
    position's segment, and where each scored completion token's value lands in TRL's ``(rows, completion
    columns)`` layout (``rows``, ``columns``) from the packed ``(sequences, offsets)``."""

    inputs: dict[str, torch.Tensor]
    segments: torch.Tensor
    rows: torch.Tensor
    columns: torch.Tensor
    sequences: torch.Tensor
    offsets: torch.Tensor
    shape: tuple[int, int]

    def model_inputs(self, attention: str) -> dict[str, torch.Tensor]:
        """The forward's inputs, once anything is appended to ``inputs`` (the uniform vision calls' masked dummy
        columns): the 4-D mask (:func:`branch_attention_mask`) over every column, the appended ones padding, and
        the labels as TRL's fused LM head takes pre-shifted ones (``shift_labels``: position i scores its label)."""
        inputs = dict(self.inputs)
        extra = inputs["input_ids"].shape[1] - self.segments.shape[1]
        segments = torch.nn.functional.pad(self.segments, (0, extra), value=PADDING_SEGMENT)
        inputs["position_ids"] = torch.nn.functional.pad(inputs["position_ids"], (0, extra))
        inputs["attention_mask"] = branch_attention_mask(segments, inputs["attention_mask"].bool(), attention)
        inputs["shift_labels"] = inputs.pop("labels")
        return inputs

    def unpack(self, per_position: torch.Tensor) -> torch.Tensor:
        """Per-position values of the packed sequences (the fused LM head's log-probabilities or entropies) in TRL's
        layout: each completion token's at its row and column, zero where TRL's mask is zero (as TRL's are)."""
        values = per_position[self.sequences, self.offsets]
        return per_position.new_zeros(self.shape).index_put((self.rows, self.columns), values)


def branch_attention_mask(segments: torch.Tensor, valid: torch.Tensor, attention: str) -> torch.Tensor:
    """The ``(sequences, 1, length, length)`` mask of packed sequences: a position sees the earlier positions of the
    prompt and of its own branch (the prompt sees itself only, causally); padding is seen by none and sees itself
    only, so no row of the mask is empty. Boolean for ``sdpa`` (True: attend), additive for ``eager``."""
    length = segments.shape[1]
    index = torch.arange(length, device=segments.device)
    causal = index[None, :] <= index[:, None]
    visible = (segments[:, None, :] == PROMPT_SEGMENT) | (segments[:, None, :] == segments[:, :, None])
    allowed = causal & visible & valid[:, None, :] & valid[:, :, None]
    allowed |= torch.eye(length, dtype=torch.bool, device=segments.device)
    if attention == "eager":
        blocked = torch.finfo(torch.float32).min
        return torch.zeros(allowed.shape, device=segments.device).masked_fill(~allowed, blocked)[:, None]
    return allowed[:, None]


def pack_by_prompt(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_width: int, prompts, pad_token_id: int
) -> PackedChunk:
    """Rows of TRL's log-probability pass (left-padded prompts, then right-padded completions of
    ``completion_width`` columns; ``prompts``: each row's :class:`EncodedPrompt`, shared by the rows of one prompt)
    packed one sequence per distinct prompt, in the order of first appearance:

    - the prompt less its last token, once, with its visual tensors once (the vision tower sees its frames once);
    - for each of its rows, a branch: the prompt's last token, then the completion less its last token (which
      predicts nothing TRL scores; a completion masked whole, as ``mask_truncated_completions`` masks one, keeps
      the last prompt token alone, unscored); the label of each branch position is the completion token it
      predicts, so each completion token is scored from its prompt and its own earlier tokens, as in TRL's pass;
    - positions: the prompt's as the model itself gives them (``_prepare_position_ids_for_generation``: Qwen3-VL's
      3-D rotary positions, text positions for text models), each branch continuing from the prompt's last one as
      text after the prompt does (``get_rope_index``); sequences right-padded to the longest.

    ``model`` is the unwrapped model (for its positions). The mask and the labels are made by
    :meth:`PackedChunk.model_inputs`."""
    device = input_ids.device
    prompt_width = input_ids.size(1) - completion_width
    groups = prompt_groups(prompts)
    first = [groups.index(number) for number in range(max(groups) + 1)]
    distinct = [prompts[row] for row in first]
    prompt_ids, prompt_mask = input_ids[first, :prompt_width], attention_mask[first, :prompt_width]
    visual = {key: value.to(device) for key, value in merge_visuals(distinct).items()}
    with_types = any(prompt.token_types for prompt in distinct)
    context = {"attention_mask": prompt_mask, **visual}
    if with_types:
        context["mm_token_type_ids"] = token_types_for(distinct, prompt_ids, prompt_width)
    positions = model._prepare_position_ids_for_generation(prompt_ids, context)
    rotary = positions if positions.ndim == 3 else positions[None]  # (position rows, prompts, prompt_width)
    completions = input_ids[:, prompt_width:]
    lengths = attention_mask[:, prompt_width:].sum(1).tolist()
    rows, columns, sequences, offsets, packed = [], [], [], [], []
    for number, prompt in enumerate(distinct):
        size = int(prompt_mask[number].sum())
        tokens, where = prompt_ids[number, prompt_width - size :], rotary[:, number, prompt_width - size :]
        types = torch.tensor(prompt.token_types or [0] * size, dtype=torch.int, device=device)
        parts = {
            "input_ids": [tokens[:-1]],
            "labels": [torch.full((size - 1,), -100, dtype=tokens.dtype, device=device)],
            "mm_token_type_ids": [types[:-1]],
            "segments": [torch.full((size - 1,), PROMPT_SEGMENT, device=device)],
            "position_ids": [where[:, :-1]],
        }
        start = size - 1
        members = [row for row, group in enumerate(groups) if group == number]
        for branch, row in enumerate(members, start=1):
            scored = int(lengths[row])
            branch_tokens = torch.cat([tokens[-1:], completions[row, : max(scored - 1, 0)]])
            width = branch_tokens.numel()
            parts["input_ids"].append(branch_tokens)
            parts["labels"].append(completions[row, :scored] if scored else torch.full_like(tokens[-1:], -100))
            parts["mm_token_type_ids"].append(torch.cat([types[-1:], types.new_zeros(width - 1)]))
            parts["segments"].append(torch.full((width,), branch, device=device))
            parts["position_ids"].append(where[:, -1:] + torch.arange(width, device=device))
            rows += [row] * scored
            columns += range(scored)
            sequences += [number] * scored
            offsets += range(start, start + scored)
            start += width
        packed.append({key: torch.cat(values, dim=-1) for key, values in parts.items()})
    count, length = len(packed), max(sequence["input_ids"].numel() for sequence in packed)
    inputs = {
        "input_ids": torch.full((count, length), pad_token_id, dtype=input_ids.dtype, device=device),
        "attention_mask": torch.zeros((count, length), dtype=attention_mask.dtype, device=device),
        "labels": torch.full((count, length), -100, dtype=input_ids.dtype, device=device),
        "mm_token_type_ids": torch.zeros((count, length), dtype=torch.int, device=device),
        "position_ids": torch.zeros((rotary.size(0), count, length), dtype=rotary.dtype, device=device),
    }
    segments = torch.full((count, length), PADDING_SEGMENT, device=device)
    for number, sequence in enumerate(packed):
        width = sequence["input_ids"].numel()
        for key in ("input_ids", "labels", "mm_token_type_ids"):
            inputs[key][number, :width] = sequence[key]
        inputs["attention_mask"][number, :width] = 1
        inputs["position_ids"][:, number, :width] = sequence["position_ids"]
        segments[number, :width] = sequence["segments"]
    if positions.ndim == 2:
        inputs["position_ids"] = inputs["position_ids"][0]
    if not with_types:
        del inputs["mm_token_type_ids"]

    def index(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.long, device=device)

    return PackedChunk(
        inputs=inputs | visual,
        segments=segments,
        rows=index(rows),
        columns=index(columns),
        sequences=index(sequences),
        offsets=index(offsets),
        shape=(input_ids.size(0), completion_width),
    )


class VisualGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` for rows with a ``visuals`` column (see the module docstring)."""

    def __init__(
        self,
        *args,
        uniform_vision_calls: bool = False,
        completion_budgets: dict[str, int] | None = None,
        share_prompt_prefill: bool = False,
        share_prompt_in_training: bool = False,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.uniform_vision_calls = uniform_vision_calls
        self.completion_budgets = dict(completion_budgets or {})
        self.share_prompt_prefill = share_prompt_prefill
        self.share_prompt_in_training = share_prompt_in_training
        attention = self.text_attention()
        if share_prompt_in_training and attention not in PACKED_ATTENTION:
            raise ValueError(
                f"share_prompt_in_training needs an attention that takes a 4-D mask "
                f"({' or '.join(PACKED_ATTENTION)}); the model runs {attention}"
            )
        self._batch_prompts: list[EncodedPrompt] | None = None  # the rows being generated for, in order
        self._batch_budgets: list[int] | None = None  # their budgets of new tokens, with completion_budgets
        self._forward_prompts: list[EncodedPrompt] | None = None  # the rows of the next log-probability pass
        if self.use_vllm:
            generation = self.vllm_generation
            generation.generation_kwargs = ban_media_placeholders(
                generation.generation_kwargs, self._tokenizer, "vllm"
            )
        elif self.generation_config is not None:
            self.generation_kwargs = ban_media_placeholders(self.generation_kwargs, self._tokenizer, "transformers")
            self.generation_config.suppress_tokens = self.generation_kwargs.get("suppress_tokens")

    def text_attention(self) -> str:
        """The attention implementation of the policy's language model (what a packed chunk's mask is made for)."""
        config = self.accelerator.unwrap_model(self.model).config
        return str(config.get_text_config()._attn_implementation)

    def encode_batch(self, inputs: list[dict]) -> list[EncodedPrompt]:
        """Each row's encoded prompt; copies of one prompt (the group of ``num_generations``) share one encoding."""
        encoded, seen = [], {}
        for row in inputs:
            key = (row.get("question_id") or str(id(row)), repr(row["prompt"]))
            if key not in seen:
                seen[key] = encode_row(self.processing_class, row)
            encoded.append(seen[key])
        return encoded

    def row_budgets(self, inputs: list[dict]) -> list[int] | None:
        """Each row's budget of new tokens (its answer kind's, else ``max_completion_length``), or None without
        ``completion_budgets``."""
        if not self.completion_budgets:
            return None
        cap = self.max_completion_length or torch.iinfo(torch.int64).max  # None: TRL sets no cap
        return [min(self.completion_budgets.get(answer_kind(row), cap), cap) for row in inputs]

    def _generate_and_score_completions(self, inputs):
        prompts = self.encode_batch(inputs)
        self._batch_prompts = self._forward_prompts = prompts
        self._batch_budgets = self.row_budgets(inputs)
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._batch_prompts = self._forward_prompts = self._batch_budgets = None
        output[BATCH_VISUALS] = prompts
        return output

    def _tokenize_prompts(self, prompts: list):
        encoded = self._batch_prompts
        if encoded is None or len(encoded) != len(prompts):
            raise RuntimeError("VisualGRPOTrainer: prompts reached generation without their encoded rows")
        # Shared prefill: the vision tower sees each distinct prompt's frames once (shared_prefill_inputs)
        with_frames = list({id(p): p for p in encoded}.values()) if self.share_prompt_prefill else encoded
        fields = merge_visuals(with_frames)
        if any(prompt.token_types for prompt in encoded):
            fields["mm_token_type_ids"] = [prompt.token_types or [0] * len(prompt.input_ids) for prompt in encoded]
        return [prompt.input_ids for prompt in encoded], None, fields

    def _generate_single_turn(self, *args, **kwargs):
        budgets = self._batch_budgets
        groups = prompt_groups(self._batch_prompts) if self.share_prompt_prefill else None
        if budgets is None and groups is None:
            return super()._generate_single_turn(*args, **kwargs)
        with cut_generation(self.accelerator.unwrap_model(self.model_wrapped), budgets, groups):
            completion_ids, logprobs = super()._generate_single_turn(*args, **kwargs)
        if budgets is not None:  # a stopped row is padded to the batch's end: its completion ends at its budget
            completion_ids = [ids[:budget] for ids, budget in zip(completion_ids, budgets, strict=True)]
        return completion_ids, logprobs

    def _prepare_inputs(self, generation_batch):
        if not self.share_prompt_in_training:
            return super()._prepare_inputs(generation_batch)
        with shuffle_grouped_by_prompt():
            return super()._prepare_inputs(generation_batch)

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
            packed = None
            if self.share_prompt_in_training:  # each prompt once (pack_by_prompt), its completions as branches
                unwrapped = self.accelerator.unwrap_model(model)
                pad = self._tokenizer.pad_token_id
                packed = pack_by_prompt(unwrapped, ids, mask, logits_to_keep, chunk, pad)
                model_inputs = packed.inputs
            else:
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
            if packed is not None:
                model_inputs = packed.model_inputs(self.text_attention())
            if compute_aux_loss:
                model_inputs["output_router_logits"] = True
            with self.accelerator.autocast():
                outputs = model(**model_inputs, fused_lm_head=True)
            if packed is not None:
                all_logps.append(packed.unpack(outputs.log_probs))
                if compute_entropy:
                    all_entropies.append(packed.unpack(outputs.entropy))
            else:
                scored = slice(-logits_to_keep - dummies, -dummies or None)  # the completion, not the dummy columns
                all_logps.append(outputs.log_probs[:, scored])
                if compute_entropy:
                    all_entropies.append(outputs.entropy[:, scored])
            if compute_aux_loss:
                all_aux_losses.append(outputs.aux_loss)
        logps = torch.cat(all_logps, dim=0)
        entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
        aux_loss = torch.stack(all_aux_losses).mean() if compute_aux_loss else None
        return logps, entropies, aux_loss
