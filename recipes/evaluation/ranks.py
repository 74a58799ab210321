"""An evaluation sharded over the ranks of a launch, for every ``sureon eval`` that runs a local model.

    torchrun --nproc-per-node 8 -m sureon eval sureon --model ... --out results/m   (the one-process arguments)
    accelerate launch --num_processes 8 -m sureon eval sureon --model ... --out results/m

The launcher starts W copies of the command and says which one each is in its environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``; :meth:`Ranks.of_launch`); started alone, a command is rank 0 of 1 and none of this costs anything.

- **The same command on every rank.** Each rank's arguments (paths resolved) are gathered first: ranks that were
  given different ones (another ``--out``, ``--limit``, a relative path read from another working directory) would
  score other rows or leave their caches where a rerun does not look, so every rank stops with the same one line
  (:meth:`Ranks.check_same_arguments`).
- **Each rank its share.** Rank r takes items r, r + W, r + 2W, ... (:meth:`Ranks.share`: questions, or SurgiQ's
  batches), on ``cuda:LOCAL_RANK`` (:meth:`Ranks.device`).
- **Caches per rank, read by all.** Rank r appends to ``rank-R-of-W.jsonl`` in the command's cache folder and reads
  every other log there (earlier runs, other world sizes) and any cache file of a run before sharding, so a killed
  run resumes each rank where it stopped and a rerun with another world size repeats nothing
  (:meth:`Ranks.cache`). Reading a log cuts a partial last line a killed run left
  (:class:`builders.jsonl_log.AppendOnlyJsonl`), which must never meet a line its writer is appending: every rank
  reads before any rank writes (a barrier).
- **One writer.** Rank 0 gathers every rank's share over gloo (no GPU needed, and no file passed through ``--out``,
  so machines that do not share it still merge) and writes the outputs once, in the dataset's order
  (:meth:`Ranks.gather`): what a one-process run writes, to the byte where the work does not depend on which items
  share a batch (SurgiQ's fixed batch plan; greedy generation on the CPU in float32, as the tests run it). The
  command checks there what came back (a generation that failed on any rank stops it before anything is written)
  and does the once-only work: the contamination warning, the judge.

A mistake in the input stops every rank alike: every rank runs the same checks, none waiting on another rank.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from builders.errors import InputError


# A day: ranks wait for the slowest at the end, and shares are uneven (long clips, long answers).
GROUP_TIMEOUT = timedelta(hours=24)
IGNORED_ARGUMENTS = ("handler", "writes", "debug")  # the CLI's own entries of a parsed command line

Cache = TypeVar("Cache")


@dataclass
class Share:
    """What one rank did: its results by key (generations, label scores), what an endpoint returned beside them, and
    its timing (rank, items, generated, cached, seconds)."""

    results: dict
    details: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the launch: rank ``rank`` of ``world_size``, on its machine's GPU ``local_rank``."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def of_launch(cls, environ: Mapping[str, str] | None = None) -> Ranks:
        """The ranks torchrun / accelerate launch set in the environment; rank 0 of 1 without a launcher."""
        env = os.environ if environ is None else environ
        return cls(int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), int(env.get("LOCAL_RANK", "0")))

    @property
    def writes(self) -> bool:
        """Whether this rank writes the outputs (rank 0)."""
        return self.rank == 0

    def share(self, count: int) -> list[int]:
        """The positions of ``count`` items this rank takes: r, r + W, r + 2W, ..."""
        return list(range(self.rank, count, self.world_size))

    def device(self) -> str:
        """This rank's device: ``cuda:LOCAL_RANK`` where there is a GPU, else the CPU."""
        import torch

        return f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu"

    def _group(self):
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo", timeout=GROUP_TIMEOUT)
        return dist

    def barrier(self) -> None:
        """Every rank waits here for the others (gloo)."""
        if self.world_size > 1:
            self._group().barrier()

    def gather(self, share: Share) -> Share | None:
        """Every rank's share, merged on rank 0 (results and details of all, the timings in rank order); ``None`` on
        the other ranks, which are done."""
        shares = [share]
        if self.world_size > 1:
            dist = self._group()
            shares = [None] * self.world_size if self.writes else None
            dist.gather_object(share, shares, dst=0)
        if not self.writes:
            return None
        merged = Share({}, {}, {})
        for each in shares:
            merged.results |= each.results
            merged.details |= each.details
        merged.timing = {"world_size": self.world_size, "ranks": [each.timing for each in shares]}
        return merged

    def check_same_arguments(self, args) -> None:
        """Stop every rank, in one line naming the options, when the ranks were not given the same arguments."""
        if self.world_size == 1:
            return
        own = comparable_arguments(args)
        everyone = [None] * self.world_size
        self._group().all_gather_object(everyone, own)
        differing = sorted(
            {name for other in everyone for name in own.keys() | other.keys() if other.get(name) != own.get(name)}
        )
        if differing:
            shown = "; ".join(
                f"--{name.replace('_', '-')}: "
                + ", ".join(f"rank {rank} {other.get(name, '(none)')}" for rank, other in enumerate(everyone))
                for name in differing
            )
            raise InputError(
                f"the {self.world_size} ranks of this launch were given different arguments ({shown}): start every "
                "rank with the same command line, with absolute paths when the ranks start in different folders"
            )

    def cache(self, make: Callable[[Path], Cache], folder: Path, earlier: Iterable[Path] = ()) -> Cache:
        """This rank's cache log in ``folder`` (made by ``make(path)``), holding every other log's entries too, and
        those of ``earlier`` caches (a run's single file from before sharding); its own entries win. Returns once
        every rank has read its logs, so no log is appended to while another rank reads it."""
        own = folder / f"rank-{self.rank}-of-{self.world_size}.jsonl"
        logs = sorted(folder.glob("rank-*.jsonl")) if folder.is_dir() else []
        others = {}
        for path in [*(path for path in earlier if path.is_file()), *logs]:
            if path != own:
                others |= make(path).entries
        cache = make(own)
        cache.entries = others | cache.entries
        self.barrier()
        return cache


ALONE = Ranks()  # a command started without a launcher


def comparable_arguments(args) -> dict[str, str]:
    """A parsed command line as text that is equal on two ranks exactly when they were given the same arguments:
    paths (and text naming an existing path) resolved from the working directory, the CLI's own entries left out."""

    def text(value) -> str:
        if isinstance(value, str) and Path(value).expanduser().exists():
            value = Path(value)  # a local path given as text (--dataset, --model); a Hub id stays as typed
        if isinstance(value, Path):
            return str(value.expanduser().resolve())
        if isinstance(value, list | tuple):
            return "[" + ", ".join(map(text, value)) + "]"
        return repr(value)

    return {name: text(value) for name, value in vars(args).items() if name not in IGNORED_ARGUMENTS}


def share_timing(ranks: Ranks, items: int, generated: int, cached: int, started: float) -> dict:
    """One rank's timing as ``summary.json`` records it (``started``: ``time.monotonic()`` before the rank's work)."""
    seconds = round(time.monotonic() - started, 3)
    return {"rank": ranks.rank, "rows": items, "generated": generated, "cached": cached, "seconds": seconds}
