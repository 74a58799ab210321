"""Benchmark blind-curation scoring: R sampled trials per question from one batched ``generate`` call
(``TransformersBackend.sample`` with ``num_return_sequences=R``, what :func:`recipes.curation.curate.score_records`
uses) against R separate calls of one trial each, on the same questions, measured in the same run.

The model is the tiny causal LM (built on the spot) or ``--model PATH``; questions are blind prompts of the demo
Sureon release (``format_messages(record, blind=True)``), cycled to ``--questions``. Times are the best of
``--repeats``; what matters is the ratio (absolute times depend on the machine).

    python benchmarks/blind_scoring.py [--questions 16] [--trials 5] [--batch-size 8] [--max-new-tokens 8]
"""

import argparse
import sys
import tempfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of, parse_with_quick  # noqa: E402
from builders.prompt import format_messages  # noqa: E402
from recipes.evaluation.inference import TransformersBackend  # noqa: E402


def demo_conversations(n: int) -> list[list[dict]]:
    import pyarrow.parquet as pq

    rows = pq.read_table(REPO / "sample_data" / "sureon_release" / "data" / "train-00000-of-00001.parquet").to_pylist()
    records = []
    for row in rows:
        options = [o["text"] for o in row["options"] or []]
        if options:
            records.append({"start": 0.0, "end": 10.0, "question": row["question"], "options": options})
    return [format_messages(records[i % len(records)], blind=True) for i in range(n)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a local model folder (default: the tiny causal LM, built now)")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_with_quick(
        parser, argv, {"questions": 4, "trials": 2, "batch_size": 2, "max_new_tokens": 2, "repeats": 1}
    )
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from recipes.training.tiny_models import build_tiny_causal_lm

            model = str(build_tiny_causal_lm(Path(tmp) / "tiny"))
        backend = TransformersBackend(model, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
        conversations = demo_conversations(args.questions)
        batches = [conversations[i : i + args.batch_size] for i in range(0, len(conversations), args.batch_size)]

        def batched():
            for batch in batches:
                backend.sample(batch, args.trials, 1.0, seed=0)

        def separate():
            for batch in batches:
                for trial in range(args.trials):
                    backend.sample(batch, 1, 1.0, seed=trial)

        batched()  # warm-up: weights loaded, kernels chosen
        one_call = best_of(args.repeats, batched)
        r_calls = best_of(args.repeats, separate)
    answers = args.questions * args.trials
    print(f"{args.questions} questions x R = {args.trials} trials, batch {args.batch_size}, {model}")
    print(f"one batched call (num_return_sequences = R): {1000 * one_call / answers:.2f} ms per answer")
    print(f"R separate calls:                            {1000 * r_calls / answers:.2f} ms per answer")
    print(f"speed-up of one batched call over R calls: {r_calls / one_call:.2f}x")


if __name__ == "__main__":
    main()
