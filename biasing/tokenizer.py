"""The graph compiler's tokenizer interface, and its adapter over the ASR model's SentencePiece tokenizer.

``as_tokenizer`` accepts NeMo's ``SentencePieceTokenizer`` (its ``.tokenizer`` is the raw processor), a raw
``sentencepiece.SentencePieceProcessor``, or any object that already implements ``GraphTokenizer`` (e.g.
``captions_model.whisper_tokens.WhisperTokenizerAdapter``). The graph compiler needs only: the surface string
of every label, greedy encoding, and an index from case-folded surfaces to labels.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload, runtime_checkable

import sentencepiece as spm

WORD_BOUNDARY = "\u2581"  # SentencePiece's "▁"


def fold_char(char: str) -> str:
    """Lower-case one character, keeping it when lower-casing would change its length (e.g. 'İ')."""
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


def fold(text: str) -> str:
    """Length-preserving lower-casing: position i of the result is the folded character i of ``text``."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(fold_char(char) for char in text)


@dataclass(frozen=True)
class SpanIndex:
    """``table`` maps every prefix of every folded label surface to the labels with exactly that surface
    (an empty tuple for a prefix that is no label's whole surface): one lookup per chain span."""

    table: dict[str, tuple[int, ...]]
    max_len: int


def build_span_index(surfaces: Sequence[str], single_chars_only: bool = False) -> SpanIndex:
    """``SpanIndex`` over label surfaces ("" never matches; ``single_chars_only``: one-character ones)."""
    grouped: dict[str, list[int]] = {}
    for label, surface in enumerate(surfaces):
        if not surface or (single_chars_only and len(surface) != 1):
            continue
        grouped.setdefault(fold(surface), []).append(label)
    table: dict[str, tuple[int, ...]] = {key[:end]: () for key in grouped for end in range(1, len(key))}
    table.update((key, tuple(labels)) for key, labels in grouped.items())
    return SpanIndex(table, max((len(key) for key in grouped), default=0))


class SpanIndexes:
    """The ``SpanIndex`` of a fixed tuple of label surfaces, each variant built once on first use
    (thread-safe): what every ``GraphTokenizer`` implementation's ``span_index`` returns."""

    def __init__(self, surfaces: tuple[str, ...]) -> None:
        self._surfaces = surfaces
        self._lock = threading.Lock()
        self._built: dict[bool, SpanIndex] = {}

    def get(self, single_chars_only: bool = False) -> SpanIndex:
        with self._lock:
            index = self._built.get(single_chars_only)
            if index is None:
                index = build_span_index(self._surfaces, single_chars_only)
                self._built[single_chars_only] = index
            return index


@runtime_checkable
class GraphTokenizer(Protocol):
    """What the graph compiler and the term checks use of a tokenizer, over labels ``0..vocab_size-1``.

    ``surfaces[i]``: label i's text with a word-start space written as ``WORD_BOUNDARY`` ("▁"), "" for labels
    that never match a phrase. ``pieces``/``ids``: the greedy segmentation of a phrase spoken after a word
    boundary (SentencePiece's dummy prefix; the first piece starts with "▁"). ``identity``: a content hash of
    the tokenizer (part of cache keys)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def surfaces(self) -> tuple[str, ...]: ...

    @property
    def identity(self) -> str: ...

    def pieces(self, text: str) -> list[str]: ...

    def ids(self, text: str) -> list[int]: ...

    def pieces_batch(self, texts: list[str]) -> list[list[str]]: ...

    def ids_batch(self, texts: list[str]) -> list[list[int]]: ...

    def span_index(self, single_chars_only: bool = False) -> SpanIndex: ...


class TokenizerAdapter:
    """Read-only view of a SentencePiece tokenizer over the non-blank vocabulary ``0..vocab_size-1``.

    ``surfaces[i]`` is the piece text of label i ("" for control, unknown, byte and padding labels, which
    never match a phrase). ``identity`` is a content hash of the tokenizer model (stable across machines).
    """

    def __init__(self, processor: spm.SentencePieceProcessor, vocab_size: int | None = None) -> None:
        self._processor = processor
        num_pieces = processor.get_piece_size()
        self.vocab_size = num_pieces if vocab_size is None else int(vocab_size)
        if self.vocab_size < num_pieces:
            raise ValueError(
                f"vocab_size {self.vocab_size} is smaller than the tokenizer's {num_pieces} pieces"
            )
        self.unk_id = processor.unk_id()
        surfaces = []
        for label in range(self.vocab_size):
            special = label >= num_pieces or (
                processor.is_control(label)
                or processor.is_unknown(label)
                or processor.is_byte(label)
                or processor.is_unused(label)
            )
            surfaces.append("" if special else processor.id_to_piece(label))
        self.surfaces: tuple[str, ...] = tuple(surfaces)
        self.model_proto: bytes = processor.serialized_model_proto()
        digest = hashlib.sha256(self.model_proto)
        digest.update(f"|vocab={self.vocab_size}".encode())
        self.identity = digest.hexdigest()
        self._span_indexes = SpanIndexes(self.surfaces)

    def pieces(self, text: str) -> list[str]:
        """Greedy SentencePiece segmentation of ``text`` as piece strings (unknown characters keep their
        text)."""
        return list(self._processor.encode(text, out_type=str))

    def ids(self, text: str) -> list[int]:
        """Greedy SentencePiece segmentation of ``text`` as label ids."""
        return list(self._processor.encode(text, out_type=int))

    def pieces_batch(self, texts: list[str]) -> list[list[str]]:
        """``pieces`` for many texts in one call."""
        return [list(p) for p in self._processor.encode(texts, out_type=str)] if texts else []

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        """``ids`` for many texts in one call."""
        return [list(p) for p in self._processor.encode(texts, out_type=int)] if texts else []

    def span_index(self, single_chars_only: bool = False) -> SpanIndex:
        """Index of labels by folded surface (built once per adapter; thread-safe)."""
        return self._span_indexes.get(single_chars_only)


_ADAPTERS_LOCK = threading.Lock()
_ADAPTERS: dict[int, tuple[Any, TokenizerAdapter]] = {}
_MAX_CACHED_ADAPTERS = 8


@overload
def as_tokenizer(tokenizer: TokenizerAdapter | spm.SentencePieceProcessor) -> TokenizerAdapter: ...


@overload
def as_tokenizer(tokenizer: GraphTokenizer) -> GraphTokenizer: ...


def as_tokenizer(tokenizer: Any) -> GraphTokenizer:
    """Wrap a NeMo SentencePieceTokenizer or a raw SentencePieceProcessor (adapters are cached per object);
    an object that already implements ``GraphTokenizer`` is returned as it is."""
    if isinstance(tokenizer, TokenizerAdapter):
        return tokenizer
    if isinstance(tokenizer, spm.SentencePieceProcessor):
        processor, vocab_size = tokenizer, None
    elif isinstance(getattr(tokenizer, "tokenizer", None), spm.SentencePieceProcessor):
        processor, vocab_size = tokenizer.tokenizer, int(tokenizer.vocab_size)
    elif isinstance(tokenizer, GraphTokenizer):
        return tokenizer
    else:
        raise TypeError(
            f"expected a SentencePiece tokenizer (NeMo SentencePieceTokenizer or SentencePieceProcessor) "
            f"or a GraphTokenizer, got {type(tokenizer).__name__}"
        )
    with _ADAPTERS_LOCK:
        cached = _ADAPTERS.get(id(tokenizer))
        if cached is not None and cached[0] is tokenizer:
            return cached[1]
        adapter = TokenizerAdapter(processor, vocab_size)
        if len(_ADAPTERS) >= _MAX_CACHED_ADAPTERS:
            _ADAPTERS.pop(next(iter(_ADAPTERS)))
        _ADAPTERS[id(tokenizer)] = (tokenizer, adapter)
        return adapter


def canonical_chain(adapter: GraphTokenizer, text: str) -> tuple[str, int]:
    """The folded character chain of ``text`` as the model spells it, and its greedy (folded) token count."""
    pieces = adapter.pieces(fold(text))
    return fold("".join(pieces)), len(pieces)


def chain_is_reachable(chain: str, index: SpanIndex) -> bool:
    """True when some sequence of labels spells ``chain`` (case-insensitively)."""
    reachable = [False] * (len(chain) + 1)
    reachable[0] = True
    for start in range(len(chain)):
        if not reachable[start]:
            continue
        for end in range(start + 1, min(len(chain), start + index.max_len) + 1):
            found = index.table.get(chain[start:end])
            if found is None:
                break
            if found:
                reachable[end] = True
    return reachable[len(chain)]
