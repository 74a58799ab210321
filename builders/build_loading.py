"""A built dataset read back, every mistake one line: the one loader of a build for every command that reads one
(``sureon eval``, ``curate``, ``audit``, ``shortcuts``, ``export``) and for the training mixtures of
``recipes/sft.py``, ``recipes/grpo.py`` and ``sureon plan``.

A mistake used to surface late and in someone else's words: a relative ``--dataset`` that does not exist as "Couldn't
reach 'build/sureon' on the Hub", a truncated parquet shard as a ``DatasetGenerationError`` traceback, a config or
split the build lacks as a ``ValueError`` traceback (``BuilderConfig 'bench_typo' not found``, after a training run's
model had loaded), each after the data had been loading for a while. Here each becomes one line that names the thing
and the fix (a :class:`builders.errors.InputError`):

- :func:`load_build`: a local-looking path that does not exist (one under ``build/``, ``outputs/`` or ``results/``
  even before that folder exists: :func:`builders.hub.looks_local`) is refused, naming the ``sureon build`` command
  that writes it, before ``datasets`` retries it as a Hub id (five tries, about 25 s online); an id that is neither
  a folder nor on the Hub says both; a config or split the build lacks names the ones it has (and, given
  ``expected``, which build the command wants); a file that cannot be read is named, found from the parquet footers
  of the config's files once loading failed (nothing is read twice on the way to a good build).
- A local build whose ``README.md`` was lost (the dataset card declaring its configs) is told so, rather than read by
  ``datasets`` as one ``default`` config of every parquet file and then told it is not the build it is.

A model folder is checked the same way, before anything loads, by :mod:`recipes.model_io.model_folder`.
"""

from pathlib import Path

from builders.errors import InputError, UserError
from builders.hub import BUILD_MANIFESTS, check_build_path
from builders.outputs import MARKER


def load_build(
    dataset: str | Path,
    config: str | None = None,
    split: str = "test",
    *,
    expected: str = "",
    option: str = "--dataset",
    **kwargs,
):
    """``datasets.load_dataset(dataset, config, split=split)`` with every mistake one line (module docstring).

    ``expected`` says which build the command reads, e.g. "a SurgiQ build (`sureon build surgiq`)": it is added to
    the message when a config is missing, the usual sign of the wrong kind of build."""
    from datasets import load_dataset
    from datasets.exceptions import DatasetNotFoundError

    check_build_path(dataset, option, config)
    check_card(dataset, option)
    name = str(dataset)
    try:
        return load_dataset(name, config, split=split, **kwargs)
    except UserError:
        raise
    except ValueError as err:
        problem = _config_or_split_problem(name, config, split, str(err), expected)
        if problem is None:
            raise
        raise InputError(problem) from None
    except Exception as err:
        names = {cls.__name__ for cls in type(err).__mro__}
        if names & {"DatasetGenerationError", "ArrowInvalid", "ArrowTypeError"}:
            raise InputError(_unreadable(name, config, split, err)) from err
        if not Path(name).expanduser().exists() and isinstance(err, ConnectionError | DatasetNotFoundError):
            raise InputError(_nowhere(option, name, err)) from err
        raise


def build_configs(dataset: str | Path, option: str = "--dataset") -> list[str]:
    """The configs a build's card declares, with :func:`load_build`'s messages for a build that is not there."""
    from datasets import get_dataset_config_names
    from datasets.exceptions import DatasetNotFoundError

    check_build_path(dataset, option)
    check_card(dataset, option)
    name = str(dataset)
    try:
        return get_dataset_config_names(name)
    except UserError:
        raise
    except Exception as err:
        if not Path(name).expanduser().exists() and isinstance(err, ConnectionError | DatasetNotFoundError):
            raise InputError(_nowhere(option, name, err)) from err
        raise


def check_card(dataset: str | Path, option: str = "--dataset") -> None:
    """Refuse a local build that lost its README.md: without the card, ``datasets`` reads every parquet file of the
    folder as one ``default`` config. A build is known by sureon's marker or its manifest; any other folder (a
    release's ``data/`` shards, a user's parquet files) is left to ``datasets``, which reads a folder without a card
    by its file names."""
    folder = Path(dataset).expanduser()
    if not folder.is_dir() or (folder / "README.md").is_file():
        return
    if (folder / MARKER).is_file() or any((folder / name).is_file() for name in BUILD_MANIFESTS):
        raise InputError(
            f"{option} {dataset} has no README.md, the dataset card that declares the build's configs (without it "
            "every parquet file reads as one config): it was lost in a copy; copy the whole build folder again, or "
            "rebuild it"
        )


def _nowhere(option: str, name: str, err: BaseException) -> str:
    """An id that is no local folder and that the Hub did not give either (offline, unknown, private)."""
    return (
        f"{option} {name}: no such folder, and no Hub dataset of that id could be read ({_first_line(err)}): "
        "check the path, or build it first"
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _config_or_split_problem(dataset: str, config: str | None, split: str, text: str, expected: str) -> str | None:
    """The message for ``datasets``' ValueError on a config or split the build lacks; ``None`` for any other."""
    from datasets import get_dataset_config_names, get_dataset_split_names

    wanted = f": {expected}" if expected else ""
    if text.startswith(("BuilderConfig", "Config name is missing")):
        configs = get_dataset_config_names(dataset)
        if config is None:
            return f"{dataset} has several configs ({', '.join(configs)}): choose one with --config"
        return f"{dataset} has no config {config!r} (it has: {', '.join(configs)}){wanted}"
    if text.startswith("Unknown split"):
        splits = get_dataset_split_names(dataset, config)
        return f"{dataset} ({config or 'default'}) has no split {split!r} (it has: {', '.join(splits)}): give --split"
    return None


def data_files(dataset: str, config: str | None, split: str | None = None) -> list[str]:
    """The files of a local build's config (of one ``split``, or all), as ``datasets`` resolves them from its card (no
    data is read); none when the build or config cannot be resolved."""
    from datasets import load_dataset_builder

    try:
        resolved = load_dataset_builder(dataset, config).config.data_files or {}
    except Exception:  # noqa: BLE001 - used to name the culprit of an error, or to look for shared rows: best effort
        return []
    return [str(path) for name, files in resolved.items() if split in (None, name) for path in files]


def unreadable_file(files: list[str]) -> tuple[str, str] | None:
    """``(file, why)`` of the first parquet file whose footer (else whose data) cannot be read; ``None`` if all
    can."""
    import pyarrow.parquet as pq

    parquet = [path for path in files if path.endswith(".parquet") and Path(path).is_file()]
    for read in (pq.read_metadata, pq.read_table):
        for path in parquet:
            try:
                read(path)
            except Exception as err:  # noqa: BLE001 - any failure to read it is what is being looked for
                return path, _first_line(err)
    return None


def _unreadable(dataset: str, config: str | None, split: str, err: BaseException) -> str:
    found = unreadable_file(data_files(dataset, config))
    if found is not None:
        path, why = found
        return f"the built dataset {dataset} has an unreadable file {path} (truncated?): rebuild it ({why})"
    detail = _first_line(err.__cause__ or err)
    return (
        f"the built dataset {dataset} ({config or 'default'}/{split}) cannot be read ({detail}): a file is truncated "
        "or not this dataset's format; rebuild it"
    )
