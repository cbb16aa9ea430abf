"""Check ``training/rnnt_loss.py`` against NeMo's RNNT loss (loss and gradients) on small random inputs.

Usage::

    python -m training.check_rnnt_loss
"""

from __future__ import annotations

import torch
from nemo.collections.asr.losses.rnnt import RNNTLoss

from training.rnnt_loss import rnnt_loss


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    b, t, u, v = 3, 9, 5, 7
    logits = torch.randn(b, t, u + 1, v, requires_grad=True)
    targets = torch.randint(0, v - 1, (b, u))
    t_len, u_len = torch.tensor([9, 6, 8]), torch.tensor([5, 2, 4])
    ours = rnnt_loss(logits.log_softmax(-1), targets, t_len, u_len, blank=v - 1)
    (g_ours,) = torch.autograd.grad(ours.sum(), logits)
    ref_logits = logits.detach().clone().requires_grad_(True)
    ref = RNNTLoss(num_classes=v - 1, reduction=None)(
        log_probs=ref_logits, targets=targets, input_lengths=t_len, target_lengths=u_len
    )
    (g_ref,) = torch.autograd.grad(ref.sum(), ref_logits)
    loss_diff, grad_diff = (ours - ref).abs().max().item(), (g_ours - g_ref).abs().max().item()
    print(f"max |loss diff| {loss_diff:.2e}, max |grad diff| {grad_diff:.2e}")
    if loss_diff > 1e-4 or grad_diff > 1e-4:
        raise SystemExit("mismatch")


if __name__ == "__main__":
    main()
