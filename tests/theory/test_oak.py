"""Tests of [B14] OAK: preconditioner estimation, kernels, kernel dynamics exactness, bad input, quick run."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.testbeds.ntk import empirical_ntk, jacobian
from icml26.theory.oak import (
    asymmetric_signgd_kernel,
    estimate_preconditioner,
    kernel_finetune_predict,
    kernel_regime_error,
    matched_learning_rate,
    optimizer_aware_kernel,
)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()


def _data(n=12, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64)


def test_preconditioner_equals_adam_v_for_constant_gradients():
    torch.manual_seed(0)
    m = nn.Linear(3, 1).double()
    X, y = _data(5)
    X = X[:, :3]
    loss_fn = lambda f, yy: (f.squeeze(-1) * yy).sum()   # noqa: E731  linear in theta: constant gradient
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    for _ in range(7):
        opt.zero_grad()
        loss_fn(m(X), y).backward()
        opt.step()
    g = torch.cat([(y @ X), y.sum().reshape(1)])          # d/dw, d/db
    P_opt = estimate_preconditioner(m, from_optimizer=opt, eps=1e-8)
    P_warm = estimate_preconditioner(m, loss_fn, [(X, y)] * 3, eps=1e-8)
    expected = 1.0 / (g.abs() + 1e-8)
    assert torch.allclose(P_opt, expected, rtol=1e-6)
    assert torch.allclose(P_warm, expected, rtol=1e-12)


def test_warmup_average_of_squares():
    m = _mlp()
    X, y = _data(12)
    loss_fn = lambda f, yy: 0.5 * ((f.squeeze(-1) - yy) ** 2).mean()  # noqa: E731
    batches = [(X[:6], y[:6]), (X[6:], y[6:]), (X, y)]
    P = estimate_preconditioner(m, loss_fn, batches, n_batches=2, eps=0.0)
    gs = []
    for Xb, yb in batches[:2]:
        grads = torch.autograd.grad(loss_fn(m(Xb), yb), list(m.parameters()))
        gs.append(torch.cat([t.reshape(-1) for t in grads]))
    v = (gs[0] ** 2 + gs[1] ** 2) / 2
    assert torch.allclose(P, 1 / v.sqrt(), rtol=1e-10)


def test_oak_kernel_symmetric_psd_and_formula():
    m = _mlp()
    X, _ = _data(10)
    P = torch.rand(sum(p.numel() for p in m.parameters()), generator=torch.Generator().manual_seed(0),
                   dtype=torch.float64)
    K = optimizer_aware_kernel(m, X, precond=P)
    assert torch.allclose(K, K.T, atol=1e-12)
    assert torch.linalg.eigvalsh(K).min() > -1e-10
    J = jacobian(m, X)[:, 0]
    assert torch.allclose(K, J @ torch.diag(P) @ J.T, atol=1e-12)
    assert torch.allclose(optimizer_aware_kernel(m, X), empirical_ntk(m, X), atol=1e-12)


def test_signgd_kernel_two_parameter_toy():
    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([0.3, -0.7], dtype=torch.float64))

        def forward(self, x):
            return (self.w[0] * x + self.w[1] * x ** 2).reshape(-1, 1)
    x = torch.tensor([-2.0, 0.5, 1.5], dtype=torch.float64)
    K = asymmetric_signgd_kernel(Toy(), x)
    expected = x[:, None] * torch.sign(x)[None, :] + (x ** 2)[:, None] * torch.sign(x ** 2)[None, :]
    assert torch.allclose(K, expected, atol=1e-12)


def test_kernel_dynamics_exact_for_linear_model_with_momentum():
    """For f linear in theta and frozen P, the kernel iteration equals preconditioned heavy-ball with Adam's
    bias-corrected first moment, run in parameter space."""
    g = torch.Generator().manual_seed(0)
    n, m_test, p = 15, 6, 8
    Phi = torch.randn(n + m_test, p, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    P = torch.rand(p, generator=g, dtype=torch.float64) + 0.1
    theta = torch.zeros(p, dtype=torch.float64)
    lr, beta1, T = 0.05, 0.9, 30
    m_ = torch.zeros(p, dtype=torch.float64)
    for k in range(T):
        grad = Phi[:n].T @ (Phi[:n] @ theta - y) / n
        m_ = beta1 * m_ + (1 - beta1) * grad
        theta = theta - lr * P * m_ / (1 - beta1 ** (k + 1))
    K = Phi @ torch.diag(P) @ Phi[:n].T
    pred = kernel_finetune_predict(K[:n], K[n:], torch.zeros(n, dtype=torch.float64),
                                   torch.zeros(m_test, dtype=torch.float64), y, lr, T, beta1=beta1)
    f_tr, f_te = pred[T]
    assert torch.allclose(f_tr, Phi[:n] @ theta, atol=1e-12)
    assert torch.allclose(f_te, Phi[n:] @ theta, atol=1e-12)


def _three_output_linear(seed=0):
    torch.manual_seed(seed)
    return nn.Linear(4, 3).double()


@pytest.mark.parametrize("loss", ["mse", "ce"])
@pytest.mark.parametrize("preconditioned", [False, True])
def test_multi_output_linear_one_sgd_step_exact(loss, preconditioned):
    """[issue 31] a 3-output nn.Linear: one (preconditioned) SGD step on the network equals one kernel step with the
    full (nC x nC) kernel, to rounding. The old output-summed kernel applied per column was 3x too large (error
    ~0.46); it is now refused."""
    model = _three_output_linear()
    n, m, C, lr = 10, 5, 3, 0.7
    g = torch.Generator().manual_seed(3)
    X = torch.randn(n + m, 4, generator=g, dtype=torch.float64)
    y = (torch.randn(n, C, generator=g, dtype=torch.float64) if loss == "mse"
         else torch.randint(0, C, (n,), generator=g))
    n_par = sum(p.numel() for p in model.parameters())
    # a preconditioner that differs per head (so no 1/C rescaling of the traced kernel could fix it)
    P = (torch.rand(n_par, generator=g, dtype=torch.float64) * 3 + 0.1) if preconditioned else None
    K = optimizer_aware_kernel(model, X, X[:n], precond=P)
    assert K.shape == ((n + m) * C, n * C)
    with torch.no_grad():
        f0 = model(X)
    pred = kernel_finetune_predict(K[: n * C], K[n * C:], f0[:n], f0[n:], y, lr, 1, loss=loss)[1]
    # the exact SGD step, L = n^-1 sum_j l(f_j, y_j)
    out = model(X[:n])
    L = (0.5 * ((out - y) ** 2).sum(1).mean() if loss == "mse"
         else torch.nn.functional.cross_entropy(out, y))
    grads = torch.autograd.grad(L, list(model.parameters()))
    with torch.no_grad():
        flat = torch.cat([gr.reshape(-1) for gr in grads])
        step = lr * (flat if P is None else P * flat)
        i = 0
        for p in model.parameters():
            p -= step[i:i + p.numel()].reshape(p.shape)
            i += p.numel()
        f1 = model(X)
    assert pred[0].shape == (n, C) and pred[1].shape == (m, C)
    assert torch.allclose(pred[0], f1[:n], atol=1e-12)
    assert torch.allclose(pred[1], f1[n:], atol=1e-12)
    # the output-summed kernel is refused with a message naming the full kernel
    Kt = optimizer_aware_kernel(model, X, X[:n], precond=P, full=False)
    assert Kt.shape == (n + m, n)
    with pytest.raises(ValueError, match="full"):
        kernel_finetune_predict(Kt[:n], Kt[n:], f0[:n], f0[n:], y, lr, 1, loss=loss)
    # and it was wrong: the old per-column use of the traced kernel misses the exact step by far more than rounding
    r = (f0[:n] - y) if loss == "mse" else torch.softmax(f0[:n], 1) - torch.nn.functional.one_hot(y, C).double()
    old = f0[:n] - (lr / n) * Kt[:n] @ r
    assert float((old - f1[:n]).norm() / (f1[:n] - f0[:n]).norm()) > 0.3


def test_multi_output_adam_like_dynamics_exact_many_steps():
    """Full block kernel + momentum: T steps of preconditioned heavy-ball on a 3-output linear layer, exactly."""
    model = _three_output_linear(1)
    n, C, lr, beta1, T = 8, 3, 0.2, 0.9, 25
    g = torch.Generator().manual_seed(5)
    X = torch.randn(n, 4, generator=g, dtype=torch.float64)
    y = torch.randn(n, C, generator=g, dtype=torch.float64)
    P = torch.rand(sum(p.numel() for p in model.parameters()), generator=g, dtype=torch.float64) + 0.2
    K = optimizer_aware_kernel(model, X, precond=P)
    with torch.no_grad():
        f0 = model(X)
    pred = kernel_finetune_predict(K, K[:C], f0, f0[:1], y, lr, T, beta1=beta1)[T][0]
    params = list(model.parameters())
    mom = [torch.zeros_like(p) for p in params]
    Ps, i = [], 0
    for p in params:
        Ps.append(P[i:i + p.numel()].reshape(p.shape))
        i += p.numel()
    for k in range(T):
        L = 0.5 * ((model(X) - y) ** 2).sum(1).mean()
        grads = torch.autograd.grad(L, params)
        with torch.no_grad():
            for p, gr, mo, pp in zip(params, grads, mom, Ps):
                mo.mul_(beta1).add_((1 - beta1) * gr)
                p -= lr * pp * mo / (1 - beta1 ** (k + 1))
    with torch.no_grad():
        assert torch.allclose(pred, model(X), atol=1e-10)


def test_signgd_full_kernel_blocks_trace_to_summed():
    model = _three_output_linear(2)
    X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    Kf = asymmetric_signgd_kernel(model, X)
    Kt = asymmetric_signgd_kernel(model, X, full=False)
    assert Kf.shape == (18, 18) and Kt.shape == (6, 6)
    blocks = Kf.reshape(6, 3, 6, 3)
    assert torch.allclose(torch.einsum("icjc->ij", blocks), Kt, atol=1e-12)


def test_multi_output_matched_learning_rate_uses_full_kernel():
    model = _three_output_linear(3)
    X = torch.randn(7, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y = torch.randn(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    K = optimizer_aware_kernel(model, X)
    with torch.no_grad():
        f0 = model(X)
    lr = matched_learning_rate(K, f0, y, 0.3)
    f1 = kernel_finetune_predict(K, K[:3], f0, f0[:1], y, lr, 1)[1][0]
    assert float((f1 - f0).norm()) == pytest.approx(0.3, rel=1e-10)
    with pytest.raises(ValueError, match="full"):
        matched_learning_rate(optimizer_aware_kernel(model, X, full=False), f0, y, 0.3)


def test_kernel_gd_closed_form():
    n, lam, lr, T = 5, 2.0, 0.3, 7
    K = lam * torch.eye(n, dtype=torch.float64)
    y = torch.arange(n, dtype=torch.float64)
    f0 = torch.zeros(n, dtype=torch.float64)
    out = kernel_finetune_predict(K, K[:2], f0, f0[:2], y, lr, T, checkpoints=(0, 3, T))
    assert set(out) == {0, 3, T}
    expected = y + (1 - lr * lam / n) ** T * (f0 - y)
    assert torch.allclose(out[T][0], expected, atol=1e-12)


def test_matched_learning_rate():
    m = _mlp()
    X, y = _data(10)
    K = empirical_ntk(m, X)
    with torch.no_grad():
        f0 = m(X).squeeze(-1)
    r = f0 - y
    lr = matched_learning_rate(K, f0, y, 0.4)
    f1 = kernel_finetune_predict(K, K[:1], f0, f0[:1], y, lr, 1)[1][0]
    assert float((f1 - f0).norm()) == pytest.approx(0.4, rel=1e-10)
    L = lambda f: 0.5 * float(((f - y) ** 2).mean())  # noqa: E731
    drop = 0.5 * (L(f0) - L(f0 - 1e-6 * K @ r))  # a reachable decrease
    lr2 = matched_learning_rate(K, f0, y, drop, match="loss")
    f1 = kernel_finetune_predict(K, K[:1], f0, f0[:1], y, lr2, 1)[1][0]
    assert L(f0) - L(f1) == pytest.approx(drop, rel=1e-8)


def test_kernel_regime_error():
    a, b, c = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), torch.tensor([0.0, 0.0])
    assert kernel_regime_error(a, a, c) == 0.0
    assert kernel_regime_error(a, b, c) == pytest.approx(0.5 / math.sqrt(5))
    with pytest.raises(ValueError, match="did not move"):
        kernel_regime_error(c, b, c)


def test_bad_inputs():
    m = _mlp()
    X, y = _data(6)
    K = empirical_ntk(m, X)
    f0 = torch.zeros(6, dtype=torch.float64)
    with pytest.raises(ValueError, match="lr"):
        kernel_finetune_predict(K, K, f0, f0, y, -1.0, 3)
    with pytest.raises(ValueError, match="steps"):
        kernel_finetune_predict(K, K, f0, f0, y, 0.1, -2)
    with pytest.raises(ValueError, match="beta1"):
        kernel_finetune_predict(K, K, f0, f0, y, 0.1, 3, beta1=1.0)
    with pytest.raises(ValueError, match="unknown loss"):
        kernel_finetune_predict(K, K, f0, f0, y, 0.1, 3, loss="hinge")
    with pytest.raises(ValueError, match="shaped like"):
        kernel_finetune_predict(K, K, f0, f0, y[:, None].repeat(1, 2), 0.1, 3)
    with pytest.raises(TypeError, match="K_train"):
        kernel_finetune_predict(K.numpy(), K, f0, f0, y, 0.1, 3)
    with pytest.raises(ValueError, match="eps"):
        estimate_preconditioner(m, from_optimizer=torch.optim.Adam(m.parameters()), eps=-1.0)
    with pytest.raises(TypeError, match="Adam"):
        estimate_preconditioner(m, from_optimizer=torch.optim.SGD(m.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="second-moment state"):
        estimate_preconditioner(m, from_optimizer=torch.optim.Adam(m.parameters()))
    with pytest.raises(ValueError, match="no"):
        estimate_preconditioner(m, lambda f, t: f.sum(), [])
    with pytest.raises(ValueError, match="target"):
        matched_learning_rate(K, f0, y, -0.1)
    frozen = _mlp().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        optimizer_aware_kernel(frozen, X)
    with pytest.raises(ValueError, match="precond"):
        optimizer_aware_kernel(m, X, precond=torch.ones(3, dtype=torch.float64))


def test_quick_reproduction_structure():
    from icml26.theory.oak.reproduce import KERNELS, VARIANTS, reproduce
    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) == 5 and len(out.checks) == 2
    assert all(c.falsifier for c in claims)
    first = claims[0]   # the strongest of eNTK / A-SignGD decides, with a shuffled-P control
    assert set(first.baselines) == {"eNTK (lr matched)", "A-SignGD (lr matched)"}
    assert first.reference == min(first.baselines.values())
    assert first.control is not None and math.isfinite(first.control)
    # fresh-eyes review 5: one paired instance per alpha (the T cells of one alpha share a trajectory)
    assert len(first.paired) == 3
    # fresh-eyes review 1: one learning-rate rule for every kernel, OAK included (matched, capped at 2n/lambda_max)
    for a in (0.0, 0.5, 1.0):
        assert out.metrics[f"lr_oak_alpha{a:g}"] <= out.metrics[f"lr_oak_stability_limit_alpha{a:g}"] * (1 + 1e-12)
        assert out.metrics[f"lr_oak_adam_lr_alpha{a:g}"] == pytest.approx(1e-3)
    # fresh-eyes review 3: the discrepancy trend under absolute error, controlled by the network's own movement
    absolute = claims[3]
    assert "absolute" in absolute.statement and absolute.control == out.metrics["spearman_alpha_abs_error_unmoved"]
    # fresh-eyes review 4: the accuracy claim's control is the closest of eNTK, A-SignGD and the unmoved network
    acc = claims[4]
    assert acc.bar and acc.control == min(out.metrics[f"acc_gap_{k}_T0"] for k in ("entk", "signgd", "f0"))
    assert all(c.verdict == "holds" for c in out.checks)
    assert all(math.isfinite(c.measured) for c in out.claims)
    assert all(c.verdict in ("holds", "does not hold", "inconclusive") for c in out.claims)
    assert all(math.isfinite(out.metrics[f"mean_E_{k}"]) for k in KERNELS + ("shuffled",))
    assert {f"mean_E_{k}" for k in VARIANTS} <= set(out.metrics)
    assert "kernel_regime_error" in out.figures and out.tables["kernel_regime_error"]
    assert out.tables["oak_variants"]


# argument checks on every public name (harness.validate)

def _bad_cases():
    m = _mlp()
    X, y = _data(6)
    K = empirical_ntk(m, X)
    f0 = torch.zeros(6, dtype=torch.float64)
    nanX = X.clone()
    nanX[0, 0] = float("nan")
    nanK = K.clone()
    nanK[0, 0] = float("nan")
    mse = lambda f, t: ((f.squeeze(-1) - t) ** 2).mean()  # noqa: E731
    return [
        (estimate_preconditioner, dict(model="not a model", loss_fn=mse, batches=[(X, y)]), TypeError, "nn.Module"),
        (estimate_preconditioner, dict(model=m, loss_fn=mse, batches=[(X, y)], n_batches=True), TypeError,
         "n_batches"),
        (estimate_preconditioner, dict(model=m, loss_fn=mse, batches=[(X, y)], eps=float("nan")), ValueError, "eps"),
        (estimate_preconditioner, dict(model=m, loss_fn="mse", batches=[(X, y)]), TypeError, "loss_fn"),
        (estimate_preconditioner, dict(model=m, loss_fn=mse, batches=[(nanX, y)]), ValueError, "NaN"),
        (optimizer_aware_kernel, dict(model=lambda x: x, X1=X), TypeError, "nn.Module"),
        (optimizer_aware_kernel, dict(model=m, X1=nanX), ValueError, "NaN|finite"),
        (asymmetric_signgd_kernel, dict(model=m, X1=nanX), ValueError, "X1 has"),
        (asymmetric_signgd_kernel, dict(model=m, X1=X, X2=X[:0]), ValueError, "X2"),
        (kernel_finetune_predict, dict(K_train=nanK, K_test_train=K, f0_train=f0, f0_test=f0, y=y, lr=0.1, steps=3),
         ValueError, "K_train has"),
        (kernel_finetune_predict, dict(K_train=K, K_test_train=K, f0_train=f0, f0_test=f0, y=y, lr=True, steps=3),
         TypeError, "lr"),
        (kernel_finetune_predict, dict(K_train=K, K_test_train=K, f0_train=f0, f0_test=f0, y=y, lr=0.1, steps=3.0),
         TypeError, "steps"),
        (kernel_finetune_predict, dict(K_train=K, K_test_train=K, f0_train=f0, f0_test=f0, y=y, lr=0.1, steps=3,
                                       checkpoints=[1.5]), TypeError, "checkpoints"),
        (matched_learning_rate, dict(K_train=nanK, f0_train=f0, y=y, target=0.1), ValueError, "K_train has"),
        (matched_learning_rate, dict(K_train=K, f0_train=f0, y=y, target=float("inf")), ValueError, "target"),
        (matched_learning_rate, dict(K_train=K, f0_train=f0, y=y, target=0.1, match="norm"), ValueError, "match"),
        (kernel_regime_error, dict(f_net=torch.tensor([float("nan"), 1.0]), f_kernel=torch.zeros(2),
                                   f_init=torch.zeros(2)), ValueError, "f_net has"),
        (kernel_regime_error, dict(f_net=[1.0, 2.0], f_kernel=torch.zeros(2), f_init=torch.zeros(2)), TypeError,
         "f_net"),
        (empirical_ntk, dict(model=m, X1=nanX), ValueError, "NaN|finite"),
    ]


@pytest.mark.parametrize("i", range(len(_bad_cases())))
def test_bad_inputs_are_refused(i):
    fn, kwargs, err, msg = _bad_cases()[i]
    with pytest.raises(err, match=msg):
        fn(**kwargs)


def test_every_public_name_has_a_bad_input_case():
    import icml26.theory.oak as pkg

    assert set(pkg.__all__) <= {fn.__name__ for fn, *_ in _bad_cases()}


def test_diverged_kernel_prediction_gives_infinite_error():
    f = torch.tensor([1.0, 2.0])
    assert kernel_regime_error(f, torch.tensor([float("inf"), 0.0]), torch.zeros(2)) == math.inf
