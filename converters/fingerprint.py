"""Cheap, content-based fingerprints of source files and folders (size + sampled blocks, never mtimes).

Copying a dataset keeps its fingerprint; changing its bytes almost surely changes it. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

SAMPLE_BYTES = 1 << 16
"""Bytes read at each sampled position (start, 3 inner positions, end) of a file."""
SMALL_FILE = 1 << 20
"""Files up to this size are hashed whole."""


def hash_file_sampled(path: Path, h: Any) -> None:
    """Feed `h` with the size and sampled blocks of one file (the whole file when small)."""
    size = path.stat().st_size
    h.update(f"{size}\0".encode())
    with open(path, "rb") as f:
        if size <= SMALL_FILE:
            h.update(f.read())
            return
        for frac in (0.0, 0.25, 0.5, 0.75):
            f.seek(int(size * frac))
            h.update(f.read(SAMPLE_BYTES))
        f.seek(max(size - SAMPLE_BYTES, 0))
        h.update(f.read(SAMPLE_BYTES))


def fingerprint_paths(root: Path, files: list[Path], options: dict[str, Any]) -> str:
    """sha256 over the relative names and sampled contents of `files` plus the conversion `options`."""
    h = hashlib.sha256()
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    for path in sorted(files):
        rel = path.relative_to(root).as_posix() if path != root else path.name
        h.update(rel.encode() + b"\0")
        hash_file_sampled(path, h)
    return h.hexdigest()[:32]


def files_under(root: Path) -> list[Path]:
    """Every regular, non-hidden file below `root` (a file itself gives [root])."""
    if root.is_file():
        return [root]
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(Path(dirpath) / n for n in sorted(filenames) if not n.startswith("."))
    return out
