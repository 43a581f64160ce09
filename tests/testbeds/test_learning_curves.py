"""Tests for the shared learning-curve / mixture-run testbed (A16, A18): table validation, synthetic curves with
known parameters, cached tiny builds (LM curves, digits curves, mixture runs), determinism."""

import numpy as np
import pytest

from icml26.testbeds import learning_curves as lc


def test_synthetic_pool_matches_its_formula_without_noise():
    cfg = lc.SyntheticCurveConfig(warmup_bump=0.0)
    tab = lc.synthetic_curve_pool(cfg, noise=0.0)
    D = np.asarray(tab.meta["tokens"])
    N = tab.n_params
    lr = 10 ** tab.features[:, 1]
    q = np.exp(-(np.log10(lr) - np.log10(cfg.lr0 * (N / 1e6) ** -cfg.lr_shift)) ** 2 / (2 * cfg.lr_width ** 2))
    want = cfg.E + cfg.A / N[:, None] ** cfg.a + cfg.B / (q[:, None] * D[None, :]) ** cfg.b
    np.testing.assert_allclose(tab.loss, want, rtol=1e-12)
    np.testing.assert_allclose(tab.compute, 6 * N[:, None] * D[None, :])
    assert tab.compute.shape == (32, 64)


def test_synthetic_noise_is_seeded():
    a, b, c = (lc.synthetic_curve_pool(seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.loss, b.loss) and not np.array_equal(a.loss, c.loss)
    with pytest.raises(ValueError, match="noise"):
        lc.synthetic_curve_pool(noise=-1.0)


def test_curve_table_validation_and_roundtrip(tmp_path):
    tab = lc.synthetic_curve_pool(seed=0)
    sub = tab.subset([3, 1])
    assert sub.names == (tab.names[3], tab.names[1]) and np.array_equal(sub.loss[0], tab.loss[3])
    sub.save(tmp_path)
    back = lc.CurveTable.load(tmp_path)
    assert np.array_equal(back.loss, sub.loss) and back.names == sub.names
    with pytest.raises(ValueError, match="unequal length"):
        lc.CurveTable.from_curves([[1, 2], [1, 2, 3]], [[2, 1], [3, 2, 1]], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        lc.CurveTable.from_curves([[1, 2]], [[2, float("nan")]], [1])
    with pytest.raises(ValueError, match="increase"):
        lc.CurveTable.from_curves([[2, 1]], [[2, 1]], [1])
    with pytest.raises(ValueError, match="positive"):
        lc.CurveTable.from_curves([[-2, 1]], [[2, 1]], [1])


def test_mixture_design_is_on_the_simplex():
    m = lc.mixture_design(3, 5, seed=0)
    assert m.shape == (9, 3) and np.allclose(m.sum(1), 1) and (m >= 0).all()
    assert np.array_equal(m[:3], np.eye(3)) and np.allclose(m[3], 1 / 3)


def test_domains_are_distinct_text():
    texts = {d: lc.domain_texts(d, 20_000) for d in lc.DOMAINS + (lc.BENCHMARK,)}
    assert all(len(t) > 5_000 for t in texts.values())
    assert len(set(texts.values())) == len(texts)
    with pytest.raises(ValueError, match="unknown domain"):
        lc.domain_texts("nope", 10)


def test_tiny_cached_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path))
    cfg = lc.LMCurvePoolConfig(widths=(16,), depths=(1,), lrs=(1e-2,), steps=8, eval_every=4, train_bytes=60_000,
                               val_bytes=30_000, eval_windows=2, tokenizer=lc.TokenizerConfig(sample_bytes=200_000))
    a = lc.lm_curve_pool(cfg)
    assert a.loss.shape == (1, 2) and np.isfinite(a.loss).all() and a.loss[0, -1] < a.loss[0, 0] + 0.5
    b = lc.lm_curve_pool(cfg)   # from the cache
    assert np.array_equal(a.loss, b.loss)
    d = lc.digits_curve_pool(lc.DigitsCurvePoolConfig(widths=(8,), depths=(1,), lrs=(1e-2,), steps=8))
    assert d.loss.shape == (1, 2) and d.loss[0, -1] < d.loss[0, 0]
    m = lc.mixture_runs(lc.MixtureRunsConfig(widths=(16,), depth=1, n_random=0, steps=4, domain_bytes=40_000,
                                             eval_windows=2, tokenizer=cfg.tokenizer))
    assert m.val_loss.shape == (4, 3) and m.bench_acc.shape == (4,) and np.isfinite(m.val_loss).all()
    with pytest.raises(ValueError, match="multiple"):
        lc.lm_curve_pool(lc.LMCurvePoolConfig(steps=10, eval_every=4))
    with pytest.raises(TypeError):
        lc.mixture_runs("small")
