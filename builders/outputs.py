"""Where commands write: outputs that appear whole or not at all, and never at the cost of an input.

Every command that writes a folder (a build, a report, an export) stages it beside ``--out`` and renames it into place
in one step (:func:`staged_output`), so a crash never leaves half an output behind. Around that rename:

- **Inputs are never written over.** :func:`check_output_location` refuses an ``--out`` that is, contains or lies
  inside an input of the command (``sureon`` checks it for every path among a command's arguments before the command
  starts; :func:`staged_output` checks the inputs its caller names once more before anything is replaced). Every other
  path a command writes (a cache, a cache folder, a ``--json`` file) follows the same rule, and no two of them overlap
  (:func:`check_written_paths`).
- **``--overwrite`` replaces only what this project wrote.** Every staged folder carries the marker file
  :data:`MARKER`; a folder without it, or a file, is never replaced (an empty folder is: nothing is lost). A single
  file output (:func:`write_owned_file`) is recorded beside it, in ``.NAME.sureon-output`` with its kind and its
  content's digest: only a file of the same kind whose content is still what sureon wrote is ever replaced.
- **No leftovers.** The staging folder is removed on an error, on Ctrl-C and on SIGTERM (``sureon`` turns SIGTERM
  into an exception, :func:`builders.errors.exit_on_sigterm`), and a run that finishes removes the staging folders that
  killed runs of this machine (SIGKILL, an out-of-memory kill) left beside the same output: they are named with the
  host and process id that made them, so a running build's staging folder is never touched.
- **The user's umask.** An output gets the permissions a folder made by ``mkdir`` gets (``mkdtemp`` would give 0700,
  which colleagues on a shared cluster cannot read).
- **Files too.** A single file (a cache entry, a manifest, a report) is written under a temporary name beside it and
  renamed into place (:func:`atomic_file`, :func:`write_atomic`): a reader never sees half a file.
- **Checked writable first.** :func:`check_writable` runs before any slow work, so a read-only or full-permission
  mistake costs seconds, not a decoding pass; so does a name too long for the names sureon makes beside it, and for a
  build the name ``datasets`` cannot cache (:func:`check_build_name`).
"""

import glob
import hashlib
import json
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from builders.errors import InputError, UserError


MARKER = ".sureon-output"  # in every folder staged_output writes: what --overwrite may replace
# What a finished run of recipes/sft.py or recipes/grpo.py writes beside its weights, last (defined, field by field,
# in ``recipes.model_io.run_record``, which takes its name from here: builders may not import recipes).
TRAINING_COMPLETE = "training_complete.json"
_MARKER_TEXT = "written by sureon-recipes; `--overwrite` may replace this folder\n"
NAME_MAX = 255  # bytes in a file name on the usual file systems (ext4, xfs, btrfs; datasets assumes it too)
MKDTEMP_RANDOM = 8  # characters tempfile.mkdtemp appends to a staging folder's prefix
# datasets 5.2.0 (builder.py, _prepare_split) names a split's cache files f"{dataset_name}-{split}{SUFFIX}.arrow"
# with SUFFIX "-JJJJJ-SSSSS-of-NNNNN" while it writes them, dataset_name being the build folder's name in snake_case
DATASETS_CACHE_FILE = "{name}-{split}-JJJJJ-SSSSS-of-NNNNN.arrow"
LONGEST_SPLIT = "validation"  # the longest split name a build writes (train, validation, test)


class OutputExistsError(UserError, FileExistsError):
    """``--out`` exists and may not be replaced (no ``--overwrite``, or not something this project wrote)."""


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _relation(target: Path, given: Path) -> str | None:
    """How ``target`` stands to ``given`` (both resolved): "is", "lies inside", "contains", or ``None``."""
    if target == given:
        return "is"
    if _inside(target, given):
        return "lies inside"
    if _inside(given, target):
        return "contains"
    return None


def check_output_location(out: str | Path, inputs: Mapping[str, str | Path | None], option: str = "--out") -> None:
    """Refuse an ``out`` (given as ``option``) that is, lies inside or contains one of ``inputs`` (``{label: path}``,
    e.g. ``{"--release": Path("R")}``; paths that do not exist are not inputs and are passed over)."""
    target = _resolved(out)
    for label, path in inputs.items():
        if path is None or not Path(path).expanduser().exists():
            continue
        relation = _relation(target, _resolved(path))
        if relation is not None:
            raise InputError(
                f"{option} {out} {relation} the input {label} {path}: a command never writes over or inside its "
                f"inputs; give {option} a path outside them (nothing was written)"
            )


def check_written_paths(written: Mapping[str, str | Path | None], inputs: Mapping[str, str | Path | None]) -> None:
    """The ownership rule for every path a command writes (``{option: path}``: ``--out``, ``--cache``, ``--cache-dir``,
    ``--json``, ...; ``None`` where not given): none is, contains or lies inside one of ``inputs``
    (:func:`check_output_location`), and none is, contains or lies inside another (a cache inside an ``--out`` that
    is replaced whole would go with it, or stop the run at its end)."""
    given = {option: path for option, path in written.items() if path is not None}
    for option, path in given.items():
        check_output_location(path, inputs, option)
    options = list(given)
    for position, first in enumerate(options):
        for second in options[position + 1 :]:
            relation = _relation(_resolved(given[first]), _resolved(given[second]))
            if relation is not None:
                raise InputError(
                    f"{first} {given[first]} {relation} {second} {given[second]}, which this command writes too: "
                    "give each its own place, neither inside the other (nothing was written)"
                )


# What a path a command writes is (sureon/cli.py's table says it of each option): a file, a folder, a build (a folder
# in the Hub layout that ``datasets`` will load), or either (a command whose actions write one or the other).
FILE, FOLDER, BUILD, FILE_OR_FOLDER = "file", "folder", "build", "file or folder"


def check_written_kind(path: str | Path, kind: str, option: str = "--out") -> None:
    """Refuse, before any work, a written path that exists as the wrong kind (a folder given for a file, a file for
    a folder: neither is ever replaced), and a build folder whose name ``datasets`` cannot cache
    (:func:`check_build_name`)."""
    path = Path(path).expanduser()
    if kind == FILE and path.is_dir():
        raise InputError(f"{option} {path} is a folder: give the path of a file (nothing was written)")
    if kind in (FOLDER, BUILD) and (path.is_file() or path.is_symlink() and not path.is_dir()):
        raise OutputExistsError(
            f"{path} is a file, not a folder sureon wrote: sureon never replaces it, --overwrite or not; remove it "
            f"yourself or choose another {option}"
        )
    if kind == BUILD:
        check_build_name(path, option)


def _nearest_existing(target: Path) -> Path:
    existing = target.parent
    while not existing.exists():
        existing = existing.parent
    return existing


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


def check_writable(out: str | Path, option: str = "--out") -> None:
    """Refuse an ``out`` that cannot be created or replaced: its nearest existing folder must be writable, and the
    longest name sureon gives a file beside it (a staging folder, ``.OUT.partial-<host>-<pid>-XXXXXXXX``) must fit
    the file system's limit on a file name."""
    target = _resolved(out)
    existing = _nearest_existing(target)
    if not existing.is_dir():
        raise InputError(f"cannot create {out}: {existing} is a file, not a folder; choose another {option}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {out}: {existing} is not writable (read-only?); choose another {option}")
    if target.is_dir() and not os.access(target, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {out}: it is not writable (read-only?); choose another {option}")
    limit = _name_max(existing)
    staging = f"{_staging_prefix(target)}{_owner()}-{'X' * MKDTEMP_RANDOM}"
    excess = len(staging.encode()) - limit
    if excess > 0:
        size = len(target.name.encode())
        raise InputError(
            f"{option} {out}: a name of {size} bytes is too long for what sureon stages beside it "
            f"(.NAME.partial-{_owner()}-XXXXXXXX; a file name holds at most {limit} bytes here): give it a name of at "
            f"most {size - excess} bytes"
        )


def check_build_name(out: str | Path, option: str = "--out", splits: Sequence[str] = (LONGEST_SPLIT,)) -> None:
    """Refuse a build folder whose name ``datasets`` cannot cache: it names a split's cache files after the folder
    (:data:`DATASETS_CACHE_FILE`), and such a name must fit :data:`NAME_MAX` bytes, or loading the build fails with
    ``OSError: [Errno 36] File name too long``. ``splits``: the build's splits (by default the longest a build has)."""
    name, split = _resolved(out).name, max(splits, key=len)
    if len(DATASETS_CACHE_FILE.format(name=name * 2, split=split).encode()) <= NAME_MAX:
        return  # snake_case at most doubles a name: it fits whatever datasets makes of it (no import needed)
    from datasets.naming import camelcase_to_snakecase

    cache_file = DATASETS_CACHE_FILE.format(name=camelcase_to_snakecase(name), split=split)
    excess = len(cache_file.encode()) - NAME_MAX
    if excess > 0:
        size = len(name.encode())
        raise InputError(
            f"{option} {out}: a folder name of {size} bytes is too long for `datasets`, which names the build's cache "
            f"files after it (...-{split}-JJJJJ-SSSSS-of-NNNNN.arrow: {len(cache_file.encode())} bytes, over the "
            f"{NAME_MAX} a file name may hold), so the build could not be loaded: give the folder a name of at most "
            f"{size - excess} bytes"
        )


def check_replaceable(out: str | Path, overwrite: bool) -> None:
    """Refuse an existing ``out`` unless ``overwrite`` is given and it is a folder this project wrote (or empty)."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise OutputExistsError(f"{out} exists; pass --overwrite to replace it")
    if not out.is_dir() or out.is_symlink():
        raise OutputExistsError(
            f"{out} is a file, not a folder sureon wrote: --overwrite never replaces it; remove it yourself or "
            "choose another --out"
        )
    if not (out / MARKER).is_file() and any(out.iterdir()):
        raise OutputExistsError(
            f"{out} was not written by sureon (it has no {MARKER} file): --overwrite replaces only sureon's own "
            "outputs; remove it yourself or choose another --out"
        )


def _owner() -> str:
    """``<host>-<pid>``: who made a staging folder, so that a later run tells a dead run's folder from a live one."""
    host = "".join(c if c.isalnum() or c == "." else "_" for c in socket.gethostname()) or "host"
    return f"{host}-{os.getpid()}"


def _staging_prefix(out: Path) -> str:
    return f".{out.name}.partial-"


def _replaced_prefix(out: Path) -> str:
    return f".{out.name}.old-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_staging(out: str | Path) -> list[Path]:
    """Remove the staging (and half-replaced) folders that dead runs of this host left beside ``out``; return them."""
    out = Path(out)
    if not out.parent.is_dir():
        return []
    host = _owner().rsplit("-", 1)[0]
    removed = []
    for sibling in out.parent.iterdir():
        for prefix in (_staging_prefix(out), _replaced_prefix(out)):
            if not sibling.name.startswith(prefix):
                continue
            owner = sibling.name[len(prefix) :].split("-")
            # <host>-<pid>-<random> (staging) or <host>-<pid> (replaced); host names here hold no "-"
            if len(owner) < 2 or owner[0] != host or not owner[1].isdigit():
                continue
            pid = int(owner[1])
            if pid != os.getpid() and not _alive(pid):
                shutil.rmtree(sibling, ignore_errors=True)
                removed.append(sibling)
    return removed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_permissions(folder: str | Path) -> None:
    """Give every file under ``folder`` the mode ``open()`` gives a new file under the umask. Writers that go through
    a temporary file keep its owner-only mode: ``safetensors`` writes every ``*.safetensors`` 0600, so a model saved by
    transformers (a training run's weights and checkpoints, a tiny test model) was unreadable to a cluster group."""
    mode = 0o666 & ~_umask()
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink() and (path.stat().st_mode & 0o777) != mode:
            path.chmod(mode)


@contextmanager
def staged_output(
    out: str | Path, overwrite: bool, inputs: Mapping[str, str | Path | None] | None = None
) -> Iterator[Path]:
    """Yield a staging folder beside ``out``; on success it replaces ``out`` in one rename, on any failure (Ctrl-C and
    SIGTERM included) it is removed. ``inputs`` (``{label: path}``) are never written over; see the module docstring
    for what ``overwrite`` may replace."""
    out = Path(out)
    check_output_location(out, inputs or {})
    check_replaceable(out, overwrite)
    check_writable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ours = f"{_staging_prefix(out)}{_owner()}-"  # this process's staging folders: a signal may come at any bytecode,
    try:  # even between mkdtemp making the folder and its name being bound, so cleanup finds them by name
        staging = Path(tempfile.mkdtemp(prefix=ours, dir=out.parent))
        staging.chmod(0o777 & ~_umask())
        yield staging
        (staging / MARKER).write_text(_MARKER_TEXT)
        check_replaceable(out, overwrite)  # again: something may have appeared there while the command ran
    except BaseException:
        for leftover in out.parent.glob(f"{glob.escape(ours)}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        raise
    replaced = None
    if out.exists():
        replaced = out.parent / f"{_replaced_prefix(out)}{_owner()}"
        os.replace(out, replaced)
    os.replace(staging, out)
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)
    remove_stale_staging(out)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary name beside ``path`` to write to (same suffix, so writers that go by it still do); it is
    renamed onto ``path`` when the block ends, and removed on any failure. Unique per process and call, so two
    writers of one cache entry never write into each other's file; created with the user's umask (not 0600)."""
    path = Path(path)
    partial = path.with_name(f".{path.stem}.partial-{os.getpid()}-{secrets.token_hex(4)}{path.suffix}")
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`atomic_file`."""
    with atomic_file(path) as partial:
        partial.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


def _file_record(path: Path) -> Path:
    """Where sureon records that it wrote the single file ``path``: ``.NAME.sureon-output`` beside it."""
    return path.with_name(f".{path.name}{MARKER}")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_file_replaceable(path: str | Path, *, kind: str, overwrite: bool, option: str = "--out") -> None:
    """Refuse a single-file output ``path`` (written as ``kind``, e.g. "sureon plan --json") that is a folder, or that
    exists and may not be replaced: without ``overwrite``, or unless sureon wrote it as ``kind`` and it has not
    changed since (its record beside it, :func:`write_owned_file`, names the kind and the content's digest)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder: give the path of a file (nothing was written)")
    if not path.exists() and not path.is_symlink():
        return
    if not overwrite:
        raise OutputExistsError(f"{path} exists; pass --overwrite to replace it")
    keep = f"sureon replaces only files it wrote; move it away or choose another {option} (nothing was written)"
    try:
        record = json.loads(_file_record(path).read_text(encoding="utf-8"))
        written_as, digest = record["kind"], record["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        raise OutputExistsError(
            f"{option} {path} is a file sureon did not write (no {_file_record(path).name} beside it): {keep}"
        ) from None
    if written_as != kind:
        raise OutputExistsError(f"{option} {path} was written by {written_as}, not {kind}: {keep}")
    if path.is_symlink() or _digest(path.read_bytes()) != digest:
        raise OutputExistsError(f"{option} {path} has changed since sureon wrote it: {keep}")


def write_owned_file(
    path: str | Path, data: str | bytes, *, kind: str, overwrite: bool, option: str = "--out"
) -> Path:
    """Write the single-file output ``path`` through :func:`write_atomic` if :func:`check_file_replaceable` allows,
    recording beside it (``.NAME.sureon-output``) that sureon wrote it as ``kind``, with the content's digest. The
    record is written first: a crash between the two leaves a record that no longer matches, which refuses a later
    replacement (nothing is lost) rather than allowing one."""
    path = Path(path)
    check_file_replaceable(path, kind=kind, overwrite=overwrite, option=option)
    data = data if isinstance(data, bytes) else data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"written_by": "sureon-recipes", "kind": kind, "sha256": _digest(data)}
    write_atomic(_file_record(path), json.dumps(record, indent=1) + "\n")
    return write_atomic(path, data)
