"""Sharpness-Aware Minimization as a wrapper around any torch optimizer [B19].

SAM (Foret et al. 2021), as used for pretraining in [B19]:

    g   = grad L(theta)
    eps = rho * g / (||g||_2 + 1e-12)                       (first_step: climb to the worst nearby point)
    theta <- base_optimizer_step(theta, grad L(theta + eps))  (second_step: go back to theta, step with that grad)

Adaptive SAM (ASAM, Kwon et al. 2021) scales the ball by |theta|: eps = rho * theta^2 * g / ||theta * g||.
The gradient norm is taken over every parameter of every group; each group's share is scaled by its own rho.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
from torch.optim import Optimizer

NORM_EPS = 1e-12  # added to ||g|| (the paper's equation); a module constant so it never shadows AdamW's eps

# helper functions


def _check_positive(name: str, value: object, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}; {hint}")


# main class


class SAM(Optimizer):
    """SAM around a base optimizer (AdamW by default) [B19].

    Either hand ``step`` a closure that re-evaluates the loss and calls ``backward`` (it is called twice)::

        opt = SAM(model.parameters(), torch.optim.AdamW, rho=0.05, lr=1e-3, weight_decay=0.1)
        def closure():
            loss = F.cross_entropy(model(x), y); loss.backward(); return loss
        loss = opt.step(closure)          # returns the loss at the unperturbed theta

    or drive the two halves yourself: ``loss.backward(); opt.first_step(zero_grad=True);
    loss_fn(model(x), y).backward(); opt.second_step(zero_grad=True)``.

    ``param_groups`` is shared with the base optimizer, so ``torch.optim.lr_scheduler`` schedules (and
    :func:`wsd_schedule`) drive SAM directly. ``state_dict`` is the base optimizer's.

    Args:
        params: parameters or parameter groups (a group may carry its own ``rho``).
        base_optimizer_cls: a ``torch.optim.Optimizer`` subclass, built on the same groups with ``base_kwargs``.
        rho: radius of the perturbation ball (> 0). [B19] uses 0.05 here (our choice).
        adaptive: ASAM's parameter-scaled ball.
        **base_kwargs: passed to ``base_optimizer_cls`` (``lr``, ``weight_decay``, ``betas``, ...).
    """

    def __init__(self, params: Iterable, base_optimizer_cls: type[Optimizer] = torch.optim.AdamW, *,
                 rho: float = 0.05, adaptive: bool = False, **base_kwargs) -> None:
        if not (isinstance(base_optimizer_cls, type) and issubclass(base_optimizer_cls, Optimizer)):
            raise TypeError("base_optimizer_cls must be a torch.optim.Optimizer subclass such as torch.optim.AdamW, "
                            f"got {base_optimizer_cls!r}")
        _check_positive("rho", rho, "use e.g. rho=0.05 (rho=0 is plain base_optimizer_cls: use it directly)")
        if "lr" in base_kwargs:
            _check_positive("lr", base_kwargs["lr"], "pass a positive learning rate such as lr=1e-3")
        params = list(params)
        if not params or all(isinstance(g, dict) and not list(g.get("params", [])) for g in params):
            raise ValueError("SAM got no parameters to optimise; pass model.parameters() of a model that has "
                             "trainable parameters")
        super().__init__(params, dict(rho=rho, adaptive=bool(adaptive), **base_kwargs))
        for group in self.param_groups:
            _check_positive("rho", group["rho"], "every parameter group needs a positive rho")
        self.base_optimizer = base_optimizer_cls(self.param_groups, **base_kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)
        for group in self.param_groups:
            lr = group.get("lr")
            if lr is not None and not isinstance(lr, torch.Tensor):
                _check_positive("lr", lr, "every parameter group needs a positive learning rate")

    @torch.no_grad()
    def _grad_norm(self) -> torch.Tensor:
        """||g||_2 over all parameters (||theta * g||_2 for adaptive groups)."""
        norms = [((p.abs() if group["adaptive"] else 1.0) * p.grad).norm(p=2)
                 for group in self.param_groups for p in group["params"] if p.grad is not None]
        if not norms:
            raise RuntimeError("SAM.first_step found no gradients; call loss.backward() before first_step()")
        device = norms[0].device
        return torch.stack([n.to(device) for n in norms]).norm(p=2)

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        """theta <- theta + eps with eps = rho * g / (||g|| + 1e-12); remembers theta for ``second_step``."""
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + NORM_EPS)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.detach().clone()
                e_w = (p * p if group["adaptive"] else 1.0) * p.grad * scale.to(p.device)
                p.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        """Return to theta and take the base optimizer's step with the gradient found at theta + eps."""
        for group in self.param_groups:
            for p in group["params"]:
                old = self.state[p].pop("old_p", None)
                if old is not None:
                    p.copy_(old)
        self.base_optimizer.step()
        self._opt_called = True  # tells an attached lr_scheduler that an optimizer step happened
        if zero_grad:
            self.zero_grad()

    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:  # type: ignore[override]
        """One SAM step: zero grads, ``closure()`` at theta, perturb, ``closure()`` at theta + eps, step.

        The closure must compute the loss, call ``backward()`` and return the loss (it need not zero grads).
        """
        if closure is None:
            raise ValueError("SAM.step needs a closure that computes the loss, calls backward() and returns the "
                             "loss (it is evaluated twice); or call first_step() and second_step() yourself")
        closure = torch.enable_grad()(closure)
        self.zero_grad()
        loss = closure()
        self.first_step(zero_grad=True)
        closure()
        self.second_step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base_optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.base_optimizer.load_state_dict(state_dict)
        self.param_groups = self.base_optimizer.param_groups
