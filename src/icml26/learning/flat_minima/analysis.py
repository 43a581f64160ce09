"""What survives a change to the base model: forgetting, int4 round-to-nearest, Hessian sharpness [B19].

Forgetting of the pretraining task after an update theta_0 -> theta_1 (fine-tuning, or quantization):

    F = L_pre(theta_1) - L_pre(theta_0)              (held-out pretraining loss, relative to the model's own base)

Symmetric per-output-channel round-to-nearest with b bits (q_max = 2^(b-1) - 1, 7 for int4):

    s_c = max_j |W_cj| / q_max,    Q(W)_cj = s_c * clamp(round(W_cj / s_c), -q_max - 1, q_max)

so each row takes at most 2^b values and |W - Q(W)| <= s_c / 2. Sharpness is the top Hessian eigenvalue of the
loss, found by power iteration on Hessian-vector products (Pearlmutter's double backward):
v <- Hv / ||Hv||, lambda = v^T H v.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from icml26.harness import validate

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
QUANTIZED_MODULES = (nn.Linear, nn.Embedding)

# helper functions


def _check_model(model: nn.Module) -> list[nn.Parameter]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(model).__name__} has no trainable parameters; pass a model with parameters")
    return params


def _check_data(data: Sequence[torch.Tensor], name: str = "data") -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data)):
        raise TypeError(f"{name} must be a pair (inputs, targets) of tensors")
    x, y = data
    if len(x) == 0:
        raise ValueError(f"{name} is empty (0 examples); pass at least one (input, target) pair")
    if len(x) != len(y):
        raise ValueError(f"{name}: inputs have {len(x)} rows but targets have {len(y)}; they must match")
    return x, y


def _check_bits(bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 16:
        raise ValueError(f"bits must be an int in [2, 16], got {bits!r}")


# quantization


@torch.no_grad()
def rtn_quantize_tensor(weight: torch.Tensor, bits: int = 4, per_channel: bool = True) -> torch.Tensor:
    """Symmetric round-to-nearest fake quantization: one scale per output channel (row of ``weight``, over all
    other dims) if ``per_channel`` and ``weight`` has 2+ dims, else one scale for the tensor."""
    _check_bits(bits)
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point():
        raise TypeError("weight must be a floating-point tensor")
    validate.finite("weight", weight)
    qmax = 2 ** (bits - 1) - 1
    w = weight.detach()
    if per_channel and w.ndim >= 2:
        amax = w.abs().amax(dim=tuple(range(1, w.ndim)), keepdim=True)
    else:
        amax = w.abs().amax()
    scale = amax / qmax
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # all-zero rows stay zero
    return (torch.clamp(torch.round(w / safe), -qmax - 1, qmax) * safe).to(weight.dtype)


def quantize_rtn(model: nn.Module, bits: int = 4, per_channel: bool = True, inplace: bool = False) -> nn.Module:
    """int-``bits`` RTN of every ``nn.Linear`` and ``nn.Embedding`` weight (biases stay in float); the copy, or
    ``model`` itself when ``inplace``. Weights are stored de-quantized (fake quantization)."""
    _check_model(model)
    _check_bits(bits)
    targets = [m for m in model.modules() if isinstance(m, QUANTIZED_MODULES)]
    if not targets:
        raise ValueError(f"{type(model).__name__} has no nn.Linear or nn.Embedding layer to quantize")
    out = model if inplace else copy.deepcopy(model)
    with torch.no_grad():
        for m in out.modules():
            if isinstance(m, QUANTIZED_MODULES):
                m.weight.copy_(rtn_quantize_tensor(m.weight, bits, per_channel))
    return out


# loss and forgetting


@torch.no_grad()
def evaluate_loss(model: nn.Module, loss_fn: LossFn, data: Sequence[torch.Tensor], *, batch_size: int = 4096) -> float:
    """Mean of ``loss_fn(model(x), y)`` (a batch-mean loss) over ``data = (X, Y)``, in eval mode, in chunks."""
    _check_model(model)
    x, y = _check_data(data)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size], y[i:i + batch_size]
        total += float(loss_fn(model(xb), yb)) * len(xb)
    model.train(was_training)
    return total / len(x)


@dataclass(frozen=True)
class ForgettingReport:
    """Pretraining-task loss of the base and of the updated model; ``forgetting`` = their difference."""

    base_loss: float
    updated_loss: float

    @property
    def forgetting(self) -> float:
        return self.updated_loss - self.base_loss


def forgetting_report(base_model: nn.Module, updated_model: nn.Module, loss_fn: LossFn,
                      data: Sequence[torch.Tensor], *, batch_size: int = 4096) -> ForgettingReport:
    """F = L_pre(updated) - L_pre(base) on held-out pretraining ``data``; ``updated_model`` is the fine-tuned
    model or ``quantize_rtn(base_model)``."""
    return ForgettingReport(evaluate_loss(base_model, loss_fn, data, batch_size=batch_size),
                            evaluate_loss(updated_model, loss_fn, data, batch_size=batch_size))


# sharpness


def hessian_top_eig(model: nn.Module, loss_fn: LossFn, batch: Sequence[torch.Tensor], *, iters: int = 20,
                    tol: float = 1e-4, seed: int = 0) -> float:
    """Largest-magnitude eigenvalue of the Hessian of ``loss_fn(model(x), y)`` w.r.t. the trainable parameters.

    Power iteration with Hessian-vector products; stops after ``iters`` products or when the Rayleigh quotient
    changes by less than ``tol`` (relative). At a minimum this is the top (positive) eigenvalue. The model is
    evaluated in eval mode (no dropout noise) and left unchanged.
    """
    params = _check_model(model)
    x, y = _check_data(batch, "batch")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be a positive int, got {iters!r}")
    was_training = model.training
    model.eval()
    try:
        loss = loss_fn(model(x), y)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        gen = torch.Generator().manual_seed(seed)
        v = [torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device) for p in params]
        eig = float("nan")
        for _ in range(iters):
            norm = torch.sqrt(sum((t * t).sum() for t in v))
            v = [t / norm for t in v]
            hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
            new = float(sum((h * t).sum() for h, t in zip(hv, v)))
            v = [h.detach() for h in hv]
            done = abs(new - eig) <= tol * abs(new)
            eig = new
            if done:
                break
    finally:
        model.train(was_training)
    return eig
