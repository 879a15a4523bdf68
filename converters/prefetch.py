"""Read ahead: run a source's episode iterator in a background thread, a few items ahead of the writer.

Reading (h5py/npz) and the store's compression then overlap. Bounded (a few items in flight); errors in
the reader are re-raised in the consumer. Standard library only.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_DONE = object()
JOIN_TIMEOUT_S = 10.0


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetch(Generic[T]):
    """`for item in Prefetch(iterator, depth=2)`; call `close()` (or use `with`) to stop the reader early."""

    def __init__(self, source: Iterator[T], *, depth: int = 2):
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(source,), name="convert-read-ahead", daemon=True)
        self._thread.start()

    def _run(self, source: Iterator[T]) -> None:
        try:
            for item in source:
                if not self._put(item):
                    return
            self._put(_DONE)
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._put(_Failure(e))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Prefetch[T]:
        return self

    def __next__(self) -> T:
        item = self._queue.get()
        if item is _DONE:
            raise StopIteration
        if isinstance(item, _Failure):
            raise item.error
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the reader thread and wait for it (it finishes the item it is reading)."""
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT_S)

    def __enter__(self) -> Prefetch[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
