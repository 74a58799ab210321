"""``sureon pipeline split | stage1 | stage2``: the construction pipeline from the command line.

    sureon pipeline split  --transcripts PATH... [--metadata FILE] --split-file splits.json [--fraction 0.1]
    sureon pipeline stage1 --transcripts PATH... --split-file splits.json --model NAME --out DIR [--cache FILE]
    sureon pipeline stage2 --input STAGE1_DIR --out DIR [--method radg|resampled] [--generators M1 M2=URL M3=URL]
                           [--option-order shuffled|stage1]

The endpoint comes from ``--base-url`` or ``OPENAI_BASE_URL``, the key from ``OPENAI_API_KEY`` only (never a flag,
so it stays out of shell history and process lists). A stage-2 generator given as ``NAME=URL`` is asked at a URL of
its own (the Sureon paper serves each generator as its own vLLM server); every endpoint stage 2 uses is checked
before anything loads. The manifest records the generators' names, never their URLs: a port that changes between
runs changes no output byte, and no cached reply. Every LLM reply is cached in ``--cache`` (default
``<out>.llm_cache.sqlite``), and stage 2's embeddings in ``<out>.embeddings/``: a killed run, rerun, pays for
nothing twice.

The parser loads nothing heavy: the stages (LLM client, datasets, embeddings) load when one runs, and stage 2's
generators and embedding model, when not given, are :class:`~builders.pipeline.radg.Stage2Config`'s own defaults.
"""

from pathlib import Path

from builders.arguments import fraction, key_value, positive_int, seed
from builders.sureon.categories import BY_CODE, CATEGORIES


def add_transcript_arguments(parser) -> None:
    parser.add_argument("--transcripts", required=True, nargs="+", type=Path, help="JSON/JSONL/SRT/VTT/SQLite files")
    parser.add_argument("--metadata", type=Path, help="video metadata (JSON/JSONL/CSV keyed by source_id)")
    parser.add_argument("--split-file", required=True, type=Path, help="stored split; made here if absent")
    parser.add_argument("--fraction", type=fraction, default=0.1, help="validation share of videos")
    parser.add_argument("--seed", type=seed, default=42)


def add_client_arguments(parser) -> None:
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    parser.add_argument("--cache", type=Path, help="SQLite LLM cache (default: <out>.llm_cache.sqlite)")
    parser.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=64,
        help="requests in flight (the Sureon paper, stage 2: 128 for its 27B-35B models, 64 for 122B)",
    )
    parser.add_argument("--max-tokens", type=positive_int)
    parser.add_argument("--prices", type=Path, help="YAML of model: {input, output} USD per million tokens")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def add_arguments(parser) -> None:
    stages = parser.add_subparsers(dest="stage", required=True)
    split = stages.add_parser("split", help="the seeded subject-stratified video split, stored once")
    add_transcript_arguments(split)

    stage1 = stages.add_parser("stage1", help="generator-validator agents: transcripts -> grounded QA (D_SGM)")
    add_transcript_arguments(stage1)
    stage1.add_argument("--model", required=True, help="endpoint model name of the agents")
    stage1.add_argument("--out", required=True, type=Path, help="output folder (release layout)")
    stage1.add_argument("--generator-calls", type=positive_int, default=3, help="R: generator calls per transcript")
    stage1.add_argument("--categories", nargs="+", choices=list(BY_CODE), help="categories (default: all ten)")
    add_client_arguments(stage1)

    stage2 = stages.add_parser("stage2", help="retrieval-augmented multi-model distractors (D_ref) or resampled")
    stage2.add_argument("--input", required=True, type=Path, help="a stage-1 output folder")
    stage2.add_argument("--out", required=True, type=Path, help="output folder (release layout)")
    stage2.add_argument("--method", choices=["radg", "resampled"], default="radg")
    stage2.add_argument(
        "--generators",
        nargs="+",
        metavar="NAME[=URL]",
        help="M1..Mn: model names at --base-url, or NAME=URL for a model served at a URL of its own "
        "(e.g. m1=http://127.0.0.1:8001/v1)",
    )
    stage2.add_argument("--embedding-model", help="sentence-transformers model")
    stage2.add_argument("--per-model", type=positive_int, default=6, help="N: distractors per generator")
    stage2.add_argument("--num-distractors", type=positive_int, default=6, help="distractors drawn into the options")
    stage2.add_argument("--top-k", type=positive_int, default=100, help="answers retrieved per pool")
    stage2.add_argument("--exemplars", type=positive_int, default=100, help="K: exemplars after merging")
    stage2.add_argument(
        "--option-order",
        choices=["shuffled", "stage1"],
        default="shuffled",
        help="shuffled: the answer and the drawn distractors in an order seeded by question_id; stage1: the answer "
        "keeps its stage-1 letter (last when the options are fewer now) and the distractors fill the other letters "
        "in draw order, for an ablation of distractor texts alone (the Sureon paper's Table 4, stage 1 vs stage 2): "
        "a re-shuffle would also remove stage 1's position bias and credit RADG with it",
    )
    add_client_arguments(stage2)


def client(args, model: str | None = None, routes: dict[str, str] | None = None):
    from builders.llm import LLMClient
    from builders.yaml_file import load_yaml_mapping

    example = "gpt-5-mini: {input: 0.25, output: 2.0}"
    prices = load_yaml_mapping(args.prices, "--prices file", example) if args.prices else None
    cache = args.cache or args.out.with_name(f"{args.out.name}.llm_cache.sqlite")
    return LLMClient(
        model,
        base_url=args.base_url,
        routes=routes,
        cache=cache,
        max_concurrency=args.max_concurrency,
        prices=prices,
        progress=True,
    )


def transcripts_and_split(args):
    from builders.pipeline.splits import load_or_make_split
    from builders.pipeline.transcripts import read_transcripts

    transcripts = read_transcripts(args.transcripts, args.metadata)
    videos = {t.source_id: t.subject for t in transcripts}
    return transcripts, load_or_make_split(args.split_file, videos, args.fraction, args.seed)


def run_split(args) -> int:
    _, split = transcripts_and_split(args)
    counts = {name: sum(v == name for v in split.values()) for name in ("train", "validation")}
    print(f"{args.split_file}: {counts['train']} train and {counts['validation']} validation videos")
    return 0


def run_stage1(args) -> int:
    from builders.pipeline.agents import Stage1Config, write_stage1

    llm = client(args, args.model)  # its settings (prices) are checked before the split file is written
    transcripts, split = transcripts_and_split(args)
    config = Stage1Config(
        model=args.model,
        generator_calls=args.generator_calls,
        categories=args.categories or [c.code for c in CATEGORIES],
        max_tokens=args.max_tokens,
    )
    manifest = write_stage1(args.out, transcripts, split, llm, config, args.overwrite)
    print(llm.ledger.summary())
    print(f"Wrote {args.out}: {manifest['written']} samples, {manifest['skipped']} skipped (see skipped.jsonl)")
    return 0


def generator_routes(items: list[str]) -> tuple[list[str], dict[str, str]]:
    """``--generators`` items (``NAME`` or ``NAME=URL``, split at the first ``=``: model names hold none) -> the
    names in order and the routes (name -> URL) of those given a URL; a malformed item is one line."""
    from urllib.parse import urlsplit

    from builders.errors import InputError

    names, routes = [], {}
    for item in items:
        if "=" in item:
            name, url = key_value(item, "--generators", "m1=http://127.0.0.1:8001/v1")
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise InputError(
                    f"--generators {item!r}: {url!r} is not an http:// or https:// URL; write NAME=URL, e.g. "
                    f"{name}=http://127.0.0.1:8001/v1"
                )
            routes[name] = url
        else:
            name = item.strip()
        if not name:
            raise InputError("--generators: an empty name; write NAME or NAME=URL")
        if name in names:
            raise InputError(f"--generators: {name} given twice; give each generator once")
        names.append(name)
    return names, routes


def check_generator_endpoints(generators: list[str], routes: dict[str, str], base_url: str | None) -> None:
    """Every endpoint the generators are asked at answers, checked once each before anything loads; a dead one is
    one line naming its generators and its URL."""
    from builders.llm.endpoint import LLMError, check_endpoint, resolve_base_url

    served: dict[str, list[str]] = {}
    for name in generators:
        served.setdefault(resolve_base_url(routes.get(name, base_url)), []).append(name)
    for url, names in served.items():
        routed = names[0] in routes
        try:
            check_endpoint(
                url,
                option="--generators NAME=URL" if routed else "--base-url",
                environment=None if routed else "OPENAI_BASE_URL",
            )
        except LLMError as err:
            raise LLMError(f"generator {', '.join(names)}: {err}") from None


def run_stage2(args) -> int:
    from builders.pipeline.radg import Stage2Config, write_stage2

    generators, routes = generator_routes(args.generators) if args.generators else (None, {})
    given = {"generators": generators, "embedding_model": args.embedding_model}
    config = Stage2Config(
        per_model=args.per_model,
        num_distractors=args.num_distractors,
        top_k=args.top_k,
        exemplars=args.exemplars,
        max_tokens=args.max_tokens,
        option_order=args.option_order,
        **{name: value for name, value in given.items() if value is not None},
    )
    llm = None
    if args.method == "radg":
        check_generator_endpoints(config.generators, routes, args.base_url)
        llm = client(args, routes=routes)
    embeddings = args.out.with_name(f"{args.out.name}.embeddings")
    manifest = write_stage2(
        args.input, args.out, args.method, config, llm, overwrite=args.overwrite, embedding_cache=embeddings
    )
    if llm is not None:
        print(llm.ledger.summary())
    print(f"Wrote {args.out}: {manifest['written']} questions, {manifest['skipped']} skipped (see skipped.jsonl)")
    print(f"Build datasets with: sureon build sureon --release {args.out} --out DIR")
    return 0


STAGES = {"split": run_split, "stage1": run_stage1, "stage2": run_stage2}


def run(args) -> int:
    return STAGES[args.stage](args)
