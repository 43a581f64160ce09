"""Reproduction of [A17] UniFast-HGR: cost scaling in the feature dimension K, and learning quality.

(a) forward + backward time of UniFast-HGR, OptFast-HGR, Soft-HGR and whitened HGR / DCCA, each baseline in
    its covariance (K x K) form and in its batch Gram (m x m, "dual") form (DCCA's Gram matmul in float64 and in
    float32), and InfoNCE, on random (m, K) batches as K grows; log-log slopes over K >= 4m; baselines are
    stopped ("DNF") past a time cap; UniFast against every DCCA form with compare_times at a moderate K and
    against both Gram forms at the largest K, the fastest baseline deciding.
(b) two-view digits (left half + noise vs right half): two MLP encoders trained with each loss from the same
    initialisation; cross-view retrieval R@1 and a linear probe on the test split.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from matplotlib.figure import Figure
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import Tensor, nn

from icml26.harness import Budget, Claim, Outcome, TimedComparison, compare_times, limit_threads, seed_everything
from icml26.harness.timing import TIMING_TOLERANCE

from .benchmark import benchmark_loss_scaling, loglog_slope
from .losses import DCCALoss, InfoNCELoss, OptFastHGRLoss, SoftHGRLoss, UniFastHGRLoss


@dataclass(frozen=True)
class Sizes:
    m: int                      # local batch size in the cost sweep
    Ks: tuple[int, ...]         # feature dimensions swept
    reps: int                   # timed calls per (loss, K)
    warmup: int
    time_cap_s: float           # a loss is stopped ("DNF") past this time per call
    ratio_K: int                # DCCA / UniFast ratio at this K (or the largest K where DCCA finished)
    ratio_iters: int
    train_Ks: tuple[int, ...]   # encoder output dimensions in the learning task
    epochs: int
    batch: int
    threads: int               # torch threads (1: on a shared CPU, OpenMP barriers swamp small ops)


SIZES = {
    Budget.QUICK: Sizes(m=64, Ks=tuple(2**i for i in range(8, 17)), reps=1, warmup=1, time_cap_s=2.0,
                        ratio_K=512, ratio_iters=3, train_Ks=(64, 256), epochs=8, batch=128, threads=1),
    Budget.STANDARD: Sizes(m=128, Ks=tuple(2**i for i in range(6, 17)), reps=5, warmup=2, time_cap_s=5.0,
                           ratio_K=2048, ratio_iters=3, train_Ks=(64, 1024), epochs=40, batch=128, threads=1),
    Budget.FULL: Sizes(m=128, Ks=tuple(2**i for i in range(6, 17)), reps=5, warmup=2, time_cap_s=30.0,
                       ratio_K=2048, ratio_iters=5, train_Ks=(64, 1024), epochs=40, batch=128, threads=2),
}

NAMES = {"unifast": "UniFast-HGR", "optfast": "OptFast-HGR (s=32)", "softhgr": "Soft-HGR (covariance form)",
         "softhgr_gram": "Soft-HGR (Gram form)", "dcca": "DCCA / whitened HGR (covariance form)",
         "dcca_gram": "DCCA / whitened HGR (Gram form)",
         "dcca_gram32": "DCCA / whitened HGR (Gram form, float32 matmul)", "infonce": "InfoNCE",
         "ccazoo_dcca": "DCCA (cca-zoo CCALoss)"}
TIMING_REPEATS = 7  # interleaved repeats per timed claim (the paired interval is over these)
R1_MARGIN = 0.02  # "beats untrained encoders by a margin": 2 pp of R@1, ~10x chance among 540 test pairs (our choice)


def _losses(seed: int, *, timing: bool = True) -> dict[str, Callable[[Tensor, Tensor], Tensor]]:
    """The losses compared. Timing sweeps both forms of each baseline; training needs each objective once
    (the Gram forms are the same objectives), with DCCA in its Gram form (cheap at any K, equal values)."""
    losses: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
        "unifast": UniFastHGRLoss(),
        "optfast": OptFastHGRLoss(32, generator=torch.Generator().manual_seed(seed)),
        "softhgr": SoftHGRLoss(),
        "dcca": DCCALoss(ridge=1e-3, form="covariance" if timing else "gram"),
        "infonce": InfoNCELoss(0.1),
    }
    if timing:
        losses["softhgr_gram"] = SoftHGRLoss(form="gram")
        losses.update(_gram_dccas())
    return losses


def _gram_dccas() -> dict[str, DCCALoss]:
    """The two Gram-form DCCA baselines: the K-long Gram matmul in float64, and in the input dtype (float32, about
    half the cost; diagonal-relative jitter, m x m Cholesky in float64)."""
    return {"dcca_gram": DCCALoss(ridge=1e-3, form="gram"),
            "dcca_gram32": DCCALoss(ridge=1e-3, form="gram", gram_dtype="input")}


# (a) cost scaling


def _scaling(sz: Sizes, seed: int) -> tuple[dict, dict[str, float], list[dict], Figure]:
    losses = _losses(seed)
    if importlib.util.find_spec("cca_zoo") is not None:  # optional peer: cca-zoo's whitening loss, timed alongside
        from cca_zoo.deep.objectives import CCALoss

        peer = CCALoss(reg_covar=1e-3)
        losses["ccazoo_dcca"] = lambda f, g: peer([f, g])
    res = benchmark_loss_scaling(losses, m=sz.m, Ks=sz.Ks, reps=sz.reps, warmup=sz.warmup,
                                 time_cap_s=sz.time_cap_s, seed=seed, clock="cpu")
    metrics: dict[str, float] = {}
    rows = []
    for name, rec in res.items():
        metrics[f"slope_{name}"] = loglog_slope(rec["K"], rec["min_s"], k_min=4 * sz.m)
        done = [k for k, s in zip(rec["K"], rec["status"]) if s == "ok"]
        metrics[f"max_K_{name}"] = float(max(done)) if done else math.nan
        for i, K in enumerate(rec["K"]):
            rows.append({"loss": NAMES[name], "K": K, "min_s": rec["min_s"][i], "median_s": rec["median_s"][i],
                         "status": rec["status"][i], "finite": rec["finite"][i]})

    fig = Figure(figsize=(6, 4.2))
    ax = fig.add_subplot(111)
    for name, rec in res.items():
        ax.loglog(rec["K"], rec["min_s"], "o-", label=f"{NAMES[name]} (slope {metrics[f'slope_{name}']:.2f})")
        dnf = [k for k, s in zip(rec["K"], rec["status"]) if s != "ok"]
        if dnf:
            ax.plot([dnf[0]], [sz.time_cap_s], "x", color=ax.lines[-1].get_color(), ms=10)
    ax.axhline(sz.time_cap_s, color="gray", ls=":", lw=1, label=f"time cap {sz.time_cap_s:g} s (x = DNF)")
    ax.set_xlabel("feature dimension K")
    ax.set_ylabel("forward + backward CPU time, min of reps [s]")
    ax.set_title(f"[A17] loss cost vs K (m = {sz.m}, float32, {sz.threads} thread(s))")
    ax.legend(fontsize=7)
    return res, metrics, rows, fig


def _time_against_unifast(sz: Sizes, K: int, seed: int, baselines: dict[str, Callable[[Tensor, Tensor], Tensor]]
                          ) -> dict[str, TimedComparison]:
    """Each baseline loss against UniFast on the same (m, K) features, forward + backward: ``compare_times``
    (interleaved, CPU time, the baseline also timed against itself as the same-work control)."""
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(sz.m, K, generator=gen).requires_grad_()
    g = (f.detach() + torch.randn(sz.m, K, generator=gen)).requires_grad_()

    def call(loss: Callable[[Tensor, Tensor], Tensor]) -> Callable[[], None]:
        return lambda: torch.autograd.grad(loss(f, g), (f, g))

    unifast = call(UniFastHGRLoss())
    return {k: compare_times(unifast, call(v), repeats=max(TIMING_REPEATS, sz.ratio_iters), warmup=1, clock="cpu")
            for k, v in baselines.items()}


def _ratio(sz: Sizes, res: dict, seed: int) -> tuple[dict[str, TimedComparison | None], int]:
    """DCCA (covariance form and both Gram forms) against UniFast at the largest K <= ratio_K where the
    covariance-form DCCA finished. Returns ({form: TimedComparison or None}, K)."""
    ok = [k for k, s in zip(res["dcca"]["K"], res["dcca"]["status"]) if s == "ok" and k <= sz.ratio_K]
    if not ok:
        return {"dcca": None, "dcca_gram": None, "dcca_gram32": None}, 0
    K = max(ok)
    forms = {"dcca": DCCALoss(ridge=1e-3), **_gram_dccas()}
    return dict(_time_against_unifast(sz, K, seed, forms)), K


def _ratio_at_max(sz: Sizes, res: dict, seed: int) -> dict[str, TimedComparison | None]:
    """Both Gram-form DCCAs against UniFast at the sweep's largest K, timed like :func:`_ratio`; ``None`` for a form
    that did not finish there (or when UniFast did not)."""
    K = res["unifast"]["K"][-1]
    done = {name: loss for name, loss in _gram_dccas().items()
            if res[name]["K"][-1] == K and res[name]["status"][-1] == "ok" and res["unifast"]["status"][-1] == "ok"}
    timed = _time_against_unifast(sz, K, seed + 1, done) if done else {}
    return {name: timed.get(name) for name in _gram_dccas()}


def _gram_dtype_agreement(m: int, K: int, seed: int) -> float:
    """Max relative difference (value and gradient) of the float32-matmul Gram-form DCCA against the float64 one on
    timing-like features (m, K): the fast Gram baseline must compute the same loss to count."""
    gen = torch.Generator().manual_seed(seed)
    f = torch.randn(m, K, generator=gen).requires_grad_()
    g = (f.detach() + torch.randn(m, K, generator=gen)).requires_grad_()
    losses = _gram_dccas()
    a, b = losses["dcca_gram"](f, g), losses["dcca_gram32"](f, g)
    ga, gb = torch.autograd.grad(a, (f, g)), torch.autograd.grad(b, (f, g))
    return max(float((a - b).detach().abs() / a.detach().abs().clamp_min(1e-12)),
               *(float((x - y).abs().max() / x.abs().max().clamp_min(1e-12)) for x, y in zip(ga, gb)))


def _cheaper_claim(statement: str, comps: dict[str, TimedComparison | None], factor: float,
                   **kw) -> Claim:
    """UniFast's median CPU time x ``factor`` below the fastest of several baselines' (``baselines=``: the
    strongest decides), paired over that baseline's interleaved repeats (factor x UniFast_i - baseline_i) and
    carrying its same-work control. A baseline that did not finish is not a number (never the strongest)."""
    ok = {NAMES[k]: tc for k, tc in comps.items() if tc is not None}
    uni = [t for tc in ok.values() for t in tc.method]
    measured = factor * statistics.median(uni) if uni else math.nan
    baselines = {NAMES[k]: statistics.median(tc.baseline) if tc is not None else math.nan for k, tc in comps.items()}
    paired = {name: [factor * u - b for u, b in zip(tc.method, tc.baseline)] for name, tc in ok.items()}
    strongest = min(ok, key=lambda n: baselines[n]) if ok else None  # the rule Claim applies for op "<"
    control = ok[strongest].control_ratio if strongest else math.nan
    return Claim(statement, measured, "<", baselines=baselines, paired=paired or None, timing_control=control,
                 timing_tolerance=TIMING_TOLERANCE, **kw)


# (b) learning quality on two-view digits


def two_view_digits(seed: int, noise: float = 0.1) -> tuple[np.ndarray, ...]:
    """View A: left 8x4 half of each digit + Gaussian noise (noise x max intensity); view B: right half.

    Returns (a_train, b_train, y_train, a_test, b_test, y_test), intensities scaled to [0, 1], 70/30 split.
    """
    d = load_digits()
    img = d.images / 16.0
    rng = np.random.default_rng(seed)
    a = img[:, :, :4].reshape(len(img), -1) + noise * rng.standard_normal((len(img), 32))
    b = img[:, :, 4:].reshape(len(img), -1)
    a_tr, a_te, b_tr, b_te, y_tr, y_te = train_test_split(
        a.astype(np.float32), b.astype(np.float32), d.target, test_size=0.3, random_state=seed, stratify=d.target)
    return a_tr, b_tr, y_tr, a_te, b_te, y_te


def _encoder(K: int) -> nn.Module:
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, K))


def _train(loss_fn: Callable[[Tensor, Tensor], Tensor], K: int, data: tuple, sz: Sizes, seed: int):
    a_tr, b_tr = torch.from_numpy(data[0]), torch.from_numpy(data[1])
    torch.manual_seed(seed)  # same initial encoders for every loss
    enc_a, enc_b = _encoder(K), _encoder(K)
    opt = torch.optim.Adam([*enc_a.parameters(), *enc_b.parameters()], lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    n, steps, finite = len(a_tr), 0, 0
    t0 = time.perf_counter()
    for _ in range(sz.epochs):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - sz.batch + 1, sz.batch):  # full batches only: m stays fixed
            idx = perm[i:i + sz.batch]
            loss = loss_fn(enc_a(a_tr[idx]), enc_b(b_tr[idx]))
            steps += 1
            if not torch.isfinite(loss):
                continue  # counted as a non-finite step; no update
            finite += 1
            opt.zero_grad()
            loss.backward()
            opt.step()
    return enc_a, enc_b, finite / max(steps, 1), time.perf_counter() - t0


@torch.no_grad()
def _evaluate(enc_a: nn.Module, enc_b: nn.Module, data: tuple, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-test-pair hits (0/1): retrieval R@1 (A -> B) and the view-A linear probe; NaN if features are not
    finite. Test pairs are the same for every loss, so two losses' hits are paired."""
    a_tr, b_tr, y_tr, a_te, b_te, y_te = data
    za_tr, zb_tr = enc_a(torch.from_numpy(a_tr)), enc_b(torch.from_numpy(b_tr))
    za, zb = enc_a(torch.from_numpy(a_te)), enc_b(torch.from_numpy(b_te))
    if not (torch.isfinite(za).all() and torch.isfinite(zb).all()):
        nan = np.full(len(y_te), np.nan)
        return nan, nan
    # retrieval: centred cosine (train means), view A -> view B, R@1
    za = torch.nn.functional.normalize(za - za_tr.mean(0), dim=1)
    zb = torch.nn.functional.normalize(zb - zb_tr.mean(0), dim=1)
    r1 = (za @ zb.T).argmax(dim=1).eq(torch.arange(len(za))).double().numpy()
    # linear probe on the (noisy) view-A embedding
    scaler = StandardScaler().fit(za_tr.numpy())
    clf = LogisticRegression(max_iter=500, random_state=seed)
    clf.fit(scaler.transform(za_tr.numpy()), y_tr)
    probe = (clf.predict(scaler.transform(enc_a(torch.from_numpy(a_te)).numpy())) == y_te).astype(np.float64)
    return r1, probe


def _quality(sz: Sizes, seed: int) -> tuple[dict[str, float], dict[str, np.ndarray], list[dict], Figure]:
    data = two_view_digits(seed)
    metrics: dict[str, float] = {}
    hits: dict[str, np.ndarray] = {}
    rows = []
    for K in sz.train_Ks:
        for name, loss_fn in _losses(seed, timing=False).items():
            enc_a, enc_b, finite_frac, train_s = _train(loss_fn, K, data, sz, seed)
            r1, probe = _evaluate(enc_a, enc_b, data, seed)
            hits[f"r1_{name}_K{K}"], hits[f"probe_{name}_K{K}"] = r1, probe
            metrics[f"r1_{name}_K{K}"], metrics[f"probe_{name}_K{K}"] = float(r1.mean()), float(probe.mean())
            metrics[f"finite_frac_{name}_K{K}"] = finite_frac
            rows.append({"loss": NAMES[name].replace(" (covariance form)", ""), "K": K, "r_at_1": float(r1.mean()),
                         "probe_acc": float(probe.mean()), "finite_step_frac": finite_frac, "train_s": train_s,
                         "note": "Gram form" if name == "dcca" else ""})
        torch.manual_seed(seed)  # untrained encoders: the chance-level reference
        r1, probe = _evaluate(_encoder(K), _encoder(K), data, seed)
        hits[f"r1_untrained_K{K}"], hits[f"probe_untrained_K{K}"] = r1, probe
        metrics[f"r1_untrained_K{K}"], metrics[f"probe_untrained_K{K}"] = float(r1.mean()), float(probe.mean())
        rows.append({"loss": "untrained encoders", "K": K, "r_at_1": float(r1.mean()), "probe_acc": float(probe.mean()),
                     "finite_step_frac": math.nan, "train_s": 0.0, "note": "reference"})

    fig = Figure(figsize=(7, 3.6))
    for j, (key, title) in enumerate((("r_at_1", "cross-view retrieval R@1"), ("probe_acc", "linear probe accuracy"))):
        ax = fig.add_subplot(1, 2, j + 1)
        labels = list(dict.fromkeys(r["loss"] for r in rows))
        width = 0.8 / len(sz.train_Ks)
        for i, K in enumerate(sz.train_Ks):
            vals = [next((r[key] for r in rows if r["loss"] == lab and r["K"] == K), math.nan) for lab in labels]
            ax.bar(np.arange(len(labels)) + i * width, vals, width, label=f"K = {K}")
        ax.set_xticks(np.arange(len(labels)) + width * (len(sz.train_Ks) - 1) / 2)
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        if key == "probe_acc":
            ax.set_ylim(0.5, 1.0)
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("[A17] two-view digits (test split)", fontsize=9)
    fig.tight_layout()
    return metrics, hits, rows, fig


# the experiment


def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    with limit_threads(sz.threads):  # torch and numpy / scikit-learn BLAS
        res, metrics, scaling_rows, fig_cost = _scaling(sz, seed)
        timings, ratio_K = _ratio(sz, res, seed)
        at_max = _ratio_at_max(sz, res, seed)
        gram_dtype_diff = _gram_dtype_agreement(sz.m, res["unifast"]["K"][-1], seed + 1)
        q_metrics, hits, quality_rows, fig_quality = _quality(sz, seed)
        exact = _exactness(seed)
    metrics.update(q_metrics)
    metrics.update(exact)
    metrics["gram32_vs_gram64_reldiff_at_Kmax"] = gram_dtype_diff
    metrics["ratio_K"] = float(ratio_K)
    # baseline / UniFast (medians of the interleaved repeats) and same-work ratios; keys as in earlier records
    for comps, ratio_key, same_key in ((timings, "{}_over_unifast_time", "{}_same_work_ratio"),
                                       (at_max, "{}_over_unifast_interleaved_at_Kmax", "{}_same_work_ratio_at_Kmax")):
        for k, tc in comps.items():
            metrics[ratio_key.format(k)] = tc.speedup if tc is not None else math.nan
            metrics[same_key.format(k)] = tc.control_ratio if tc is not None else math.nan

    def speedups(comps: dict[str, TimedComparison | None]) -> str:
        return ", ".join(f"{NAMES[k]} {tc.speedup:.3g}x (same-work {tc.control_ratio:.3f})" if tc is not None
                         else f"{NAMES[k]} did not finish" for k, tc in comps.items())

    uni = res["unifast"]
    K_max = uni["K"][-1]
    t_max = uni["min_s"][-1]
    # fraction of the cap used at K_max; 2.0 when UniFast did not finish or gave a non-finite loss/gradient
    cap_frac = t_max / sz.time_cap_s if (uni["status"][-1] == "ok" and uni["finite"][-1]) else 2.0
    metrics["unifast_time_at_Kmax_s"], metrics["unifast_cap_frac_at_Kmax"] = t_max, cap_frac

    def _cap_frac(name: str) -> float:  # the same statistic for an HGR/CCA baseline (2.0 when DNF at K_max)
        rec = res[name]
        if rec["K"][-1] != K_max or rec["status"][-1] != "ok" or not rec["finite"][-1]:
            return 2.0
        return rec["min_s"][-1] / sz.time_cap_s

    hgr_cca = [n for n in ("dcca", "dcca_gram", "dcca_gram32", "softhgr", "softhgr_gram") if n in res]
    cap_ctl_name = min(hgr_cca, key=_cap_frac)
    cap_ctl = _cap_frac(cap_ctl_name)
    metrics["fastest_hgr_cca_cap_frac_at_Kmax"] = cap_ctl
    for name in ("dcca_gram", "dcca_gram32", "softhgr_gram", "optfast", "infonce"):  # same-sweep ratios, largest K
        t = res[name]["min_s"][-1]
        metrics[f"{name}_over_unifast_time_at_Kmax"] = t / t_max if math.isfinite(t) and t_max > 0 else math.nan
    K0, K1 = sz.train_Ks[0], sz.train_Ks[-1]

    def paired(a: str, b: str, shift: float = 0.0) -> list[float]:  # per test pair: hits_a - (hits_b + shift)
        return list(hits[a] - (hits[b] + shift))

    rivals = {"softhgr": "Soft-HGR", "dcca": "DCCA (Gram form)", "infonce": "InfoNCE"}

    def quality_claim(what: str, key: str, K: int, metric: str, note: str) -> Claim:
        """UniFast within 1 pp of the strongest of Soft-HGR, DCCA and InfoNCE (the abstract's HGR/CCA variants and
        contrastive objectives), paired over the test pairs against the one that decides."""
        return Claim(statement=f"UniFast-HGR matches the strongest baseline's learning quality ({what}; Soft-HGR, "
                               "DCCA, InfoNCE)",
                     measured=metrics[f"{key}_unifast_K{K}"], op=">=",
                     baselines={f"{lab} - 1 pp": metrics[f"{key}_{n}_K{K}"] - 0.01 for n, lab in rivals.items()},
                     paired={f"{lab} - 1 pp": paired(f"{key}_unifast_K{K}", f"{key}_{n}_K{K}", -0.01)
                             for n, lab in rivals.items()},
                     metric=metric, paper="consistent gains over HGR/CCA variants and contrastive objectives",
                     falsifier=f"UniFast's {'R@1' if key == 'r1' else 'probe accuracy'} more than 1 pp below the "
                               f"strongest of Soft-HGR, DCCA and InfoNCE at K={K}",
                     note=note + "; same run and init")
    claims = [
        Claim(statement="UniFast-HGR's cost is O(m^2 K): forward+backward time grows ~linearly in K",
              measured=metrics["slope_unifast"], op="in", reference=(0.7, 1.3),
              control=metrics["slope_dcca"], control_arm="covariance-form (K x K) whitening in place of UniFast's",
              metric="log-log slope of UniFast time vs K (K >= 4m)", baseline="linear-cost band from the spec",
              paper="dominant cost O(m^2 K)",
              falsifier="a log-log slope of UniFast's time vs K outside [0.7, 1.3] (e.g. quadratic in K)",
              note=f"min of {sz.reps} reps, m={sz.m}, K up to {K_max}; CPU time, one thread"),
        _cheaper_claim(
              "UniFast-HGR is >= 10x cheaper than whitening at moderate K (the fastest of covariance-form and both "
              "Gram-form DCCAs)", timings, 10.0,
              metric=f"10 x median CPU time of UniFast fwd+bwd at K={ratio_K} [s], interleaved, "
                     f"{max(TIMING_REPEATS, sz.ratio_iters)} repeats per baseline",
              falsifier=f"the fastest DCCA (covariance form, or Gram form with a float64 or float32 matmul) under 10x "
                        f"UniFast's CPU time at K={ratio_K}, or the per-repeat paired interval containing 0",
              paper="dominant cost O(m^2 K), vs O(m K^2 + K^3) whitening",
              note=f"spec's bar: 10x at K = 2048; K is the largest <= {sz.ratio_K} at which covariance-form DCCA "
                   f"finished under the cap in this run; speed-ups: {speedups(timings)}. Covariance-form (K x K) "
                   "whitening is the slow way to whiten when K > m, so it is listed but never decides"),
        _cheaper_claim(
              f"UniFast-HGR is cheaper than Gram-form whitening at extreme K (K={K_max}), by more than the "
              f"{TIMING_TOLERANCE:.0%} timing tolerance", at_max, 1.0 + TIMING_TOLERANCE,
              metric=f"{1.0 + TIMING_TOLERANCE:g} x median CPU time of UniFast fwd+bwd at K={K_max} [s], interleaved, "
                     f"{max(TIMING_REPEATS, sz.ratio_iters)} repeats per baseline",
              falsifier=f"the faster Gram-form DCCA (float64 or float32 Gram matmul) under {1.0 + TIMING_TOLERANCE:g}x "
                        f"UniFast's CPU time at K={K_max}, or the per-repeat paired interval containing 0",
              paper="replaces the whitening estimator; dominant cost O(m^2 K)",
              note=f"speed-ups: {speedups(at_max)}; float32 vs float64 Gram DCCA max relative difference (value, "
                   f"gradient) {gram_dtype_diff:.2g} on features like the timed ones; Soft-HGR in Gram form / UniFast "
                   f"(sweep): {metrics['softhgr_gram_over_unifast_time_at_Kmax']:.2f}"),
        Claim(statement=f"UniFast-HGR still runs at K={K_max} (finite loss and gradient under the time cap)",
              measured=cap_frac, op="<", reference=1.0,
              metric=f"UniFast fwd+bwd CPU time at K={K_max} / time cap {sz.time_cap_s:g} s (2.0 if DNF or non-finite)",
              baseline="time cap that stops the baselines",
              falsifier=f"UniFast over the {sz.time_cap_s:g} s cap, or a non-finite loss or gradient, at K={K_max}, "
                        "or an HGR/CCA baseline running under the cap there too",
              paper="stable behavior at extreme feature dimensions", bar=True, control=cap_ctl,
              control_arm=f"the fastest HGR/CCA baseline at the same K ({NAMES[cap_ctl_name]}), same statistic",
              note="baselines: " + ", ".join(f"{NAMES[n]} max K {metrics[f'max_K_{n}']:.0f}" for n in res if n != "unifast")),
        Claim(statement="UniFast-HGR learns cross-view dependence: retrieval beats untrained encoders by >= 2 pp",
              measured=metrics[f"r1_unifast_K{K0}"], op=">=", reference=metrics[f"r1_untrained_K{K0}"] + R1_MARGIN,
              metric=f"test R@1, view A -> B, K={K0}", baseline="untrained encoders' R@1 + 2 pp, same test pairs",
              falsifier="UniFast-trained encoders' R@1 less than 2 pp above untrained encoders'",
              paired=paired(f"r1_unifast_K{K0}", f"r1_untrained_K{K0}", R1_MARGIN),
              note=f"chance = 1/{len(hits[f'r1_unifast_K{K0}'])}; paired over test pairs"),
        quality_claim("retrieval", "r1", K0, f"test R@1, view A -> B, K={K0}",
                      f"{sz.epochs} epochs, m={sz.batch}; untrained {metrics[f'r1_untrained_K{K0}']:.3f}, "
                      f"OptFast {metrics[f'r1_optfast_K{K0}']:.3f}"),
        quality_claim("linear probe", "probe", K0, f"test linear-probe accuracy on view-A features, K={K0}",
                      f"untrained encoders already reach {metrics[f'probe_untrained_K{K0}']:.3f}"),
        quality_claim("retrieval with K > m", "r1", K1, f"test R@1, view A -> B, K={K1}, m={sz.batch}",
                      f"OptFast {metrics[f'r1_optfast_K{K1}']:.3f}"),
        # checks: true by construction or by the algorithm's complexity
        Claim(statement=f"UniFast-HGR trains stably with K > m (K={K1}, m={sz.batch}): no NaN",
              measured=metrics[f"finite_frac_unifast_K{K1}"], op=">=", reference=1.0, kind="check",
              metric="fraction of training steps with a finite loss", baseline="every step finite",
              note=f"the score is bounded in [-1.5, 1] by construction; Soft-HGR {metrics[f'finite_frac_softhgr_K{K1}']:.2f}, "
                   f"OptFast {metrics[f'finite_frac_optfast_K{K1}']:.2f}, DCCA {metrics[f'finite_frac_dcca_K{K1}']:.2f}"),
        Claim(statement="covariance-form whitening (K x K eigh) scales super-quadratically in K",
              measured=metrics["slope_dcca"], op=">=", reference=2.3, kind="check",
              metric="log-log slope of covariance-form DCCA time vs K (K >= 4m, finished points)",
              baseline="spec's band for an O(mK^2 + K^3) estimator",
              note=f"a check of the benchmark; Gram forms: DCCA slope {metrics['slope_dcca_gram']:.2f}, "
                   f"Soft-HGR {metrics['slope_softhgr_gram']:.2f}; covariance-form Soft-HGR {metrics['slope_softhgr']:.2f}"),
        Claim(statement=f"the float32-matmul Gram-form DCCA computes the float64 one's loss at K={K_max}",
              measured=gram_dtype_diff, op="<", reference=1e-4, kind="check",
              metric=f"max relative difference (value and gradient) of the two Gram-form DCCAs, m={sz.m}, K={K_max}, "
                     "random features like the timed ones",
              baseline="1e-4 (the diagonal-relative jitter of the float32 Gram)",
              note="the fast baseline in the extreme-K claim counts only if it computes the same loss; it does not on "
                   "rank-deficient features (see the README)"),
        Claim(statement="Gram-form baselines are the same objectives as their covariance forms",
              measured=max(exact.values()), op="<", reference=1e-4, kind="check",
              metric="max relative difference (value and gradient, float64) of Gram vs covariance form, "
                     "Soft-HGR and DCCA, m=32, K in {48, 96}",
              baseline="1e-4 (the Gram-form DCCA adds a 1e-6 jitter)",
              note="exact identities (linear-kernel CCA; ||F0 G0^T||_F^2 = tr(F0^T F0 G0^T G0))"),
    ]
    return Outcome(metrics=metrics, claims=claims,
                   tables={"scaling": scaling_rows, "quality": quality_rows},
                   figures={"cost_vs_K": fig_cost, "quality": fig_quality})


def _exactness(seed: int) -> dict[str, float]:
    """Relative difference of value and gradient between the Gram and covariance forms (float64)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for K in (48, 96):  # K > m = 32: the Gram form's Cholesky path (for K <= m it reuses the primal rows)
        f = torch.randn(32, K, generator=gen, dtype=torch.float64).requires_grad_()
        g = (f.detach() + torch.randn(32, K, generator=gen, dtype=torch.float64)).requires_grad_()
        for name, cov, gram in (("softhgr", SoftHGRLoss(), SoftHGRLoss(form="gram")),
                                ("dcca", DCCALoss(), DCCALoss(form="gram"))):
            a, b = cov(f, g), gram(f, g)
            ga, gb = torch.autograd.grad(a, (f, g)), torch.autograd.grad(b, (f, g))
            rel = max(float((a - b).detach().abs() / a.detach().abs().clamp_min(1e-12)),
                      *(float((x - y).abs().max() / x.abs().max().clamp_min(1e-12)) for x, y in zip(ga, gb)))
            out[f"gram_vs_cov_reldiff_{name}_K{K}"] = rel
    return out
