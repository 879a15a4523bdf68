"""What writers leave behind: unsealed segments (and whether their writer still runs), unused new stores.

`verify --quarantine` and every new writer reclaim the unsealed segments of provably dead writers (same
host, process gone); a failed first write removes the store it created only while nothing else is in it.
numpy-free; must not import torch or click.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

from amago_pipe.processes import pid_alive
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import PARTITIONS, marker_key, sealed_key, segment_key, segment_pid, segments_key


def unsealed_segments(files: StoreFiles, partition: str) -> Iterator[str]:
    """Ids of the segment folders of `partition` that have no seal marker (being written, or abandoned)."""
    sealed = {n[:-5] for n in files.backend.list_dir(sealed_key(partition)) if n.endswith(".json")}
    for sid in files.backend.list_dir(segments_key(partition)):
        if sid in sealed or sid.startswith(".") or sid == "zarr.json":
            continue
        if files.backend.is_dir(segment_key(partition, sid)) and not files.backend.exists(marker_key(partition, sid)):
            yield sid


def writer_state(files: StoreFiles, partition: str, sid: str, *, id_pid_is_local: bool = False) -> tuple[str, str]:
    """(`alive` | `dead` | `unknown`, who) for the process writing an unsealed segment.

    `dead` only when provable: the segment's metadata names this host and that process is gone. Writers on
    other hosts are `unknown`, and so are segments whose metadata is not readable (yet) unless
    `id_pid_is_local` (`verify --quarantine`): then the pid in the segment id is checked on this host.
    """
    raw = files.backend.read_bytes(f"{segment_key(partition, sid)}/zarr.json")
    try:
        writer = (json.loads(raw).get("attributes") or {}).get("writer") or {} if raw else {}
        host, pid = str(writer["host"]), int(writer["pid"])
    except (ValueError, TypeError, KeyError, AttributeError):
        id_pid = segment_pid(sid)
        if not id_pid_is_local or id_pid is None:
            return "unknown", f"pid {id_pid} (writer metadata not readable)"
        host, pid = socket.gethostname(), id_pid
    who = f"pid {pid} on {host}"
    if host != socket.gethostname():
        return "unknown", who + " (another host, not checked)"
    return ("alive" if pid_alive(pid) else "dead"), who


def reclaim_abandoned(files: StoreFiles, partition: str) -> list[str]:
    """Delete the unsealed segments of `partition` whose writer is provably dead; returns their ids."""
    removed = []
    for sid in unsealed_segments(files, partition):
        if writer_state(files, partition, sid)[0] == "dead":
            files.backend.delete(segment_key(partition, sid))
            removed.append(sid)
    return removed


def discard_if_unused(files: StoreFiles) -> bool:
    """Remove a store that holds only group metadata (no segment, sealed or not, of any writer); True if removed.

    For a write that created the store and failed: another process may have opened the store meanwhile, and
    its data is never touched. The root zarr.json goes first, so nobody opens the store while it is removed.
    """
    backend = files.backend
    keys = backend.files()
    skeleton = {"zarr.json", f"{PARTITIONS}/zarr.json"}
    if any(k not in skeleton and not _partition_metadata(k) for k in keys):
        return False
    for key in ["zarr.json", *(k for k in keys if k != "zarr.json")]:
        backend.delete(key)
    backend.prune_dirs()
    return True


def _partition_metadata(key: str) -> bool:
    """partitions/<name>/zarr.json, or partitions/<name>/segments/zarr.json (which zarr adds as a parent group)."""
    parts = key.split("/")
    if parts[0] != PARTITIONS or parts[-1] != "zarr.json":
        return False
    return len(parts) == 3 or (len(parts) == 4 and parts[2] == "segments")


def discard_partition_if_unused(files: StoreFiles, partition: str) -> bool:
    """Remove a partition that holds only group metadata (no segment of any writer); True if removed.

    For a write that created the partition and failed; a partition another writer has put a segment in stays.
    """
    backend = files.backend
    prefix = f"{PARTITIONS}/{partition}"
    keys = backend.files(prefix)
    if not keys or any(not _partition_metadata(k) for k in keys):
        return False
    backend.delete(prefix)
    return True
