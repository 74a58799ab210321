"""What a run of the chat client used: per stage, calls, cache hits, retries, invalid replies, failures, tokens and
cost; per model, every reply returned (cache hits included) and its tokens.

Apart from the client because the evaluation sums the usage its generations report with the same :class:`ModelUsage`,
whichever backend answered them.
"""

from collections import defaultdict
from dataclasses import asdict, dataclass


@dataclass
class StageUsage:
    calls: int = 0
    cached: int = 0
    retries: int = 0
    invalid_json: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class ModelUsage:
    """Every reply one model gave a run, fresh or from the cache, and the tokens the server reported for it."""

    replies: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0

    def add(self, usage: dict, cached: bool = False) -> None:
        self.replies += 1
        self.cached += cached
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.reasoning_tokens += reasoning_tokens(usage)


def reasoning_tokens(usage: dict) -> int:
    """The reasoning tokens of a reply's usage, where the server reports them (OpenAI's ``completion_tokens_details``;
    they are part of ``completion_tokens``); 0 otherwise."""
    details = usage.get("completion_tokens_details") or {}
    return int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0


class UsageLedger:
    """Per-stage counts and tokens (cost only where a price is known for the model), and per-model replies."""

    def __init__(self, prices: dict[str, dict[str, float]] | None = None):
        self.prices = prices or {}
        self.stages: dict[str, StageUsage] = defaultdict(StageUsage)
        self.models: dict[str, ModelUsage] = defaultdict(ModelUsage)

    def by_model(self) -> dict[str, dict]:
        return {model: asdict(usage) for model, usage in sorted(self.models.items())}

    def add_tokens(self, stage: str, model: str, usage: dict) -> None:
        entry = self.stages[stage]
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        entry.prompt_tokens += prompt
        entry.completion_tokens += completion
        entry.reasoning_tokens += reasoning_tokens(usage)
        price = self.prices.get(model)
        if price is not None:
            cost = (prompt * price.get("input", 0.0) + completion * price.get("output", 0.0)) / 1e6
            entry.cost_usd = (entry.cost_usd or 0.0) + cost

    def as_dict(self) -> dict[str, dict]:
        return {stage: asdict(usage) for stage, usage in sorted(self.stages.items())}

    def summary(self) -> str:
        lines = []
        for stage, u in sorted(self.stages.items()):
            cost = f", ${u.cost_usd:.4f}" if u.cost_usd is not None else ""
            lines.append(
                f"{stage}: {u.calls} calls ({u.cached} cached, {u.retries} retries, {u.invalid_json} invalid JSON, "
                f"{u.failed} failed), {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens{cost}"
            )
        return "\n".join(lines)
