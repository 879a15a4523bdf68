"""Content hashes of JSON data, files and folders: the one hasher of the house (standard library only).

`hash_tree` hashes a folder's relative names and contents; `sampled=True` reads only the size and a few
blocks of each large file (cheap fingerprints of big source datasets: copying keeps them, changing the bytes
almost surely changes them). Never mtimes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SAMPLE_BYTES = 1 << 16
"""Bytes read at each sampled position (start, 3 inner positions, end) of a large file."""
SMALL_FILE = 1 << 20
"""With `sampled=True`, files up to this size are still hashed whole."""


def hash_json(obj: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace)."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def hash_file(path: Path, h: Any = None, *, sampled: bool = False) -> str:
    """sha256 of a file's bytes, streamed (fed into `h` when given); `sampled`: size + sampled blocks."""
    h = h or hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if sampled:
            h.update(f"{size}\0".encode())
        if not sampled or size <= SMALL_FILE:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return str(h.hexdigest())
        for frac in (0.0, 0.25, 0.5, 0.75):
            f.seek(int(size * frac))
            h.update(f.read(SAMPLE_BYTES))
        f.seek(max(size - SAMPLE_BYTES, 0))
        h.update(f.read(SAMPLE_BYTES))
    return str(h.hexdigest())


def files_under(root: Path, exclude: Iterable[str] = ()) -> list[Path]:
    """Every regular file below `root`, sorted; hidden names, `.tmp-*` temporaries and the top-level
    names in `exclude` left out. A file itself gives `[root]`; a missing root gives `[]`."""
    if root.is_file():
        return [root]
    skip = set(exclude)
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        top = Path(dirpath) == root
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (top and d in skip))
        out.extend(Path(dirpath) / n for n in sorted(filenames) if not n.startswith(".") and not (top and n in skip))
    return out


def hash_paths(root: Path, files: Iterable[Path], *, sampled: bool = False, extra: Any = None) -> str:
    """sha256 over the names (relative to `root`) and contents of `files`, plus `extra` (JSON) when given."""
    h = hashlib.sha256()
    if extra is not None:
        h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    for path in sorted(files):
        rel = path.relative_to(root).as_posix() if path != root else path.name
        h.update(rel.encode() + b"\0")
        h.update(bytes.fromhex(hash_file(path, sampled=sampled)))
    return h.hexdigest()


def hash_tree(root: Path, exclude: Iterable[str] = (), *, sampled: bool = False) -> str:
    """`hash_paths` over `files_under(root, exclude)`; '' when `root` does not exist."""
    if not root.exists():
        return ""
    return hash_paths(root, files_under(root, exclude), sampled=sampled)


def source_hash(obj: Any) -> str | None:
    """Short sha256 of the source file defining `obj` (a user's function or class), so editing it changes the
    hash; None when it has no readable source file (builtins, C extensions)."""
    import inspect

    try:
        source = inspect.getsourcefile(obj)
        data = Path(source).read_bytes() if source else None
    except (TypeError, OSError):
        return None
    return None if data is None else hashlib.sha256(data).hexdigest()[:16]
