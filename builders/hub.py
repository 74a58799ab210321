"""Write datasets in the Hugging Face Hub layout and push them.

Layout: ``<config>/<split>-NNNNN-of-NNNNN.parquet`` + ``README.md`` whose YAML ``configs:`` lists the shards, so that
``datasets.load_dataset(folder, config)`` works offline and the folder uploads as is. Image bytes are embedded in the
parquet (self-contained), the ``datasets`` features travel in the parquet schema metadata, and shards are written
row group by row group, so a config larger than memory streams through.

Every build goes to a staging folder first and replaces the output in one rename (:mod:`builders.outputs`): a crash
never leaves half a dataset behind.

Frames stored as files (the public corpus, and ``sureon build sureon --frames-layout files``, the training configs'
default) sit once each under the build's ``media/``, and rows hold their paths relative to the build. Every reader
(training, evaluation, export, planning) resolves them with :func:`media_root` and :func:`resolve_frames`, against
the local folder or against the ``media/`` files of a Hub copy, fetched once. Without the project, the same with
``datasets`` and ``huggingface_hub`` alone (``BUILD`` a local folder or a Hub id)::

    root = BUILD if os.path.isdir(BUILD) else snapshot_download(BUILD, repo_type="dataset", allow_patterns="media/**")
    db = load_dataset(BUILD, "db", split="train").map(lambda r: {"frames": [f"{root}/{p}" for p in r["frames"]]})
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from builders.errors import InputError, UserError
from builders.outputs import TRAINING_COMPLETE


if TYPE_CHECKING:  # datasets is imported where a split is written, not by every command that imports this module
    from datasets import DatasetInfo, Features


DEFAULT_MAX_SHARD_BYTES = 500 * 1024 * 1024
MEDIA_DIR = "media"  # where a build stores frames as files, each once


def _approx_bytes(value) -> int:
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, dict):
        return sum(_approx_bytes(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_approx_bytes(v) for v in value)
    return 8


@dataclass
class WrittenSplit:
    split: str
    num_examples: int
    num_bytes: int  # Arrow size, as ``datasets`` reports it
    download_size: int  # parquet bytes on disk

    def info(self, features: "Features") -> "DatasetInfo":
        """The ``dataset_info`` entry of the card. It also keys ``datasets``' cache: without it, two local folders of
        the same name and configs would share cached data."""
        from datasets import DatasetInfo, SplitDict, SplitInfo

        return DatasetInfo(
            features=features,
            splits=SplitDict({self.split: SplitInfo(self.split, self.num_bytes, self.num_examples)}),
            download_size=self.download_size,
            dataset_size=self.num_bytes,
        )


def write_split(
    rows: Iterable[dict],
    features: "Features",
    config_dir: Path,
    split: str,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    rows_per_group: int = 100,
) -> WrittenSplit:
    """Write ``rows`` as parquet shards ``<split>-NNNNN-of-NNNNN.parquet`` in ``config_dir``."""
    config_dir.mkdir(parents=True, exist_ok=True)
    schema = features.arrow_schema
    # only media features (images) need ``datasets``' encoding; plain rows go to Arrow as they are (it checks their
    # types against the schema), which spares ~0.5 ms a row on the millions of rows of the public corpus
    from datasets.features.features import require_decoding

    encode = features.encode_example if any(require_decoding(f) for f in features.values()) else dict
    shard_paths: list[Path] = []
    writer: pq.ParquetWriter | None = None
    batch: list[dict] = []
    shard_bytes = 0
    count = 0
    arrow_bytes = 0

    def flush():
        nonlocal batch, arrow_bytes
        if batch:
            table = pa.Table.from_pylist(batch, schema=schema)
            arrow_bytes += table.nbytes
            writer.write_table(table)
            batch = []

    for row in rows:
        encoded = encode(row)
        size = _approx_bytes(encoded)
        if writer is None or (shard_bytes + size > max_shard_bytes and shard_bytes > 0):
            if writer is not None:
                flush()
                writer.close()
            shard_paths.append(config_dir / f".{split}-{len(shard_paths):05d}.parquet.tmp")
            writer = pq.ParquetWriter(shard_paths[-1], schema)
            shard_bytes = 0
        batch.append(encoded)
        shard_bytes += size
        count += 1
        if len(batch) >= rows_per_group:
            flush()
    if writer is None:  # an empty split still gets a (schema-only) shard, so the config loads
        shard_paths.append(config_dir / f".{split}-00000.parquet.tmp")
        writer = pq.ParquetWriter(shard_paths[-1], schema)
    flush()
    writer.close()
    total = len(shard_paths)
    on_disk = 0
    for index, path in enumerate(shard_paths):
        on_disk += path.stat().st_size
        os.replace(path, config_dir / f"{split}-{index:05d}-of-{total:05d}.parquet")
    return WrittenSplit(split, count, arrow_bytes, on_disk)


def configs_metadata(config_splits: dict[str, list[str]], default: str | None = None) -> list[dict]:
    """The README ``configs:`` entries for ``{config: [split, ...]}``."""
    entries = []
    for config, splits in config_splits.items():
        entry = {
            "config_name": config,
            "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"} for split in splits],
        }
        if config == default:
            entry["default"] = True
        entries.append(entry)
    return entries


# ---- pushing a build or a trained model -----------------------------------------------------------------------------

BUILD_MANIFESTS = ("build_manifest.json", "manifest.json")  # sureon build sureon / surgiq; sureon build public
MODEL_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
# files matching MODEL_WEIGHTS that are no model's weights: a LoRA adapter's, and the Trainer's own state
NOT_MODEL_WEIGHTS = ("adapter_model*", "training_args.bin", "optimizer*", "scheduler*", "rng_state*", "scaler*")
# Never uploaded, and said so in the docs: hidden files and folders (sureon's own marker among them) and the
# Trainer's checkpoints (a run's history: optimizer states, several copies of the weights). ``upload_folder`` matches
# these against paths relative to the folder with ``fnmatch``, whose ``*`` also matches ``/``.
NEVER_UPLOADED = (".*", "*/.*", "checkpoint-*", "*/checkpoint-*")
# File names that look like credentials (matched case-insensitively against each file's name): a folder holding one
# is refused with the files named, never pushed with them silently left out, so the user decides what they are.
SECRET_NAMES = (
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "credentials*",
    "*secret*",
    "*password*",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*netrc",
    "token",
    "token.*",
    "*_token",
    "*_token.*",
    "*-token",
    "*-token.*",
)
REPO_TYPES = ("model", "dataset")


def model_weight_files(folder: Path) -> list[Path]:
    """The model weight files at the top of ``folder`` (a LoRA adapter's and the Trainer's state files are none)."""
    from fnmatch import fnmatch

    found = {path for pattern in MODEL_WEIGHTS for path in folder.glob(pattern) if path.is_file()}
    return sorted(path for path in found if not any(fnmatch(path.name, other) for other in NOT_MODEL_WEIGHTS))


def uploaded_files(folder: Path) -> list[str]:
    """The files (paths relative to ``folder``) a push uploads: every file but :data:`NEVER_UPLOADED`, filtered as
    ``HfApi.upload_folder`` filters them (``huggingface_hub``'s ``filter_repo_objects``)."""
    from huggingface_hub.utils import filter_repo_objects

    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    return list(filter_repo_objects(files, ignore_patterns=list(NEVER_UPLOADED)))


def _looks_secret(relative: str) -> bool:
    from fnmatch import fnmatch

    name = relative.rsplit("/", 1)[-1].lower()
    return any(fnmatch(name, pattern) for pattern in SECRET_NAMES)


def pushed_kind(folder: Path, repo_type: str | None = None) -> str:
    """The repo type ``folder`` is pushed as, ``model`` or ``dataset``, read from the folder; every reason not to push
    it is one line (:class:`InputError`), found from the file listing before anything is sent.

    A model is a finished training run: ``config.json``, weights and ``training_complete.json``. A dataset is a
    build: sureon's :data:`builders.outputs.MARKER` and the card declaring its configs. Only folders sureon wrote are
    pushed: a build carries the marker; a training run is sureon's once finished (its ``training_complete.json``; a
    run of this version carries the marker from its start, an earlier one does not). ``repo_type`` given against the
    folder's kind is refused, as is a folder holding a file named like a credential (:data:`SECRET_NAMES`)."""
    from builders.outputs import MARKER

    if repo_type is not None and repo_type not in REPO_TYPES:
        raise InputError(f"--repo-type {repo_type!r}: choose model or dataset (or leave it out: read from the folder)")
    owned = (folder / MARKER).is_file()
    trained = any((folder / name).exists() for name in ("config.json", TRAINING_COMPLETE))
    if trained or any(folder.glob("checkpoint-*")):
        kind = "model"
        if repo_type == "dataset":
            raise InputError(
                f"{folder} is a training run's folder (a model: config.json, {TRAINING_COMPLETE} or checkpoints), not "
                "a dataset: push it as a model repo (leave --repo-type out, or give --repo-type model)"
            )
        if not (folder / TRAINING_COMPLETE).is_file():
            raise InputError(
                f"{folder} has no {TRAINING_COMPLETE}: an unfinished training run (or a model sureon did not train); "
                "let the run finish (rerunning its command resumes from the last checkpoint), then push the folder"
            )
        if not (folder / "config.json").is_file() or not model_weight_files(folder):
            raise InputError(
                f"{folder} has {TRAINING_COMPLETE} but not the model it describes (config.json and weights): an "
                "incomplete copy of the run's folder; copy it again"
            )
    elif owned or any((folder / name).is_file() for name in BUILD_MANIFESTS):
        kind = "dataset"
        if repo_type == "model":
            raise InputError(
                f"{folder} is a dataset build (no config.json or weights), not a model: push it as a dataset repo "
                "(leave --repo-type out, or give --repo-type dataset)"
            )
        if not owned:
            raise InputError(
                f"{folder} was not written by sureon (it has no {MARKER} file; copying with `cp dir/*` leaves hidden "
                "files behind): push the folder `sureon build` wrote, or rebuild it"
            )
    else:
        raise InputError(
            f"{folder} is no folder sureon wrote (neither a build's {MARKER} nor a finished run's "
            f"{TRAINING_COMPLETE}): `sureon push` uploads builds and finished training runs; build or train it first"
        )
    if not (folder / "README.md").is_file():
        what = "the dataset card declaring its configs" if kind == "dataset" else "the model card the run writes"
        raise InputError(
            f"{folder} has no README.md card ({what}): it was lost in a copy; copy the whole folder again, or "
            f"{'rebuild it' if kind == 'dataset' else 'rerun the training command, which writes it'}"
        )
    if kind == "dataset" and not _declares_configs(folder / "README.md"):
        raise InputError(
            f"{folder}/README.md declares no configs (its YAML header has no configs: list): not the card `sureon "
            "build` writes; rebuild the folder, or copy the whole build again"
        )
    secrets = [path for path in uploaded_files(folder) if _looks_secret(path)]
    if secrets:
        shown = ", ".join(secrets[:5]) + (f" and {len(secrets) - 5} more" if len(secrets) > 5 else "")
        raise InputError(
            f"{folder} holds {len(secrets)} file(s) named like credentials ({shown}): nothing was pushed; move them "
            "out of the folder (or rename them if they hold no secret) and push again"
        )
    return kind


def _declares_configs(card: Path) -> bool:
    from huggingface_hub import metadata_load

    try:
        metadata = metadata_load(card) or {}
    except Exception:  # noqa: BLE001 - any card whose YAML header cannot be read declares nothing
        return False
    return bool(metadata.get("configs"))


def push_folder(
    folder: str | Path, repo_id: str, private: bool = False, token: str | None = None, repo_type: str | None = None
) -> str:
    """Upload a build as a dataset repo, or a finished training run as a model repo (the type read from the folder,
    :func:`pushed_kind`; ``repo_type`` given must agree); returns the commit's URL. The token comes from ``token``,
    ``HF_TOKEN`` or the login, is handed to ``huggingface_hub`` only, and is never printed or logged.

    Everything a push needs is checked before anything is sent, each mistake one line: the folder (what it is, that
    sureon wrote it, no file named like a credential), the repo id, the Hub not switched off (``HF_HUB_OFFLINE``), a
    token. Hidden files and the Trainer's ``checkpoint-*`` folders are never uploaded (:data:`NEVER_UPLOADED`). A
    Hub that cannot be reached, or that refuses the token, is named with what to do.
    """
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    folder = Path(folder)
    if not folder.exists():
        raise InputError(f"{folder}: no such folder to push (build or train it first)")
    if not folder.is_dir():
        raise InputError(f"{folder} is a file: push the folder a build or a training run wrote")
    repo_type = pushed_kind(folder, repo_type)
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise InputError(f"--repo-id {repo_id!r} is not a Hub repo id (ORG/NAME): {err}") from None
    if constants.is_offline_mode():
        raise UserError(
            f"cannot push {folder}: the Hub cannot be reached in offline mode (HF_HUB_OFFLINE is set); unset it "
            "and push again"
        )
    if not (token or get_token()):
        raise UserError("no Hugging Face token to push with: log in with `hf auth login` (or set HF_TOKEN)")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            repo_type=repo_type,
            folder_path=str(folder),
            commit_message=f"Upload {folder.name} with sureon-recipes",
            ignore_patterns=list(NEVER_UPLOADED),
        )
    except Exception as err:
        problem = _push_problem(err, repo_id, api.endpoint)
        if problem is None:
            raise
        raise UserError(problem) from err
    prefix = "datasets/" if repo_type == "dataset" else ""
    return getattr(commit, "commit_url", None) or f"https://huggingface.co/{prefix}{repo_id}"


def _push_problem(err: Exception, repo_id: str, endpoint: str) -> str | None:
    """One line for a push the Hub refused or never received (``None``: not such a case, a bug). Told apart by
    class name: ``huggingface_hub`` raises its own HTTP library's errors."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if "HfHubHTTPError" in names:
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status == 401:
            return "the Hub refused the token (HTTP 401): log in again with `hf auth login` (or set HF_TOKEN)"
        if status == 403:
            return f"no write access to {repo_id} on the Hub (HTTP 403): check the organisation and the token's role"
        return None
    if names & {"TransportError", "ConnectionError", "TimeoutException"}:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"cannot reach the Hub at {endpoint} ({reason}): check the network connection (or HF_ENDPOINT)"
    return None


# ---- reading a build ------------------------------------------------------------------------------------------------


# The folders sureon writes into by the project's convention (the README's folder table): builds, training runs,
# evaluation results. A path under one of them is local even before the folder exists (a fresh checkout has none),
# so a build not made yet is told so at once, not looked up on the Hub as the id `build/NAME` (online, datasets
# retries that request five times, about 25 s, before failing).
LOCAL_ROOTS = ("build", "outputs", "results")


def looks_local(path: str | Path) -> bool:
    """Whether ``path`` names a local folder rather than a Hub id: it exists, is absolute or starts with ``.``/``~``,
    is no valid repo id (``a/b/c``), or its first part is an existing folder (``data/sureon_release`` beside
    ``data/``) or one of :data:`LOCAL_ROOTS`, present or not (``build/sureon``)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(path)
    if Path(text).exists() or text.startswith(("/", ".", "~")):
        return True
    try:
        validate_repo_id(text)
    except HFValidationError:
        return True
    root = text.split("/", 1)[0]
    return "/" in text and (root in LOCAL_ROOTS or Path(root).is_dir())


def build_command(path: str | Path, config: str | None = None) -> str:
    """The command that writes a build at ``path``, told from the ``config`` read from it: a Sureon config (``db``,
    ``bench``, ...), a SurgiQ one (``default``, ``shuffled``) or the public corpus's (``clip``, ``image``,
    ``clip-<source>``, ``bench-*``); the three builders when the config names none of them."""
    from builders.sureon.configs import CONFIGS as SUREON_CONFIGS
    from builders.surgiq.configs import CONFIGS as SURGIQ_CONFIGS

    if config in SUREON_CONFIGS:
        builder = "sureon"
    elif config in SURGIQ_CONFIGS:
        builder = "surgiq"
    elif config is not None and config.startswith(("clip", "image", "bench-")):
        builder = "public"
    else:
        builder = "sureon|public|surgiq"
    return f"`sureon build {builder} --out {path} ...`"


def check_build_path(path: str | Path, what: str = "dataset", config: str | None = None) -> None:
    """Refuse a local-looking path that does not exist at once, naming the command that builds it (for ``config``,
    the one read from it), before ``datasets`` retries it as a Hub id; and a local build whose folder name is too
    long for the cache file names ``datasets`` derives from it (:func:`builders.outputs.check_build_name`, for the
    splits its parquet files hold), before loading it fails with ``OSError: [Errno 36] File name too long``."""
    from builders.outputs import LONGEST_SPLIT, check_build_name

    folder = Path(path).expanduser()
    if looks_local(path) and not folder.exists():
        raise FileNotFoundError(
            f"{what} {path}: no such folder (a local path, not a Hub id): check the path, or build it first with "
            f"{build_command(path, config)}"
        )
    if folder.is_dir():
        splits = sorted({shard.name.split("-")[0] for shard in folder.glob("*/*.parquet")})
        check_build_name(folder, what, splits or (LONGEST_SPLIT,))


def frames_are_files(features) -> bool:
    """Whether the ``frames`` column holds paths relative to the build (rather than images)."""
    feature = features.get("frames") if features is not None else None
    return getattr(getattr(feature, "feature", None), "dtype", None) == "string"


def media_root(build: str | Path, dataset=None, revision: str | None = None) -> Path | None:
    """The folder a build's relative frame paths resolve against: the local build folder, or the snapshot of a Hub
    build's ``media/`` (downloaded once, then huggingface_hub's cache). ``None`` when ``dataset`` (a loaded split)
    holds its frames as images, so nothing is downloaded for a build that needs no media."""
    if dataset is not None and not frames_are_files(dataset.features):
        return None
    if Path(build).expanduser().is_dir():
        return Path(build).expanduser()
    from huggingface_hub import snapshot_download

    return Path(
        snapshot_download(str(build), repo_type="dataset", revision=revision, allow_patterns=[f"{MEDIA_DIR}/**"])
    )


def resolve_frames(record: dict, root: Path | None) -> dict:
    """``record`` with its relative ``frames`` paths made absolute against ``root`` (see :func:`media_root`); records
    whose frames are images, or have none, are returned as they are. A missing file is an error naming it."""
    frames = record.get("frames")
    if not frames or not isinstance(frames[0], str):
        return record
    if root is None:
        raise InputError(f"frames {frames[:1]} are paths relative to the build, but no build folder was given")
    paths = [Path(root) / frame for frame in frames]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise InputError(f"frames not found: {missing[:3]} (is the build's {MEDIA_DIR}/ folder complete?)")
    return {**record, "frames": [str(path.resolve()) for path in paths]}
