"""Optimizer-Aware Kernel (OAK): the empirical NTK with an estimated Adam preconditioner [B14].

K_OAK(x, x') = grad f(x)^T P grad f(x'), P = diag(1 / (sqrt(v_hat) + eps)), with v_hat estimated from warm-up
gradients (or read from an Adam optimiser); kernel-regime predictions of fine-tuning and their error against
the actually fine-tuned network. Baselines: the plain eNTK and Malladi et al.'s (2023) A-SignGD kernel.
"""

from icml26.testbeds.ntk import empirical_ntk

from .kernel import (
    asymmetric_signgd_kernel,
    estimate_preconditioner,
    kernel_finetune_predict,
    kernel_regime_error,
    matched_learning_rate,
    optimizer_aware_kernel,
)

__all__ = ["estimate_preconditioner", "optimizer_aware_kernel", "asymmetric_signgd_kernel", "kernel_finetune_predict",
           "matched_learning_rate", "kernel_regime_error", "empirical_ntk"]
