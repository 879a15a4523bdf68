"""Content hashes for stage configs and stage output folders, and config diffs (torch-free)."""

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
    """sha256 over every file below `root` (relative path + content); empty string if `root` is missing.

    `exclude` names top-level files or folders of `root` left out (logs and other side files).
    """
    if not root.is_dir():
        return ""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d not in exclude]
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel in exclude or name.startswith(".tmp-"):
                continue
            h.update(rel.encode() + b"\0")
            h.update(bytes.fromhex(hash_file(path)))
    return h.hexdigest()


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted key paths where two JSON-like configs differ (a list or a leaf counts as one key)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted({*old, *new}, key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(path)
            else:
                out.extend(changed_keys(old[key], new[key], path))
        return out
    return [] if old == new else [prefix]
