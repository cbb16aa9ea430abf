"""Fixtures for the biasing tests: small SentencePiece tokenizers trained here (no downloads)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from tests.biasing.biasing_helpers import WORDS

torch.set_num_threads(1)


def _sentences(seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    sentences = []
    for _ in range(500):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
        words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 6))))
        cased = []
        for word in words:
            roll = rng.random()
            cased.append(word.capitalize() if roll < 0.3 else word.upper() if roll < 0.4 else word)
        sentences.append(" ".join(cased))
    sentences.append(letters + " " + letters.upper())
    return sentences


def _train(directory: Path, name: str, model_type: str, vocab_size: int) -> Path:
    prefix = directory / name
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences(7)),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return prefix.with_suffix(".model")


@pytest.fixture(scope="session")
def bpe_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _train(tmp_path_factory.mktemp("spm"), "bpe", "bpe", 256)


@pytest.fixture(scope="session")
def bpe(bpe_model_path: Path) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(bpe_model_path))


@pytest.fixture(scope="session")
def char_sp(tmp_path_factory: pytest.TempPathFactory) -> spm.SentencePieceProcessor:
    path = _train(tmp_path_factory.mktemp("spm_char"), "char", "char", 60)
    return spm.SentencePieceProcessor(model_file=str(path))
