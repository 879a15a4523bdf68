"""Background batch loader: a thread samples store windows into a bounded queue of torch Batches.

Batch i is drawn with its own generator seeded by (seed, rank, i), so the stream is the same whatever
the prefetch depth, and resuming only needs the index of the next batch. Imports torch, numpy and the
store; no nets, agents or envs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.data.batch import Batch, window_to_batch
from amago_pipe.errors import DataError
from amago_pipe.store import TrajectoryStore, WindowBatch

WindowHook = Callable[[WindowBatch, np.random.Generator], WindowBatch]
"""Applied to each sampled batch of windows before it becomes tensors (e.g. sample-time relabeling)."""


def check_partitions(store: TrajectoryStore, partitions: dict[str, float], *, where: str) -> dict[str, int]:
    """Timesteps of each weighted partition; DataError when one is missing or all weighted ones are empty."""
    known = store.partitions()
    missing = [p for p in partitions if p not in known]
    if missing:
        raise DataError(
            f"{where}: the store has no partition {', '.join(repr(p) for p in missing)} "
            f"(it has: {', '.join(known) or 'none'}); convert or collect data into it first"
        )
    sizes = {p: store.partition_info(p).timesteps for p in partitions}
    empty = [p for p, w in partitions.items() if w > 0 and sizes[p] == 0]
    if empty and len(empty) == sum(1 for w in partitions.values() if w > 0):
        raise DataError(
            f"{where}: partition(s) {', '.join(repr(p) for p in empty)} hold no episodes; "
            "nothing to train on (run the convert/collect stage that fills them)"
        )
    return sizes


class BatchLoader:
    """Iterates torch Batches sampled from store partitions; `state_dict()` / `start` resume the stream."""

    def __init__(
        self,
        store: TrajectoryStore,
        *,
        batch_size: int,
        seq_len: int,
        partitions: dict[str, float],
        seed: int,
        rank: int = 0,
        mode: str = "timesteps",
        balance: str = "none",
        prefetch: int = 4,
        start: int = 0,
        pin_memory: bool = False,
        threaded: bool = True,
        on_windows: WindowHook | None = None,
        task_ids: Mapping[str, int] | None = None,
    ):
        self.store = store
        self.batch_size, self.seq_len = batch_size, seq_len
        self.partitions = {p: w for p, w in partitions.items() if w > 0}
        self.seed, self.rank, self.mode, self.balance = seed, rank, mode, balance
        self.prefetch = max(1, prefetch)
        self.next_index = start
        """Index of the next batch handed out (the sampler state saved in checkpoints)."""
        self.pin_memory = pin_memory
        self.threaded = threaded
        self.codec = ActionCodec(store.spec.action)
        self.on_windows = on_windows
        self.task_ids = task_ids
        """Env name -> task id of the batches' `task` (an agent with `popart_per_task`); None: no task ids."""
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def sample(self, index: int) -> Batch:
        """Batch number `index` of this stream (deterministic given the store content)."""
        rng = np.random.default_rng([self.seed, self.rank, index])
        window = self.store.sample(
            self.batch_size,
            self.seq_len,
            partitions=self.partitions,
            rng=rng,
            mode=self.mode,
            balance=self.balance,
            tasks=self.task_ids is not None,
        )
        if self.on_windows is not None:
            window = self.on_windows(window, rng)
        batch = window_to_batch(window, self.store.spec, self.codec, self.task_ids)
        return batch.pin_memory() if self.pin_memory else batch

    def state_dict(self) -> dict[str, Any]:
        return {"next_index": self.next_index, "seed": self.seed, "rank": self.rank}

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        if not self.threaded:
            batch = self.sample(self.next_index)
            self.next_index += 1
            return batch
        if self._thread is None:
            self._start()
        item = self._queue.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        index, batch = item
        if index != self.next_index:  # cannot happen: one producer, FIFO queue
            raise RuntimeError(f"batch loader out of order: got batch {index}, expected {self.next_index}")
        self.next_index += 1
        return batch

    def _start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._produce, args=(self.next_index,), daemon=True, name="batch-loader")
        self._thread.start()

    def _produce(self, first: int) -> None:
        index = first
        try:
            while not self._stop.is_set():
                item = (index, self.sample(index))
                while not self._stop.is_set():
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                index += 1
        except BaseException as e:  # surfaced in the training thread by __next__
            self._queue.put(e)

    def close(self) -> None:
        """Stop the producer thread and drop prefetched batches (the stream restarts at `next_index`)."""
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    self._thread.join(timeout=0.05)
            self._thread = None
        self._queue = queue.Queue(maxsize=self.prefetch)

    def __enter__(self) -> BatchLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
