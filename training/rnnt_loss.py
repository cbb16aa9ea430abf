"""A vectorised RNNT loss in plain PyTorch (CPU-friendly; NeMo's CPU RNNT loss loops in Python).

For each encoder frame t the forward variables of the whole label row are computed at once: within a row,
``alpha[t, u] = logaddexp(alpha[t-1, u] + blank[t-1, u], alpha[t, u-1] + emit[t, u-1])`` is a linear
recurrence in log space, solved with a cumulative sum of the emission scores and ``torch.logcumsumexp``.
So the Python loop has T iterations, each vectorised over batch and labels; autograd gives the gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor


def rnnt_loss(
    log_probs: Tensor, targets: Tensor, logit_lengths: Tensor, target_lengths: Tensor, blank: int
) -> Tensor:
    """Per-utterance negative log-likelihood.

    Args:
        log_probs: [B, T, U+1, V] log-softmax outputs of the joint.
        targets: [B, U] label ids (padding anywhere past target_lengths).
        logit_lengths: [B] valid encoder frames.
        target_lengths: [B] valid labels.
        blank: blank id.

    Returns:
        [B] losses (nats).
    """
    b, t_max, u1, _ = log_probs.shape
    blank_lp = log_probs[..., blank]  # [B, T, U+1]
    tgt = targets[:, : u1 - 1].clamp(min=0, max=log_probs.shape[-1] - 1)
    emit_lp = torch.gather(log_probs[:, :, :-1, :], 3, tgt[:, None, :, None].expand(b, t_max, u1 - 1, 1))[
        ..., 0
    ]
    zero = torch.zeros(b, t_max, 1, dtype=log_probs.dtype, device=log_probs.device)
    cum_emit = torch.cat([zero, emit_lp.cumsum(dim=2)], dim=2)  # [B, T, U+1]: sum_{j<u} emit[t, j]
    rows = [cum_emit[:, 0]]  # row t=0: only emissions from alpha[0, 0] = 0
    for t in range(1, t_max):
        from_below = rows[-1] + blank_lp[:, t - 1]
        c = cum_emit[:, t]
        rows.append(c + torch.logcumsumexp(from_below - c, dim=1))
    alphas = torch.stack(rows, dim=1)  # [B, T, U+1]
    bi = torch.arange(b, device=log_probs.device)
    t_last = (logit_lengths - 1).clamp(min=0)
    final = alphas[bi, t_last, target_lengths] + blank_lp[bi, t_last, target_lengths]
    return -final
