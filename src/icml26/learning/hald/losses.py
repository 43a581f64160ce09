"""The two supervision signals of HALD [A10].

Soft phase (stored labels, KD):   L_soft = KL(p_stored || softmax(s(c(x)) / T))   (batchmean)
Hard phase (CutMix + smoothing):  y~ = (1 - eps) onehot(y) + eps / C
                                   x' = M * x + (1 - M) * x_pi,  t = lam y~ + (1 - lam) y~_pi
                                   L_hard = - sum_c t_c log softmax(s(x'))_c
lam ~ Beta(alpha, alpha) per batch; the box has side sqrt(1 - lam) and lam is corrected to the pasted area
(timm ``Mixup`` with mixup_alpha = 0, pairing each row with the flipped batch).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from icml26.harness import validate

__all__ = ["kd_loss", "smooth_one_hot", "matched_smoothing", "cutmix", "soft_cross_entropy"]


def kd_loss(student_logits: torch.Tensor, soft_labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """KLDivLoss(batchmean)(log_softmax(student / T), soft_labels) [A10]."""
    if student_logits.shape != soft_labels.shape:
        raise ValueError(f"student_logits {tuple(student_logits.shape)} and soft_labels "
                         f"{tuple(soft_labels.shape)} must have the same (batch, classes) shape")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite positive number, got {temperature}")
    validate.finite("student_logits", student_logits)
    validate.finite("soft_labels", soft_labels)
    return F.kl_div(F.log_softmax(student_logits / temperature, dim=1), soft_labels, reduction="batchmean")


def smooth_one_hot(y: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """(1 - eps) onehot + eps / C: on value 1 - eps + eps/C, off value eps/C (timm convention)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), got {smoothing}")
    num_classes = validate.positive_int("num_classes", num_classes)
    validate.indices("y", y, num_classes)  # class labels; a float 1.5 or a 12 of 10 is refused, not truncated
    off = smoothing / num_classes
    return torch.full((y.shape[0], num_classes), off).scatter_(1, y.long()[:, None], 1.0 - smoothing + off)


def matched_smoothing(num_classes: int, ref_classes: int = 1000, ref_smoothing: float = 0.8) -> float:
    """Label smoothing that gives ``num_classes`` classes the hard signal ``ref_smoothing`` gives ``ref_classes``.

    With y~ = (1 - eps) onehot + eps / C the on/off ratio is r = 1 + (1 - eps) C / eps, and the logit margin
    that minimises the soft cross-entropy is log r. Matching r to the reference setting gives

        eps_C = C / (C + r_ref - 1),    r_ref = 1 + (1 - eps_ref) C_ref / eps_ref.

    The official HALD setting (eps = 0.8 at C = 1000: on 0.2008, off 0.0008, r = 251) maps to eps = 1/26 at
    C = 10 (on 0.9654, off 0.0038); eps = 0.8 at C = 10 has r = 3.5 only (on 0.28, off 0.08). [A10]
    """
    for name, c in (("num_classes", num_classes), ("ref_classes", ref_classes)):
        if isinstance(c, bool) or not isinstance(c, int) or c < 2:
            raise ValueError(f"{name} must be an int >= 2, got {c!r}")
    if not 0.0 < ref_smoothing < 1.0:
        raise ValueError(f"ref_smoothing must be in (0, 1), got {ref_smoothing}")
    r_ref = 1.0 + (1.0 - ref_smoothing) * ref_classes / ref_smoothing
    return num_classes / (num_classes + r_ref - 1.0)


def cutmix(x: torch.Tensor, y: torch.Tensor, num_classes: int, alpha: float = 1.0, smoothing: float = 0.0,
           generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """CutMix with label smoothing, one lam per batch, rows paired with the flipped batch [A10]."""
    if x.ndim != 4 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x must be (B, C, H, W) with B = len(y); got {tuple(x.shape)} and {tuple(y.shape)}")
    if not alpha > 0:
        raise ValueError(f"cutmix alpha must be > 0, got {alpha}")
    t = smooth_one_hot(y, num_classes, smoothing).to(x.dtype)
    lam = _beta(alpha, generator)
    u = torch.rand(2, generator=generator)
    H, W = x.shape[-2:]
    cut = math.sqrt(1.0 - lam)
    ch, cw = int(H * cut), int(W * cut)
    cy, cx = int(u[0] * H), int(u[1] * W)
    y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, H)
    x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, W)
    lam = 1.0 - (y1 - y0) * (x1 - x0) / (H * W)
    xm = x.clone()
    xm[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]
    return xm, lam * t + (1.0 - lam) * t.flip(0)


def _beta(alpha: float, generator: torch.Generator | None) -> float:
    # Beta(a, a) = G1 / (G1 + G2) with Gamma(a, 1) draws from the seeded generator
    g = torch._standard_gamma(torch.full((2,), float(alpha), dtype=torch.float64), generator=generator)
    return float(g[0] / g.sum())


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """mean_b - sum_c t_bc log softmax(logits)_bc."""
    if logits.shape != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} must have the same "
                         "(batch, classes) shape")
    validate.finite("logits", logits)
    validate.finite("targets", targets)
    return -(targets * F.log_softmax(logits, dim=1)).sum(1).mean()
