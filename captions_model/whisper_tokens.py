"""Whisper's byte-level BPE tokenizer (GPT-2 style) as a ``biasing.tokenizer.GraphTokenizer``.

The graph compiler (``biasing.compile``) works on label surfaces with SentencePiece's conventions: a
word-start space is written "▁" and a phrase's greedy segmentation starts with a "▁" piece. Here a token's
surface is its bytes (the GPT-2 byte-to-unicode mapping undone) decoded as UTF-8, every space written "▁"
(" Hus" -> "▁Hus"); special tokens (ids >= ``text_token_limit``: ``<|endoftext|>`` and after) and tokens
whose bytes are not a complete UTF-8 string on their own (pieces of a multi-byte character) get "", i.e.
never match. A phrase is segmented as Whisper spells it mid-sentence: the BPE encoding of " " + text.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import tokenizers

from biasing.tokenizer import WORD_BOUNDARY, SpanIndex, SpanIndexes

__all__ = ["WhisperTokenizerAdapter", "byte_decoder"]


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-to-unicode table inverted: printable character -> the byte it stands for."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    shifted = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + shifted)
            shifted += 1
    return {chr(char): byte for byte, char in zip(printable, chars, strict=True)}


def _surface(token: str | None, decoder: dict[str, int]) -> str:
    if not token:
        return ""
    try:
        text = bytes(decoder[char] for char in token).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return ""
    return text.replace(" ", WORD_BOUNDARY)


class WhisperTokenizerAdapter:
    """Read-only ``GraphTokenizer`` view of a Whisper ``tokenizers.Tokenizer`` (byte-level BPE).

    ``vocab_size`` is the decoder's logits width (tiny.en: 51864), at least the tokenizer's size with its
    added tokens; labels past the tokenizer's tokens are "" like the special ones. ``identity`` is the
    sha256 of the tokenizer.json text (``tokenizer_json`` when given, else the tokenizer's own
    serialisation) plus the vocabulary size and the text-token limit.
    """

    def __init__(
        self,
        tokenizer: tokenizers.Tokenizer,
        text_token_limit: int,
        vocab_size: int | None = None,
        tokenizer_json: str | None = None,
    ) -> None:
        num_tokens = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self.vocab_size: int = num_tokens if vocab_size is None else int(vocab_size)
        if self.vocab_size < num_tokens:
            raise ValueError(
                f"vocab_size {self.vocab_size} is smaller than the tokenizer's {num_tokens} tokens"
            )
        if not 0 < text_token_limit <= num_tokens:
            raise ValueError(f"text_token_limit must be in 1..{num_tokens}, got {text_token_limit}")
        self._tokenizer = tokenizer
        self.text_token_limit = int(text_token_limit)
        decoder = byte_decoder()
        self.surfaces: tuple[str, ...] = tuple(
            _surface(tokenizer.id_to_token(label), decoder) if label < self.text_token_limit else ""
            for label in range(self.vocab_size)
        )
        text = tokenizer.to_str() if tokenizer_json is None else tokenizer_json
        digest = hashlib.sha256(text.encode("utf-8"))
        digest.update(f"|vocab={self.vocab_size}|text_tokens={self.text_token_limit}".encode())
        self.identity: str = digest.hexdigest()
        self._span_indexes = SpanIndexes(self.surfaces)

    @classmethod
    def from_json(
        cls, tokenizer_json: str, text_token_limit: int, vocab_size: int | None = None
    ) -> WhisperTokenizerAdapter:
        """Adapter over the tokenizer in a tokenizer.json text (its identity hashes exactly that text)."""
        return cls(
            tokenizers.Tokenizer.from_str(tokenizer_json), text_token_limit, vocab_size, tokenizer_json
        )

    def ids(self, text: str) -> list[int]:
        """Whisper's BPE ids of ``text`` spoken after a space (" " + text), no special tokens."""
        return list(self._tokenizer.encode(" " + text, add_special_tokens=False).ids)

    def ids_batch(self, texts: list[str]) -> list[list[int]]:
        """``ids`` for many texts in one call."""
        if not texts:
            return []
        encoded = self._tokenizer.encode_batch([" " + text for text in texts], add_special_tokens=False)
        return [list(item.ids) for item in encoded]

    def pieces(self, text: str) -> list[str]:
        """The surfaces of ``ids(text)``; a run of tokens that only together form a character (byte pieces)
        becomes one piece with that text (no label spells it: the compiler rejects the term)."""
        return self._pieces_of(self.ids(text))

    def pieces_batch(self, texts: list[str]) -> list[list[str]]:
        """``pieces`` for many texts in one call."""
        return [self._pieces_of(ids) for ids in self.ids_batch(texts)]

    def _pieces_of(self, ids: list[int]) -> list[str]:
        decoder = byte_decoder()
        out: list[str] = []
        pending = b""
        for label in ids:
            surface = self.surfaces[label] if label < self.vocab_size else ""
            if surface and not pending:
                out.append(surface)
                continue
            token = self._tokenizer.id_to_token(label) or ""
            pending += bytes(decoder.get(char, 0) for char in token)
            try:
                out.append(pending.decode("utf-8").replace(" ", WORD_BOUNDARY))
            except UnicodeDecodeError:
                continue
            pending = b""
        if pending:
            out.append(pending.decode("utf-8", errors="replace").replace(" ", WORD_BOUNDARY))
        return out

    def span_index(self, single_chars_only: bool = False) -> SpanIndex:
        """Index of labels by folded surface (built once per adapter; thread-safe)."""
        return self._span_indexes.get(single_chars_only)

    def decode(self, ids: list[int]) -> str:
        """Text of text-token ids (special ones dropped), for logs and tests."""
        return str(self._tokenizer.decode([i for i in ids if i < self.text_token_limit]))
