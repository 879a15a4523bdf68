"""Content hashes for stage configs and stage output folders (torch-free)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

STAGE_LOG = "stage.log"
"""Per-stage log file; excluded from the output hash (it changes on every run)."""


def hash_json(obj: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace)."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def hash_file(path: Path, h: Any = None) -> str:
    """sha256 of a file's bytes, streamed."""
    h = h or hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return str(h.hexdigest())


def hash_tree(root: Path, exclude: tuple[str, ...] = (STAGE_LOG,)) -> str:
    """sha256 over every file below `root` (relative path + content); empty string if `root` is missing."""
    if not root.is_dir():
        return ""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel in exclude or name.startswith(".tmp-"):
                continue
            h.update(rel.encode() + b"\0")
            h.update(bytes.fromhex(hash_file(path)))
    return h.hexdigest()
