"""Tests for [B08] H2CL: hypergraph container, heterogeneity, energy minimisers, views, encoder, loss, data."""

import logging
import math

import numpy as np
import pytest
import torch

from icml26.graphs.h2cl import (
    H2CL,
    HGNN,
    H2CLEncoder,
    HeteroAwareViewGenerator,
    HHConv,
    Hypergraph,
    HypergraphData,
    add_structural_noise,
    coordinate_descent_sweep,
    digits_knn_hypergraph,
    dirichlet_energy,
    edge_mean,
    heterogeneity,
    hypergraph_sbm,
    incidence_weights,
    info_nce,
    node_update,
    train_h2cl,
    train_hgnn,
    weighted_heterogeneity,
)
from icml26.harness import Budget, Outcome


def _small(seed=0, n=12, m=6, d=5):
    g = torch.Generator().manual_seed(seed)
    edges = [torch.randperm(n, generator=g)[: 2 + i % 3].tolist() for i in range(m)]
    hg = Hypergraph.from_edge_list(edges, n)
    return torch.randn(n, d, generator=g, dtype=torch.float64), hg, edges


# hypergraph container

def test_from_edge_list_known_structure_and_bad_input(caplog):
    with caplog.at_level(logging.WARNING):
        hg = Hypergraph.from_edge_list([[0, 1, 2], [], [2, 3], [3, 3]], num_nodes=6)
    assert "dropped 1 empty" in caplog.text
    assert hg.num_edges == 3 and hg.nnz == 6
    assert hg.edges() == [[0, 1, 2], [2, 3], [3]]
    assert hg.isolated_nodes == 2                      # nodes 4 and 5
    assert hg.to_dense().sum().item() == 6
    with pytest.raises(ValueError, match="empty"):
        Hypergraph.from_edge_list([[0], []], drop_empty=False)
    with pytest.raises(ValueError, match="no non-empty"):
        Hypergraph.from_edge_list([[], []])
    with pytest.raises(ValueError, match="empty"):
        Hypergraph(torch.tensor([[0, 1], [0, 0]]), 2, 2)           # hyperedge 1 has no member
    with pytest.raises(ValueError, match="duplicate"):
        Hypergraph(torch.tensor([[0, 0], [0, 0]]), 1, 1)
    with pytest.raises(ValueError, match="node ids"):
        Hypergraph(torch.tensor([[0, 5], [0, 0]]), 2, 1)
    with pytest.raises(TypeError):
        Hypergraph(torch.tensor([[0.0], [0.0]]), 1, 1)
    with pytest.raises(ValueError, match="shape"):
        Hypergraph(torch.tensor([0, 1]), 2, 1)
    H = np.array([[1, 0, 0], [1, 0, 1], [0, 0, 1]])
    hm = Hypergraph.from_incidence_matrix(H)
    assert hm.num_edges == 2 and hm.edges() == [[0, 1], [1, 2]]


def test_feature_validation():
    x, hg, _ = _small()
    with pytest.raises(ValueError, match="shape"):
        heterogeneity(x[:-1], hg)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        heterogeneity(bad, hg)
    with pytest.raises(TypeError):
        heterogeneity(x.numpy(), hg)


# heterogeneity

def test_heterogeneity_matches_brute_force_and_singletons_are_zero():
    x, hg, _ = _small()
    edges = [[0, 1, 2], [3], [2, 4, 5, 6]]
    hg = Hypergraph.from_edge_list(edges, 12)
    h = heterogeneity(x, hg)
    k = 0
    for e in edges:
        for v in e:
            if len(e) == 1:
                ref = 0.0
            else:
                loo = torch.stack([x[u] for u in e if u != v]).mean(0).float()
                ref = 1 - torch.nn.functional.cosine_similarity(x[v].float(), loo, dim=0).item()
            assert h[k].item() == pytest.approx(ref, abs=1e-5)
            k += 1


def test_identical_features_give_zero_heterogeneity_and_uniform_views():
    hg = Hypergraph.from_edge_list([[0, 1, 2], [2, 3], [3, 4, 5]])
    x = torch.ones(6, 4)
    h = heterogeneity(x, hg)
    assert torch.allclose(h, torch.zeros_like(h), atol=1e-6)
    p = HeteroAwareViewGenerator(p_mean=0.3).drop_probabilities(h)
    assert torch.allclose(p, torch.full_like(p, 0.3))
    conv = HHConv(4, 4)
    _, _, a = conv(x, hg)                               # identical rows -> cosine distance 0 -> uniform weights
    assert torch.allclose(a, torch.ones_like(a), atol=1e-5)


def test_drop_probabilities_monotone_capped_and_mean_pm():
    gen = HeteroAwareViewGenerator(p_mean=0.3, p_cap=0.7)
    h = torch.rand(5000, generator=torch.Generator().manual_seed(0))
    p = gen.drop_probabilities(h)
    assert float(p.mean()) == pytest.approx(0.3, abs=1e-5)        # no capping: mean is exactly p_mean
    h = h ** 4                                                      # skewed: the tail is capped
    p = gen.drop_probabilities(h)
    order = torch.argsort(h)
    assert bool((p[order].diff() >= -1e-7).all())
    assert float(p.max()) == pytest.approx(0.7)
    assert float(p.mean()) < 0.3
    with pytest.raises(ValueError):
        HeteroAwareViewGenerator(p_mean=1.2)


# energy and closed forms

def test_closed_form_minimisers_match_lbfgs():
    x, hg, _ = _small(seed=3)
    w = torch.rand(hg.nnz, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 0.1
    f = x + 0.3
    g_star = edge_mean(f, hg, w)
    G = torch.zeros(hg.num_edges, x.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([G], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")
    opt.step(lambda: (opt.zero_grad(), (e := dirichlet_energy(f, G, hg, w, x)).backward(), e)[2])
    assert torch.allclose(G.detach(), g_star, atol=1e-6)
    f_star = node_update(x, g_star, hg, w, 1.0)
    Fv = x.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([Fv], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")
    opt.step(lambda: (opt.zero_grad(), (e := dirichlet_energy(Fv, g_star, hg, w, x)).backward(), e)[2])
    assert torch.allclose(Fv.detach(), f_star, atol=1e-6)


def test_coordinate_descent_never_increases_energy():
    x, hg, _ = _small(seed=4, n=30, m=15)
    w = torch.rand(hg.nnz, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    f, g = x.clone(), torch.zeros(hg.num_edges, x.shape[1], dtype=torch.float64)
    e = float(dirichlet_energy(f, g, hg, w, x))
    for _ in range(10):
        f, g = coordinate_descent_sweep(f, x, hg, w)
        e_new = float(dirichlet_energy(f, g, hg, w, x))
        assert e_new <= e + 1e-10
        e = e_new


def test_weighted_heterogeneity_is_mean_for_uniform_weights():
    h = torch.rand(20)
    assert weighted_heterogeneity(h, torch.ones(20)) == pytest.approx(float(h.mean()))


# encoder

def test_plain_layer_is_mean_aggregation_and_isolated_nodes_keep_self():
    hg = Hypergraph.from_edge_list([[0, 1], [1, 2]], num_nodes=4)     # node 3 isolated
    x = torch.randn(4, 3)
    conv = HHConv(3, 3, reweight=False, act=False)
    out, g, a = conv(x, hg)
    u, s = conv.W1(x), conv.W0(x)
    assert torch.allclose(g[0], (u[0] + u[1]) / 2, atol=1e-6)
    assert torch.allclose(out[1], (s[1] + g[0] + g[1]) / 3, atol=1e-6)
    assert torch.allclose(out[3], s[3], atol=1e-6)
    assert torch.equal(a, torch.ones(hg.nnz))


def test_encoder_is_permutation_equivariant():
    x, hg, edges = _small(seed=5)
    x = x.float()
    torch.manual_seed(0)
    enc = H2CLEncoder(5, 8, 2)
    z, g, ws = enc(x, hg)
    pn = torch.randperm(12, generator=torch.Generator().manual_seed(1))      # new id of node i is inv[i]
    inv = torch.argsort(pn)
    pe = torch.randperm(hg.num_edges, generator=torch.Generator().manual_seed(2))
    edges2 = [[int(inv[v]) for v in edges[int(j)]] for j in pe]
    z2, g2, _ = enc(x[pn], Hypergraph.from_edge_list(edges2, 12))
    assert torch.allclose(z2, z[pn], atol=1e-5)
    assert torch.allclose(g2, g[pe], atol=1e-5)


def test_info_nce_matches_hand_computation():
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    z2 = torch.tensor([[1.0, 0.2], [0.1, 1.0], [-1.0, 1.0]])
    tau = 0.5

    def cos(a, b):
        return float(a @ b / (a.norm() * b.norm()))

    def half(A, B):
        tot = 0.0
        for i in range(3):
            pos = math.exp(cos(A[i], B[i]) / tau)
            neg = sum(math.exp(cos(A[i], A[k]) / tau) for k in range(3) if k != i)
            neg += sum(math.exp(cos(A[i], B[k]) / tau) for k in range(3))
            tot += -math.log(pos / neg)
        return tot / 3

    assert float(info_nce(z1, z2, tau)) == pytest.approx(0.5 * (half(z1, z2) + half(z2, z1)), rel=1e-5)
    with pytest.raises(ValueError):
        info_nce(z1, z2[:2])


def test_training_is_deterministic_and_learns():
    data = hypergraph_sbm(num_nodes=80, num_edges=40, dim=8, seed=1)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        m = H2CL(8, 16)
        runs.append(train_h2cl(m, data.x, data.hg, epochs=8, lr=5e-3, seed=3))
    assert runs[0] == runs[1]
    assert runs[0][-1] < runs[0][0]
    with pytest.raises(ValueError):
        train_h2cl(m, data.x, data.hg, epochs=0)


# data

def test_structural_noise_flags_and_sizes():
    base = hypergraph_sbm(num_nodes=120, num_edges=60, seed=2)
    assert not bool(base.noisy.any())
    noisy = add_structural_noise(base, 0.5, seed=0)
    assert torch.equal(noisy.hg.edge_size(), base.hg.edge_size())
    assert float(noisy.noisy.float().mean()) == pytest.approx(0.5, abs=1e-6)
    y = noisy.y
    inc = noisy.hg.incidence
    for e, mem in enumerate(noisy.hg.edges()):
        maj = int(torch.bincount(y[base.hg.edges()[e]]).argmax())
        flagged = noisy.noisy[inc[1] == e]
        assert all(int(y[v]) != maj for v, f in zip(inc[0][inc[1] == e].tolist(), flagged.tolist()) if f)
    with pytest.raises(ValueError):
        add_structural_noise(base, 1.0)


def test_digits_hypergraph():
    d = digits_knn_hypergraph(k=4, num_nodes=100, seed=0)
    assert d.hg.num_edges == 100 and d.x.shape == (100, 64)
    assert int(d.hg.edge_size().max()) == 5


# reproduction

def test_reproduce_quick_is_well_formed():
    out = __import__("icml26.graphs.h2cl.reproduce", fromlist=["reproduce"]).reproduce(Budget.QUICK, 0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) == 5 and len(out.checks) == 2
    # fixed-bar claims (AUC > 0.8, weighted heterogeneity < 0) carry the untrained encoder's weights as control
    bars = [c for c in claims if c.bar]
    assert len(bars) == 2 and all(c.control is not None and "untrained" in c.control_arm for c in bars)
    for c in out.claims:
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
        if c.kind == "claim":
            assert c.falsifier
    assert math.isfinite(out.metrics["epoch_cost_ratio_h2cl_over_hgnn"])
    assert {"accuracy", "ablations_sbm_noise0.4", "weights"} <= set(out.tables)
    # fresh-eyes review: paired instances are measured_i - reference_i (not measured_i against 0) ...
    for c in claims:
        if c.paired is not None:
            assert np.mean(c.paired) == pytest.approx(c.measured - c.reference, abs=1e-9), c.statement
    # ... the robustness and clean claims carry the untrained encoder as control ...
    acc = [c for c in claims if "robust" in c.statement or "Clean" in c.statement]
    assert len(acc) == 3 and all(c.control is not None and "untrained" in c.control_arm for c in acc)
    # ... and are measured against the strongest other arm, not plain HCL alone
    for tb in ("sbm", "digits"):
        gaps = [v for k, v in out.metrics.items() if k.startswith(f"{tb}_robust_gap_vs_") and "strongest" not in k]
        assert len(gaps) >= 2 and out.metrics[f"{tb}_robust_gap_vs_strongest"] == pytest.approx(min(gaps))


# argument checks on every public name (harness.validate)

def _bad_cases():
    x, hg, _ = _small()
    x32 = x.float()
    w = torch.ones(hg.nnz)
    g = torch.zeros(hg.num_edges, x.shape[1])
    h = heterogeneity(x32, hg)
    data = hypergraph_sbm(num_nodes=48, num_edges=20, seed=0)
    model = H2CL(x.shape[1], hid=4)
    nan_x = x32.clone()
    nan_x[0, 0] = float("nan")
    inc = hg.incidence
    return [
        (Hypergraph, dict(incidence=inc.float(), num_nodes=12, num_edges=6), TypeError, "integer"),
        (Hypergraph, dict(incidence=inc, num_nodes=3, num_edges=6), ValueError, "node ids"),
        (HypergraphData, dict(x=x32, y=torch.zeros(5, dtype=torch.long), hg=hg,
                              noisy=torch.zeros(hg.nnz, dtype=torch.bool)), ValueError, "y must be"),
        (HypergraphData, dict(x=x32, y=torch.zeros(12, dtype=torch.long), hg=hg, noisy=torch.zeros(3)),
         ValueError, "noisy"),
        (hypergraph_sbm, dict(num_nodes=0), ValueError, "num_nodes"),
        (hypergraph_sbm, dict(num_edges=2.5), TypeError, "num_edges"),
        (hypergraph_sbm, dict(feature_snr=float("nan")), ValueError, "feature_snr"),
        (digits_knn_hypergraph, dict(k=0), ValueError, "k must"),
        (digits_knn_hypergraph, dict(k=8, num_nodes=5), ValueError, "num_nodes"),
        (add_structural_noise, dict(data=hg, frac=0.2), TypeError, "HypergraphData"),
        (add_structural_noise, dict(data=data, frac=float("nan")), ValueError, "frac"),
        (heterogeneity, dict(x=nan_x, hg=hg), ValueError, "NaN"),
        (weighted_heterogeneity, dict(h=h, w=torch.ones(3)), ValueError, "same shape"),
        (weighted_heterogeneity, dict(h=h, w=-torch.ones(hg.nnz)), ValueError, "non-negative"),
        (weighted_heterogeneity, dict(h=torch.ones(0), w=torch.ones(0)), ValueError, "h"),
        (dirichlet_energy, dict(f=x32, g=g[:2], hg=hg, w=w, x=x32), ValueError, "g must have shape"),
        (dirichlet_energy, dict(f=x32, g=g, hg=hg, w=torch.ones(2), x=x32), ValueError, "w must have shape"),
        (edge_mean, dict(f=x32[:3], hg=hg), ValueError, "f must have shape"),
        (edge_mean, dict(f=x32, hg=hg, w=torch.full((hg.nnz,), float("nan"))), ValueError, "w has"),
        (node_update, dict(x=x32, g=g, hg=hg, w=w, lam=0.0), ValueError, "lam"),
        (coordinate_descent_sweep, dict(f=x32, x=x32, hg=hg, w=-w), ValueError, "non-negative"),
        (coordinate_descent_sweep, dict(f=x32, x=x32, hg=hg, w=w, lam=float("inf")), ValueError, "lam"),
        (HeteroAwareViewGenerator, dict(p_mean=1.5), ValueError, "p_mean"),
        (HeteroAwareViewGenerator().drop_probabilities, dict(h=torch.full((4,), float("nan"))), ValueError, "h has"),
        (HeteroAwareViewGenerator(), dict(x=x32, hg=hg, h=torch.ones(3)), ValueError, "h must have shape"),
        (HHConv, dict(in_dim=0, out_dim=4), ValueError, "in_dim"),
        (HHConv, dict(in_dim=5, out_dim=4, lam=-1.0), ValueError, "lam"),
        (HHConv(5, 4), dict(f=x32[:, :3], hg=hg), ValueError, "feature columns"),
        (H2CLEncoder, dict(in_dim=5, hid=4, layers=0), ValueError, "layers"),
        (H2CL, dict(in_dim=5, hid=4, tau=0.0), ValueError, "tau"),
        (H2CL, dict(in_dim=5, hid=4, p_views=(0.2,)), ValueError, "p_views"),
        (model.loss, dict(x=x32, hg=hg, h=torch.ones(2)), ValueError, "h must have shape"),
        (model.embed, dict(x=nan_x, hg=hg), ValueError, "NaN"),
        (info_nce, dict(z1=torch.ones(1, 3), z2=torch.ones(1, 3)), ValueError, "at least 2 rows"),
        (info_nce, dict(z1=torch.full((4, 3), float("nan")), z2=torch.ones(4, 3)), ValueError, "z1 has"),
        (train_h2cl, dict(model=model, x=x32, hg=hg, lr=-1.0), ValueError, "lr"),
        (train_h2cl, dict(model=model, x=x32[:, :3], hg=hg), ValueError, "feature columns"),
        (train_h2cl, dict(model=torch.nn.Linear(5, 4), x=x32, hg=hg), TypeError, "H2CL"),
        (HGNN, dict(in_dim=5, hid=4, num_classes=1), ValueError, "num_classes"),
        (HGNN, dict(in_dim=5, hid=4, num_classes=3, dropout=1.0), ValueError, "dropout"),
        (train_hgnn, dict(x=x32, y=torch.zeros(12), hg=hg, train_idx=torch.arange(3)), TypeError, "integer"),
        (train_hgnn, dict(x=x32, y=torch.zeros(12, dtype=torch.long), hg=hg, train_idx=torch.tensor([0, 99])),
         ValueError, "train_idx"),
        (train_hgnn, dict(x=x32, y=torch.zeros(12, dtype=torch.long), hg=hg, train_idx=torch.arange(3),
                          epochs=0), ValueError, "epochs"),
        (incidence_weights, dict(model=torch.nn.Linear(5, 4), x=x32, hg=hg), TypeError, "H2CL"),
    ]


@pytest.mark.parametrize("i", range(len(_bad_cases())))
def test_bad_inputs_are_refused(i):
    fn, kwargs, err, msg = _bad_cases()[i]
    with pytest.raises(err, match=msg):
        fn(**kwargs)


def _public_name(fn) -> str:
    if isinstance(fn, type):
        return fn.__name__
    if hasattr(fn, "__self__"):            # bound method: its class
        return type(fn.__self__).__name__
    return getattr(fn, "__name__", type(fn).__name__)


def test_every_public_name_has_a_bad_input_case():
    import icml26.graphs.h2cl as pkg

    covered = {_public_name(fn) for fn, *_ in _bad_cases()}
    assert set(pkg.__all__) <= covered, set(pkg.__all__) - covered
