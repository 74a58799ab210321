"""Where commands write: outputs that appear whole or not at all, and never at the cost of an input.

Every command that writes a folder (a build, a report, an export) stages it beside ``--out`` and renames it into place
in one step (:func:`staged_output`), so a crash never leaves half an output behind. Around that rename:

- **Inputs are never written over.** :func:`check_output_location` refuses an ``--out`` that is, contains or lies
  inside an input of the command (``sureon`` checks it for every path among a command's arguments before the command
  starts; :func:`staged_output` checks the inputs its caller names once more before anything is replaced).
- **``--overwrite`` replaces only what this project wrote.** Every staged folder carries the marker file
  :data:`MARKER`; a folder without it, or a file, is never replaced (an empty folder is: nothing is lost).
- **No leftovers.** The staging folder is removed on an error, on Ctrl-C and on SIGTERM (``sureon`` turns SIGTERM
  into an exception, :func:`builders.errors.exit_on_sigterm`), and a run that finishes removes the staging folders that
  killed runs of this machine (SIGKILL, an out-of-memory kill) left beside the same output: they are named with the
  host and process id that made them, so a running build's staging folder is never touched.
- **The user's umask.** An output gets the permissions a folder made by ``mkdir`` gets (``mkdtemp`` would give 0700,
  which colleagues on a shared cluster cannot read).
- **Files too.** A single file (a cache entry, a manifest, a report) is written under a temporary name beside it and
  renamed into place (:func:`atomic_file`, :func:`write_atomic`): a reader never sees half a file.
- **Checked writable first.** :func:`check_writable` runs before any slow work, so a read-only or full-permission
  mistake costs seconds, not a decoding pass.
"""

import glob
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from builders.errors import InputError, UserError


MARKER = ".sureon-output"  # in every folder staged_output writes: what --overwrite may replace
_MARKER_TEXT = "written by sureon-recipes; `--overwrite` may replace this folder\n"


class OutputExistsError(UserError, FileExistsError):
    """``--out`` exists and may not be replaced (no ``--overwrite``, or not something this project wrote)."""


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_output_location(out: str | Path, inputs: Mapping[str, str | Path | None]) -> None:
    """Refuse an ``out`` that is, lies inside or contains one of ``inputs`` (``{label: path}``, e.g.
    ``{"--release": Path("R")}``; paths that do not exist are not inputs and are passed over)."""
    target = _resolved(out)
    for label, path in inputs.items():
        if path is None or not Path(path).expanduser().exists():
            continue
        given = _resolved(path)
        if target == given:
            relation = "is"
        elif _inside(target, given):
            relation = "lies inside"
        elif _inside(given, target):
            relation = "contains"
        else:
            continue
        raise InputError(
            f"--out {out} {relation} the input {label} {path}: a command never writes over or inside its inputs; "
            "choose an --out outside them (nothing was written)"
        )


def check_writable(out: str | Path) -> None:
    """Refuse an ``out`` that cannot be created or replaced: its nearest existing folder must be writable."""
    target = _resolved(out)
    existing = target.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"cannot create {out}: {existing} is a file, not a folder; choose another --out")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {out}: {existing} is not writable (read-only?); choose another --out")
    if target.is_dir() and not os.access(target, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {out}: it is not writable (read-only?); choose another --out")


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
