"""Reproduction of [B08] H2CL: robustness of hypergraph contrastive learning to heterogeneous incidences.

Testbeds (no downloads): (i) a hypergraph SBM (4 classes, Gaussian class features, size-6 hyperedges) and
(ii) the HGNN-style kNN hypergraph on scikit-learn's bundled digits. Structural noise: a share of each
hyperedge's members (0, 20, 40, 60%) replaced by random nodes of other classes; the replaced incidences are
recorded (ground truth for the weight-separation claim only).

Methods, trained on the same data in the same run: H2CL (heterogeneity-aware views + re-weighting encoder);
TriCL-style plain hypergraph contrastive learning (uniform random incidence dropping + mean encoder, same GRACE
loss and sizes); ablations without the view generator and without re-weighting, and a random-guidance control
(H2CL whose views are guided by shuffled heterogeneity) at the headline noise; feature-only logistic regression;
supervised HGNN (torch_geometric ``HypergraphConv``) as a reference. Evaluation: frozen embeddings, logistic
regression probe on 10% labelled nodes, accuracy on 80%. Control: the probe refit on shuffled labels.

Claims: H2CL degrades less under 40-60% noise than the plain method (>= 2 points, spec); H2CL competitive on
clean data (within 1 point); learned weights separate injected incidences (ROC-AUC > 0.8); weighted
heterogeneity below unweighted at every layer. Checks: one layer with identity weights is a coordinate-descent
step (energy does not increase); the shuffled-label probe is at chance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from icml26.harness import Budget, Claim, Outcome, seed_everything

from .heterogeneity import coordinate_descent_sweep, dirichlet_energy, heterogeneity, weighted_heterogeneity
from .hypergraph import HypergraphData, add_structural_noise, digits_knn_hypergraph, hypergraph_sbm
from .model import H2CL, HGNN, incidence_weights, train_h2cl, train_hgnn


@dataclass(frozen=True)
class Sizes:
    sbm_nodes: int
    digits_nodes: int
    hid: int
    epochs: int
    hgnn_epochs: int
    noise: tuple          # structural-noise fractions on the SBM
    digits_noise: tuple   # structural-noise fractions on digits
    timing_epochs: int


SIZES = {
    Budget.QUICK: Sizes(240, 300, 32, 25, 100, (0.0, 0.4), (0.0, 0.4), 3),
    Budget.STANDARD: Sizes(400, 500, 64, 50, 200, (0.0, 0.2, 0.4, 0.6), (0.0, 0.4, 0.6), 5),
    Budget.FULL: Sizes(1200, 1797, 128, 100, 200, (0.0, 0.2, 0.4, 0.6), (0.0, 0.2, 0.4, 0.6), 10),
}

HEADLINE = 0.4            # noise level for ablations, controls and the weight claims
ROBUST = (0.4, 0.6)       # the robustness claim averages these noise levels
LR = 5e-3                 # our choice: 1e-3 (spec) under-trains at our 25-50 epochs
SHUFFLES = 20            # label shuffles averaged in the shuffled-label control
PLAIN = dict(reweight=False, uniform_views=True)
ABLATIONS = {"H2CL w/o view generator": dict(uniform_views=True), "H2CL w/o re-weighting": dict(reweight=False)}


# helper functions

def _split(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    perm = rng.permutation(n)
    return perm[: n // 10], perm[n // 5:]           # 10% probe-train, (10% unused validation), 80% test


def _probe(z: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray) -> np.ndarray:
    """Per-test-node correctness (0/1) of a logistic-regression probe on frozen, standardised features."""
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(z[tr], y[tr])
    return (clf.predict(z[te]) == y[te]).astype(float)


def _fit(data: HypergraphData, sz: Sizes, seed: int, h: torch.Tensor | None = None, **kw) -> H2CL:
    torch.manual_seed(seed)
    model = H2CL(data.x.shape[1], sz.hid, **kw)
    train_h2cl(model, data.x, data.hg, epochs=sz.epochs, lr=LR, seed=seed, h=h)
    return model


def _epoch_costs(data: HypergraphData, sz: Sizes, seed: int) -> tuple[float, float]:
    """Seconds per training epoch of H2CL and of supervised HGNN, interleaved on the same data."""
    torch.manual_seed(seed)
    h2, hg = H2CL(data.x.shape[1], sz.hid), HGNN(data.x.shape[1], sz.hid, int(data.y.max()) + 1)
    o1, o2 = torch.optim.Adam(h2.parameters(), lr=LR), torch.optim.Adam(hg.parameters(), lr=LR)
    h = heterogeneity(data.x, data.hg)
    tr = torch.arange(data.x.shape[0] // 10)
    gen = torch.Generator().manual_seed(seed)
    t1 = t2 = 0.0
    for _ in range(sz.timing_epochs):
        s = time.perf_counter()
        o1.zero_grad()
        h2.loss(data.x, data.hg, h, gen).backward()
        o1.step()
        t1 += time.perf_counter() - s
        s = time.perf_counter()
        o2.zero_grad()
        torch.nn.functional.cross_entropy(hg(data.x, data.hg)[tr], data.y[tr]).backward()
        o2.step()
        t2 += time.perf_counter() - s
    return t1 / sz.timing_epochs, t2 / sz.timing_epochs


def _energy_check(model: H2CL, data: HypergraphData) -> float:
    """Max over 5 sweeps of E(after) - E(before) for the W = I, identity-activation layer with the model's
    first-layer weights held fixed (<= 0 up to rounding by the coordinate-descent theorem)."""
    w = incidence_weights(model, data.x, data.hg)[0].double()
    x = data.x.double()
    f, worst = x.clone(), -float("inf")
    g = torch.zeros(data.hg.num_edges, x.shape[1], dtype=x.dtype)
    for _ in range(5):
        e0 = float(dirichlet_energy(f, g, data.hg, w, x))
        f, g = coordinate_descent_sweep(f, x, data.hg, w)
        worst = max(worst, float(dirichlet_energy(f, g, data.hg, w, x)) - e0)
    return worst


# one testbed

def run_testbed(base: HypergraphData, noise: tuple, sz: Sizes, seed: int, *, extras: bool) -> dict:
    """Accuracy per (method, noise) with per-node correctness; weights/heterogeneity at the headline noise."""
    rng = np.random.default_rng(seed)
    y = base.y.numpy()
    tr, te = _split(len(y), rng)
    out: dict = {"acc": {}, "correct": {}}
    for frac in noise:
        data = add_structural_noise(base, frac, seed=seed + 17) if frac > 0 else base
        runs = {"H2CL": _fit(data, sz, seed), "plain HCL (TriCL-style)": _fit(data, sz, seed, **PLAIN)}
        if extras and frac == HEADLINE:
            for name, kw in ABLATIONS.items():
                runs[name] = _fit(data, sz, seed, **kw)
            h = heterogeneity(data.x, data.hg)
            perm = torch.randperm(h.numel(), generator=torch.Generator().manual_seed(seed))
            runs["H2CL, shuffled-h guidance (control)"] = _fit(data, sz, seed, h=h[perm])
        for name, model in runs.items():
            c = _probe(model.embed(data.x, data.hg).numpy(), y, tr, te)
            out["correct"][name, frac], out["acc"][name, frac] = c, float(c.mean())
        c = _probe(data.x.numpy(), y, tr, te)
        out["correct"]["features + LR", frac], out["acc"]["features + LR", frac] = c, float(c.mean())
        hgnn = train_hgnn(data.x, data.y, data.hg, torch.as_tensor(tr), hid=sz.hid, epochs=sz.hgnn_epochs, seed=seed)
        with torch.no_grad():
            out["acc"]["HGNN (supervised)", frac] = float((hgnn(data.x, data.hg).argmax(1).numpy()[te] == y[te]).mean())
        if frac == HEADLINE:
            model = runs["H2CL"]
            h = heterogeneity(data.x, data.hg)
            ws = incidence_weights(model, data.x, data.hg)
            noisy = data.noisy.numpy()
            out["auc_w"] = [float(roc_auc_score(noisy, -w.numpy())) for w in ws]
            out["auc_h"] = float(roc_auc_score(noisy, h.numpy()))
            out["h_gap"] = [weighted_heterogeneity(h, w) - float(h.mean()) for w in ws]
            out["h_mean"] = float(h.mean())
            # control: the same weights from an untrained encoder (same init seed, no contrastive training)
            torch.manual_seed(seed)
            untrained = H2CL(data.x.shape[1], sz.hid)
            wu = incidence_weights(untrained, data.x, data.hg)
            out["auc_w_untrained"] = [float(roc_auc_score(noisy, -w.numpy())) for w in wu]
            out["h_gap_untrained"] = [weighted_heterogeneity(h, w) - float(h.mean()) for w in wu]
            out["beta"] = [float(c.beta.detach()) for c in model.encoder.convs]
            if extras:
                out["energy"] = _energy_check(model, data)
                z = model.embed(data.x, data.hg).numpy()
                shuf = []
                for _ in range(SHUFFLES):     # averaged: one shuffle of ~40 labels can keep much of the truth
                    y_shuf = y.copy()
                    y_shuf[tr] = rng.permutation(y[tr])
                    shuf.append(float(_probe(z, y_shuf, tr, te).mean()))
                out["shuffled_probe"] = float(np.mean(shuf))
                out["chance"] = float(np.max(np.bincount(y[te])) / len(te))
                out["epoch_cost"] = _epoch_costs(data, sz, seed)
    return out


# figure

def _figure(res: dict, noise: tuple, title: str):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4.0))
    ax = fig.add_subplot()
    for name in ("H2CL", "plain HCL (TriCL-style)", "HGNN (supervised)", "features + LR"):
        ax.plot(noise, [res["acc"][name, f] for f in noise], "o-", label=name)
    ax.set_xlabel("structural noise (share of each hyperedge replaced)")
    ax.set_ylabel("test accuracy (linear probe / HGNN)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    torch.set_num_threads(1)
    sbm = run_testbed(hypergraph_sbm(num_nodes=sz.sbm_nodes, num_edges=sz.sbm_nodes // 2, feature_snr=2.0,
                                     seed=seed), sz.noise, sz, seed, extras=True)
    dig = run_testbed(digits_knn_hypergraph(k=8, num_nodes=sz.digits_nodes, seed=seed), sz.digits_noise, sz,
                      seed + 1, extras=False)
    H, P = "H2CL", "plain HCL (TriCL-style)"

    metrics: dict[str, float] = {}
    rows = []
    for tb, res, noise in (("sbm", sbm, sz.noise), ("digits", dig, sz.digits_noise)):
        for (name, frac), acc in sorted(res["acc"].items(), key=lambda kv: (kv[0][1], kv[0][0])):
            metrics[f"{tb}_acc_{name}_noise{frac:g}"] = acc
            rows.append({"testbed": tb, "method": name, "noise": frac, "accuracy": round(acc, 4)})
    for tb, res in (("sbm", sbm), ("digits", dig)):
        metrics[f"{tb}_auc_h_input"] = res["auc_h"]
        for i, (a, g) in enumerate(zip(res["auc_w_untrained"], res["h_gap_untrained"])):
            metrics[f"{tb}_auc_weights_untrained_layer{i + 1}"] = a
            metrics[f"{tb}_weighted_minus_mean_h_untrained_layer{i + 1}"] = g
        for i, (a, g, b) in enumerate(zip(res["auc_w"], res["h_gap"], res["beta"])):
            metrics[f"{tb}_auc_weights_layer{i + 1}"] = a
            metrics[f"{tb}_weighted_minus_mean_h_layer{i + 1}"] = g
            metrics[f"{tb}_beta_layer{i + 1}"] = b
    t_h2, t_hg = sbm["epoch_cost"]
    metrics.update(epoch_seconds_h2cl=t_h2, epoch_seconds_hgnn=t_hg, epoch_cost_ratio_h2cl_over_hgnn=t_h2 / t_hg,
                   shuffled_label_probe_acc=sbm["shuffled_probe"], energy_max_increase=sbm["energy"])

    def diffs(res: dict, fracs) -> np.ndarray:
        return np.concatenate([res["correct"][H, f] - res["correct"][P, f] for f in fracs])

    rob = [f for f in ROBUST if f in sz.noise]
    rob_d = [f for f in ROBUST if f in sz.digits_noise]
    d_sbm, d_dig = diffs(sbm, rob), diffs(dig, rob_d)
    d_clean = np.concatenate([diffs(sbm, [0.0]), diffs(dig, [0.0])])
    claims = [
        Claim("SBM hypergraph: H2CL degrades less under 40-60% structural noise than plain hypergraph CL",
              measured=float(d_sbm.mean()), op=">=", reference=0.02, paired=list(d_sbm),
              baseline="TriCL-style plain HCL (uniform views, mean encoder), same run", paper="gap >= 2-3 points (spec)",
              metric="mean accuracy gap H2CL - plain at noise 0.4 and 0.6 (per test node paired)",
              falsifier="accuracy gap below 2 points, or the per-node paired interval containing 0"),
        Claim("digits kNN hypergraph: H2CL degrades less under 40-60% structural noise than plain hypergraph CL",
              measured=float(d_dig.mean()), op=">=", reference=0.02, paired=list(d_dig),
              baseline="TriCL-style plain HCL, same run", paper="gap >= 2-3 points (spec)",
              metric="mean accuracy gap H2CL - plain at the noisy levels (per test node paired)",
              falsifier="accuracy gap below 2 points, or the per-node paired interval containing 0"),
        Claim("Clean hypergraphs: H2CL is competitive with plain hypergraph CL (within 1 point)",
              measured=float(d_clean.mean()), op=">=", reference=-0.01,
              baseline="TriCL-style plain HCL on the clean SBM and digits hypergraphs", paper="competitive or superior",
              metric="accuracy gap H2CL - plain, pooled over both clean testbeds",
              falsifier="H2CL more than 1 point below the plain method on clean data"),
        Claim("Learned re-weighting separates injected (heterogeneous) incidences from clean ones",
              measured=float(sbm["auc_w"][0]), op=">", reference=0.8, baseline="ROC-AUC 0.8 (spec's bar)", bar=True,
              control=float(sbm["auc_w_untrained"][0]),
              control_arm="the same layer-1 weights of an untrained encoder (same init, no contrastive training)",
              paper="ROC-AUC > 0.8 (spec)", metric="ROC-AUC of -a_ve (layer 1) for injected vs clean incidences, "
              f"SBM at {HEADLINE:g} noise", falsifier="ROC-AUC at or below 0.8"),
        Claim("Re-weighting lowers the heterogeneity seen by message passing at every layer",
              measured=float(max(sbm["h_gap"] + dig["h_gap"])), op="<", reference=0.0, bar=True,
              control=float(max(sbm["h_gap_untrained"] + dig["h_gap_untrained"])),
              control_arm="the same weights of an untrained encoder (same init, no contrastive training)",
              baseline="unweighted mean heterogeneity of the same incidences",
              metric="max over layers and testbeds of sum(a h)/sum(a) - mean(h)",
              paper="reweighting patterns effectively reduce heterogeneity",
              falsifier="weighted heterogeneity at or above the unweighted mean at some layer"),
        Claim("One encoder layer (W = I, identity activation, fixed w) is a coordinate-descent step on the "
              "heterogeneity-weighted Dirichlet energy", kind="check",
              measured=sbm["energy"], op="<=", reference=1e-9, baseline="energy before the sweep",
              metric="max energy increase over 5 sweeps (float64)"),
        Claim("Control: the probe refit on shuffled labels is at chance (no leakage)", kind="check",
              measured=sbm["shuffled_probe"], op="<=", reference=sbm["chance"] + 0.1,
              baseline="majority-class rate + 0.1",
              metric=f"test accuracy with shuffled training labels (mean of {SHUFFLES} shuffles)"),
    ]
    extras = [{"method": n, "accuracy": round(sbm["acc"][n, HEADLINE], 4)} for n in
              (H, P, *ABLATIONS, "H2CL, shuffled-h guidance (control)")]
    tables = {"accuracy": rows, "ablations_sbm_noise0.4": extras,
              "weights": [{"testbed": tb, "layer": i + 1, "auc_weights": round(r["auc_w"][i], 4),
                           "auc_input_h": round(r["auc_h"], 4), "weighted_minus_mean_h": round(r["h_gap"][i], 5),
                           "beta": round(r["beta"][i], 3)} for tb, r in (("sbm", sbm), ("digits", dig))
                          for i in range(len(r["auc_w"]))]}
    figures = {"accuracy_vs_noise_sbm": _figure(sbm, sz.noise, "hypergraph SBM"),
               "accuracy_vs_noise_digits": _figure(dig, sz.digits_noise, "digits kNN hypergraph")}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures,
                   notes=f"H2CL epoch {t_h2 * 1e3:.1f} ms vs HGNN {t_hg * 1e3:.1f} ms (interleaved, same data)")
