"""The plan's padding and loader figures: how much of what the GPUs compute is padding, under the trainer's random
draw or the length-grouped one (``recipes/training/batching.py``), and how many CPU cores the data loader needs to
keep the GPUs fed at the plan's predicted rate."""

import math

import numpy as np


RANDOM_DRAWS = 16  # seeded epochs of the random draw pooled: one epoch of a few hundred rows is noisy
SIMULATED_WINDOWS = 4  # the grouped draw's windows simulated at least (rows drawn with replacement up to them)
LOADER_HEADROOM = 2.0  # workers per GPU for twice the mean load: a clip batch costs several times an image batch
RANK_PROCESS_CORES = 1  # each rank's own process (the training loop driving its GPU) keeps a core busy


def grouped_in(settings: dict) -> bool:
    """Whether a recipe's settings ask for length-grouped batches (``train_sampling_strategy: group_by_length``)."""
    from recipes.training.batching import GROUPED

    return settings.get("train_sampling_strategy") == GROUPED


def padding_share(
    rows: list[dict], batch_size: int, *, grouped: bool, seed: int, global_batch_size: int | None = None
) -> float:
    """Padded tokens over tokens computed when the mixture ``rows`` stand for (the plan's measured rows, or synthetic
    ones repeated in the mixture's proportions, each with its ``tokens``) are drawn into micro-batches of
    ``batch_size`` as the trainer draws them: a random permutation (transformers' ``RandomSampler``, over
    :data:`RANDOM_DRAWS` seeded epochs), or :func:`recipes.training.batching.grouped_order` with the recipe's
    ``global_batch_size`` (None: one rank without accumulation). The trainer draws from the whole mixture, sorting
    windows of 16 steps: fewer rows than :data:`SIMULATED_WINDOWS` such windows are drawn with replacement up to
    that many (seeded), so that a sample of a few hundred rows, or two synthetic ones, is batched as the mixture
    would be."""
    from recipes.training.batching import STEPS_PER_WINDOW, grouped_order

    if not rows:
        return 0.0
    rng = np.random.default_rng(seed)
    lengths = np.array([row["tokens"] for row in rows])
    population = SIMULATED_WINDOWS * STEPS_PER_WINDOW * (global_batch_size or batch_size)
    if len(lengths) < population:
        lengths = rng.choice(lengths, size=population, replace=True)
    if grouped:
        orders = [
            grouped_order(lengths, batch_size=batch_size, global_batch_size=global_batch_size or batch_size, seed=seed)
        ]
    else:
        orders = [np.random.default_rng([seed, draw]).permutation(len(lengths)) for draw in range(RANDOM_DRAWS)]
    padded = computed = 0
    for order in orders:
        order_padded, order_computed = batches_padding(lengths, order, batch_size)
        padded += order_padded
        computed += order_computed
    return padded / computed


def batches_padding(lengths, order, batch_size: int) -> tuple[int, int]:
    """``(padded tokens, tokens computed)`` of rows of ``lengths`` drawn in ``order`` and cut into micro-batches of
    ``batch_size``, each padded to its longest row as the collator pads it."""
    drawn = np.asarray(lengths)[np.asarray(order)]
    padded = computed = 0
    for start in range(0, len(drawn), batch_size):
        batch = drawn[start : start + batch_size]
        computed += int(batch.max()) * len(batch)
        padded += int(batch.max()) * len(batch) - int(batch.sum())
    return padded, computed


def loader_plan(cpu_seconds_per_sample: float, samples_per_second: float, *, num_gpus: int, cores: int | None) -> dict:
    """The CPU cores the data loader needs to produce ``samples_per_second`` (over all GPUs) at
    ``cpu_seconds_per_sample`` (one sample's collator CPU time, decoding included, on one thread as a dataloader
    worker runs), against the machine's ``cores`` (None when not known).

    ``cores_needed``: the loader's cores over the machine (CPU seconds a sample x samples a second);
    ``cores_per_gpu_needed``: its share per GPU plus the rank's own process (:data:`RANK_PROCESS_CORES`);
    ``workers_per_gpu``: the ``dataloader_num_workers`` that covers :data:`LOADER_HEADROOM` times the mean load
    (at least 1, so that collating never runs inside the training loop)."""
    if cpu_seconds_per_sample < 0 or samples_per_second < 0 or num_gpus < 1:
        raise ValueError("CPU seconds, samples per second and GPUs must be non-negative (GPUs at least 1)")
    cores_needed = cpu_seconds_per_sample * samples_per_second
    loader_per_gpu = cores_needed / num_gpus
    per_gpu = loader_per_gpu + RANK_PROCESS_CORES
    enough = None if cores is None else cores >= per_gpu * num_gpus
    warning = None
    if enough is False:
        warning = (
            f"the data loader needs {per_gpu:.1f} CPU cores per GPU ({cpu_seconds_per_sample:.3f} CPU s a sample at "
            f"{samples_per_second:.1f} samples/s over {num_gpus} GPUs, plus each rank's own process) and this machine "
            f"has {cores / num_gpus:.1f}: the GPUs will wait for batches; use a machine with more cores per GPU or "
            "fewer frames / lower pixel caps"
        )
    return {
        "cpu_seconds_per_sample": cpu_seconds_per_sample,
        "cores_needed": cores_needed,
        "cores_per_gpu_needed": per_gpu,
        "workers_per_gpu": max(1, math.ceil(LOADER_HEADROOM * loader_per_gpu)),
        "cores_available": cores,
        "enough": enough,
        "warning": warning,
    }
