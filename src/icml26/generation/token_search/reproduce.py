"""[A01] Reproduction: 1D ordered (PCA) vs 2D grid (patch k-means) tokens for verifier-guided search on digits.

scikit-learn's 8x8 digits, split by the seed into A (720: tokenizers, verifier, AR priors), B (720: held-out
evaluator) and a test split (the rest). Both tokenizers give L = 16 tokens over V = 16 values.

1. Verifier accuracy on prefix readouts of test images, t = 1, 2, 4, 8, 16 tokens.
2. Training-free search (uniform prior): beam search and best-of-N at equal verifier calls; success = the
   held-out evaluator (an RBF SVM on split B) predicts the requested class; realism = distance to the nearest
   real image of B (verifier hacking shows up as verifier-success without evaluator-success, or far images).
3. Test-time scaling with an AR prior (a class-conditional GRU trained on split A's tokens; sampled with the
   null class, so the requested class enters only through the verifier): best-of-N, beam and lookahead (full
   rollout) at 16..128 verifier calls per target, for both tokenizers.

Every search of a comparison uses the same verifier-call budget (counted and checked in the run).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from icml26.harness import Budget, Claim, Outcome, limit_threads, seed_everything
from icml26.testbeds.cache import load_cached
from icml26.testbeds.digits import digits_tensors, shuffled_indices

from .priors import ARPrior, UniformPrior, train_ar_prior
from .search import SearchResult, beam_search, best_of_n, lookahead_search
from .tokenizers import GridVQTokenizer, NestedDropoutTokenizer, OrderedPCATokenizer
from .verifiers import HeldOutEvaluator, fit_logistic_verifier, fit_mlp_verifier


@dataclass(frozen=True)
class Sizes:
    n_classes: int          # requested classes (targets per repeat)
    repeats: int            # searches per class (independent random draws)
    scaling_calls: tuple    # verifier calls per target, AR-prior scaling curves
    free_calls: tuple       # verifier calls per target, training-free search
    prior_steps: int        # AR prior training steps (Adam, batch 128)
    nd_steps: int           # nested-dropout tokenizer training steps (full batch)


SIZES = {
    Budget.QUICK: Sizes(3, 3, (16, 32), (32,), 120, 150),
    Budget.STANDARD: Sizes(10, 6, (16, 32, 64, 128), (32, 128), 300, 1000),
    Budget.FULL: Sizes(10, 30, (16, 32, 64, 128, 256), (32, 128, 256), 600, 2000),
}
N_A, N_B = 720, 720                                  # split sizes; the test split is the remaining 357 images
L, V = 16, 16
PREFIXES = (1, 2, 4, 8, 16)
BEAM = {16: (1, 4, 4), 32: (2, 4, 4), 64: (2, 4, 2), 128: (2, 4, 1), 256: (4, 4, 1)}   # calls -> (B, K, s)
FREE_BEAM = {32: (1, 2, 1), 128: (2, 4, 1), 256: (4, 4, 1)}
SEARCHES = ("best-of-N", "beam", "lookahead")
TOKS = ("1D", "grid")


# testbed

def make_tokenizers(XA: np.ndarray) -> dict[str, OrderedPCATokenizer | GridVQTokenizer]:
    return {"1D": OrderedPCATokenizer(L, V).fit(XA), "grid": GridVQTokenizer(2, V, random_state=0).fit(XA)}


def load_prior(name: str, tokens: np.ndarray, labels: np.ndarray, split_seed: int, steps: int) -> ARPrior:
    """The AR prior for one tokenizer's split-A tokens, trained once and cached (atomic, keyed by config)."""
    digest = hashlib.sha256(np.ascontiguousarray(tokens).tobytes() + labels.tobytes()).hexdigest()
    cfg = {"paper": "A01", "tokenizer": name, "split_seed": split_seed, "n_train": len(tokens), "steps": steps,
           "L": L, "V": V, "version": 1}

    def build(d: Path) -> None:
        model = train_ar_prior(tokens, labels, V, 10, steps=steps, seed=split_seed)
        torch.save(model.state_dict(), d / "prior.pt")
        (d / "tokens.sha256").write_text(digest)

    def load(d: Path) -> ARPrior:
        if (d / "tokens.sha256").read_text() != digest:
            raise ValueError("cached prior was trained on different tokens")
        model = ARPrior(V, L, 10)
        model.load_state_dict(torch.load(d / "prior.pt", weights_only=True))
        return model.eval()

    return load_cached("a01_ar_prior", cfg, build, load)


def load_nested_dropout(XA: np.ndarray, split_seed: int, steps: int) -> NestedDropoutTokenizer:
    """The learned 1D tokenizer (MLP + FSQ, nested dropout) on split A, trained once and cached."""
    digest = hashlib.sha256(np.ascontiguousarray(XA).tobytes()).hexdigest()
    cfg = {"paper": "A01", "tokenizer": "nested_dropout", "split_seed": split_seed, "steps": steps, "L": L, "V": V,
           "version": 1}

    def build(d: Path) -> None:
        tok = NestedDropoutTokenizer(L, V, steps=steps, random_state=split_seed).fit(XA)
        torch.save(tok.state_dict(), d / "tokenizer.pt")
        (d / "data.sha256").write_text(digest)

    def load(d: Path) -> NestedDropoutTokenizer:
        if (d / "data.sha256").read_text() != digest:
            raise ValueError("cached tokenizer was trained on different images")
        return NestedDropoutTokenizer(L, V, steps=steps).load_state_dict(
            torch.load(d / "tokenizer.pt", weights_only=False))

    return load_cached("a01_nested_dropout", cfg, build, load)


def scaling_slope(success: np.ndarray, calls) -> np.ndarray:
    """Per target, the least-squares slope of success (rows: budgets) against log2(verifier calls)."""
    x = np.log2(np.asarray(calls, float))
    if success.shape[0] != len(x) or len(x) < 2:
        raise ValueError(f"need one row per budget and >= 2 budgets, got {success.shape} for calls {tuple(calls)}")
    xc = x - x.mean()
    return (xc[:, None] * (success - success.mean(0))).sum(0) / (xc ** 2).sum()


def _run(search: str, calls: int, tok, prior, verifier, cond, rng, condition_prior: bool) -> SearchResult:
    B, K, s = (FREE_BEAM if isinstance(prior, UniformPrior) else BEAM)[calls]
    kw = dict(rng=rng, condition_prior=condition_prior, max_verifier_calls=calls)
    if search == "best-of-N":
        return best_of_n(tok, prior, verifier, cond, calls, **kw)
    if search == "beam":
        return beam_search(tok, prior, verifier, cond, beam_width=B, expand=K, step=s, **kw)
    return lookahead_search(tok, prior, verifier, cond, beam_width=B, expand=K, step=s, horizon=L, **kw)


# figures

def _figure(acc: dict, scaling: dict, sz: Sizes) -> Figure:
    fig = Figure(figsize=(10, 3.6))
    a1, a2 = fig.subplots(1, 2)
    for name in acc:
        a1.plot(PREFIXES, [acc[name][t].mean() for t in PREFIXES], "o-", label=name)
    for name in TOKS:
        for search, ls in zip(SEARCHES, ("-", "--", ":")):
            a2.plot(sz.scaling_calls, [scaling[name, search, c]["success"].mean() for c in sz.scaling_calls],
                    "o" + ls, color="C0" if name == "1D" else "C1", label=f"{name} {search}")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("prefix length t (tokens)")
    a1.set_ylabel("verifier accuracy on prefix readout")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("verifier calls per target")
    a2.set_ylabel("held-out evaluator success")
    a2.set_title("AR prior (null class) + search")
    for ax in (a1, a2):
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _figure_samples(images: dict[str, np.ndarray], cond: np.ndarray) -> Figure:
    first = [int(np.flatnonzero(cond == c)[0]) for c in np.unique(cond)]
    fig = Figure(figsize=(1.0 * len(first), 2.3))
    axes = fig.subplots(2, len(first), squeeze=False)
    for r, name in enumerate(TOKS):
        for j, i in enumerate(first):
            axes[r, j].imshow(images[name][i].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            axes[r, j].set_xticks([])
            axes[r, j].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)
    fig.suptitle("training-free beam search (uniform prior), one output per requested class", fontsize=8)
    return fig


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    rng = np.random.default_rng(seed)
    X, y = digits_tensors()
    X, y = X.numpy().astype(np.float64), y.numpy()
    idx = shuffled_indices(len(X), seed).numpy()
    iA, iB, iT = idx[:N_A], idx[N_A:N_A + N_B], idx[N_A + N_B:]
    cond = np.tile(np.arange(sz.n_classes), sz.repeats)

    with limit_threads(1):
        toks = make_tokenizers(X[iA])
        verifier = fit_logistic_verifier(X[iA], y[iA], seed=seed)
        mlp_verifier = fit_mlp_verifier(X[iA], y[iA], seed=seed)
        evaluator = HeldOutEvaluator.fit(X[iB], y[iB], seed=seed)
        priors = {n: load_prior(n, t.encode(X[iA]), y[iA], seed, sz.prior_steps) for n, t in toks.items()}

        # 1. verifier accuracy on prefix readouts of test images (+ the learned nested-dropout 1D tokenizer)
        readers = toks | {"1D learned": load_nested_dropout(X[iA], seed, sz.nd_steps),
                          "grid (variance order)": GridVQTokenizer(2, V, random_state=0, order="variance").fit(X[iA]),
                          "1D rotated (control)": OrderedPCATokenizer(L, V, rotation_seed=seed).fit(X[iA])}
        acc = {n: {t: (verifier.clf.predict(tok.decode(tok.encode(X[iT]), t)) == y[iT]).astype(float)
                   for t in PREFIXES} for n, tok in readers.items()}

        # 2. training-free search (uniform prior)
        free, calls_seen = {}, []
        for n, tok in toks.items():
            up = UniformPrior(V, L)
            for c in sz.free_calls:
                for search in ("best-of-N", "beam"):
                    r = _run(search, c, tok, up, verifier, cond, rng, True)
                    calls_seen.append((c, r.n_verifier_calls))
                    free[n, search, c] = evaluator(r.image, cond) | {
                        "verifier_success": (verifier.clf.predict(r.image) == cond).astype(float), "image": r.image}
            for rep in (1, 2):          # two independent unguided draws: the no-search reference and its re-draw
                img = tok.decode(up.sample(len(cond), rng=rng))
                free[n, "unguided" if rep == 1 else "unguided (re-draw)", 1] = evaluator(img, cond) | {
                    "verifier_success": (verifier.clf.predict(img) == cond).astype(float),
                    "mlp_verifier_success": (mlp_verifier.clf.predict(img) == cond).astype(float)}

        # 2a. control: the same training-free beam guided by a verifier fitted on shuffled labels
        shuf_verifier = fit_logistic_verifier(X[iA], rng.permutation(y[iA]), seed=seed)
        r = _run("beam", max(sz.free_calls), toks["1D"], UniformPrior(V, L), shuf_verifier, cond, rng, True)
        calls_seen.append((max(sz.free_calls), r.n_verifier_calls))
        free["1D", "beam, shuffled-label verifier (control)", max(sz.free_calls)] = evaluator(r.image, cond) | {
            "verifier_success": (shuf_verifier.clf.predict(r.image) == cond).astype(float)}

        # 2b. the role of the verifier: the same training-free beam guided by an MLP classifier instead
        c_big = max(sz.free_calls)
        for n, tok in toks.items():
            r = _run("beam", c_big, tok, UniformPrior(V, L), mlp_verifier, cond, rng, True)
            calls_seen.append((c_big, r.n_verifier_calls))
            free[n, "beam, MLP verifier", c_big] = evaluator(r.image, cond) | {
                "verifier_success": (mlp_verifier.clf.predict(r.image) == cond).astype(float), "image": r.image}

        # 3. AR prior + search, scaling with verifier calls
        scaling = {}
        for n, tok in toks.items():
            for c in sz.scaling_calls:
                for search in SEARCHES:
                    r = _run(search, c, tok, priors[n], verifier, cond, rng, False)
                    calls_seen.append((c, r.n_verifier_calls))
                    scaling[n, search, c] = evaluator(r.image, cond) | {"prior_calls": r.n_prior_calls}
            for mode, pc in (("cond", cond), ("null", None)):
                scaling[n, f"prior sample ({mode} class)", 1] = evaluator(
                    tok.decode(priors[n].sample(len(cond), cond=pc, rng=rng)), cond)

        # checks on the run's own objects
        c0 = int(sz.scaling_calls[0])
        B, K, s = BEAM[c0]
        tok = toks["1D"]
        rb = beam_search(tok, priors["1D"], verifier, cond, beam_width=B, expand=K, step=s, rng=seed + 7,
                         condition_prior=False)
        rl = lookahead_search(tok, priors["1D"], verifier, cond, beam_width=B, expand=K, step=s, horizon=0,
                              rng=seed + 7, condition_prior=False)
        same_h0 = float(np.mean(np.all(rb.tokens == rl.tokens, axis=1)))
        zA = tok.encode(X[iA])
        mse = np.array([np.mean((tok.decode(zA, t) - X[iA]) ** 2) for t in range(L + 1)])
        mean_gap = max(float(np.abs(tk.decode(tk.encode(X[iT][:1]), 0)[0] - X[iA].mean(0)).max())
                       for tk in toks.values())

    # metrics and claims
    big_free, calls_dev = max(sz.free_calls), max(abs(a - b) for a, b in calls_seen)
    short = [t for t in PREFIXES if t < L]
    pre = {n: np.mean([acc[n][t] for t in short], axis=0) for n in acc}           # per test image
    metrics: dict[str, float] = {f"prefix_acc_{n}_t{t}": float(acc[n][t].mean()) for n in acc for t in PREFIXES}
    for (n, search, c), e in free.items():
        for k in ("success", "realism_dist", "verifier_success"):
            if k in e:
                metrics[f"free_{k}_{n}_{search}_{c}"] = float(e[k].mean())
    for (n, search, c), e in scaling.items():
        metrics[f"ar_success_{n}_{search}_{c}"] = float(e["success"].mean())
        metrics[f"ar_logprob_{n}_{search}_{c}"] = float(e["log_prob"].mean())
        metrics[f"ar_realism_{n}_{search}_{c}"] = float(e["realism_dist"].mean())
    keys = [(s_, c) for s_ in SEARCHES for c in sz.scaling_calls]
    auc = {n: np.mean([scaling[n, s_, c]["success"] for s_, c in keys], axis=0) for n in TOKS}   # per target
    slope = {n: np.mean([scaling_slope(np.array([scaling[n, s_, c]["success"] for c in sz.scaling_calls]),
                                       sz.scaling_calls) for s_ in SEARCHES], axis=0) for n in TOKS}  # per target
    for n in TOKS:
        for s_ in SEARCHES:
            metrics[f"ar_slope_{n}_{s_}"] = float(scaling_slope(np.array([scaling[n, s_, c]["success"]
                                                                          for c in sz.scaling_calls]),
                                                                sz.scaling_calls).mean())
    free_auc = {n: np.mean([free[n, "beam", c]["success"] for c in sz.free_calls], axis=0) for n in TOKS}
    # the best search per tokenizer and budget (higher mean success of best-of-N and beam), per target
    free_pick = {(n, c): max(("best-of-N", "beam"), key=lambda s_: float(free[n, s_, c]["success"].mean()))
                 for n in TOKS for c in sz.free_calls}
    free_best = {n: np.mean([free[n, free_pick[n, c], c]["success"] for c in sz.free_calls], axis=0) for n in TOKS}
    level = {n: np.array([np.mean([scaling[n, s_, c]["success"].mean() for s_ in SEARCHES])
                          for c in sz.scaling_calls]) for n in TOKS}                  # mean success per budget
    reach = {n: next((int(c) for c, v in zip(sz.scaling_calls, level[n]) if v >= 0.9), None) for n in TOKS}
    f1 = free["1D", "beam", big_free]
    hack = {n: free[n, "beam", big_free] for n in TOKS}
    mlp_hack = {n: free[n, "beam, MLP verifier", big_free] for n in TOKS}
    ung, ung2 = {n: free[n, "unguided", 1] for n in TOKS}, {n: free[n, "unguided (re-draw)", 1] for n in TOKS}

    def gap(e: dict) -> np.ndarray:                 # per target: verifier says yes, held-out evaluator says no
        return e["verifier_success"] - e["success"]

    gap_d = gap(hack["grid"]) - gap(hack["1D"])                       # searched
    gap_d_ctrl = gap(ung["grid"]) - gap(ung["1D"])                     # no search (control)

    def gap_mlp(e: dict) -> np.ndarray:             # the same gap, judged by the MLP verifier
        return e["mlp_verifier_success"] - e["success"]

    gap_d_ctrl_mlp = gap_mlp(ung["grid"]) - gap_mlp(ung["1D"])         # no search, MLP verifier (control)
    gap_d_mlp = gap(mlp_hack["grid"]) - gap(mlp_hack["1D"])
    move = {n: hack[n]["realism_dist"] - ung[n]["realism_dist"] for n in TOKS}          # search vs own unguided
    move_ctrl = {n: ung2[n]["realism_dist"] - ung[n]["realism_dist"] for n in TOKS}     # re-draw, no search
    move_mlp = {n: mlp_hack[n]["realism_dist"] - ung[n]["realism_dist"] for n in TOKS}
    for n in TOKS:
        metrics[f"free_gap_{n}_beam_{big_free}"] = float(gap(hack[n]).mean())
        metrics[f"free_gap_{n}_unguided"] = float(gap(ung[n]).mean())
        metrics[f"free_realism_change_{n}_beam_{big_free}"] = float(move[n].mean())
    ctrl_free = free["1D", "beam, shuffled-label verifier (control)", big_free]
    nonsearch = {"unguided uniform sequence": ung["1D"]["success"],
                 "AR prior sample, null class": scaling["1D", "prior sample (null class)", 1]["success"],
                 "AR prior sample, requested class (a trained generator)":
                     scaling["1D", "prior sample (cond class)", 1]["success"]}
    pre_base = ("grid", "grid (variance order)")
    metrics |= {f"free_best_success_mean_{n}": float(free_best[n].mean()) for n in TOKS}
    metrics |= {f"ar_calls_to_0.9_{n}": float(reach[n]) if reach[n] else float("nan") for n in TOKS}
    metrics |= {f"prefix_acc_mean_{n}": float(pre[n].mean()) for n in pre}
    metrics |= {"prefix_acc_mean_1D": float(pre["1D"].mean()), "prefix_acc_mean_grid": float(pre["grid"].mean()),
                "ar_success_mean_1D": float(auc["1D"].mean()), "ar_success_mean_grid": float(auc["grid"].mean()),
                "lookahead_h0_equals_beam": same_h0, "max_calls_deviation": float(calls_dev),
                "max_prefix_mse_increase_1D": float(np.diff(mse).max()), "prefix0_mean_image_gap": mean_gap}
    n_tg = len(cond)
    claims = [
        Claim("Prefix readouts of 1D ordered tokens are more verifiable than those of grid tokens (raster or "
              "variance-ordered)",
              pre["1D"].mean(), ">", baselines={f"{b} tokens": float(pre[b].mean()) for b in pre_base},
              paired={f"{b} tokens": list(pre["1D"] - pre[b]) for b in pre_base},
              control=float(pre["1D rotated (control)"].mean()),
              control_arm="the same 16-d PCA subspace in a random rotation (ordering removed)",
              metric=f"verifier accuracy on prefix readouts, mean over t in {short}",
              paper="pilot: 0.70 vs 0.26 at t=4",
              note=f"{len(iT)} test images; paired = per-image difference of the mean accuracy over prefix lengths. "
                   "The variance-ordered grid puts the highest-variance patches first (an ordered grid).",
              falsifier="1D prefix accuracy at or below the stronger grid's, or the per-image paired interval "
                        "containing 0, or the rotated control beating the grids too"),
        Claim("Ordering matters: prefix readouts of ordered 1D tokens (PCA) are more verifiable than those of the "
              "same subspace in a random rotation", pre["1D"].mean(), ">", pre["1D rotated (control)"].mean(),
              baseline="rotated PCA tokens (same 16-d subspace, ordering removed), same verifier and images",
              metric=f"verifier accuracy on prefix readouts, mean over t in {short}",
              paired=list(pre["1D"] - pre["1D rotated (control)"]),
              falsifier="ordered PCA's prefix accuracy at or below the rotated basis', or the paired interval "
                        "containing 0"),
        Claim("Prefix readouts of learned nested-dropout 1D tokens are more verifiable than those of grid tokens "
              "(raster or variance-ordered)",
              pre["1D learned"].mean(), ">", baselines={f"{b} tokens": float(pre[b].mean()) for b in pre_base},
              paired={f"{b} tokens": list(pre["1D learned"] - pre[b]) for b in pre_base},
              metric=f"verifier accuracy on prefix readouts, mean over t in {short}",
              note=f"MLP autoencoder + FSQ trained with nested dropout ({sz.nd_steps} full-batch Adam steps on "
                   "split A): the learned counterpart of the PCA tokenizer, as FlexTok is of PCA.",
              falsifier="the learned 1D tokens' prefix accuracy at or below grid's, or the paired interval "
                        "containing 0"),
        Claim("AR prior + test-time search succeeds more on 1D ordered tokens than on grid tokens at equal verifier "
              "calls", auc["1D"].mean(), ">", auc["grid"].mean(), baseline="grid tokens, same searches and call budgets",
              metric=f"held-out evaluator success, mean over calls {sz.scaling_calls} and over {{best-of-N, beam, "
                     "lookahead}",
              paired=list(auc["1D"] - auc["grid"]),
              note=f"{n_tg} targets ({sz.n_classes} classes x {sz.repeats}); a GRU prior per tokenizer, sampled "
                   "with the null class (the class enters through the verifier only). Decided on the level at equal "
                   "calls (the slope was chosen after looking and favours the arm that starts lower). Per budget: "
                   f"1D {np.round(level['1D'], 3).tolist()}, grid {np.round(level['grid'], 3).tolist()}; calls to "
                   f"reach 0.9: 1D {reach['1D']}, grid {reach['grid']}. Secondary: slope per log2(calls) 1D "
                   f"{slope['1D'].mean():.3f}, grid {slope['grid'].mean():.3f}. Class-conditional prior sample "
                   f"(no search): 1D {scaling['1D', 'prior sample (cond class)', 1]['success'].mean():.3f}, grid "
                   f"{scaling['grid', 'prior sample (cond class)', 1]['success'].mean():.3f}.",
              falsifier="1D's mean success at equal calls at or below grid's, or the paired interval containing 0"),
        Claim("Training-free search (no AR model) over 1D ordered tokens generates the requested class",
              f1["success"].mean(), ">", baselines={k: float(v.mean()) for k, v in nonsearch.items()},
              paired={k: list(f1["success"] - v) for k, v in nonsearch.items()},
              control=float(ctrl_free["success"].mean()),
              control_arm="the same beam guided by a verifier fitted on shuffled labels",
              metric=f"held-out evaluator success, 1D beam, uniform prior, {big_free} calls",
              paper="pilot: 1.00 at 124 calls",
              note="Success = an RBF SVM trained on a split disjoint from the verifier's agrees with the class. "
                   "Baselines: every non-search generator the run has (one sample each); the strongest decides.",
              falsifier="beam-searched 1D sequences judged the requested class no more often than the strongest "
                        "non-search generator's samples"),
        Claim("Training-free search works better over 1D ordered tokens than over grid tokens",
              free_best["1D"].mean(), ">", free_best["grid"].mean(),
              baseline="grid tokens, the better of best-of-N and beam at each budget",
              metric=f"held-out evaluator success, uniform prior, the better search per tokenizer and budget, mean "
                     f"over calls {sz.free_calls}",
              paper="pilot: 0.63 vs 0.42 at 32 calls", paired=list(free_best["1D"] - free_best["grid"]),
              note="searches picked: " + ", ".join(f"{n}@{c}: {free_pick[n, c]}" for n in TOKS for c in sz.free_calls)
                   + f"; beam only: 1D {free_auc['1D'].mean():.3f}, grid {free_auc['grid'].mean():.3f}.",
              falsifier="1D success at or below grid's, or the paired interval containing 0"),
        Claim("Training-free search over grid tokens hacks the verifier more than over 1D tokens (the verifier "
              "accepts what the held-out evaluator rejects)", float(gap_d.mean()), ">", 0.0, bar=True,
              baseline="no difference between the tokenizers' verifier-minus-evaluator gaps",
              metric=f"(verifier success - evaluator success) of grid minus that of 1D, uniform-prior beam, "
                     f"{big_free} calls", paper="pilot: grid outputs adversarial-looking",
              paired=list(gap_d), control=float(gap_d_ctrl.mean()), control_paired=list(gap_d_ctrl),
              control_arm="unguided uniform sequences (no search), same difference of gaps",
              note=f"gaps: grid {gap(hack['grid']).mean():.3f}, 1D {gap(hack['1D']).mean():.3f}; unguided grid "
                   f"{gap(ung['grid']).mean():.3f}, 1D {gap(ung['1D']).mean():.3f}.",
              falsifier="grid's gap at or below 1D's, or the paired interval containing 0"),
        Claim("Search moves grid outputs away from real images more than 1D outputs, relative to each "
              "tokenizer's own unguided sequences", float((move["grid"] - move["1D"]).mean()), ">", 0.0, bar=True,
              baseline="equal change in nearest-real distance", paired=list(move["grid"] - move["1D"]),
              metric=f"change in nearest-real-image distance (split B) from unguided to beam ({big_free} calls), "
                     "grid minus 1D", paper="pilot: 1.28 (1D) vs 3.26 (grid)",
              control=float((move_ctrl["grid"] - move_ctrl["1D"]).mean()),
              control_paired=list(move_ctrl["grid"] - move_ctrl["1D"]),
              control_arm="a second unguided draw instead of search (no search)",
              note=f"levels: unguided grid {ung['grid']['realism_dist'].mean():.2f} -> beam "
                   f"{hack['grid']['realism_dist'].mean():.2f}; unguided 1D {ung['1D']['realism_dist'].mean():.2f} -> "
                   f"beam {hack['1D']['realism_dist'].mean():.2f}. The old level comparison (1D < grid) holds before "
                   "any search runs, so it is not evidence of hacking.",
              falsifier="grid's change at or below 1D's (search brings grid no further from real images), or the "
                        "paired interval containing 0"),
        Claim("With a different verifier (an MLP), grid search still hacks more than 1D search", float(gap_d_mlp.mean()),
              ">", 0.0, bar=True, baseline="no difference between the gaps", paired=list(gap_d_mlp),
              metric=f"verifier-minus-evaluator success gap, grid minus 1D, MLP verifier, beam, {big_free} calls",
              control=float(gap_d_ctrl_mlp.mean()), control_paired=list(gap_d_ctrl_mlp),
              control_arm="unguided uniform sequences (no search), judged by the same MLP verifier",
              note=f"evaluator success 1D {mlp_hack['1D']['success'].mean():.3f} vs grid "
                   f"{mlp_hack['grid']['success'].mean():.3f}; verifier success 1D "
                   f"{mlp_hack['1D']['verifier_success'].mean():.3f} vs grid "
                   f"{mlp_hack['grid']['verifier_success'].mean():.3f}; realism change from unguided 1D "
                   f"{move_mlp['1D'].mean():+.2f}, grid {move_mlp['grid'].mean():+.2f}.",
              falsifier="grid's gap at or below 1D's under the MLP verifier, or the paired interval containing 0"),
        Claim("Every search in a comparison used exactly its verifier-call budget", calls_dev, "<=", 0.0,
              baseline="the stated budget", metric="max |verifier calls counted - budget| over all searches",
              kind="check", note="Counted by the search loop and asserted against the closed-form plan."),
        Claim("Lookahead with horizon 0 is beam search", same_h0, ">=", 1.0, baseline="beam search, same seed",
              metric="fraction of targets with identical tokens", kind="check"),
        Claim("1D prefix MSE is non-increasing in t (orthogonal components, bin-mean centroids)",
              float(np.diff(mse).max()), "<=", 1e-12, baseline="0", metric="max increase of split-A MSE over t",
              kind="check"),
        Claim("Empty-prefix readout is the mean image for both tokenizers", mean_gap, "<=", 1e-9,
              baseline="0", metric="max |decode(prefix_len=0) - mean image|", kind="check"),
    ]

    tables = {
        "prefix_accuracy": [{"t": t, **{n: float(acc[n][t].mean()) for n in acc}} for t in PREFIXES],
        "training_free": [{"tokenizer": n, "search": s_, "calls": c, "success": float(e["success"].mean()),
                           "verifier_success": float(e["verifier_success"].mean()) if "verifier_success" in e
                           else float("nan"), "realism_dist": float(e["realism_dist"].mean())}
                          for (n, s_, c), e in free.items()],
        "ar_scaling": [{"tokenizer": n, "search": s_, "calls": c, "success": float(e["success"].mean()),
                        "eval_log_prob": float(e["log_prob"].mean()), "realism_dist": float(e["realism_dist"].mean()),
                        "prior_tokens": e.get("prior_calls", L)} for (n, s_, c), e in scaling.items()],
    }
    figures = {"prefix_and_scaling": _figure(acc, scaling, sz),
               "training_free_samples": _figure_samples({n: hack[n]["image"] for n in TOKS}, cond)}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)
