"""Length-grouped SFT batches (recipes/training/batching.py): a row's length known without decoding a frame, equal to
the collator's count; the grouped order keeps the mixture's proportions in every step and is the same for a seed on
any number of ranks; a run with ``train_sampling_strategy: group_by_length`` draws it; and the plan's padding and
loader figures (recipes/training/plan/batching.py)."""

from collections import Counter

import numpy as np
import pytest
import torch
from accelerate.data_loader import BatchSamplerShard
from torch.utils.data import BatchSampler

from recipes.training.batching import STEPS_PER_WINDOW, GroupedSampler, grouped_order, row_lengths
from recipes.training.plan.batching import batches_padding, loader_plan, padding_share
from recipes.training.plan.tokens import measure_mixture
from tests.test_sft import collator_for, image_source, run_sft, text_source, video_source


def collator_counts(collator, index) -> list[int]:
    return [len(collator.encoded(index[i]).input_ids) for i in range(len(index))]


@pytest.mark.parametrize(
    "case",
    ["video, images and text", "tagged frames, capped, with a system prompt", "blind", "a text model", "max_length"],
)
def test_a_rows_length_without_its_frames_is_the_collators_count(
    case, tiny_qwen3_vl, tiny_causal_lm, sureon_build, tmp_path
):
    entries = [video_source(sureon_build), image_source(tmp_path), text_source(tmp_path)]
    model, options = tiny_qwen3_vl, {}
    if case.startswith("tagged"):
        # the bench config stores its frames in the rows (the db config as files under media/)
        entries = [video_source(sureon_build, name="bench", split="test")]
        options = {"frames_as": "images", "max_frames": 5, "system_prompt": "You are a surgeon."}
    elif case == "blind":
        options = {"blind": True}
    elif case == "a text model":
        model, entries, options = tiny_causal_lm, [video_source(sureon_build), text_source(tmp_path)], {"blind": True}
    elif case == "max_length":
        options = {"max_length": 120}
    collator, index, _ = collator_for(model, entries, **options)
    counted = row_lengths(collator, index)
    assert counted == collator_counts(collator, index)
    if case == "video, images and text":  # counted in forked processes, a chunk each
        assert row_lengths(collator, index, processes=2, chunk_rows=8) == counted
    if case == "max_length":
        assert 1 in counted and max(counted) <= 120  # some rows refused: each trains as one masked token


def mixture_lengths(rows: int = 700, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of a mixture like the 8B recipe's: clips (~1,500 tokens), images (300-600) and text rows."""
    rng = np.random.default_rng(seed)
    sources = rng.choice(3, size=rows, p=[0.4, 0.5, 0.1])
    lengths = np.select(
        [sources == 0, sources == 1],
        [rng.integers(1450, 1600, rows), rng.integers(300, 600, rows)],
        rng.integers(80, 250, rows),
    )
    return lengths, sources


def steps_on_ranks(order: list[int], ranks: int, batch_size: int, global_batch: int) -> list[list[tuple[int, ...]]]:
    """What each optimizer step trains when accelerate shards ``order`` over ``ranks``: the step's micro-batches."""
    sampler = BatchSampler(order, batch_size, drop_last=False)
    per_rank = [list(BatchSamplerShard(sampler, num_processes=ranks, process_index=r)) for r in range(ranks)]
    accumulation = global_batch // (batch_size * ranks)
    full_steps = len(order) // global_batch
    return [
        sorted(tuple(batch) for rank in per_rank for batch in rank[step * accumulation : (step + 1) * accumulation])
        for step in range(full_steps)
    ]


def test_grouped_order_keeps_the_mixture_in_every_step_and_is_the_seeds_on_any_number_of_ranks():
    lengths, sources = mixture_lengths()
    batch, global_batch = 4, 16
    order = grouped_order(lengths, batch_size=batch, global_batch_size=global_batch, seed=7)
    assert sorted(order) == list(range(len(lengths)))  # every row once: the proportions over the epoch are exact
    assert order == grouped_order(lengths, batch_size=batch, global_batch_size=global_batch, seed=7)
    assert order != grouped_order(lengths, batch_size=batch, global_batch_size=global_batch, seed=8)
    assert order != grouped_order(lengths, batch_size=batch, global_batch_size=global_batch, seed=7, epoch=1)

    window = STEPS_PER_WINDOW * global_batch
    for start in range(0, len(order) - window + 1, window):
        share = Counter(sources[order[start : start + window]].tolist())
        for step in range(start, start + window, global_batch):
            counts = Counter(sources[order[step : step + global_batch]].tolist())
            for source in range(3):  # within one micro-batch of the window's proportions
                assert abs(counts[source] - share[source] * global_batch / window) <= batch, (step, counts, share)

    # the same rows in the same micro-batches in each step, on 1, 2 or 4 ranks
    one = steps_on_ranks(order, 1, batch, global_batch)
    assert len(one) == len(lengths) // global_batch
    assert steps_on_ranks(order, 2, batch, global_batch) == one
    assert steps_on_ranks(order, 4, batch, global_batch) == one
    # the epoch's only short micro-batch comes last, so every other one stays whole when the trainer cuts
    micro_batches = [order[i : i + batch] for i in range(0, len(order), batch)]
    assert all(len(micro_batch) == batch for micro_batch in micro_batches[:-1])

    sampler = GroupedSampler(list(lengths), batch_size=batch, global_batch_size=global_batch, seed=7)
    first = list(sampler)
    sampler.set_epoch(1)
    assert first == order and list(sampler) != order and not hasattr(sampler, "generator")


def test_grouped_batches_pad_less_than_random_ones():
    lengths, sources = mixture_lengths()
    rows = [{"tokens": int(length), "source": str(source)} for length, source in zip(lengths, sources, strict=True)]
    random_share = padding_share(rows, 4, grouped=False, seed=0)
    grouped_share = padding_share(rows, 4, grouped=True, seed=0, global_batch_size=16)
    assert random_share > 0.3 and grouped_share < 0.05
    # two synthetic rows (a clip, an image) stand for a mixture of half each: not one batch of the two
    synthetic = [{"tokens": 1527, "source": "clip"}, {"tokens": 392, "source": "image"}]
    assert padding_share(synthetic, 4, grouped=True, seed=0, global_batch_size=64) < 0.01
    assert 0.3 < padding_share(synthetic, 4, grouped=False, seed=0) < 0.4


def test_the_plan_measures_rows_with_their_cpu_time_and_the_collator_pads_as_the_plan_counts(
    tiny_qwen3_vl, sureon_build, tmp_path
):
    from recipes.model_io.modeling import load_processor

    entries = [video_source(sureon_build), image_source(tmp_path), text_source(tmp_path)]
    rows = measure_mixture(load_processor(str(tiny_qwen3_vl)), entries, {"max_frames": 8}, samples=64, seed=0)
    assert all(row["cpu_seconds"] > 0 for row in rows)
    grouped = padding_share(rows, 2, grouped=True, seed=0, global_batch_size=4)
    assert grouped < padding_share(rows, 2, grouped=False, seed=0)

    # the collator's own batches, drawn in the grouped order, pad exactly the share the plan counts
    collator, index, _ = collator_for(tiny_qwen3_vl, entries, max_frames=8)
    lengths = row_lengths(collator, index)
    order = grouped_order(lengths, batch_size=2, global_batch_size=4, seed=0)
    masks = [collator([index[i] for i in order[s : s + 2]])["attention_mask"] for s in range(0, len(order), 2)]
    padded = sum(int((mask == 0).sum()) for mask in masks)
    computed = sum(mask.numel() for mask in masks)
    assert (padded, computed) == batches_padding(lengths, order, 2)


def test_a_run_with_group_by_length_trains_on_the_grouped_batches(tiny_qwen3_vl, sureon_build, tmp_path, monkeypatch):
    from recipes.training.collator import SFTCollator

    drawn = []
    collate = SFTCollator.__call__

    def recording(self, index_rows):
        drawn.append([(int(row["source"]), int(row["row"])) for row in index_rows])
        return collate(self, index_rows)

    monkeypatch.setattr(SFTCollator, "__call__", recording)
    entries = [video_source(sureon_build), text_source(tmp_path)]
    run_sft(
        tmp_path,
        tiny_qwen3_vl,
        entries,
        steps=2,
        train_sampling_strategy="group_by_length",
        seed=3,
        save_strategy="no",
    )

    collator, index, _ = collator_for(tiny_qwen3_vl, entries)
    order = grouped_order(row_lengths(collator, index), batch_size=2, global_batch_size=2, seed=3)
    expected = [[(index[i]["source"], index[i]["row"]) for i in order[s : s + 2]] for s in (0, 2)]
    assert drawn[:2] == expected


def test_loader_plan_arithmetic():
    # 0.1 CPU s a sample at 18.6 samples/s over 4 GPUs: 1.86 cores, 0.465 a GPU, plus each rank's own process
    plan = loader_plan(0.1, 18.6, num_gpus=4, cores=8)
    assert plan["cores_needed"] == pytest.approx(1.86)
    assert plan["cores_per_gpu_needed"] == pytest.approx(1.465)
    assert plan["workers_per_gpu"] == 1 and plan["enough"] is True and plan["warning"] is None
    short = loader_plan(0.5, 18.6, num_gpus=4, cores=8)  # 9.3 cores for loading + 4 for the ranks > 8
    assert short["enough"] is False and "3.3 CPU cores per GPU" in short["warning"] and "has 2.0" in short["warning"]
    assert short["workers_per_gpu"] == 5  # ceil(2 x 2.325)
    unknown = loader_plan(0.5, 18.6, num_gpus=4, cores=None)
    assert unknown["enough"] is None and unknown["warning"] is None and unknown["cores_available"] is None


def test_grouped_order_refuses_a_global_batch_of_partial_micro_batches():
    with pytest.raises(ValueError, match="not a whole number of micro-batches"):
        grouped_order([1, 2, 3], batch_size=4, global_batch_size=6, seed=0)
    assert grouped_order([5], batch_size=1, global_batch_size=1, seed=0) == [0]


def test_a_padded_batch_scores_each_row_as_the_row_alone(tiny_qwen3_vl, sureon_build, tmp_path):
    """Grouping only changes which rows share a micro-batch, and so the padding: the loss of every row in a padded
    batch is the row's own loss, so the step's loss is the same whatever the grouping."""
    from recipes.model_io.modeling import load_model

    model = load_model(str(tiny_qwen3_vl), dtype="float32").eval()
    collator, index, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build), text_source(tmp_path)])
    rows = [index[0], index[len(index) - 1], index[1]]  # two clips of different lengths around a short text row

    def row_losses(batch) -> list[float]:
        with torch.no_grad():
            logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        labels = batch["labels"][:, 1:]
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), labels, ignore_index=-100, reduction="none"
        )
        return [float(losses[i][labels[i] != -100].sum()) for i in range(len(labels))]

    together = row_losses(collator(rows))
    alone = [row_losses(collator([row]))[0] for row in rows]
    assert together == pytest.approx(alone, rel=1e-5)


def test_the_lengths_are_counted_once_and_read_back_on_restart(tiny_qwen3_vl, sureon_build, tmp_path, monkeypatch):
    """A restarted or resumed run reads its rows' lengths from the stage's folder instead of counting them again (the
    8B mixture's count takes CPU hours); a change to what they depend on counts afresh."""
    from recipes.training import batching

    collator, index, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)])
    counted = batching.cached_row_lengths(collator, index, tmp_path / "stage")
    assert counted == row_lengths(collator, index) and len(list((tmp_path / "stage").glob("row_lengths-*.npy"))) == 1

    def no_counting(*args, **kwargs):
        raise AssertionError("counted again")

    monkeypatch.setattr(batching, "row_lengths", no_counting)
    assert batching.cached_row_lengths(collator, index, tmp_path / "stage") == counted
    other, _, _ = collator_for(tiny_qwen3_vl, [video_source(sureon_build)], max_frames=2)
    with pytest.raises(AssertionError, match="counted again"):
        batching.cached_row_lengths(other, index, tmp_path / "stage")


def test_a_pictures_size_is_read_whatever_image_formats_pil_has_registered():
    """Once every PIL plugin is registered (another library's ``Image.init()``), PIL's format probes read lines from
    the stream: a stored frame's size still comes from its header."""
    import io

    import pyarrow as pa
    from PIL import Image

    from recipes.training.batching import picture_size

    Image.init()
    stored = io.BytesIO()
    Image.new("RGB", (64, 48)).save(stored, "JPEG")
    assert picture_size(stored.getvalue()) == picture_size(pa.py_buffer(stored.getvalue())) == (64, 48)
