"""The strict LLM judge for Sequence Summarization (the Sureon paper, Section 4, Appendix D.1), through
``builders.llm``.

A prediction is correct only if no reference step is missing, the order holds and no action is substituted;
paraphrases and surgical synonyms match. The judge sees only the reference and the prediction (the prompt lives in
``recipes/evaluation/prompts/sequence_judge.md``), answers JSON validated against :class:`JudgeReply` at temperature 0,
and every call is cached by the client: re-judging a finished run costs nothing. An empty prediction is incorrect
without a call; a judge call that fails after its retries leaves the verdict ``None`` (listed, never guessed).
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from builders.errors import InputError
from builders.llm import ChatRequest, LLMClient


DEFAULT_PROMPT = Path(__file__).parent / "prompts" / "sequence_judge.md"
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{(reference|prediction)\}")


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    verdict: Literal["correct", "incorrect"]


@dataclass(frozen=True)
class JudgePrompt:
    system: str
    user: str

    @classmethod
    def from_file(cls, path: str | Path = DEFAULT_PROMPT) -> "JudgePrompt":
        text = re.sub(r"<!--.*?-->", "", Path(path).read_text(encoding="utf-8"), flags=re.DOTALL)
        pieces = _SECTION.split(text)
        sections = dict(zip(pieces[1::2], (piece.strip() for piece in pieces[2::2]), strict=True))
        if set(sections) != {"system", "user"}:
            raise InputError(f"{path}: needs a '## system' and a '## user' section, found {sorted(sections)}")
        if set(_PLACEHOLDER.findall(sections["user"])) != {"reference", "prediction"}:
            raise InputError(f"{path}: the user section must contain {{reference}} and {{prediction}}")
        return cls(sections["system"], sections["user"])

    def messages(self, reference: str, prediction: str) -> list[dict]:
        values = {"reference": reference.strip(), "prediction": prediction.strip()}
        user = _PLACEHOLDER.sub(lambda match: values[match.group(1)], self.user)  # one pass: no re-substitution
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class Verdict:
    correct: bool | None
    reason: str | None
    error: str | None = None


class SequenceJudge:
    """``params``: request fields merged into every judge request (``--judge-request-param``), e.g. a reasoning
    judge's ``reasoning_effort``, or ``temperature: None`` to leave out a field the judge model refuses."""

    def __init__(
        self, client: LLMClient, prompt: JudgePrompt | None = None, max_tokens: int = 512, params: dict | None = None
    ):
        self.client = client
        self.prompt = prompt or JudgePrompt.from_file()
        self.max_tokens = max_tokens
        self.params = params or {}

    def request(self, reference: str, prediction: str) -> ChatRequest:
        return ChatRequest(
            self.prompt.messages(reference, prediction),
            stage="judge",
            temperature=0.0,
            max_tokens=self.max_tokens,
            schema=JudgeReply,
            params=self.params,
        )

    def judge_many(self, pairs: list[tuple[str, str | None]]) -> list[Verdict]:
        """Verdicts for (reference, prediction) pairs, in order."""
        to_ask = [i for i, (_, prediction) in enumerate(pairs) if prediction and prediction.strip()]
        results = self.client.chat_many([self.request(*pairs[i]) for i in to_ask])
        verdicts = [Verdict(False, "empty prediction")] * len(pairs)
        for i, result in zip(to_ask, results, strict=True):
            if result.ok:
                verdicts[i] = Verdict(result.data.verdict == "correct", result.data.reason)
            else:
                verdicts[i] = Verdict(None, None, result.error)
        return verdicts
