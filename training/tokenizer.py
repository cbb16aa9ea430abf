"""Train the cased, punctuated SentencePiece BPE tokenizer on the training sentences.

Writes ``tokenizer.model`` and ``vocab.txt`` (NeMo's ``type: bpe`` tokenizer directory layout).

Usage::

    python -m training.tokenizer --text training/work/text/train.txt --out training/work/tokenizer --vocab 512
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sentencepiece as spm


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=512)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=str(args.text),
        model_prefix=str(args.out / "tokenizer"),
        vocab_size=args.vocab,
        model_type="bpe",
        character_coverage=1.0,
        split_digits=True,
        normalization_rule_name="identity",
        bos_id=-1,
        eos_id=-1,
        unk_id=0,
        input_sentence_size=200000,
        shuffle_input_sentence=True,
    )
    sp = spm.SentencePieceProcessor(model_file=str(args.out / "tokenizer.model"))
    vocab = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    (args.out / "vocab.txt").write_text("\n".join(vocab) + "\n")
    sample = args.text.read_text().splitlines()[:2000]
    tokens = sum(len(sp.encode(s)) for s in sample)
    words = sum(len(s.split()) for s in sample)
    print(f"vocab {sp.get_piece_size()}, {tokens / words:.2f} tokens per word")


if __name__ == "__main__":
    main()
