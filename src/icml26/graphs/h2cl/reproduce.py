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

Claims: H2CL more robust under 40-60% noise than the strongest other arm (plain HCL, features + LR, the
ablations; >= 2 points, spec), with the untrained encoder as control; H2CL competitive on clean data with the
strongest arm (within 1 point), same control; learned weights separate injected incidences (ROC-AUC > 0.8);
weighted heterogeneity below unweighted at every layer. Checks: a W = I layer with one fixed weight is a
coordinate-descent step (energy does not increase); the shuffled-label probe is at chance. The encoder's actual
two-weight update (a_ve, b_ve) is measured, not claimed, as a descent step.
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

from .heterogeneity import (
    coordinate_descent_sweep,
    dirichlet_energy,
    edge_mean,
    heterogeneity,
    node_update,
    weighted_heterogeneity,
)
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
UNTRAINED = "H2CL, untrained encoder (control)"
FEATURES = "features + LR"
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
    """Max over 5 sweeps of E(after) - E(before) for the W = I, identity-activation layer with a *single* weight
    w (the model's first-layer a_ve, held fixed, in both half-steps): <= 0 up to rounding by the
    coordinate-descent theorem. The encoder itself uses a_ve in the G-step and b_ve in the F-step: see
    :func:`_two_weight_energy_change`."""
    w = incidence_weights(model, data.x, data.hg)[0].double()
    x = data.x.double()
    f, worst = x.clone(), -float("inf")
    g = torch.zeros(data.hg.num_edges, x.shape[1], dtype=x.dtype)
    for _ in range(5):
        e0 = float(dirichlet_energy(f, g, data.hg, w, x))
        f, g = coordinate_descent_sweep(f, x, data.hg, w)
        worst = max(worst, float(dirichlet_energy(f, g, data.hg, w, x)) - e0)
    return worst


def _two_weight_energy_change(data: HypergraphData, beta: float) -> tuple[float, float]:
    """The encoder's actual update with W = I and identity activation (G from a_ve, F from b_ve, both recomputed
    from the current f at inverse temperature ``beta``), 5 layers: max energy change E(after) - E(before) with the
    layer's weights frozen at w = a and at w = b ('before' uses the G-optimal g for the current f under w). Not a
    theorem: with a != b the two half-steps minimise different energies."""
    x = data.x.double()
    v, e = data.hg.incidence
    f, worst_a, worst_b = x.clone(), -float("inf"), -float("inf")
    for _ in range(5):
        gbar = edge_mean(f, data.hg)
        a = torch.exp(-beta * (1 - torch.nn.functional.cosine_similarity(f[v], gbar[e], dim=-1)))
        g_new = edge_mean(f, data.hg, a)
        b = torch.exp(-beta * (1 - torch.nn.functional.cosine_similarity(f[v], g_new[e], dim=-1)))
        f_new = node_update(x, g_new, data.hg, b, 1.0)
        d_a = float(dirichlet_energy(f_new, g_new, data.hg, a, x) - dirichlet_energy(f, edge_mean(f, data.hg, a),
                                                                                      data.hg, a, x))
        d_b = float(dirichlet_energy(f_new, g_new, data.hg, b, x) - dirichlet_energy(f, edge_mean(f, data.hg, b),
                                                                                      data.hg, b, x))
        worst_a, worst_b = max(worst_a, d_a), max(worst_b, d_b)
        f = f_new
    return worst_a, worst_b


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
        if extras and frac in ROBUST:
            for name, kw in ABLATIONS.items():
                runs[name] = _fit(data, sz, seed, **kw)
        if extras and frac == HEADLINE:
            h = heterogeneity(data.x, data.hg)
            perm = torch.randperm(h.numel(), generator=torch.Generator().manual_seed(seed))
            runs["H2CL, shuffled-h guidance (control)"] = _fit(data, sz, seed, h=h[perm])
        for name, model in runs.items():
            c = _probe(model.embed(data.x, data.hg).numpy(), y, tr, te)
            out["correct"][name, frac], out["acc"][name, frac] = c, float(c.mean())
        # control: the same encoder, same init seed, no contrastive training (the paper's contribution removed)
        torch.manual_seed(seed)
        c = _probe(H2CL(data.x.shape[1], sz.hid).embed(data.x, data.hg).numpy(), y, tr, te)
        out["correct"][UNTRAINED, frac], out["acc"][UNTRAINED, frac] = c, float(c.mean())
        c = _probe(data.x.numpy(), y, tr, te)
        out["correct"][FEATURES, frac], out["acc"][FEATURES, frac] = c, float(c.mean())
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
                out["energy_two_weight"] = {b: _two_weight_energy_change(data, b) for b in
                                            (float(model.encoder.convs[0].beta.detach()), 5.0)}
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
    for name in ("H2CL", "plain HCL (TriCL-style)", "HGNN (supervised)", FEATURES, UNTRAINED):
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

    def diffs(res: dict, fracs, arm: str, method: str = H) -> np.ndarray:
        return np.concatenate([res["correct"][method, f] - res["correct"][arm, f] for f in fracs])

    def strongest(res: dict, fracs) -> tuple[str, dict]:
        """The non-method arm with the highest mean accuracy over ``fracs`` (plain HCL, features + LR, and the
        two ablations where they ran at every level); returns it and every candidate's mean accuracy."""
        cands = [P, FEATURES, *ABLATIONS]
        accs = {a: float(np.mean([res["acc"][a, f] for f in fracs])) for a in cands
                if all((a, f) in res["acc"] for f in fracs)}
        return max(accs, key=accs.get), accs

    rob = {"sbm": [f for f in ROBUST if f in sz.noise], "digits": [f for f in ROBUST if f in sz.digits_noise]}
    rob_claims, clean_d, clean_c, clean_ref = [], [], [], []
    for tb, res, title in (("sbm", sbm, "SBM hypergraph"), ("digits", dig, "digits kNN hypergraph")):
        fr = rob[tb]
        best, cand = strongest(res, fr)
        d, dc = diffs(res, fr, best), diffs(res, fr, best, UNTRAINED)
        metrics[f"{tb}_robust_gap_vs_strongest"] = float(d.mean())
        metrics[f"{tb}_robust_gap_untrained_vs_strongest"] = float(dc.mean())
        for arm in cand:
            metrics[f"{tb}_robust_gap_vs_{arm}"] = float(diffs(res, fr, arm).mean())
        # finding 6: "degrades less" read as a smaller drop from clean, as well as the level gap
        drop = {m: float(np.mean([res["acc"][m, 0.0] - res["acc"][m, f] for f in fr])) for m in (H, P)}
        metrics[f"{tb}_drop_plain_minus_drop_h2cl"] = drop[P] - drop[H]
        others = ", ".join(f"{a} {v:.3f}" for a, v in cand.items())
        rob_claims.append(Claim(
            f"{title}: H2CL is more robust under 40-60% structural noise than the strongest other arm",
            measured=float(d.mean()), op=">=", reference=0.02, paired=list(d - 0.02),
            baseline=f"strongest of plain HCL / features + LR / ablations by mean accuracy at the noisy levels: "
                     f"{best} (mean accuracies: {others})", paper="gap >= 2-3 points (spec)",
            metric=f"mean accuracy gap H2CL - {best} at noise {', '.join(f'{f:g}' for f in fr)} (per test node)",
            control=float(dc.mean()), control_paired=list(dc - 0.02),
            control_arm="the same encoder untrained (same init seed, no contrastive training), same probe",
            falsifier="accuracy gap to the strongest arm below 2 points, or the per-node paired interval of "
                      "(gap - 0.02) containing 0, or the untrained encoder passing too"))
        best0, _ = strongest(res, [0.0])
        clean_ref.append(f"{tb}: {best0}")
        clean_d.append(diffs(res, [0.0], best0))
        clean_c.append(diffs(res, [0.0], best0, UNTRAINED))
    d_clean, c_clean = np.concatenate(clean_d), np.concatenate(clean_c)
    metrics["clean_gap_vs_strongest"], metrics["clean_gap_untrained_vs_strongest"] = (float(d_clean.mean()),
                                                                                      float(c_clean.mean()))
    ew = sbm["energy_two_weight"]
    for b, (da, db) in ew.items():
        tag = "learned_beta" if b != 5.0 else "beta5"
        metrics[f"energy_two_weight_increase_w_a_{tag}"], metrics[f"energy_two_weight_increase_w_b_{tag}"] = da, db
    claims = [
        *rob_claims,
        Claim("Clean hypergraphs: H2CL is competitive with the strongest other arm (within 1 point)",
              measured=float(d_clean.mean()), op=">=", reference=-0.01, paired=list(d_clean + 0.01),
              baseline=f"strongest of plain HCL / features + LR on each clean testbed ({'; '.join(clean_ref)})",
              paper="competitive or superior",
              metric="accuracy gap H2CL - strongest arm, pooled over both clean testbeds (per test node)",
              control=float(c_clean.mean()), control_paired=list(c_clean + 0.01),
              control_arm="the same encoder untrained (same init seed, no contrastive training), same probe",
              falsifier="H2CL more than 1 point below the strongest arm on clean data, or the untrained encoder "
                        "within 1 point too"),
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
        Claim("A W = I, identity-activation layer with one fixed weight w (a_ve in both half-steps) is a "
              "coordinate-descent step on the weighted Dirichlet energy", kind="check",
              measured=sbm["energy"], op="<=", reference=1e-9, baseline="energy before the sweep",
              metric="max energy increase over 5 sweeps (float64)"),
        Claim("Control: the probe refit on shuffled labels is at chance (no leakage)", kind="check",
              measured=sbm["shuffled_probe"], op="<=", reference=sbm["chance"] + 0.1,
              baseline="majority-class rate + 0.1",
              metric=f"test accuracy with shuffled training labels (mean of {SHUFFLES} shuffles)"),
    ]
    extras = [{"method": n, "accuracy": round(sbm["acc"][n, HEADLINE], 4)} for n in
              (H, P, *ABLATIONS, "H2CL, shuffled-h guidance (control)", UNTRAINED)]
    tables = {"accuracy": rows, "ablations_sbm_noise0.4": extras,
              "weights": [{"testbed": tb, "layer": i + 1, "auc_weights": round(r["auc_w"][i], 4),
                           "auc_input_h": round(r["auc_h"], 4), "weighted_minus_mean_h": round(r["h_gap"][i], 5),
                           "beta": round(r["beta"][i], 3)} for tb, r in (("sbm", sbm), ("digits", dig))
                          for i in range(len(r["auc_w"]))]}
    figures = {"accuracy_vs_noise_sbm": _figure(sbm, sz.noise, "hypergraph SBM"),
               "accuracy_vs_noise_digits": _figure(dig, sz.digits_noise, "digits kNN hypergraph")}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures,
                   notes=f"H2CL epoch {t_h2 * 1e3:.1f} ms vs HGNN {t_hg * 1e3:.1f} ms (interleaved, same data)")
