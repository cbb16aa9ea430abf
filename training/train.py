"""Train the RNNT head (frame projection, prediction network, joint) on cached Whisper encoder outputs.

A plain, resumable CPU loop (no Lightning): batches of similar length, AdamW with warm-up, the vectorised
RNNT loss of ``training/rnnt_loss.py``; every ``--eval-every`` steps greedy WER on the held-out caches; every
``--save-every-s`` seconds one current checkpoint ``<work>/ckpt.pt`` (model + optimizer + step), overwritten.
Stop it at any time and run it again with the same arguments: it resumes from ``ckpt.pt``.

``--device cuda`` trains on a GPU; ``--plain`` builds the model with ``training/plain.py`` instead of NeMo,
for machines where only PyTorch is installed (``training/gpu_train.sh``). Both train the same weights.

Usage::

    python -m training.train --init training/work/init.nemo --train "training/work/cache/train_*.pt" \
        --eval training/work/cache/test_festival_full.pt --work training/work/run1 --minutes 100
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import random
import time
from pathlib import Path

import torch
from tqdm import tqdm

from training.checkpoint import is_frozen, load_trained
from training.features import load_model
from training.plain import load_plain, word_error_rate
from training.rnnt_loss import rnnt_loss


def load_new_caches(patterns: list[str], loaded: set[Path], train: list[dict]) -> int:
    """Append the items of caches matching ``patterns`` not loaded yet; returns how many caches were new."""
    paths = sorted({p for pat in patterns for p in map(Path, glob.glob(pat))} - loaded)
    for path in paths:
        train.extend(torch.load(path))
        loaded.add(path)
    if not loaded:
        raise SystemExit(f"no training caches match {patterns}")
    return len(paths)


def make_batches(items: list[dict], max_frames: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar length with at most ``max_frames`` (padded 20 ms frames) each."""
    order = sorted(range(len(items)), key=lambda i: items[i]["feats"].shape[0] + rng.random() * 20)
    batches, cur, longest = [], [], 0
    for i in order:
        t = items[i]["feats"].shape[0]
        if cur and max(longest, t) * (len(cur) + 1) > max_frames:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, t)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(
    items: list[dict],
    idx: list[int],
    tokenizer,
    device: str | torch.device = "cpu",  # noqa: ANN001
) -> tuple[torch.Tensor, ...]:
    feats = [items[i]["feats"].float() for i in idx]
    lens = torch.tensor([f.shape[0] for f in feats])
    x = torch.nn.utils.rnn.pad_sequence(feats, batch_first=True)
    toks = [torch.tensor(tokenizer.text_to_ids(items[i]["text"])) for i in idx]
    tlens = torch.tensor([t.numel() for t in toks])
    y = torch.nn.utils.rnn.pad_sequence(toks, batch_first=True)
    return tuple(t.to(device, non_blocking=True) for t in (x, lens, y, tlens))


def augment(x: torch.Tensor, lens: torch.Tensor, noise: float, masks: int, width: int = 10) -> torch.Tensor:
    """Gaussian noise on the cached features plus ``masks`` zeroed time spans (<= ``width`` 20 ms frames)."""
    if noise > 0:
        x = x + torch.randn_like(x) * noise
    if masks > 0:
        t = torch.arange(x.shape[1], device=x.device)[None, :]
        for _ in range(masks):
            start = (torch.rand(x.shape[0], device=x.device) * lens).long()[:, None]
            span = torch.randint(1, width + 1, (x.shape[0], 1), device=x.device)
            x = x.masked_fill(((t >= start) & (t < start + span))[..., None], 0.0)
    return x


def head_forward(model, x: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """Cached Whisper frames [B, T, D] -> encoder output [B, D_out, T'] and lengths (80 ms frames)."""
    if model.training:
        x = augment(x, lens, getattr(model, "_feat_noise", 0.0), getattr(model, "_time_masks", 0))
    return model.encoder.head(x, lens)


def batch_loss(model, x, lens, y, tlens) -> torch.Tensor:  # noqa: ANN001
    enc, enc_len = head_forward(model, x, lens)
    g, _, _ = model.decoder(targets=y, target_length=tlens)
    with torch.autocast(enc.device.type, dtype=torch.bfloat16, enabled=getattr(model, "_bf16_joint", False)):
        logits = model.joint(encoder_outputs=enc, decoder_outputs=g)
    losses = rnnt_loss(logits.float().log_softmax(-1), y, enc_len, tlens, blank=model.decoder.blank_idx)
    return losses.sum() / tlens.sum()


@torch.inference_mode()
def decode_caches(model, items: list[dict], batch_frames: int = 6000) -> tuple[list[str], list[str]]:  # noqa: ANN001
    """Hypotheses (the model's current decoding) and references of cached items, in batch order; the model
    must be in eval mode (no augmentation)."""
    hyps, refs = [], []
    device = next(model.parameters()).device
    for idx in make_batches(items, batch_frames, random.Random(0)):
        x, lens, _, _ = collate(items, idx, model.tokenizer, device)
        enc, enc_len = head_forward(model, x, lens)
        out = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len)
        hyps += [h.text for h in out]
        refs += [items[i]["text"] for i in idx]
    return hyps, refs


def evaluate(model, items: list[dict], batch_frames: int = 6000) -> tuple[float, list[str]]:  # noqa: ANN001
    """Greedy WER on cached items, and three hypotheses with their references; back to training mode after."""
    model.eval()
    hyps, refs = decode_caches(model, items, batch_frames)
    model.train()
    model.encoder.eval()
    return word_error_rate(hyps, refs), hyps[:3] + refs[:3]


def lr_at(step: int, peak: float, warmup: int, total: int, time_frac: float = 0.0) -> float:
    """Linear warm-up, then cosine decay to 5 % of ``peak`` at ``total`` steps, or at ``time_frac`` 1 (the
    fraction of a time budget spent) if that comes first."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = min(1.0, max((step - warmup) / max(1, total - warmup), time_frac))
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--init", type=Path, required=True, help=".nemo with the Whisper encoder + fresh head"
    )
    parser.add_argument(
        "--train",
        nargs="+",
        required=True,
        help="feature caches or glob patterns (quoted); re-expanded every epoch, so new caches join in",
    )
    parser.add_argument("--eval", type=Path, nargs="*", default=[])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=100.0, help="stop after this much wall time")
    parser.add_argument("--steps", type=int, default=20000, help="schedule length (cosine decay)")
    parser.add_argument("--lr", type=float, default=1.5e-3)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--batch-frames", type=int, default=9000)
    parser.add_argument("--feat-noise", type=float, default=0.05)
    parser.add_argument(
        "--warm-start",
        type=Path,
        default=None,
        help="ckpt.pt (full or compact) of the same or a smaller model to start from, with a fresh schedule",
    )
    parser.add_argument(
        "--bf16-joint", action="store_true", help="joint in bfloat16 (~1.7x faster on AVX512-BF16)"
    )
    parser.add_argument("--time-masks", type=int, default=0, help="zeroed spans per utterance (<= 200 ms)")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--save-every-s", type=float, default=300.0)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda where a GPU is lent")
    parser.add_argument(
        "--time-schedule",
        action="store_true",
        help="decay the learning rate over --minutes (what a fixed time budget needs), or --steps if sooner",
    )
    parser.add_argument("--eval-first", action="store_true", help="evaluate before the first step too")
    parser.add_argument("--plain", action="store_true", help="plain PyTorch model, no NeMo")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.work.mkdir(parents=True, exist_ok=True)
    model = (load_plain(args.init) if args.plain else load_model(args.init)).to(args.device)
    model._feat_noise = args.feat_noise
    model._bf16_joint = args.bf16_joint
    model._time_masks = args.time_masks
    for name, p in model.named_parameters():  # Whisper frozen; projection, top blocks, decoder, joint trained
        p.requires_grad_(not is_frozen(name))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=1e-3)
    ckpt_path, step, seen_s = args.work / "ckpt.pt", 0, 0.0
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=args.device)
        load_trained(model, ckpt)
        if "opt" in ckpt:  # casts the moments of a compact checkpoint back to float32
            opt.load_state_dict(ckpt["opt"])
        else:  # weights only (what training/gpu_train.sh returns): the step count goes on, fresh moments
            print("checkpoint holds weights only: AdamW moments start afresh")
        step, seen_s = ckpt["step"], ckpt["seen_s"]
        print(f"resumed from {ckpt_path} at step {step}")
    elif args.warm_start:
        state = torch.load(args.warm_start, map_location=args.device)["model"]
        missing, unexpected = model.load_state_dict(state, strict=False)
        new = [k for k in missing if not is_frozen(k)]  # a compact checkpoint lacks the frozen Whisper
        if unexpected or any(not k.startswith("encoder.top.") for k in new):
            raise RuntimeError(f"warm start does not fit: missing={missing} unexpected={unexpected}")
        print(f"warm start from {args.warm_start}; new: {sorted({k.split('.')[2] for k in new})}")
    loaded: set[Path] = set()
    train: list[dict] = []
    load_new_caches(args.train, loaded, train)
    evals = {p.stem: torch.load(p) for p in args.eval}
    print(
        f"train {len(train)} utterances, {sum(i['duration'] for i in train) / 3600:.2f} h; "
        f"trainable {sum(p.numel() for p in params) / 1e6:.2f} M"
    )
    model.train()
    model.encoder.eval()
    log = (args.work / "log.jsonl").open("a")
    if args.eval_first:
        record = {"step": step, "seen_h": round(seen_s / 3600, 3), "wall_s": 0.0}
        for name, items in evals.items():
            record[f"wer_{name}"] = round(evaluate(model, items)[0], 4)
        print(f"before training: {record}")
        log.write(json.dumps(record) + "\n")
    start, last_save = time.time(), time.time()
    rng = random.Random(step)
    bar = tqdm(initial=step, total=args.steps, desc="train")
    done = False
    while not done:
        if load_new_caches(args.train, loaded, train):
            tqdm.write(f"train now {len(train)} utterances, {sum(i['duration'] for i in train) / 3600:.2f} h")
        for idx in make_batches(train, args.batch_frames, rng):
            x, lens, y, tlens = collate(train, idx, model.tokenizer, args.device)
            time_frac = (time.time() - start) / (args.minutes * 60) if args.time_schedule else 0.0
            for g in opt.param_groups:
                g["lr"] = lr_at(step, args.lr, args.warmup, args.steps, time_frac)
            loss = batch_loss(model, x, lens, y, tlens)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            seen_s += sum(train[i]["duration"] for i in idx)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", h=f"{seen_s / 3600:.1f}")
            record = {
                "step": step,
                "loss": round(loss.item(), 4),
                "seen_h": round(seen_s / 3600, 3),
                "wall_s": round(time.time() - start, 1),
            }
            if step % args.eval_every == 0:
                for name, items in evals.items():
                    wer, sample = evaluate(model, items)
                    record[f"wer_{name}"] = round(wer, 4)
                    tqdm.write(f"step {step} {name} WER {wer:.3f} | {sample[0]!r} <- {sample[3]!r}")
            if step % 10 == 0 or len(record) > 4:
                log.write(json.dumps(record) + "\n")
                log.flush()
            stop = time.time() - start > args.minutes * 60 or step >= args.steps
            if time.time() - last_save > args.save_every_s or stop:
                tmp = ckpt_path.with_suffix(".tmp")
                model.encoder.half_precision_state = False  # full precision in the resume checkpoint
                torch.save(
                    {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "seen_s": seen_s},
                    tmp,
                )
                model.encoder.half_precision_state = True
                tmp.replace(ckpt_path)
                last_save = time.time()
            if stop:
                done = True
                break
    bar.close()
    print(f"stopped at step {step}; checkpoint {ckpt_path}")


if __name__ == "__main__":
    main()
