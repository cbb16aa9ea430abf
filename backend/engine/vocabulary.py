"""Per-stream vocabularies: compiled off the decode thread, registered in the decoder's biasing multi-model on
the decode thread, shared by content and reference-counted.

Lifecycle of one registration (one distinct term list): normalise + compile (compile thread) -> acquire a
lease in the multi-model (decode thread) -> referenced by handles and by the streams using it -> when the last
handle is released and no stream uses it any more, the lease is released on the decode thread. NeMo reuses a
removed id at once, so a lease is released only when nothing can still read its id.

Two counts, two jobs: ``biasing.nemo.registry.BiasingRegistry`` compiles and caches lists and leases their
ids in the decoder's multi-model (the engine holds exactly one lease per distinct list, taken and given back
on the decode thread); the ``VocabularyRegistry`` here counts the handles and streams using each lease, from
any thread, and schedules the lease's release when the last one lets go.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from backend.engine.errors import EngineError
from biasing.matching import TermFinder
from biasing.terms import Term, normalize_terms

if TYPE_CHECKING:
    pass


class Registration:
    """One compiled list registered in the multi-model under ``model_id`` (held by ``lease``).

    ``refs`` counts live handles plus streams using it; it is guarded by the registry's lock. When it drops to
    zero the lease release is scheduled on the decode thread; from then on ``model_id`` is invalid.
    """

    def __init__(self, key: str, terms: tuple[Term, ...], lease: Any) -> None:
        self.key = key
        self.terms = terms
        self.lease = lease
        self.model_id: int = lease.model_id
        self.refs = 0
        self.removed = False
        self.finder = TermFinder(terms)
        self.final_vocabulary: Any = None  # the second pass's graph, when the engine runs one

    def matched_terms(self, text: str) -> tuple[str, ...]:
        """The terms (by their listed spelling) that occur in ``text`` (``biasing.matching``'s rules)."""
        return tuple(self.finder.find(text))


class VocabularyHandle:
    """A caller's reference to a registered vocabulary. ``release()`` is idempotent; after it, ``model_id``
    raises. Handles of the same term list share one registration."""

    def __init__(self, registry: VocabularyRegistry, registration: Registration) -> None:
        self._registry = registry
        self._registration: Registration | None = registration

    @property
    def model_id(self) -> int:
        """The id in the decoder's multi-model (valid while this handle is not released)."""
        if self._registration is None:
            raise EngineError("vocabulary handle was released")
        return self._registration.model_id

    @property
    def terms(self) -> tuple[Term, ...]:
        """The normalised terms of this vocabulary."""
        if self._registration is None:
            raise EngineError("vocabulary handle was released")
        return self._registration.terms

    @property
    def released(self) -> bool:
        """True once ``release()`` was called."""
        return self._registration is None

    def registration(self) -> Registration:
        """The shared registration (for the engine, which acquires it per stream)."""
        if self._registration is None:
            raise EngineError("vocabulary handle was released")
        return self._registration

    def release(self) -> None:
        """Drop this reference (idempotent); the model leaves the decoder when nothing else uses it."""
        registration, self._registration = self._registration, None
        if registration is not None:
            self._registry.unref(registration)


class VocabularyRegistry:
    """Content-addressed, ref-counted registrations.

    ``_lock`` guards ``_by_key`` and every ``Registration.refs``; it is taken from the event loop thread and
    from handle releases (any thread), never while waiting on the decode thread.
    ``remove`` is a callable that schedules the release of a registration's lease on the decode thread.
    """

    def __init__(self, remove: Callable[[Any], None]) -> None:
        self._remove = remove
        self._lock = threading.Lock()
        self._by_key: dict[str, Registration] = {}

    def lookup_and_ref(self, key: str) -> Registration | None:
        """The live registration for ``key`` with one more reference, or None."""
        with self._lock:
            registration = self._by_key.get(key)
            if registration is not None:
                registration.refs += 1
            return registration

    def add(self, registration: Registration) -> Registration:
        """Record a new registration with one reference; if another with the same key won the race, return
        that one (referenced) and let the caller remove the duplicate."""
        with self._lock:
            existing = self._by_key.get(registration.key)
            if existing is not None:
                existing.refs += 1
                return existing
            registration.refs = 1
            self._by_key[registration.key] = registration
            return registration

    def ref(self, registration: Registration) -> None:
        """One more user (a stream) of a live registration."""
        with self._lock:
            if registration.removed:
                raise EngineError("vocabulary was released")
            registration.refs += 1

    def unref(self, registration: Registration) -> None:
        """One user fewer; the last one schedules the removal from the decoder."""
        with self._lock:
            registration.refs -= 1
            if registration.refs > 0:
                return
            registration.removed = True
            if self._by_key.get(registration.key) is registration:
                del self._by_key[registration.key]
        self._remove(registration.lease)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_key)


def normalized(terms: Sequence[Term | str], tokenizer: Any) -> tuple[Term, ...]:
    """Normalise and validate a term list against the model's tokenizer (raises ``TermValidationError``)."""
    return tuple(normalize_terms(list(terms), tokenizer=tokenizer))
