"""The export directory: its file names, the manifest (format version, checksums) and reading it back safely.

    manifest.json        format, versions, DataSpec, network config, state contract, source, scores, checksums
    weights.safetensors  policy weights (model + actor) with their metadata: also a valid amago-pipe policy file
    policy.pt            TorchScript step program (runs with plain torch)
    policy.pt2           torch.export step program (plain torch: torch.export.load(...).module())
    policy.onnx          ONNX step program (when the `onnx` extra is installed; runs with onnxruntime)
    README.md            model card

An export is made in `.<name>.partial-<pid>` beside `<name>` and moved into place whole; `<name>` may be new, an
empty folder or an earlier export, never anything else. Standard library only.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from amago_pipe.errors import ConfigError, StoreFormatError
from amago_pipe.hashing import hash_file
from amago_pipe.processes import alive_here, other_process_alive

log = logging.getLogger(__name__)

FORMAT = 1
"""Version of the export directory layout and manifest; readers refuse newer ones."""
MANIFEST = "manifest.json"
WEIGHTS = "weights.safetensors"
TORCHSCRIPT = "policy.pt"
TORCH_EXPORT = "policy.pt2"
ONNX = "policy.onnx"
CARD = "README.md"
FORM_FILES = {"torchscript": TORCHSCRIPT, "torch_export": TORCH_EXPORT, "onnx": ONNX}
"""Portable program forms and their files."""
WRITER = ".writer.json"
"""Stamp of a partial folder (host, pid, start time); removed before the manifest is written."""
_DEBRIS = re.compile(r"\.(?P<name>.+)\.(?P<kind>partial|old)-(?P<pid>\d+)")


def read_manifest(folder: Path, *, check_files: bool = True) -> dict[str, Any]:
    """The manifest of an export directory, after checking its format and (by default) every file's checksum.

    StoreFormatError naming the file and the fix: not an export, unreadable or truncated manifest, a newer
    format, a missing file, a checksum mismatch (modified or truncated)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise StoreFormatError(
            f"{folder}: not an amago-pipe export (no {MANIFEST}); make one with `amago-pipe export RUN_DIR --out DIR` "
            "or an `export` stage"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreFormatError(f"{path}: unreadable or truncated manifest ({e}); export the policy again") from e
    if not isinstance(manifest, dict) or "format" not in manifest:
        raise StoreFormatError(f"{path}: not an amago-pipe export manifest (no 'format'); export the policy again")
    if int(manifest["format"]) > FORMAT:
        raise StoreFormatError(
            f"{path}: export format {manifest['format']} (made by amago-pipe {manifest.get('amago_pipe_version')}) is "
            f"newer than this amago-pipe reads (format {FORMAT}); upgrade amago-pipe"
        )
    recorded = manifest.get("digest")
    if recorded is not None and recorded != manifest_digest(manifest):
        raise StoreFormatError(
            f"{path}: the manifest was edited after export (its digest no longer matches: the step-program contract, "
            "the policy's spec or the verification record may have changed); export the policy again"
        )
    if check_files:
        for name, digest in (manifest.get("files") or {}).items():
            file = Path(folder) / name
            if not file.is_file():
                raise StoreFormatError(f"{folder}: file '{name}' listed in the manifest is missing; export again")
            if hash_file(file) != digest:
                raise StoreFormatError(
                    f"{file}: checksum mismatch (the file was modified or truncated after export); export again"
                )
    return manifest


def write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Add the checksum of every other file of `folder` and write manifest.json; returns the manifest."""
    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name != MANIFEST)
    manifest = {**manifest, "files": {p.name: hash_file(p) for p in files}}
    manifest["digest"] = manifest_digest(manifest)
    (Path(folder) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's content without its own `digest` (keys sorted): any later edit changes it."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def replace_problem(out: Path) -> str | None:
    """Why an export may not replace `out` (None when `out` is missing, an empty folder or an earlier export).

    An earlier export is a folder holding a manifest.json with the export `format` key and only the files it lists."""
    out = Path(out)
    if out.is_symlink():
        return "is a symbolic link"
    if not out.exists():
        return None
    if not out.is_dir():
        return "is a file, not a folder"
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return None
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        manifest = None
    listed = manifest.get("files") if isinstance(manifest, dict) and "format" in manifest else None
    if not isinstance(listed, dict):
        return f"is not empty and holds no earlier export (no {MANIFEST} of an export; it holds {_some(entries)})"
    extra = [n for n in entries if n != MANIFEST and (n not in listed or not (out / n).is_file())]
    if extra:
        return f"holds an earlier export and other files ({_some(extra)}) that replacing it would delete"
    return None


def check_replaceable(out: Path, *, where: str) -> None:
    """ConfigError naming `out` and the fix unless an export may replace it (see `replace_problem`)."""
    problem = replace_problem(out)
    if problem:
        raise ConfigError(f"{where} {out}: {problem}; choose an empty or new folder, or remove it yourself", path=where)


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def start_partial(out: Path) -> Path:
    """Reclaim what dead exports left beside `out`, then make and stamp this process's partial folder for it."""
    out = Path(out)
    for path in reclaim_debris(out):
        log.info("removed %s, left by an export that was killed", path)
    tmp = partial_path(out)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    stamp = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    (tmp / WRITER).write_text(json.dumps(stamp))
    return tmp


def partial_path(out: Path) -> Path:
    """The folder this process makes its export to `out` in."""
    return Path(out).parent / f".{Path(out).name}.partial-{os.getpid()}"


def reclaim_debris(out: Path) -> list[Path]:
    """Remove the `.<name>.partial-<pid>` and `.<name>.old-<pid>` folders of `out` whose export died; return them.

    A partial folder's stamp says which host and process made it; one of a live process (or of another host) is
    kept. An old copy (the earlier export, moved aside) is put back when `out` is missing, else removed."""
    out = Path(out)
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    for path in sorted(out.parent.iterdir()):
        match = _DEBRIS.fullmatch(path.name)
        if not match or match["name"] != out.name or not path.is_dir() or path.is_symlink():
            continue
        pid = int(match["pid"])
        if not (_stamp_dead(path, pid) if match["kind"] == "partial" else not other_process_alive(pid)):
            continue
        if match["kind"] == "old" and not out.exists():
            if replace_problem(path) is None:
                os.replace(path, out)
                log.info("restored the earlier export %s from %s", out, path)
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _stamp_dead(partial: Path, pid: int) -> bool:
    """Whether the process named by a partial folder's stamp is gone from this host (without a stamp: `pid`)."""
    try:
        stamp = json.loads((partial / WRITER).read_text())
        host, pid, started = str(stamp["host"]), int(stamp["pid"]), float(stamp["started"])
    except FileNotFoundError:
        return not other_process_alive(pid)  # made by an older amago-pipe, or just before its manifest
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: keep it rather than guess
    return host == socket.gethostname() and not alive_here(host, pid, started)


def move_into_place(tmp: Path, out: Path, *, where: str) -> None:
    """Move the finished export `tmp` to `out` in one step: a rename onto a new or empty `out`, an exchange
    (Linux renameat2) with an earlier export. Without the exchange, two renames; `reclaim_debris` repairs a kill
    between them. ConfigError when `out` changed while the export was made and may no longer be replaced."""
    check_replaceable(out, where=where)
    if out.is_dir() and any(out.iterdir()):
        if _exchange(tmp, out):
            shutil.rmtree(tmp, ignore_errors=True)  # now the earlier export
            return
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
        try:
            os.replace(tmp, out)
        except BaseException:
            os.replace(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return
    try:
        os.replace(tmp, out)  # replaces an empty folder, never a non-empty one
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            check_replaceable(out, where=where)
        raise


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where the system or file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))
