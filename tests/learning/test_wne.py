"""Tests for [B16] WNE: the NE identity, the wrapper's normalization, the architectural NE blocks."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from icml26.harness import Budget, Outcome
from icml26.learning.wne import (
    AffineConv2d,
    AffineResidual,
    DnCNN,
    NormEquivariantWrapper,
    ScaleEquivariantWrapper,
    SortPool,
    TinyDenoisingTransformer,
    make_dncnn,
    ne_defect,
    tiled_forward,
    time_forward,
)
from icml26.learning.wne.data import patch_pool, psnr
from icml26.learning.wne.reproduce import SIZES, Sizes, train

torch.set_num_threads(2)
AB = [(0.1, -5.0), (0.37, 2.5), (1.0, 0.0), (3.0, -1.2), (10.0, 5.0)]


def randomize_biases(model: nn.Module) -> nn.Module:
    """Give every bias a nonzero value, so an ordinary net is neither SE nor NE."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


def backbone(kind: str, channels: int) -> nn.Module:
    torch.manual_seed(0)
    if kind == "dncnn":
        return randomize_biases(make_dncnn(4, 8, "ordinary", channels=channels, residual=False))
    return randomize_biases(TinyDenoisingTransformer(channels, dim=16, depth=2, heads=2, residual=False))


def image(channels: int, dtype: torch.dtype = torch.float32, n: int = 2, size: int = 16) -> torch.Tensor:
    return torch.randn(n, channels, size, size, generator=torch.Generator().manual_seed(3)).to(dtype)


# --- the NE identity f(a y + b) = a f(y) + b


@pytest.mark.parametrize("kind", ["dncnn", "transformer"])
@pytest.mark.parametrize("pred_mode", ["direct", "residual"])
@pytest.mark.parametrize("channels", [1, 3])
def test_wrapper_is_ne_float32(kind, pred_mode, channels):
    model = NormEquivariantWrapper(backbone(kind, channels), pred_mode)
    x = image(channels)
    for a, b in AB:
        assert ne_defect(model, x, a, b) < 1e-5


@pytest.mark.parametrize("kind", ["dncnn", "transformer"])
@pytest.mark.parametrize("pred_mode", ["direct", "residual"])
def test_wrapper_is_ne_float64(kind, pred_mode):
    model = NormEquivariantWrapper(backbone(kind, 3), pred_mode).double()
    x = image(3, torch.float64)
    for a, b in AB:
        assert ne_defect(model, x, a, b) < 1e-10


@pytest.mark.parametrize("kind", ["dncnn", "transformer"])
def test_unwrapped_backbone_is_not_ne(kind):
    model = backbone(kind, 1).double()
    x = image(1, torch.float64)
    assert max(ne_defect(model, x, a, b) for a, b in AB) > 1e-2


def test_ne_defect_is_zero_at_identity_and_for_identity_map():
    x = image(1, torch.float64)
    assert ne_defect(nn.Identity(), x, 7.0, -3.0) < 1e-15
    assert ne_defect(backbone("dncnn", 1).double(), x, 1.0, 0.0) == 0.0


def test_backbone_sees_mean0_std1():
    seen = []
    bb = backbone("transformer", 3)
    bb.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach()))
    x = 4.0 * image(3, n=5) + torch.arange(5.0).view(5, 1, 1, 1)
    NormEquivariantWrapper(bb, "residual")(x)
    (z,) = seen
    assert torch.allclose(z.mean(dim=(1, 2, 3)), torch.zeros(5), atol=1e-6)
    assert torch.allclose(z.std(dim=(1, 2, 3)), torch.ones(5), atol=1e-6)


def test_reduce_dims_normalizes_per_channel():
    seen = []
    bb = nn.Identity()
    bb.register_forward_hook(lambda mod, inp, out: seen.append(inp[0]))
    x = image(3, torch.float64) * torch.tensor([1.0, 5.0, 0.2], dtype=torch.float64).view(1, 3, 1, 1)
    NormEquivariantWrapper(bb, reduce_dims=(2, 3))(x)
    assert torch.allclose(seen[0].std(dim=(2, 3)), torch.ones(2, 3, dtype=torch.float64))


def test_theorem_wrapping_an_ne_function_changes_nothing():
    # f NE  =>  f(y) = sigma f(y~) + mu: the wrapper with g = f reproduces f exactly.
    torch.manual_seed(0)
    f = make_dncnn(4, 8, "norm_equiv").double()
    x = image(1, torch.float64)
    with torch.no_grad():
        assert torch.allclose(NormEquivariantWrapper(f, "direct")(x), f(x), atol=1e-12)


def test_direct_with_residual_backbone_equals_residual_mode():
    torch.manual_seed(0)
    inner = randomize_biases(make_dncnn(3, 8, "ordinary", residual=False)).double()
    outer = DnCNN(1, 3, 8, mode="ordinary", residual=True).double()
    outer.load_state_dict(inner.state_dict())
    x = image(1, torch.float64)
    with torch.no_grad():
        a = NormEquivariantWrapper(inner, "residual")(x)
        b = NormEquivariantWrapper(outer, "direct")(x)
    assert torch.allclose(a, b, atol=1e-12)


def test_scale_equivariant_wrapper_is_se_but_not_ne():
    model = ScaleEquivariantWrapper(backbone("dncnn", 1), "residual").double()
    x = image(1, torch.float64)
    assert ne_defect(model, x, 3.0, 0.0) < 1e-12
    assert ne_defect(model, x, 1.0, 2.0) > 1e-3


# --- constant input


@pytest.mark.parametrize("pred_mode", ["direct", "residual"])
def test_constant_input_is_returned_unchanged(pred_mode):
    model = NormEquivariantWrapper(backbone("dncnn", 1), pred_mode)
    x = image(1, n=3)
    x[1] = 0.7  # one constant sample in the batch
    with torch.no_grad():
        out = model(x)
        alone = model(x[[0, 2]])
    assert torch.equal(out[1], x[1])
    assert torch.isfinite(out).all()
    assert torch.allclose(out[[0, 2]], alone, atol=1e-6)  # other samples unaffected


def test_min_std_threshold():
    model = NormEquivariantWrapper(backbone("dncnn", 1), min_std=1e-3)
    x = 0.5 + 1e-5 * image(1)
    with torch.no_grad():
        assert torch.equal(model(x), x)


def test_architectural_ne_net_maps_constants_to_constants():
    torch.manual_seed(0)
    f = make_dncnn(4, 8, "norm_equiv").double()
    c = torch.full((1, 1, 12, 12), -2.5, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(f(c), c, atol=1e-12)


# --- architectural NE blocks


def test_affine_conv_kernels_sum_to_one():
    torch.manual_seed(0)
    conv = AffineConv2d(6, 10, 3).double()
    with torch.no_grad():
        conv.weight.mul_(7.0).add_(0.3)  # any unconstrained weight
    sums = conv.kernel.sum(dim=(1, 2, 3))
    assert torch.allclose(sums, torch.ones(10, dtype=torch.float64), atol=1e-12)
    # still after a gradient step
    opt = torch.optim.SGD(conv.parameters(), lr=1e-3)
    conv(torch.randn(2, 6, 8, 8, dtype=torch.float64)).pow(2).sum().backward()
    opt.step()
    assert torch.allclose(conv.kernel.sum(dim=(1, 2, 3)), torch.ones(10, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(AffineConv2d(3, 4, 3).kernel.sum(dim=(1, 2, 3)), torch.ones(4), atol=1e-5)  # float32


def test_affine_conv_is_ne_and_keeps_size():
    torch.manual_seed(0)
    conv = AffineConv2d(3, 4, 5).double()
    x = image(3, torch.float64, size=11)
    assert conv(x).shape == (2, 4, 11, 11)
    for a, b in AB:
        assert ne_defect(conv, x, a, b) < 1e-12


def test_sortpool_commutes_with_affine_maps_and_sorts_pairs():
    x = image(6, torch.float64)
    pool = SortPool()
    for a, b in AB:
        assert torch.allclose(pool(a * x + b), a * pool(x) + b, atol=1e-12)
    expect = x.unflatten(1, (3, 2)).sort(dim=2).values.flatten(1, 2)  # peer: torch.sort on pairs
    assert torch.allclose(pool(x), expect, atol=1e-12)
    assert not torch.allclose(pool(-x), -pool(x))  # a < 0 is not covered: min and max swap


def test_affine_residual_is_convex_mix():
    r = AffineResidual(0.25)
    x, y = torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 2, 2)
    assert torch.allclose(r(x, y), torch.full_like(x, 0.25))


@pytest.mark.parametrize("channels", [1, 3])
def test_architectural_ne_dncnn_is_ne(channels):
    torch.manual_seed(0)
    f = make_dncnn(4, 8, "norm_equiv", channels=channels)
    x = image(channels)
    for a, b in AB:
        assert ne_defect(f, x, a, b) < 1e-5
        assert ne_defect(f.double(), x.double(), a, b) < 1e-10
        f.float()


def test_bias_free_dncnn_is_se_not_ne():
    torch.manual_seed(0)
    f = make_dncnn(4, 8, "bias_free").double()
    x = image(1, torch.float64)
    assert ne_defect(f, x, 4.0, 0.0) < 1e-12
    assert ne_defect(f, x, 1.0, 1.0) > 1e-3


def test_ordinary_dncnn_parameter_count():
    f = make_dncnn(6, 24, "ordinary")
    # 1->24, 4 x 24->24, 24->1 convs, 3x3 with bias
    expect = (9 * 24 + 24) + 4 * (9 * 24 * 24 + 24) + (9 * 24 + 1)
    assert sum(p.numel() for p in f.parameters()) == expect
    assert sum(p.numel() for p in NormEquivariantWrapper(f).parameters()) == expect  # parameter-free wrapper


# --- input validation


def test_validation_errors():
    bb = backbone("dncnn", 1)
    with pytest.raises(ValueError, match="pred_mode"):
        NormEquivariantWrapper(bb, "noise")
    with pytest.raises(TypeError, match="nn.Module"):
        NormEquivariantWrapper(lambda x: x)
    with pytest.raises(ValueError, match="min_std"):
        NormEquivariantWrapper(bb, min_std=-1.0)
    with pytest.raises(ValueError, match="batch axis"):
        NormEquivariantWrapper(bb, reduce_dims=(0, 1))(image(1))
    w = NormEquivariantWrapper(bb)
    x = image(1)
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        NormEquivariantWrapper(bb, check_finite=True)(x)
    with pytest.raises(ValueError, match="NaN"):
        ScaleEquivariantWrapper(bb, check_finite=True)(x)
    with pytest.raises(ValueError, match="NaN"):  # our backbones scan their input in eager mode
        w(x)
    # ... and the refusal names the user's input (1 bad entry), not the normalised tensor the NaN spread to
    for wrapped in (w, ScaleEquivariantWrapper(bb)):
        with pytest.raises(ValueError, match=rf"y has 1 NaN or infinite entries \(of {x.numel()}\)"):
            wrapped(x)
    # the wrapper's own scan is opt-in: around a backbone that does not scan, NaN propagates (no device sync)
    assert torch.isnan(NormEquivariantWrapper(nn.Identity())(x)).any()
    with pytest.raises(TypeError, match="floating"):
        w(torch.ones(2, 1, 4, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="Tensor"):
        w(np.ones((2, 1, 4, 4)))
    with pytest.raises(ValueError, match="shaped like"):
        NormEquivariantWrapper(nn.Conv2d(1, 2, 1))(image(1))
    with pytest.raises(ValueError, match="a must be > 0"):
        ne_defect(w, image(1), -1.0, 0.0)
    with pytest.raises(ValueError, match="finite"):
        ne_defect(w, image(1), 1.0, math.inf)


def test_block_and_model_validation():
    with pytest.raises(ValueError, match="even number of channels"):
        SortPool()(torch.ones(1, 3, 2, 2))
    with pytest.raises(ValueError, match="odd"):
        AffineConv2d(1, 2, 4)
    with pytest.raises(ValueError, match="zero padding"):
        AffineConv2d(1, 2, 3, padding_mode="zeros")
    with pytest.raises(ValueError, match="mode"):
        make_dncnn(mode="fancy")
    with pytest.raises(ValueError, match="even width"):
        make_dncnn(4, 7, "norm_equiv")
    with pytest.raises(ValueError, match="depth"):
        make_dncnn(1, 8)
    with pytest.raises(ValueError, match="multiples of patch"):
        TinyDenoisingTransformer()(torch.ones(1, 1, 10, 12))
    with pytest.raises(ValueError, match=r"\(N, 1, H, W\)"):
        make_dncnn()(torch.ones(1, 3, 8, 8))
    with pytest.raises(ValueError, match="divisible"):
        TinyDenoisingTransformer(dim=10, heads=3)


# --- determinism and experiment pieces


def test_determinism():
    def run():
        torch.manual_seed(5)
        m = NormEquivariantWrapper(TinyDenoisingTransformer(dim=16, residual=False), "residual")
        pool = patch_pool(("coins", "moon"), 32, 16, np.random.default_rng(0))
        sz = Sizes(steps=3, models=("wne",), sigmas_test=(25,), noise_seeds=1, time_size=16, time_iters=1,
                   time_warmup=0, overhead_bound=0.1, batch=4, patch=16)
        losses = train(m, pool, sz, seed=0)
        with torch.no_grad():
            return losses, m(pool[:2]), pool
    (l1, o1, p1), (l2, o2, p2) = run(), run()
    assert l1 == l2 and torch.equal(o1, o2) and torch.equal(p1, p2)


def test_psnr_closed_form():
    clean = torch.zeros(2, 1, 4, 4)
    est = torch.full_like(clean, 0.1)  # MSE = 0.01 -> 20 dB
    assert torch.allclose(psnr(est, clean), torch.full((2,), 20.0))


def test_time_forward_shapes():
    bb = backbone("dncnn", 1)
    t = time_forward({"a": bb, "b": NormEquivariantWrapper(bb)}, image(1, n=1), n_iter=3, warmup=1)
    assert set(t) == {"a", "b"} and all(len(v) == 3 and min(v) > 0 for v in t.values())
    with pytest.raises(ValueError):
        time_forward(bb, image(1), n_iter=0)


def test_sizes_defined_for_every_budget():
    assert all(b in SIZES for b in Budget)


def test_quick_reproduction_is_well_formed():
    from icml26.learning.wne.reproduce import reproduce

    out = reproduce(Budget.QUICK, seed=0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) >= 5 and len(out.checks) >= 2
    assert all(math.isfinite(c.measured) and c.falsifier for c in claims)
    assert all(c.verdict in ("holds", "does not hold", "inconclusive") for c in out.claims)
    # per-instance pairing over 3 test images x 1 noise draw at quick (the timed claims pair over repeats instead)
    assert all(len(c.paired) == 3 for c in claims if c.paired is not None and c.timing_control is None)
    timed = [c for c in claims if c.timing_control is not None]
    assert len(timed) == 2 and all(len(c.paired) >= 3 for c in timed)
    # the NE identity is a check (true by construction), and it holds; the unwrapped control fails it
    ne = next(c for c in out.checks if c.statement.startswith("NE identity"))
    assert ne.verdict == "holds"
    assert all(math.isfinite(v) for v in out.metrics.values())
    assert "psnr_vs_sigma" in out.figures and out.tables["psnr_vs_sigma"]
    assert out.metrics["ne_defect_wne"] < 1e-5 < out.metrics["ne_defect_ordinary"]


# --- parity items: reductions over < 2 elements, reduce_dims validation, torch.compile, tiled inference


@pytest.mark.parametrize("pred_mode", ["direct", "residual"])
def test_one_pixel_images_are_constant_not_nan(pred_mode):
    """One element has no (unbiased) std: the sample is treated as constant, f(c) = c, instead of all-NaN."""
    w = NormEquivariantWrapper(backbone("dncnn", 1), pred_mode)
    y = torch.randn(3, 1, 1, 1)
    assert torch.equal(w(y), y)
    per_channel = NormEquivariantWrapper(nn.Identity(), pred_mode, reduce_dims=(1,))  # one channel per sample
    z = torch.randn(2, 1, 4, 4)
    assert torch.equal(per_channel(z), z)


@pytest.mark.parametrize("cls", [NormEquivariantWrapper, ScaleEquivariantWrapper])
def test_both_wrappers_validate_reduce_dims(cls):
    bb = backbone("dncnn", 1)
    for bad in ((), (1.5,), "12", (True,)):
        with pytest.raises(TypeError, match="reduce_dims"):
            cls(bb, reduce_dims=bad)
    with pytest.raises(ValueError, match="batch axis"):
        cls(bb, reduce_dims=(0, 2))


@pytest.mark.parametrize("cls", [NormEquivariantWrapper, ScaleEquivariantWrapper])
def test_wrapped_model_compiles_with_fullgraph(cls):
    """No data-dependent Python branch in forward: dynamo captures one graph (fullgraph=True raises on a break)."""
    torch._dynamo.reset()
    w = cls(backbone("dncnn", 1), "residual").eval()
    x = image(1)
    compiled = torch.compile(w, fullgraph=True, backend="eager")
    with torch.no_grad():
        assert torch.allclose(compiled(x), w(x), atol=1e-6)
    checked = torch.compile(cls(backbone("dncnn", 1), check_finite=True), fullgraph=True, backend="eager")
    with pytest.raises(Exception):  # the opt-in scan is a graph break, which fullgraph refuses
        checked(x)
    torch._dynamo.reset()


def test_tiled_forward_stitches_and_keeps_ne():
    x = image(1, torch.float64, n=2, size=20)
    assert torch.equal(tiled_forward(nn.Identity(), x, tile=8), x)  # edge-aligned last tiles, averaged overlaps
    assert torch.allclose(tiled_forward(nn.Identity(), x, tile=8, overlap=3), x)
    w = NormEquivariantWrapper(backbone("dncnn", 1).double(), "residual")
    assert torch.allclose(tiled_forward(w, x, tile=20), w(x))  # one tile = the whole image
    f = lambda y: tiled_forward(w, y, tile=8)  # noqa: E731
    assert ne_defect(f, x, 3.0, -1.5) < 1e-12  # each tile is NE, so the stitched map is NE
    tiles = tiled_forward(lambda t: t.mean(dim=(1, 2, 3), keepdim=True).expand_as(t), x, tile=10)
    assert float(tiles[0, :, :10, :10].std()) < 1e-12 < float(tiles[0].std())  # per-tile statistics
    with pytest.raises(ValueError, match="tile"):
        tiled_forward(w, x, tile=32)
    with pytest.raises(ValueError, match="overlap"):
        tiled_forward(w, x, tile=8, overlap=8)


# --- issue "Reliability": every public entry point refuses bad input with a clear ValueError / TypeError


@functools.lru_cache(maxsize=1)
def _bad_input_cases():
    import icml26.learning.wne as W

    nan = float("nan")
    x = torch.randn(2, 1, 8, 8)
    xn = x.clone()
    xn[0, 0, 0, 0] = nan
    bb = W.make_dncnn(2, 4)
    long = torch.ones(1, 1, 8, 8, dtype=torch.long)
    return [
        (lambda: W.AffineConv2d(0, 2), ValueError, "in_channels must be a positive int"),
        (lambda: W.AffineConv2d(1, 2)(torch.randn(2, 3, 8, 8)), ValueError, "must have 1 channels"),  # RuntimeError
        (lambda: W.AffineConv2d(1, 2)(xn), ValueError, "x has 1 NaN or infinite"),                # silent NaN
        (lambda: W.AffineConv2d(1, 2)([1.0]), TypeError, "x must be a torch.Tensor"),               # torch TypeError
        (lambda: W.AffineConv2d(1, 2)(torch.randn(1, 8, 8)), ValueError, "at least 4 dimensions"),  # was silent
        (lambda: W.AffineConv2d(1, 2, 5)(torch.randn(1, 1, 2, 2)), ValueError, "reflect padding of 2"),
        (lambda: W.SortPool()([1, 2]), TypeError, "x must be a torch.Tensor"),                      # AttributeError
        (lambda: W.SortPool()(torch.full((1, 2, 2, 2), nan)), ValueError, "NaN"),                   # silent NaN
        (lambda: W.SortPool()(torch.randn(2, 3, 4, 4)), ValueError, "even number of channels"),
        (lambda: W.AffineResidual(nan), ValueError, "alpha must be finite"),                        # was silent
        (lambda: W.AffineResidual()([1], [1]), TypeError, "x must be a torch.Tensor"),              # AttributeError
        (lambda: W.AffineResidual()(xn, x), ValueError, "x has 1 NaN"),                             # silent NaN
        (lambda: W.AffineResidual()(x, x[:1]), ValueError, "equal shapes"),
        (lambda: W.DnCNN(width=0), ValueError, "width must be an int >= 1"),
        (lambda: W.DnCNN()(xn), ValueError, "y has 1 NaN"),                                         # silent NaN
        (lambda: W.DnCNN()(long), TypeError, "floating-point"),                                     # RuntimeError
        (lambda: W.DnCNN()(torch.randn(0, 1, 8, 8)), ValueError, "empty"),                          # was silent
        (lambda: W.DnCNN(mode="norm_equiv")(torch.randn(1, 1, 1, 1)), ValueError, "reflect padding"),  # RuntimeError
        (lambda: W.make_dncnn(0), ValueError, "depth must be an int >= 2"),
        (lambda: W.make_dncnn(mode="norm_equiv", width=3), ValueError, "even width"),
        (lambda: W.TinyDenoisingTransformer(mlp_ratio=0), ValueError, "mlp_ratio must be an int >= 1"),
        (lambda: W.TinyDenoisingTransformer()(xn), ValueError, "y has 1 NaN"),                      # silent NaN
        (lambda: W.TinyDenoisingTransformer()(long), TypeError, "floating-point"),                  # RuntimeError
        (lambda: W.NormEquivariantWrapper(lambda t: t), TypeError, "backbone must be a torch.nn.Module"),
        (lambda: W.NormEquivariantWrapper(bb, min_std=nan), ValueError, "min_std"),
        (lambda: W.NormEquivariantWrapper(bb, check_finite=True)(xn), ValueError, "NaN"),
        (lambda: W.NormEquivariantWrapper(bb, reduce_dims=(7,))(x), ValueError, "outside the input's 4"),  # wrapped
        (lambda: W.NormEquivariantWrapper(bb).normalize([1.0]), TypeError, "y must be a torch.Tensor"),   # Attr.Error
        (lambda: W.ScaleEquivariantWrapper(3), TypeError, "backbone must be a torch.nn.Module"),
        (lambda: W.ScaleEquivariantWrapper(bb, reduce_dims=(7,))(x), ValueError, "outside the input's 4"),
        (lambda: W.ScaleEquivariantWrapper(nn.Conv2d(1, 2, 1))(x), ValueError, "shaped like its input"),  # was silent
        (lambda: W.tiled_forward(3, x, 4), TypeError, "model must be a callable"),                  # 'int' not callable
        (lambda: W.tiled_forward(bb, xn, 4), ValueError, "NaN"),                                    # was silent
        (lambda: W.tiled_forward(lambda t: t[:, :, :2], x, 4), ValueError, "same shape"),           # RuntimeError
        (lambda: W.tiled_forward(bb, x, 0), ValueError, "tile must be between 1"),
        (lambda: W.ne_defect(3, x, 2.0, 0.3), TypeError, "model must be a callable"),              # 'int' not callable
        (lambda: W.ne_defect(lambda t: t.sum(), x, 2.0, 0.3), ValueError, "same batch size"),          # was silent
        (lambda: W.ne_defect(lambda t: t * nan, x, 2.0, 0.3), ValueError, "model's output f(x)"),   # returned nan
        (lambda: W.ne_defect(bb, x, 0.0, 0.3), ValueError, "a must be > 0"),
        (lambda: W.time_forward({}, x), TypeError, "non-empty mapping"),
        (lambda: W.time_forward(bb, x, "5"), TypeError, "n_iter must be an integer"),               # '<' TypeError
        (lambda: W.time_forward(bb, x, 2, -1), ValueError, "warmup must be an integer >= 0"),
    ]


@pytest.mark.parametrize("case", range(42))
def test_public_entry_points_refuse_bad_input(case):
    cases = _bad_input_cases()
    assert len(cases) == 42
    call, error, fragment = cases[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()


def test_a_model_scans_its_input_once_and_its_ne_blocks_do_not_rescan(monkeypatch):
    """The architectural NE DnCNN scanned for NaN/inf in every block (14 scans per forward against the ordinary
    net's 1), which was part of its timed slowdown; now the model scans its input once. A block called on its own
    still scans."""
    from icml26.learning.wne import blocks

    calls = []
    real = blocks.v.finite
    monkeypatch.setattr(blocks.v, "finite", lambda name, x: (calls.append(name), real(name, x))[1])
    from icml26.learning.wne.models import make_dncnn

    for mode in ("ordinary", "norm_equiv"):
        calls.clear()
        make_dncnn(depth=6, width=8, mode=mode)(torch.rand(1, 1, 8, 8))
        assert len(calls) == 1, (mode, calls)
    calls.clear()
    x = torch.rand(1, 2, 4, 4)
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        SortPool()(x)  # on its own a block still refuses NaN
    bad = torch.rand(1, 1, 8, 8)
    bad[0, 0, 1, 1] = float("inf")
    with pytest.raises(ValueError, match="finite|inf"):
        make_dncnn(depth=3, width=8, mode="norm_equiv")(bad)
