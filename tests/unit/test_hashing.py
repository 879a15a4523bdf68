"""The one hasher: folder hashes follow names and contents (sampled for big files), never mtimes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from amago_pipe.hashing import SMALL_FILE, files_under, hash_json, hash_paths, hash_tree


def test_hash_paths_follows_content_and_extra(tmp_path: Path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"x" * 10)
    fp = hash_paths(tmp_path, [f], extra={"episodes": None})
    assert fp == hash_paths(tmp_path, [f], extra={"episodes": None})
    assert fp != hash_paths(tmp_path, [f], extra={"episodes": 3})
    f.write_bytes(b"x" * 9 + b"y")
    assert fp != hash_paths(tmp_path, [f], extra={"episodes": None})


def test_tree_hash_ignores_mtimes_and_location_but_not_names(tmp_path: Path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "w.bin").write_bytes(b"abc")
    (src / "log.txt").write_text("noise")
    first = hash_tree(src, exclude=("log.txt",))
    os.utime(src / "sub" / "w.bin", (1, 1))
    (src / "log.txt").write_text("other noise")
    (src / ".tmp-x.1").write_text("a dead writer's temporary")
    assert hash_tree(src, exclude=("log.txt",)) == first
    shutil.copytree(src, tmp_path / "copy")
    assert hash_tree(tmp_path / "copy", exclude=("log.txt",)) == first
    (src / "sub" / "w.bin").rename(src / "sub" / "v.bin")
    assert hash_tree(src, exclude=("log.txt",)) != first
    assert hash_tree(tmp_path / "missing") == ""
    assert files_under(src / "sub" / "v.bin") == [src / "sub" / "v.bin"]


def test_sampled_hash_of_a_big_file_sees_its_ends_and_size(tmp_path: Path):
    big = tmp_path / "big.bin"
    data = bytearray(SMALL_FILE * 3)
    big.write_bytes(data)
    first = hash_tree(tmp_path, sampled=True)
    assert first != hash_tree(tmp_path)  # the sampled form is its own hash
    data[-1] = 1
    big.write_bytes(data)
    assert hash_tree(tmp_path, sampled=True) != first
    big.write_bytes(data + b"\0")
    assert hash_tree(tmp_path, sampled=True) != first


def test_json_hash_is_canonical():
    assert hash_json({"a": 1, "b": [1, 2]}) == hash_json({"b": [1, 2], "a": 1})
    assert hash_json({"a": 1}) != hash_json({"a": 2})
