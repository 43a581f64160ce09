"""Optimizer-Aware Kernel (OAK): the eNTK with an estimated Adam preconditioner [B14].

Adam with beta1 -> 0 and a frozen second moment v is preconditioned gradient descent,
theta' = -P grad L with P = diag(1 / (sqrt(v) + eps)). In function space (L = n^-1 sum_j l(f_j, y_j)):

    df(x)/dt = -n^-1 sum_j K_P(x, x_j) dl/df_j,      K_OAK(x, x') = grad f(x)^T P grad f(x')      (symmetric PSD)

The preconditioner is estimated before fine-tuning: v_hat = mean over B warm-up minibatches of the squared
fine-tuning gradient at the pretrained theta_0 (no update), or read from an Adam optimiser's bias-corrected
second moment. Baselines: the plain eNTK (P = I) and the asymmetric SignGD kernel of Malladi et al. (2023),
K_A(x, x') = grad f(x)^T sign(grad f(x')), which describes Adam's sign-like early phase.

Kernel prediction of fine-tuning (discrete, same learning rate and step count as the network):

    mu_k = beta1 mu_{k-1} + (1 - beta1) r_k,   f_{k+1} = f_k - (lr / n) K mu_k / (1 - beta1^(k+1)),   r = dl/df   (k = 0, 1, ...)

(beta1 = 0: kernel gradient descent; beta1 > 0 carries Adam's bias-corrected first moment into function space,
which is exact for a model linear in theta with frozen P). Kernel-regime error on held-out points:
E(T) = |f_T^net - f_T^kernel| / |f_T^net - f_0|.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Literal, Sequence

import torch
from torch import nn

from icml26.harness import validate as chk
from icml26.testbeds.ntk import empirical_ntk, jacobian, trainable_parameters

__all__ = ["estimate_preconditioner", "optimizer_aware_kernel", "asymmetric_signgd_kernel", "kernel_finetune_predict",
           "matched_learning_rate", "kernel_regime_error"]


# helper functions

def _flat_grad(model: nn.Module, loss: torch.Tensor) -> torch.Tensor:
    params = list(trainable_parameters(model).values())
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])


def _tensor(name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    chk.non_empty(name, t)
    return chk.finite(name, t)


def _module(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _residual(f: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    if loss == "mse":
        return f - y
    if loss == "ce":
        if f.ndim == 1 or f.shape[1] == 1:     # binary logistic, y in {0, 1}
            return torch.sigmoid(f) - y.reshape(f.shape)
        return torch.softmax(f, dim=1) - torch.nn.functional.one_hot(y.long(), f.shape[1]).to(f.dtype)
    raise ValueError(f"unknown loss {loss!r}; use 'mse' or 'ce'")


# preconditioner

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def estimate_preconditioner(model: nn.Module, loss_fn: LossFn | None = None,
                            batches: Iterable[tuple[torch.Tensor, torch.Tensor]] | None = None, *,
                            n_batches: int | None = None, eps: float = 1e-8,
                            from_optimizer: torch.optim.Optimizer | None = None) -> torch.Tensor:
    """Flat diagonal P = 1 / (sqrt(v_hat) + eps) over the trainable parameters (``named_parameters`` order).

    - warm-up (default): v_hat = mean over the first ``n_batches`` of ``batches`` of (grad loss_fn(model(X), y))^2
      at the current parameters; nothing is updated.
    - ``from_optimizer``: v_hat = Adam/AdamW's ``exp_avg_sq / (1 - beta2^t)`` (bias-corrected) from its state.
    """
    _module(model)
    eps = chk.non_negative("eps", eps)
    params = trainable_parameters(model)
    if from_optimizer is not None:
        if not isinstance(from_optimizer, (torch.optim.Adam, torch.optim.AdamW)):
            raise TypeError(f"from_optimizer must be torch.optim.Adam or AdamW, got {type(from_optimizer).__name__}")
        beta2 = from_optimizer.param_groups[0]["betas"][1]
        vs = []
        for p in params.values():
            st = from_optimizer.state.get(p)
            if not st or "exp_avg_sq" not in st:
                raise ValueError("the optimiser has no second-moment state for some trainable parameter: take at "
                                 "least one step with it first (or use the warm-up estimate)")
            t = float(st["step"])
            vs.append((st["exp_avg_sq"] / (1 - beta2 ** t)).reshape(-1))
        v = torch.cat(vs).detach()
        return 1.0 / (v.sqrt() + eps)
    if loss_fn is None or batches is None:
        raise ValueError("pass loss_fn and batches (warm-up estimate) or from_optimizer")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable (outputs, targets) -> scalar loss, got {type(loss_fn).__name__}")
    if n_batches is not None:
        n_batches = chk.positive_int("n_batches", n_batches)
    acc, count = None, 0
    for X, y in batches:
        if n_batches is not None and count >= n_batches:
            break
        _tensor(f"batch {count} inputs", X)
        g = _flat_grad(model, loss_fn(model(X), y)).detach()
        acc = g * g if acc is None else acc + g * g
        count += 1
    if count == 0:
        raise ValueError("batches yielded no (X, y) pairs")
    if not torch.isfinite(acc).all():
        raise ValueError("a warm-up gradient was NaN or inf")
    return 1.0 / ((acc / count).sqrt() + eps)


# kernels

def optimizer_aware_kernel(model: nn.Module, X1: torch.Tensor, X2: torch.Tensor | None = None, *,
                           precond: torch.Tensor | None = None, full: bool | None = None) -> torch.Tensor:
    """K_OAK(X1, X2) = J1 diag(precond) J2^T; ``precond=None`` gives the plain eNTK.

    For a model with C outputs the exact function-space dynamics need the full kernel, the (n1 C, n2 C) matrix of
    C x C blocks K_(ic),(jc') = grad f_c(x_i)^T P grad f_c'(x_j) (sample-major: row i * C + c). ``full=None``
    (default) returns that for C > 1 and the (n1, n2) kernel for C = 1; ``full=False`` forces the output-summed
    (traced) n1 x n2 kernel, sum_c of the diagonal blocks, which is *not* the dynamics of a multi-output model.
    """
    _module(model)
    if full is None:
        full = _n_outputs(model, X1) > 1
    return empirical_ntk(model, X1, X2, precond=precond, trace_outputs=not full)


def asymmetric_signgd_kernel(model: nn.Module, X1: torch.Tensor, X2: torch.Tensor | None = None, *,
                             full: bool | None = None) -> torch.Tensor:
    """Malladi et al. (2023) A-SignGD kernel K(x, x') = grad f(x)^T sign(grad f(x')).

    ``full`` as in :func:`optimizer_aware_kernel`: for C > 1 outputs the (n1 C, n2 C) block kernel (default), or the
    output-summed n1 x n2 one with ``full=False``.
    """
    _module(model)
    _tensor("X1", X1)
    if X2 is not None:
        _tensor("X2", X2)
    J1 = jacobian(model, X1)
    J2 = J1 if X2 is None else jacobian(model, X2)
    if full is None:
        full = J1.shape[1] > 1
    if not full:
        return torch.einsum("icp,jcp->ij", J1, torch.sign(J2))
    return J1.reshape(-1, J1.shape[2]) @ torch.sign(J2).reshape(-1, J2.shape[2]).T


def _n_outputs(model: nn.Module, X: torch.Tensor) -> int:
    if not isinstance(X, torch.Tensor) or X.ndim < 1 or X.shape[0] == 0:
        raise ValueError("X1 must be a tensor with a leading batch dimension holding at least one input")
    p = next(iter(trainable_parameters(model).values()))
    with torch.no_grad():
        out = model(X[:1].to(p.dtype) if X.is_floating_point() else X[:1])
    return int(out.numel())


# kernel dynamics

def kernel_finetune_predict(K_train: torch.Tensor, K_test_train: torch.Tensor, f0_train: torch.Tensor,
                            f0_test: torch.Tensor, y: torch.Tensor, lr: float, steps: int, *,
                            loss: Literal["mse", "ce"] = "mse", beta1: float = 0.0,
                            checkpoints: Sequence[int] | None = None
                            ) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """Discrete kernel dynamics f_{k+1} = f_k - (lr/n) K mu_k / (1 - beta1^(k+1)) (k = 0, 1, ...) on train and test points.

    Loss convention: L = n^-1 sum_j l(f_j, y_j) with l = |f_j - y_j|^2 / 2 (``"mse"``) or the softmax / logistic
    cross-entropy (``"ce"``), so r_j = dl/df_j and one gradient step on theta moves f_i by
    -(lr/n) sum_j K_(i,j) r_j, where K_(i,j) is the C x C block grad f(x_i)^T P grad f(x_j).

    - One output (f0 of shape (n,) or (n, 1)): ``K_train`` (n, n), ``K_test_train`` (m, n).
    - C > 1 outputs (f0 of shape (n, C)): the full block kernels ``K_train`` (n C, n C) and ``K_test_train``
      (m C, n C), sample-major (row i * C + c), as returned by ``optimizer_aware_kernel`` /
      ``empirical_ntk(..., trace_outputs=False)``. An output-summed (n, n) kernel is refused for C > 1: applied to
      every output column it ignores the cross-output blocks and counts each head's gradient C times (a 3-output
      linear layer's SGD step comes out 3x too large), and no rescaling fixes it when P differs per head.

    Returns {step: (f_train, f_test)} at ``checkpoints`` (default: the last step), shaped like ``f0_train`` /
    ``f0_test``. For f linear in theta with frozen P this is exactly preconditioned heavy-ball with Adam's
    bias-corrected first moment.
    """
    for name, t in (("K_train", K_train), ("K_test_train", K_test_train), ("f0_train", f0_train),
                    ("f0_test", f0_test), ("y", y)):
        _tensor(name, t)
    if f0_train.ndim not in (1, 2) or f0_test.ndim != f0_train.ndim:
        raise ValueError(f"f0_train must be (n,) or (n, C) and f0_test the same rank, got {tuple(f0_train.shape)} "
                         f"and {tuple(f0_test.shape)}")
    n = f0_train.shape[0]
    C = 1 if f0_train.ndim == 1 else f0_train.shape[1]
    if f0_test.ndim == 2 and f0_test.shape[1] != C:
        raise ValueError(f"f0_test has {f0_test.shape[1]} outputs, f0_train {C}")
    m = f0_test.shape[0]
    if C > 1 and K_train.shape == (n, n):
        raise ValueError(f"f0_train has C = {C} outputs but K_train is the output-summed ({n}, {n}) kernel; the "
                         f"dynamics of a multi-output model need the full ({n * C}, {n * C}) block kernel: compute it "
                         "with optimizer_aware_kernel(model, X1, X2) (full for C > 1) or "
                         "empirical_ntk(..., trace_outputs=False)")
    if K_train.shape != (n * C, n * C):
        raise ValueError(f"K_train must be ({n * C}, {n * C}) for n = {n} points with C = {C} outputs, got "
                         f"{tuple(K_train.shape)}")
    if K_test_train.shape != (m * C, n * C):
        raise ValueError(f"K_test_train must be ({m * C}, {n * C}) for m = {m} test points, got "
                         f"{tuple(K_test_train.shape)}")
    if y.shape[0] != n:
        raise ValueError(f"y must have n = {n} rows, got {tuple(y.shape)}")
    if loss == "mse":
        if y.numel() != n * C:
            raise ValueError(f"loss='mse' needs y shaped like f0_train {tuple(f0_train.shape)}, got {tuple(y.shape)}")
        y = y.reshape(f0_train.shape)
    elif y.shape != (n,):
        raise ValueError(f"loss='ce' needs y as (n,) labels (class indices for C > 1, 0/1 for one output), got "
                         f"{tuple(y.shape)}")
    lr = chk.positive("lr", lr)
    steps = chk.non_negative_int("steps", steps)
    beta1 = chk.in_range("beta1", beta1, 0.0, 1.0, high_open=True)
    if loss not in ("mse", "ce"):
        raise ValueError(f"unknown loss {loss!r}; use 'mse' or 'ce'")
    if checkpoints is not None:
        checkpoints = [chk.non_negative_int("checkpoints[]", c) for c in checkpoints]
    checkpoints = sorted(set(checkpoints)) if checkpoints is not None else [steps]
    if any(c < 0 or c > steps for c in checkpoints):
        raise ValueError(f"checkpoints must lie in [0, steps={steps}]")
    dt = K_train.dtype
    f_tr, f_te = f0_train.to(dt).clone(), f0_test.to(dt).clone()
    y = y.to(dt)
    mu = torch.zeros_like(f_tr)
    out = {}
    for k in range(steps + 1):
        if k in checkpoints:
            out[k] = (f_tr.clone(), f_te.clone())
        if k == steps:
            break
        r = _residual(f_tr, y, loss)
        mu = beta1 * mu + (1 - beta1) * r
        m_hat = (mu / (1 - beta1 ** (k + 1))).reshape(-1)          # sample-major (n C,)
        f_tr = f_tr - (lr / n) * (K_train @ m_hat).reshape(f_tr.shape)
        f_te = f_te - (lr / n) * (K_test_train @ m_hat).reshape(f_te.shape)
    return out


def matched_learning_rate(K_train: torch.Tensor, f0_train: torch.Tensor, y: torch.Tensor, target: float, *,
                          match: Literal["loss", "displacement"] = "displacement") -> float:
    """Learning rate at which one kernel-GD step from f0 matches a target (MSE, L = |f - y|^2 / (2n), r = f0 - y).

    - ``match="displacement"``: |f1 - f0| = lr |K r| / n equals ``target`` (the network's first-step change of
      its train outputs). Always defined.
    - ``match="loss"``: L0 - L(lr) equals ``target``, with L(lr) = L0 - lr r^T K r / n^2 + lr^2 |K r|^2 / (2 n^3)
      (smaller root; the minimiser if out of reach). Undefined when the network's first step raises the loss,
      which Adam's sign-like first step often does near a pretrained minimum.
    Used to give the plain eNTK and A-SignGD a fair learning rate [B14 spec]. For C > 1 outputs pass the full
    (n C, n C) block kernel (sample-major), as for :func:`kernel_finetune_predict`.
    """
    for name, t in (("K_train", K_train), ("f0_train", f0_train), ("y", y)):
        _tensor(name, t)
    target = chk.positive("target", target)
    match = chk.one_of("match", match, ("loss", "displacement"))
    n = f0_train.shape[0]
    C = 1 if f0_train.ndim == 1 else int(f0_train[0].numel())
    if K_train.shape != (n * C, n * C):
        raise ValueError(f"K_train must be ({n * C}, {n * C}) for n = {n} points with C = {C} outputs (the full "
                         f"block kernel for C > 1), got {tuple(K_train.shape)}")
    if y.numel() != n * C:
        raise ValueError(f"y must be shaped like f0_train {tuple(f0_train.shape)}, got {tuple(y.shape)}")
    r = (f0_train.reshape(-1) - y.reshape(-1)).to(K_train.dtype)
    Kr = K_train @ r
    if match == "displacement":
        norm = float(Kr.norm())
        if norm == 0.0:
            raise ValueError("K r = 0: the kernel does not move the outputs")
        return target * n / norm
    if match != "loss":
        raise ValueError(f"unknown match {match!r}; use 'displacement' or 'loss'")
    b = float((r * Kr).sum()) / n ** 2
    a = float((Kr * Kr).sum()) / (2 * n ** 3)
    if b <= 0 or a <= 0:
        raise ValueError("the kernel does not decrease the loss at f0 (r^T K r <= 0)")
    disc = b * b - 4 * a * target
    return b / (2 * a) if disc < 0 else (b - math.sqrt(disc)) / (2 * a)


def kernel_regime_error(f_net: torch.Tensor, f_kernel: torch.Tensor, f_init: torch.Tensor) -> float:
    """E = |f_net - f_kernel| / |f_net - f_init| (0: the kernel predicts fine-tuning exactly).

    A kernel prediction that diverged (NaN/inf in ``f_kernel``) gives E = inf; ``f_net`` and ``f_init`` must be
    finite."""
    _tensor("f_net", f_net)
    _tensor("f_init", f_init)
    if not isinstance(f_kernel, torch.Tensor):
        raise TypeError(f"f_kernel must be a torch.Tensor, got {type(f_kernel).__name__}")
    if not (f_net.shape == f_kernel.shape == f_init.shape):
        raise ValueError(f"shapes differ: {tuple(f_net.shape)}, {tuple(f_kernel.shape)}, {tuple(f_init.shape)}")
    den = float((f_net - f_init).double().norm())
    if den == 0.0:
        raise ValueError("the network did not move (f_net == f_init): the relative error is undefined")
    if not bool(torch.isfinite(f_kernel).all()):
        return math.inf
    return float((f_net - f_kernel).double().norm()) / den
