"""Token-level n-gram LM (BPE pieces of the ASR tokenizer) for shallow fusion with NeMo's NGPU-LM.

Tokenises the training sentences with the model's SentencePiece tokenizer, counts token n-grams
(with <s> and </s>), estimates an interpolated modified Kneser-Ney LM (Chen & Goodman, as KenLM's
lmplz), prunes rare high-order n-grams (raw count <= threshold; probabilities are estimated before
pruning and backoff weights renormalised after it), writes an ARPA file whose "words" are the
characters ``chr(token_id + token_offset)`` (NeMo's convention, default offset 100), then loads it
with ``NGramGPULanguageModel.from_arpa`` and saves it as a ``.nemo`` that RNNT decoding accepts as
``greedy.ngram_lm_model`` / ``beam.ngram_lm_model``.

Usage:
    PYTHONPATH=. .venv/bin/python -m training.lm --text training/work/text/train.txt \
        --tokenizer training/work/tokenizer/tokenizer.model --order 4 --prune 0 0 1 1 \
        --out training/work/lm/tokens_4gram.nemo [--ppl-text training/work/text/test.txt]

Writes ``<out>.arpa`` next to ``<out>.nemo``. ``--ppl-text`` is for measuring only (the first
``--ppl-lines`` lines are scored with a plain-Python ARPA scorer and with the loaded NGPU-LM).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

DEFAULT_TOKEN_OFFSET = 100  # nemo.collections.asr.parts.submodules.ngram_lm.constants


def tokenise(lines: list[str], model_file: Path) -> list[list[int]]:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    return sp.encode(lines, out_type=int)


class Counts:
    """Sorted unique n-gram codes (base-``base`` integers, first symbol most significant) per order."""

    def __init__(self, sents: list[list[int]], vocab: int, order: int) -> None:
        self.vocab, self.order = vocab, order
        self.bos, self.eos, self.base = vocab, vocab + 1, vocab + 2
        seq = np.concatenate([np.array([self.bos, *s, self.eos], dtype=np.int64) for s in sents])
        lens = np.array([len(s) + 2 for s in sents])
        sent_end = np.repeat(np.cumsum(lens), lens)  # exclusive end of the sentence of each position
        pos = np.arange(seq.size)
        self.codes: dict[int, np.ndarray] = {}
        self.raw: dict[int, np.ndarray] = {}
        for n in range(1, order + 1):
            valid = pos + n <= sent_end
            start = pos[valid]
            code = np.zeros(start.size, dtype=np.int64)
            for k in range(n):
                code = code * self.base + seq[start + k]
            self.codes[n], self.raw[n] = np.unique(code, return_counts=True)
        self.num_tokens = int(seq.size - len(sents))  # predicted events: tokens + </s>

    def first(self, n: int, codes: np.ndarray) -> np.ndarray:
        return codes // self.base ** (n - 1)

    def last(self, codes: np.ndarray) -> np.ndarray:
        return codes % self.base

    def context(self, codes: np.ndarray) -> np.ndarray:
        return codes // self.base

    def suffix(self, n: int, codes: np.ndarray) -> np.ndarray:
        return codes % self.base ** (n - 1)

    def symbols(self, n: int, code: int) -> list[int]:
        out = []
        for _ in range(n):
            out.append(code % self.base)
            code //= self.base
        return out[::-1]


def lookup(sorted_codes: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Indices of ``query`` in ``sorted_codes`` (every query must be present)."""
    idx = np.searchsorted(sorted_codes, query)
    found = (idx < sorted_codes.size) & (sorted_codes[np.minimum(idx, sorted_codes.size - 1)] == query)
    if not found.all():
        raise ValueError("n-gram lookup failed: missing lower-order n-gram")
    return idx


FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # as KenLM's --discount_fallback


def discounts(adj: np.ndarray) -> tuple[float, float, float]:
    """Modified Kneser-Ney discounts D1, D2, D3+ from counts-of-adjusted-counts (KenLM-style fallback)."""
    n1, n2, n3, n4 = (int((adj == k).sum()) for k in (1, 2, 3, 4))
    if min(n1, n2, n3, n4) == 0:
        return FALLBACK_DISCOUNTS  # e.g. unigram continuation counts of a small vocabulary are all large
    y = n1 / (n1 + 2 * n2)
    d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
    return d if all(0 < x < k + 1 for k, x in enumerate(d)) else FALLBACK_DISCOUNTS


def build(c: Counts, prune: list[int]) -> dict[int, dict[str, np.ndarray]]:
    """Interpolated modified KN; returns per order: codes, log10 prob, log10 backoff (kept n-grams only)."""
    order = c.order
    # adjusted counts: raw for the highest order and for n-grams starting with <s>, else continuation counts
    adj = {order: c.raw[order].astype(np.float64)}
    for n in range(order - 1, 0, -1):
        suf, cont = np.unique(c.suffix(n + 1, c.codes[n + 1]), return_counts=True)
        a = np.zeros(c.codes[n].size)
        a[lookup(c.codes[n], suf)] = cont
        starts_bos = c.first(n, c.codes[n]) == c.bos
        a[starts_bos] = c.raw[n][starts_bos]
        adj[n] = a

    prob: dict[int, np.ndarray] = {}  # interpolated p(w | h) for all observed n-grams (natural prob)
    gamma: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # context codes -> interpolation weight
    phat: dict[int, np.ndarray] = {}
    disc: dict[int, tuple[float, float, float]] = {}
    # unigrams: every token and </s> (never <s>), interpolated with the uniform distribution
    n_events = c.vocab + 1
    uni_codes = np.arange(n_events, dtype=np.int64)
    uni_codes[-1] = c.eos
    a1 = np.zeros(n_events)
    is_pred = c.codes[1] != c.bos
    a1[np.searchsorted(uni_codes, c.codes[1][is_pred])] = adj[1][is_pred]
    for n in range(1, order + 1):
        codes = uni_codes if n == 1 else c.codes[n]
        a = a1 if n == 1 else adj[n]
        d1, d2, d3 = discounts(a)
        disc[n] = (d1, d2, d3)
        dsc = np.where(a >= 3, d3, np.where(a == 2, d2, np.where(a == 1, d1, 0.0)))
        if n == 1:
            ctx_inv = np.zeros(codes.size, dtype=np.int64)
            ctx_codes = np.zeros(1, dtype=np.int64)
        else:
            ctx_codes, ctx_inv = np.unique(c.context(codes), return_inverse=True)
        denom = np.bincount(ctx_inv, weights=a)
        mass = np.bincount(ctx_inv, weights=dsc)
        g = mass / denom
        ph = (a - dsc) / denom[ctx_inv]
        lower = (
            np.full(codes.size, 1.0 / n_events)
            if n == 1
            else prob[n - 1][lookup(uni_codes if n == 2 else c.codes[n - 1], c.suffix(n, codes))]
        )
        prob[n] = ph + g[ctx_inv] * lower
        phat[n] = ph
        gamma[n] = (ctx_codes, g)

    # pruning (raw count <= threshold), then close under prefixes and suffixes
    keep = {1: np.ones(n_events, dtype=bool)}
    for n in range(2, order + 1):
        keep[n] = c.raw[n] > prune[n - 1]
    for n in range(order, 2, -1):
        kept = c.codes[n][keep[n]]
        for sub in (c.context(kept), c.suffix(n, kept)):
            keep[n - 1][lookup(c.codes[n - 1], np.unique(sub))] = True

    out: dict[int, dict[str, np.ndarray]] = {}
    for n in range(1, order + 1):
        codes = uni_codes if n == 1 else c.codes[n]
        out[n] = {"codes": codes[keep[n]], "logp": np.log10(prob[n][keep[n]])}
    # backoff weights of contexts (order n-1) from their kept / pruned order-n extensions
    for n in range(2, order + 1):
        codes = c.codes[n]
        lower_codes = uni_codes if n == 2 else c.codes[n - 1]
        lower_p = prob[n - 1][lookup(lower_codes, c.suffix(n, codes))]
        ctx_codes, g = gamma[n]
        ctx_inv = np.searchsorted(ctx_codes, c.context(codes))
        s_kept = np.bincount(ctx_inv, weights=lower_p * keep[n], minlength=ctx_codes.size)
        pruned_mass = np.bincount(ctx_inv, weights=phat[n] * ~keep[n], minlength=ctx_codes.size)
        bow = g + pruned_mass / np.maximum(1.0 - s_kept, 1e-12)
        # contexts = kept order-(n-1) n-grams (plus <s> as unigram)
        hist = out[n - 1]["codes"] if n > 2 else np.append(uni_codes, c.bos)
        idx = np.searchsorted(ctx_codes, hist)
        found = (idx < ctx_codes.size) & (ctx_codes[np.minimum(idx, ctx_codes.size - 1)] == hist)
        lbow = np.zeros(hist.size)
        lbow[found] = np.log10(bow[idx[found]])
        if n == 2:
            out["bos_bow"] = {"logp": np.array([lbow[-1]])}
            lbow = lbow[:-1]
        out[n - 1]["bow"] = lbow
    out["disc"] = {"d": np.array([disc[n] for n in range(1, order + 1)])}
    return out


def sym(c: Counts, s: int, offset: int) -> str:
    return "<s>" if s == c.bos else "</s>" if s == c.eos else chr(s + offset)


def write_arpa(path: Path, c: Counts, lm: dict, offset: int) -> None:
    order = c.order
    counts = [lm[n]["codes"].size + (2 if n == 1 else 0) for n in range(1, order + 1)]  # + <s>, <unk>
    with open(path, "w", encoding="utf-8") as f:
        f.write("\\data\\\n")
        for n in range(1, order + 1):
            f.write(f"ngram {n}={counts[n - 1]}\n")
        for n in range(1, order + 1):
            f.write(f"\n\\{n}-grams:\n")
            if n == 1:
                f.write("-99\t<unk>\t0\n")
                f.write(f"-99\t<s>\t{lm['bos_bow']['logp'][0]:.6f}\n")
            codes, logp = lm[n]["codes"], lm[n]["logp"]
            bow = lm[n].get("bow")
            lines = []
            for i in range(codes.size):
                words = " ".join(sym(c, s, offset) for s in c.symbols(n, int(codes[i])))
                if bow is not None and int(codes[i]) % c.base != c.eos:
                    lines.append(f"{logp[i]:.6f}\t{words}\t{bow[i]:.6f}\n")
                else:
                    lines.append(f"{logp[i]:.6f}\t{words}\n")
            f.writelines(lines)
        f.write("\n\\end\\\n")


class ArpaScorer:
    """Plain backoff scorer for an ARPA file written by :func:`write_arpa` (for sanity checks)."""

    def __init__(self, path: Path, offset: int) -> None:
        self.p: dict[tuple, float] = {}
        self.b: dict[tuple, float] = {}
        self.order = 0
        special = {"<s>": -1, "</s>": -2, "<unk>": -3}
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("\\") or line.startswith("ngram "):
                    continue
                parts = line.split("\t")
                key = tuple(special[w] if w in special else ord(w) - offset for w in parts[1].split(" "))
                self.order = max(self.order, len(key))
                self.p[key] = float(parts[0])
                if len(parts) > 2:
                    self.b[key] = float(parts[2])

    def logp(self, hist: tuple, w: int) -> float:
        hist = hist[-(self.order - 1) :] if self.order > 1 else ()
        back = 0.0
        while True:
            key = (*hist, w)
            if key in self.p:
                return back + self.p[key]
            if not hist:
                return back + self.p.get((-3,), -99.0)
            back += self.b.get(hist, 0.0)
            hist = hist[1:]

    def sentence(self, toks: list[int]) -> float:
        hist: tuple = (-1,)
        total = 0.0
        for w in [*toks, -2]:
            total += self.logp(hist, w)
            hist = (*hist, w)
        return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", type=Path, default=Path("training/work/text/train.txt"))
    ap.add_argument("--tokenizer", type=Path, default=Path("training/work/tokenizer/tokenizer.model"))
    ap.add_argument("--order", type=int, default=4)
    ap.add_argument(
        "--prune",
        type=int,
        nargs="+",
        default=[0, 0, 1, 1],
        help="per order (1..N): drop n-grams with raw count <= value (unigrams are never pruned)",
    )
    ap.add_argument("--token-offset", type=int, default=DEFAULT_TOKEN_OFFSET)
    ap.add_argument("--out", type=Path, default=Path("training/work/lm/tokens_4gram.nemo"))
    ap.add_argument("--ppl-text", type=Path, default=None, help="held-out text for a perplexity check only")
    ap.add_argument("--ppl-lines", type=int, default=200)
    args = ap.parse_args()
    prune = (args.prune + [args.prune[-1]] * args.order)[: args.order]

    import sentencepiece as spm

    vocab = spm.SentencePieceProcessor(model_file=str(args.tokenizer)).get_piece_size()
    t0 = time.time()
    lines = [ln.strip() for ln in args.text.read_text(encoding="utf-8").splitlines() if ln.strip()]
    sents = tokenise(lines, args.tokenizer)
    t_tok = time.time() - t0
    counts = Counts(sents, vocab, args.order)
    t_count = time.time() - t0 - t_tok
    lm = build(counts, prune)
    t_est = time.time() - t0 - t_tok - t_count
    args.out.parent.mkdir(parents=True, exist_ok=True)
    arpa = args.out.with_suffix(".arpa")
    write_arpa(arpa, counts, lm, args.token_offset)
    t_arpa = time.time() - t0 - t_tok - t_count - t_est
    print(f"sentences {len(sents)}, tokens+</s> {counts.num_tokens}, vocab {vocab}, prune {prune}")
    for n in range(1, args.order + 1):
        d = ", ".join(f"{x:.3f}" for x in lm["disc"]["d"][n - 1])
        print(f"  order {n}: observed {counts.codes[n].size:>9}  kept {lm[n]['codes'].size:>9}  D=({d})")
    print(
        f"time: tokenise {t_tok:.1f}s, count {t_count:.1f}s, estimate {t_est:.1f}s, write arpa {t_arpa:.1f}s"
    )

    import torch

    torch.set_num_threads(1)
    from nemo.collections.asr.parts.submodules.ngram_lm import NGramGPULanguageModel

    t1 = time.time()
    ngpu = NGramGPULanguageModel.from_arpa(
        arpa, vocab_size=vocab, token_offset=args.token_offset, use_triton=False
    )
    ngpu.save_to(str(args.out))
    t_nemo = time.time() - t1
    print(f"NGPU-LM from_arpa + save_to {t_nemo:.1f}s: states {ngpu.num_states}, arcs {ngpu.num_arcs}")
    print(
        f"sizes: {arpa} {arpa.stat().st_size / 1e6:.1f} MB, {args.out} {args.out.stat().st_size / 1e6:.1f} MB"
    )

    if args.ppl_text is not None:
        held = [ln.strip() for ln in args.ppl_text.read_text(encoding="utf-8").splitlines() if ln.strip()]
        held_toks = tokenise(held[: args.ppl_lines], args.tokenizer)
        scorer = ArpaScorer(arpa, args.token_offset)
        lp = sum(scorer.sentence(t) for t in held_toks)
        n_ev = sum(len(t) + 1 for t in held_toks)
        print(
            f"held-out {len(held_toks)} lines, {n_ev} tokens+</s>: ppl {10 ** (-lp / n_ev):.2f} (ARPA scorer)"
        )
        # normalisation check: sum over all events of p(w | h) for a few histories
        for hist in [(-1,), tuple(held_toks[0][:1]), tuple(held_toks[0][:3]), tuple(held_toks[1][:2])]:
            tot = sum(10 ** scorer.logp(hist, w) for w in [*range(vocab), -2])
            print(f"  sum_w p(w | {hist}) = {tot:.6f}")
        # the same lines through the loaded NGPU-LM (natural log)
        ngpu2 = NGramGPULanguageModel.from_file(args.out, vocab_size=vocab, use_triton=False)
        eos = False
        labels = torch.nn.utils.rnn.pad_sequence([torch.tensor(t) for t in held_toks], batch_first=True)
        lens = torch.tensor([len(t) for t in held_toks])
        with torch.no_grad():
            sc = ngpu2.score_sentences(labels, lens, bos=True, eos=eos)
        ours = sum(scorer.sentence(t) - scorer.logp((-1, *t), -2) for t in held_toks)
        theirs = float(sc.sum()) / math.log(10)
        print(f"  log10 prob without </s>: ARPA scorer {ours:.3f}, NGPU-LM {theirs:.3f}")


if __name__ == "__main__":
    main()
