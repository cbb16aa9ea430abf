"""Vocabulary lifecycle: content-hash keys, compile off the decode path, memory + disk caches, and
reference-counted registration in the decoder's ``GPUBiasingMultiModel`` (TurboBias 2.0, section 2).

Threads. ``compile``/``prewarm`` block (a 10,000-term list takes about half a second): call them from a
worker thread, never from the decode thread. ``acquire``/``release`` change the multi-model; NeMo's
``advance`` must not run meanwhile, so call them on the decode thread between steps, or give the registry the
engine's ``decode_lock`` (held by the engine around every step) and call them from anywhere.

Safety. NeMo reuses a removed model id at once. A model is removed only when no lease holds it, and a
released ``Lease`` refuses to give out its id, so a stream can never score with another meeting's vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import multiprocessing
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo.collections.asr.parts.context_biasing.biasing_multi_model import GPUBiasingMultiModel
from nemo.collections.asr.parts.context_biasing.boosting_graph_batched import GPUBoostingTreeModel

from biasing.compile import build_graph
from biasing.disk_cache import DiskCache
from biasing.graph import COMPILER_VERSION, BoostingGraph, GraphParams
from biasing.nemo.compat import to_nemo_model
from biasing.terms import Term, TermValidationError
from biasing.tokenizer import as_tokenizer
from biasing.worker import compile_arrays, graph_from_arrays


class LeaseReleasedError(RuntimeError):
    """A released lease was asked for its model id (that id may already belong to another vocabulary)."""


@dataclass(frozen=True, eq=False)
class CompiledVocabulary:
    """A compiled vocabulary: its key, graph arrays and the NeMo model built from them (CPU tensors)."""

    key: str
    graph: BoostingGraph
    model: GPUBoostingTreeModel
    num_terms: int

    @property
    def nbytes(self) -> int:
        """Bytes held in RAM (graph arrays + NeMo model tensors): what the memory budget counts."""
        tensors = itertools.chain(self.model.parameters(), self.model.buffers())
        return self.graph.nbytes + sum(int(t.nbytes) for t in tensors)


@dataclass(eq=False)
class _Registration:
    """One vocabulary (with one alpha) inside one multi-model; guarded by the registry lock."""

    multi_model: GPUBiasingMultiModel
    key: str
    alpha: float
    model_id: int
    leases: int = 0


class Lease:
    """A stream's (or meeting's) claim on a registered vocabulary. ``model_id`` goes into the stream's
    biasing config; after ``BiasingRegistry.release`` it raises ``LeaseReleasedError``."""

    def __init__(self, registration: _Registration, lease_id: int) -> None:
        self._registration = registration
        self.lease_id = lease_id
        self.key = registration.key
        self.alpha = registration.alpha
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    @property
    def model_id(self) -> int:
        if self._released:
            raise LeaseReleasedError(f"lease {self.lease_id} on vocabulary {self.key[:12]} was released")
        return self._registration.model_id

    def __repr__(self) -> str:
        state = "released" if self._released else f"model_id={self._registration.model_id}"
        return f"Lease({self.lease_id}, key={self.key[:12]}, {state})"


@dataclass(frozen=True)
class RegistryStats:
    """A snapshot for metrics."""

    memory_entries: int
    memory_bytes: int
    disk_bytes: int
    registered: int
    idle_registered: int
    active_leases: int
    compiles: int
    disk_hits: int
    memory_hits: int
    disk_write_errors: int


@dataclass
class _Counters:
    compiles: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    disk_write_errors: int = 0
    lease_ids: itertools.count[int] = field(default_factory=itertools.count)


def canonical_terms(terms: Sequence[Term | str]) -> list[Term]:
    """Terms in a canonical order (text, weight, alternates), exact duplicates dropped: the key's and the
    compiler's input, so the same list in any order gives the same key and the same arrays."""
    items = {Term(t) if isinstance(t, str) else t for t in terms}
    return sorted(items, key=lambda t: (t.text, t.weight, t.alternates))


class BiasingRegistry:
    """Compiles, caches and registers vocabularies for one tokenizer and one set of graph parameters.

    ``memory_budget_bytes`` bounds the compiled vocabularies kept in RAM (LRU); ``disk_budget_bytes`` the
    files under ``cache_dir`` (LRU by mtime; no disk cache when ``cache_dir`` is None);
    ``idle_keep_registered`` is how many vocabularies with no lease stay registered in a multi-model (LRU),
    so a meeting that reconnects gets its id back at once. With ``compile_processes`` > 0 graphs are built
    in that many worker processes (recommended in the server: a compile running in a thread of the decode
    process competes for its GIL; a 10,000-term list then stretches decode steps by tens of milliseconds).
    Call ``close()`` to stop the workers.
    """

    def __init__(
        self,
        tokenizer: Any,
        params: GraphParams = GraphParams(),
        cache_dir: Path | None = None,
        memory_budget_bytes: int = 512 * 2**20,
        disk_budget_bytes: int = 4 * 2**30,
        idle_keep_registered: int = 8,
        decode_lock: AbstractContextManager[Any] | None = None,
        compile_processes: int = 0,
    ) -> None:
        if memory_budget_bytes <= 0 or idle_keep_registered < 0 or compile_processes < 0:
            raise ValueError(
                "need memory_budget_bytes > 0, idle_keep_registered >= 0, compile_processes >= 0"
            )
        self._tokenizer = as_tokenizer(tokenizer)
        self.params = params
        self.memory_budget_bytes = memory_budget_bytes
        self.idle_keep_registered = idle_keep_registered
        self._disk = None if cache_dir is None else DiskCache(Path(cache_dir), disk_budget_bytes)
        self._decode_lock: AbstractContextManager[Any] = decode_lock or contextlib.nullcontext()
        # _lock guards everything below; it is held only briefly (never while compiling or doing disk I/O).
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, CompiledVocabulary] = OrderedDict()
        self._memory_bytes = 0
        self._inflight: dict[str, Future[CompiledVocabulary]] = {}
        self._registrations: dict[tuple[int, str, float], _Registration] = {}
        self._idle: OrderedDict[tuple[int, str, float], _Registration] = OrderedDict()
        self._counters = _Counters()
        self._pool = (
            ProcessPoolExecutor(compile_processes, mp_context=multiprocessing.get_context("spawn"))
            if compile_processes
            else None
        )

    def close(self) -> None:
        """Stop the compile worker processes (if any); compiled and registered vocabularies stay usable."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BiasingRegistry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def key_for(self, terms: Sequence[Term | str]) -> str:
        """Content hash of (tokenizer, canonical terms with weights, graph parameters, compiler version)."""
        payload = {
            "compiler": COMPILER_VERSION,
            "tokenizer": self._tokenizer.identity,
            "params": self.params.identity(),
            "terms": [[t.text, repr(float(t.weight)), list(t.alternates)] for t in canonical_terms(terms)],
        }
        return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()

    def compile(self, terms: Sequence[Term | str]) -> CompiledVocabulary:
        """Memory cache, then disk cache, then compile (blocking; call from a worker thread). Concurrent calls
        for one key share one compile. Raises ``TermValidationError`` for terms the tokenizer cannot spell."""
        key = self.key_for(terms)
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
                self._counters.memory_hits += 1
                return hit
            future = self._inflight.get(key)
            owner = future is None
            if future is None:
                future = self._inflight[key] = Future()
        if not owner:
            return future.result()
        try:
            compiled = self._load_or_build(key, terms)
            future.set_result(compiled)
            return compiled
        except BaseException as error:
            future.set_exception(error)
            raise
        finally:
            with self._lock:
                del self._inflight[key]

    def prewarm(self, terms: Sequence[Term | str]) -> CompiledVocabulary:
        """A meeting's start: compile (or load) its vocabulary now, off the decode thread, so that acquiring
        it for the first stream is only a registration. Same as ``compile``."""
        return self.compile(terms)

    def _load_or_build(self, key: str, terms: Sequence[Term | str]) -> CompiledVocabulary:
        canonical = canonical_terms(terms)
        graph = self._disk.load(key) if self._disk is not None else None
        if graph is None:
            try:
                graph = self._build(canonical)
            except TermValidationError as error:  # report positions in the caller's list, not the sorted one
                given = [Term(t) if isinstance(t, str) else t for t in terms]
                first = {term: index for index, term in reversed(list(enumerate(given)))}
                raise TermValidationError(
                    [dataclasses.replace(e, index=first[canonical[e.index]]) for e in error.errors]
                ) from None
            counter = "compiles"
            if self._disk is not None:
                try:
                    self._disk.store(key, graph)
                except OSError:  # disk full or unwritable: the graph is still good; stats() shows the count
                    with self._lock:
                        self._counters.disk_write_errors += 1
        else:
            counter = "disk_hits"
        compiled = CompiledVocabulary(key, graph, to_nemo_model(graph), len(canonical))
        with self._lock:
            setattr(self._counters, counter, getattr(self._counters, counter) + 1)
            self._remember(compiled)
        return compiled

    def _build(self, canonical: list[Term]) -> BoostingGraph:
        if self._pool is None:
            return build_graph(canonical, self._tokenizer, self.params)
        tokenizer = self._tokenizer
        job = self._pool.submit(
            compile_arrays, tokenizer.model_proto, tokenizer.vocab_size, canonical, self.params
        )
        return graph_from_arrays(*job.result())

    def _remember(self, compiled: CompiledVocabulary) -> None:
        """Insert into the memory LRU and evict down to the budget (the newest entry always stays)."""
        if compiled.key in self._memory:
            self._memory_bytes -= self._memory.pop(compiled.key).nbytes
        self._memory[compiled.key] = compiled
        self._memory_bytes += compiled.nbytes
        while self._memory_bytes > self.memory_budget_bytes and len(self._memory) > 1:
            _, evicted = self._memory.popitem(last=False)
            self._memory_bytes -= evicted.nbytes

    def cached(self, key: str) -> CompiledVocabulary | None:
        """The compiled vocabulary in the memory cache, if there."""
        with self._lock:
            return self._memory.get(key)

    def acquire(
        self, compiled_or_key: CompiledVocabulary | str, multi_model: GPUBiasingMultiModel, alpha: float = 1.0
    ) -> Lease:
        """A lease on the vocabulary's id in ``multi_model``: registers it on first use, shares the
        registration afterwards (one per multi-model, vocabulary and alpha). Never compiles: a key must be
        compiled (and still cached, or registered) already; otherwise ``LookupError``."""
        key = compiled_or_key if isinstance(compiled_or_key, str) else compiled_or_key.key
        slot = (id(multi_model), key, float(alpha))
        with self._decode_lock, self._lock:
            registration = self._registrations.get(slot)
            if registration is None:
                compiled = compiled_or_key if isinstance(compiled_or_key, CompiledVocabulary) else None
                compiled = compiled or self._memory.get(key)
                if compiled is None:
                    raise LookupError(
                        f"vocabulary {key[:12]} is not compiled; compile() it off the decode thread"
                    )
                model_id = multi_model.add_model(compiled.model, alpha=float(alpha))
                registration = _Registration(multi_model, key, float(alpha), model_id)
                self._registrations[slot] = registration
            self._idle.pop(slot, None)
            registration.leases += 1
            return Lease(registration, next(self._counters.lease_ids))

    def release(self, lease: Lease) -> None:
        """Give a lease back (idempotent). The last lease of a vocabulary unregisters it, or parks it among
        the idle registrations, evicting the least recently used beyond ``idle_keep_registered``."""
        with self._decode_lock, self._lock:
            if lease._released:
                return
            lease._released = True
            registration = lease._registration
            registration.leases -= 1
            if registration.leases > 0:
                return
            slot = (id(registration.multi_model), registration.key, registration.alpha)
            self._idle[slot] = registration
            while len(self._idle) > self.idle_keep_registered:
                self._unregister(*self._idle.popitem(last=False))

    def drop_idle(self) -> int:
        """Unregister every vocabulary that no lease holds; returns how many were removed."""
        with self._decode_lock, self._lock:
            count = len(self._idle)
            while self._idle:
                self._unregister(*self._idle.popitem(last=False))
            return count

    def _unregister(self, slot: tuple[int, str, float], registration: _Registration) -> None:
        del self._registrations[slot]
        registration.multi_model.remove_model(registration.model_id)

    def stats(self) -> RegistryStats:
        """Counts and sizes now (reads the cache directory: not for the decode thread)."""
        disk_bytes = self._disk.total_bytes() if self._disk is not None else 0
        with self._lock:
            return RegistryStats(
                memory_entries=len(self._memory),
                memory_bytes=self._memory_bytes,
                disk_bytes=disk_bytes,
                registered=len(self._registrations),
                idle_registered=len(self._idle),
                active_leases=sum(r.leases for r in self._registrations.values()),
                compiles=self._counters.compiles,
                disk_hits=self._counters.disk_hits,
                memory_hits=self._counters.memory_hits,
                disk_write_errors=self._counters.disk_write_errors,
            )
