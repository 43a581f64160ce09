"""[B19] flat-minima pretraining: SAM, WSD schedules, int4 RTN, Hessian power iteration, forgetting."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.learning.flat_minima import (
    SAM,
    evaluate_loss,
    forgetting_report,
    hessian_top_eig,
    large_lr_schedule,
    quantize_rtn,
    rtn_quantize_tensor,
    short_anneal_schedule,
    wsd_multiplier,
    wsd_schedule,
)

torch.set_default_dtype(torch.float32)


def quadratic(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(n, n, generator=g, dtype=torch.float64)
    a = m @ m.T + 0.5 * torch.eye(n, dtype=torch.float64)
    theta = nn.Parameter(torch.randn(n, generator=g, dtype=torch.float64))
    return a, theta


def tiny_mlp(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(dtype)


# SAM


def test_sam_perturbation_has_norm_rho():
    model = tiny_mlp()
    x, y = torch.randn(16, 3, dtype=torch.float64), torch.randint(0, 2, (16,))
    opt = SAM(model.parameters(), torch.optim.SGD, rho=0.07, lr=0.1)
    F.cross_entropy(model(x), y).backward()
    before = [p.detach().clone() for p in model.parameters()]
    g = torch.cat([p.grad.flatten() for p in model.parameters()])
    opt.first_step()
    eps = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    assert torch.linalg.vector_norm(eps).item() == pytest.approx(0.07, rel=1e-10)
    torch.testing.assert_close(eps, 0.07 * g / g.norm(), rtol=1e-9, atol=1e-14)


def test_sam_step_on_quadratic_matches_hand_computation():
    # L = 1/2 theta^T A theta: g = A theta, eps = rho g/||g||, SAM grad = A (theta + eps); SGD step with it.
    a, theta = quadratic()
    rho, lr = 0.3, 0.05
    t0 = theta.detach().clone()
    opt = SAM([theta], torch.optim.SGD, rho=rho, lr=lr)

    def closure():
        loss = 0.5 * theta @ a @ theta
        loss.backward()
        return loss

    loss = opt.step(closure)
    g = a @ t0
    expected = t0 - lr * a @ (t0 + rho * g / (g.norm() + 1e-12))
    torch.testing.assert_close(theta.detach(), expected, rtol=1e-12, atol=1e-12)
    assert loss.item() == pytest.approx(0.5 * float(t0 @ a @ t0))


def test_sam_two_step_form_equals_closure_form_and_adamw_on_perturbed_grad():
    a, theta = quadratic(seed=1)
    a2, theta2 = quadratic(seed=1)
    ref = nn.Parameter(theta.detach().clone())
    opt = SAM([theta], torch.optim.AdamW, rho=0.1, lr=1e-2, weight_decay=0.1)
    opt2 = SAM([theta2], torch.optim.AdamW, rho=0.1, lr=1e-2, weight_decay=0.1)
    adamw = torch.optim.AdamW([ref], lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        (0.5 * theta @ a @ theta).backward()
        opt.first_step(zero_grad=True)
        (0.5 * theta @ a @ theta).backward()
        opt.second_step(zero_grad=True)
        opt2.step(lambda: (0.5 * theta2 @ a2 @ theta2).backward())
        g = a @ ref.detach()
        ref.grad = a @ (ref.detach() + 0.1 * g / (g.norm() + 1e-12))
        adamw.step()
    torch.testing.assert_close(theta.detach(), theta2.detach(), rtol=0, atol=0)
    torch.testing.assert_close(theta.detach(), ref.detach(), rtol=1e-12, atol=1e-12)


def test_sam_adaptive_perturbation():
    a, theta = quadratic(seed=2)
    t0 = theta.detach().clone()
    opt = SAM([theta], torch.optim.SGD, rho=0.2, adaptive=True, lr=0.1)
    (0.5 * theta @ a @ theta).backward()
    g = theta.grad.detach().clone()
    opt.first_step()
    expected = 0.2 * t0 ** 2 * g / (t0.abs() * g).norm()
    torch.testing.assert_close(theta.detach() - t0, expected, rtol=1e-10, atol=1e-14)
    assert ((theta.detach() - t0) / t0.abs()).norm().item() == pytest.approx(0.2, rel=1e-10)


def test_sam_with_lr_scheduler_and_state_dict():
    model = tiny_mlp()
    opt = SAM(model.parameters(), torch.optim.AdamW, lr=1e-3)
    sched = wsd_schedule(opt, 10, warmup_frac=0.2, decay_frac=0.2)
    assert opt.base_optimizer.param_groups[0]["lr"] == pytest.approx(0.5e-3)
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, 2, (8,))
    opt.step(lambda: F.cross_entropy(model(x), y).backward())
    sched.step()
    assert opt.base_optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    sd = opt.state_dict()
    opt2 = SAM(tiny_mlp(1).parameters(), torch.optim.AdamW, lr=1e-3)
    opt2.load_state_dict(sd)
    assert opt2.param_groups is opt2.base_optimizer.param_groups
    assert opt2.base_optimizer.state and opt2.param_groups[0]["lr"] == pytest.approx(1e-3)


def test_sam_deterministic_under_seed():
    def run():
        model = tiny_mlp(3)
        opt = SAM(model.parameters(), torch.optim.AdamW, lr=1e-2)
        g = torch.Generator().manual_seed(0)
        for _ in range(5):
            x, y = torch.randn(8, 3, generator=g, dtype=torch.float64), torch.randint(0, 2, (8,), generator=g)
            opt.step(lambda: F.cross_entropy(model(x), y).backward())
        return torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(run(), run())


@pytest.mark.parametrize("kw", [dict(rho=0.0), dict(rho=-0.1), dict(rho=float("nan")), dict(lr=0.0), dict(lr=-1e-3)])
def test_sam_rejects_non_positive_rho_or_lr(kw):
    with pytest.raises(ValueError, match="rho|lr"):
        SAM(tiny_mlp().parameters(), torch.optim.AdamW, **{"lr": 1e-3, **kw})


def test_sam_rejects_model_without_parameters_bad_base_and_missing_closure():
    with pytest.raises(ValueError, match="no parameters"):
        SAM(nn.ReLU().parameters(), torch.optim.AdamW, lr=1e-3)
    with pytest.raises(TypeError, match="Optimizer subclass"):
        SAM(tiny_mlp().parameters(), "adamw", lr=1e-3)
    opt = SAM(tiny_mlp().parameters(), torch.optim.AdamW, lr=1e-3)
    with pytest.raises(ValueError, match="closure"):
        opt.step()
    with pytest.raises(RuntimeError, match="backward"):
        opt.first_step()


# schedules


def test_wsd_shape():
    t, w, d = 100, 10, 30
    m = [wsd_multiplier(s, total_steps=t, warmup_frac=0.1, decay_frac=0.3, min_lr_ratio=0.1) for s in range(t)]
    assert m[:w] == pytest.approx([(s + 1) / w for s in range(w)])            # linear warm-up
    assert m[w:t - d] == pytest.approx([1.0] * (t - d - w))                     # plateau
    decay = m[t - d:]
    steps = [decay[i] - decay[i + 1] for i in range(d - 1)]
    assert steps == pytest.approx([steps[0]] * (d - 1))                         # linear decay
    assert decay[-1] == pytest.approx(0.1)                                      # ends at the minimum


def test_large_lr_and_short_anneal_schedules():
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = large_lr_schedule(opt, 100, lr_multiplier=3.0, warmup_frac=0.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.3)
    lrs = []
    for _ in range(100):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert max(lrs) == pytest.approx(0.3) and lrs[-1] == pytest.approx(0.0)
    opt2 = torch.optim.SGD([p], lr=0.1)
    short = short_anneal_schedule(opt2, 100, warmup_frac=0.0)
    lrs2 = []
    for _ in range(100):
        lrs2.append(opt2.param_groups[0]["lr"])
        opt2.step()
        short.step()
    assert lrs2[89] == pytest.approx(0.1) and lrs2[90] < 0.1            # decay only over the last 10 steps


@pytest.mark.parametrize("kw", [dict(total_steps=0), dict(warmup_frac=0.6, decay_frac=0.5),
                                dict(decay_frac=-0.1), dict(peak_scale=0.0)])
def test_wsd_validation(kw):
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    args = {"total_steps": 10, **kw}
    with pytest.raises(ValueError):
        wsd_schedule(opt, **args)


def test_wsd_rejects_non_positive_lr_and_non_optimizer():
    with pytest.raises(ValueError, match="positive base learning rate"):
        wsd_schedule(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.0), 10)
    with pytest.raises(TypeError):
        wsd_schedule("adam", 10)


# quantization


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_rtn_levels_error_and_idempotence(bits):
    w = torch.randn(12, 40, generator=torch.Generator().manual_seed(bits)) * torch.logspace(-2, 1, 12)[:, None]
    q = rtn_quantize_tensor(w, bits=bits)
    scale = w.abs().amax(1, keepdim=True) / (2 ** (bits - 1) - 1)
    for row in q:
        assert row.unique().numel() <= 2 ** bits
    assert ((w - q).abs() <= scale / 2 * (1 + 1e-6)).all()
    codes = q / scale
    torch.testing.assert_close(codes, codes.round(), rtol=0, atol=1e-4)           # on the grid
    torch.testing.assert_close(rtn_quantize_tensor(q, bits=bits), q, rtol=1e-6, atol=0)


def test_rtn_zero_rows_and_per_tensor():
    w = torch.randn(4, 8)
    w[1] = 0
    q = rtn_quantize_tensor(w)
    assert torch.equal(q[1], torch.zeros(8)) and torch.isfinite(q).all()
    assert rtn_quantize_tensor(w, per_channel=False).unique().numel() <= 16


def test_quantize_rtn_model_copy_and_inplace():
    model = nn.Sequential(nn.Embedding(10, 6), nn.Flatten(), nn.Linear(12, 5))
    before = [p.detach().clone() for p in model.parameters()]
    qm = quantize_rtn(model)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))   # original untouched
    assert qm[0].weight.unique(dim=None).numel() <= 10 * 16
    assert all(row.unique().numel() <= 16 for row in qm[2].weight)
    assert torch.equal(qm[2].bias, model[2].bias)                                # biases stay in float
    assert quantize_rtn(model, inplace=True) is model and torch.equal(model[2].weight, qm[2].weight)


def test_quantize_validation():
    with pytest.raises(ValueError, match="no trainable parameters"):
        quantize_rtn(nn.ReLU())
    with pytest.raises(ValueError, match="no nn.Linear"):
        quantize_rtn(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="bits"):
        rtn_quantize_tensor(torch.randn(3, 3), bits=1)


# sharpness


def test_power_iteration_matches_eigvalsh_of_explicit_hessian():
    model = tiny_mlp(seed=4)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(32, 3, dtype=torch.float64, generator=g), torch.randint(0, 2, (32,), generator=g)
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    flat0 = torch.cat([p.detach().flatten() for p in model.parameters()])

    def loss_of(flat):
        chunks = torch.split(flat, [s.numel() for s in shapes])
        params = {n: c.view(s) for n, c, s in zip(names, chunks, shapes)}
        return F.cross_entropy(torch.func.functional_call(model, params, (x,)), y)

    eigs = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss_of, flat0))
    top = eigs[eigs.abs().argmax()].item()
    est = hessian_top_eig(model, F.cross_entropy, (x, y), iters=1000, tol=1e-12)
    assert est == pytest.approx(top, rel=1e-6)


def test_power_iteration_on_linear_regression_closed_form():
    x = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randn(50, 1, dtype=torch.float64)
    model = nn.Linear(4, 1, bias=False).to(torch.float64)
    est = hessian_top_eig(model, F.mse_loss, (x, y), iters=500, tol=1e-12)
    assert est == pytest.approx(torch.linalg.eigvalsh(2 * x.T @ x / 50)[-1].item(), rel=1e-8)


def test_sharpness_validation_and_determinism():
    model = tiny_mlp()
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, 2, (8,))
    assert hessian_top_eig(model, F.cross_entropy, (x, y), iters=5, seed=3) == \
        hessian_top_eig(model, F.cross_entropy, (x, y), iters=5, seed=3)
    with pytest.raises(ValueError, match="empty"):
        hessian_top_eig(model, F.cross_entropy, (x[:0], y[:0]))
    with pytest.raises(ValueError, match="no trainable parameters"):
        hessian_top_eig(nn.Identity(), F.mse_loss, (x, x))
    with pytest.raises(ValueError, match="iters"):
        hessian_top_eig(model, F.cross_entropy, (x, y), iters=0)


# forgetting


def test_forgetting_report_and_evaluate_loss():
    model = tiny_mlp()
    x, y = torch.randn(100, 3, dtype=torch.float64), torch.randint(0, 2, (100,))
    full = F.cross_entropy(model(x), y).item()
    assert evaluate_loss(model, F.cross_entropy, (x, y), batch_size=7) == pytest.approx(full, rel=1e-12)
    rep = forgetting_report(model, model, F.cross_entropy, (x, y))
    assert rep.forgetting == 0.0
    q = forgetting_report(model, quantize_rtn(model, bits=2), F.cross_entropy, (x, y))
    assert q.base_loss == pytest.approx(full) and q.forgetting != 0.0
    with pytest.raises(ValueError, match="empty"):
        evaluate_loss(model, F.cross_entropy, (x[:0], y[:0]))
    with pytest.raises(ValueError, match="must match"):
        evaluate_loss(model, F.cross_entropy, (x, y[:5]))
    with pytest.raises(TypeError):
        evaluate_loss(model, F.cross_entropy, x)


def test_three_line_usage_in_a_standard_loop():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Linear(16, 3))
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    start = F.cross_entropy(model(x), y).item()
    opt = SAM(model.parameters(), torch.optim.AdamW, rho=0.05, lr=1e-2, weight_decay=0.1)
    sched = wsd_schedule(opt, total_steps=50)
    for _ in range(50):
        opt.step(lambda: F.cross_entropy(model(x), y).backward())
        sched.step()
    assert F.cross_entropy(model(x), y).item() < start


# reproduction


def test_quick_reproduction_is_well_formed():
    from icml26.learning.flat_minima.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    assert len(out.claims) >= 4
    assert all(math.isfinite(c.measured) and math.isfinite(c.reference) for c in out.claims)
    assert all(c.kind == "claim" and c.falsifier for c in out.claims)
    # forgetting is claimed per fine-tuning LR (never averaged across LRs), against 0.8 x that LR's baseline
    per_lr = [c for c in out.claims if c.statement.startswith("SAM pretraining forgets less")]
    assert [c.statement for c in per_lr] == ["SAM pretraining forgets less after fine-tuning at LR 0.0003 (F <= 0.8 x baseline)"]
    assert per_lr[0].reference == pytest.approx(0.8 * out.metrics["F_baseline_lr0.0003"])
    assert per_lr[0].measured == out.metrics["F_sam_lr0.0003"]
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert set(out.figures) == {"frontier", "bases"} and out.tables["finetuning"]
    # robust at the quick budget: every base learned something and fine-tuning moved it
    assert out.metrics["base_loss_baseline"] < math.log(97) - 1.0
    assert out.metrics["F_mean_baseline"] > 0


def _bad_input_cases():
    import icml26.learning.flat_minima as f

    m, nan = nn.Linear(3, 2), float("nan")
    batch = (torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
    sgd = torch.optim.SGD(m.parameters(), lr=0.1)
    return [
        (lambda: f.SAM(m.parameters(), torch.optim.SGD, rho=-1.0, lr=0.1), ValueError, "rho must be"),
        (lambda: f.SAM(m.parameters(), torch.optim.SGD, lr=0.1).step(), ValueError, "needs a closure"),
        (lambda: f.wsd_multiplier(10, total_steps=100, warmup_frac=1.5), ValueError, "warmup_frac"),   # was 0.073
        (lambda: f.wsd_multiplier(0, total_steps=0), ValueError, "total_steps"),          # was a ZeroDivisionError
        (lambda: f.wsd_multiplier(0, total_steps=100, warmup_frac=0.6, decay_frac=0.6), ValueError, "<= 1"),
        (lambda: f.wsd_multiplier(-1, total_steps=100), ValueError, "step must be an integer >= 0"),  # was 0.0
        (lambda: f.wsd_schedule(sgd, total_steps=0), ValueError, "total_steps"),
        (lambda: f.short_anneal_schedule(sgd, total_steps=10, decay_frac=2.0), ValueError, "decay_frac"),
        (lambda: f.quantize_rtn(m, bits=0), ValueError, "bits"),
        (lambda: f.rtn_quantize_tensor(torch.tensor([nan, 1.0]), bits=4), ValueError, "NaN"),   # returned nan
        (lambda: f.hessian_top_eig(m, F.cross_entropy, batch, iters=0), ValueError, "iters"),
        (lambda: f.evaluate_loss(m, F.cross_entropy, batch, batch_size=0), ValueError, "batch_size"),
        (lambda: f.forgetting_report(m, m, F.cross_entropy, (torch.randn(4, 3), torch.tensor([0, 1]))), ValueError,
         "must match"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_input_cases())))
def test_public_entry_points_refuse_bad_input(case):
    call, error, fragment = _bad_input_cases()[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()
