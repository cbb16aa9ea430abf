"""Compiled graphs on disk: one ``<key>.npz`` per vocabulary, written atomically, verified on load, evicted
least recently used first.

Files are plain NumPy archives (no pickle). A file that is truncated, corrupt, from another compiler version
or for another key is deleted and reported as a miss; the caller recompiles. LRU order is the file's mtime,
refreshed on every hit.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np

from biasing.graph import (
    ALL_ARRAYS,
    COMPILER_VERSION,
    BoostingGraph,
    GraphMode,
    GraphValidationError,
)

_SUFFIX = ".npz"
_META = "meta_json"
# What a damaged or foreign file can raise while being read and checked.
_UNREADABLE = (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile, GraphValidationError)


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in ALL_ARRAYS:
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


class DiskCache:
    """A directory of compiled graphs with a byte budget. Thread-safe; safe with several processes writing
    the same key (each writes its own temporary file and renames it into place)."""

    def __init__(self, directory: Path, budget_bytes: int) -> None:
        if budget_bytes <= 0:
            raise ValueError("disk budget_bytes must be > 0")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()  # serialises eviction scans within this process

    def path_for(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def load(self, key: str) -> BoostingGraph | None:
        """The graph stored for ``key``, or None (missing, or damaged and now deleted)."""
        path = self.path_for(key)
        try:
            graph = self._read(path, key)
        except FileNotFoundError:
            return None
        except _UNREADABLE:
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)
        except FileNotFoundError:  # evicted by another process just now; the graph in hand is still good
            pass
        return graph

    @staticmethod
    def _read(path: Path, key: str) -> BoostingGraph:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(archive[_META].tobytes().decode())
            arrays = {name: archive[name] for name in ALL_ARRAYS}
        if meta.get("key") != key or meta.get("compiler") != COMPILER_VERSION:
            raise ValueError("file belongs to another key or compiler version")
        if meta.get("checksum") != _checksum(arrays):
            raise ValueError("checksum mismatch")
        graph = BoostingGraph(
            vocab_size=int(meta["vocab_size"]),
            max_order=int(meta["max_order"]),
            mode=GraphMode(meta["mode"]),
            **arrays,
        )
        graph.validate()
        return graph

    def store(self, key: str, graph: BoostingGraph) -> None:
        """Write atomically (temporary file in the same directory, fsync, rename), then evict LRU files."""
        arrays = graph.arrays()
        meta = {
            "key": key,
            "compiler": COMPILER_VERSION,
            "vocab_size": graph.vocab_size,
            "max_order": graph.max_order,
            "mode": graph.mode.value,
            "checksum": _checksum(arrays),
        }
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(handle, "wb") as file:
                meta_bytes = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
                np.savez(file, **{**arrays, _META: meta_bytes})  # type: ignore[arg-type]  # numpy's stub
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path_for(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._evict(keep=self.path_for(key))

    def total_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[float, int, Path]]:
        entries = []
        for path in self.directory.glob(f"*{_SUFFIX}"):
            if path.name.startswith(".tmp-"):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        return sorted(entries)

    def _evict(self, keep: Path) -> None:
        with self._lock:
            entries = self._entries()
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.budget_bytes:
                    break
                if path == keep:
                    continue
                path.unlink(missing_ok=True)
                total -= size
