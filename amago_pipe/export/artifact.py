"""The export directory: its file names, the manifest (format version, checksums) and reading it back safely.

    manifest.json        format, versions, DataSpec, network config, state contract, source, scores, checksums
    weights.safetensors  policy weights (model + actor) with their metadata: also a valid amago-pipe policy file
    policy.pt            TorchScript step program (runs with plain torch)
    policy.pt2           torch.export step program (plain torch: torch.export.load(...).module())
    policy.onnx          ONNX step program (when the `onnx` extra is installed; runs with onnxruntime)
    README.md            model card

Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amago_pipe.errors import StoreFormatError
from amago_pipe.hashing import hash_file

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
    (Path(folder) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
