"""The Sequence Summarization judge through a local chat-completions server: what it sees, how verdicts are read."""

import json

import pytest
from fake_chat_server import FakeChatServer, Reply, last_user_text

from builders.llm import LLMClient
from recipes.evaluation.judge import DEFAULT_PROMPT, JudgePrompt, SequenceJudge


REFERENCE = "The fundus is retracted, Calot's triangle is dissected, and the cystic duct and artery are clipped."


def judge_for(server, tmp_path, **kwargs):
    client = LLMClient("judge-model", base_url=server.url, api_key="k", cache=tmp_path / "judge.sqlite", backoff=0)
    return SequenceJudge(client, **kwargs)


def strict_script(body, index):
    """Correct only when every reference step is named, in order (a stand-in for the judge model)."""
    text = last_user_text(body)
    prediction = text.split("PREDICTION:")[1].lower()
    steps = ["retract", "dissect", "clip"]
    positions = [prediction.find(step) for step in steps]
    ok = min(positions) >= 0 and positions == sorted(positions)
    return Reply(content=json.dumps({"reason": "compared", "verdict": "correct" if ok else "incorrect"}))


def test_verdicts_follow_the_judge_and_it_sees_only_reference_and_prediction(tmp_path):
    predictions = [
        "Retraction of the fundus, dissection of Calot's triangle, then clipping of duct and artery.",
        "Calot's triangle is dissected, the fundus retracted, the duct clipped.",  # order violated
        "The fundus is retracted and the duct is clipped.",  # a step missing
    ]
    with FakeChatServer(strict_script) as server:
        verdicts = judge_for(server, tmp_path).judge_many([(REFERENCE, p) for p in predictions])
    assert [v.correct for v in verdicts] == [True, False, False]
    sent = sorted(body["messages"][1]["content"] for body in server.requests)  # arrival order is concurrent
    assert sent == sorted(f"REFERENCE:\n{REFERENCE}\n\nPREDICTION:\n{prediction}" for prediction in predictions)
    for body in server.requests:
        system, user = body["messages"]
        assert system["role"] == "system" and "strict grader" in system["content"] and user["role"] == "user"
        assert body["temperature"] == 0.0
        schema = body["response_format"]["json_schema"]
        assert schema["strict"] is True and schema["schema"]["properties"]["verdict"]["enum"] == [
            "correct",
            "incorrect",
        ]


def test_judge_calls_are_cached_and_empty_predictions_cost_nothing(tmp_path):
    pairs = [(REFERENCE, "Retracted, dissected, clipped."), (REFERENCE, "   "), (REFERENCE, None)]
    with FakeChatServer(strict_script) as server:
        first = judge_for(server, tmp_path).judge_many(pairs)
        again = judge_for(server, tmp_path).judge_many(pairs)
    assert len(server.requests) == 1
    assert first == again and [v.correct for v in first] == [True, False, False]
    assert first[1].reason == "empty prediction"


def test_a_failed_judge_call_leaves_the_verdict_open(tmp_path):
    with FakeChatServer(lambda body, index: Reply(content="I think it is correct.")) as server:
        (verdict,) = judge_for(server, tmp_path).judge_many([(REFERENCE, "Retracted, dissected, clipped.")])
    assert verdict.correct is None and "invalid JSON for JudgeReply" in verdict.error
    assert len(server.requests) == 3  # asked again twice, then counted as failed


def test_placeholders_inside_texts_are_not_substituted_again():
    prompt = JudgePrompt.from_file(DEFAULT_PROMPT)
    user = prompt.messages("step {prediction}", "pred {reference}")[1]["content"]
    assert user == "REFERENCE:\nstep {prediction}\n\nPREDICTION:\npred {reference}"
    assert "<!--" not in prompt.system and "{reference}" not in prompt.system


def test_prompt_file_must_have_both_sections(tmp_path):
    bad = tmp_path / "judge.md"
    bad.write_text("## system\nBe strict.\n")
    with pytest.raises(ValueError, match="needs a '## system' and a '## user' section"):
        JudgePrompt.from_file(bad)
    bad.write_text("## system\nBe strict.\n## user\nREFERENCE: {reference}\n")
    with pytest.raises(ValueError, match=r"must contain \{reference\} and \{prediction\}"):
        JudgePrompt.from_file(bad)
