"""[A14] Reproduction: do label-free redundancy measures predict which vision-token skips are harmless?

On the tiny digit-VQA vision-language models (``testbed.py``; a 6-layer and an 8-layer model at the standard
budget), **retrained for every seed** (the seed is the model's initialisation and batch-order seed, and also draws
the split of the held-out images into a calibration part (measures) and an evaluation part (accuracies)):

1. measures per block on the calibration pairs: R_i(V), R_i(T), ShortGPT's block influence over all tokens,
   A_i (and A_i relative to the uniform vision share |V|/N), D_l, U_l (cross-validated probes for the answer);
2. ground truth on the evaluation pairs: the accuracy after skipping each block for V only, after removing each
   whole block (ShortGPT), after a vision exit at each e and a late entry at each s, after every k-subset V-skip;
3. claims: Spearman(R(V), accuracy after the V-skip) >= 0.6 in each model (control: block depth as the ranking),
   and at least as good as the strongest label-free ranking (ShortGPT's BI, depth); the 2 most redundant blocks
   skipped for V cost <= 2 points and the 2 least redundant >= 5 points (control: a random 2-subset, same FLOPs);
   the redundancy-ranked plan at least as accurate as the strongest baseline (skip the last k, a random k-subset,
   the least-redundant k at equal FLOPs; FastV and ShortGPT at equal or more FLOPs); the exit chosen from A
   (tau_A relative to |V|/N) and U keeps >= 98% accuracy (control: a uniformly random exit block); early and late
   blocks more redundant for V than the middle ones (U-shape);
4. checks: hooks leave the model unchanged, skip-all equals deleting the block, exit at L equals the base model,
   A matches a brute-force sum and attention rows sum to 1.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, replace

import numpy as np
import torch

from icml26.harness import Budget, Claim, Outcome, limit_threads, seed_everything

from .measures import (
    RedundancyReport,
    adjacent_token_redundancy,
    block_influence,
    cross_modal_attention,
    layer_redundancy,
    per_example_redundancy,
    spearman,
    uniform_vision_share,
    unique_information_probe,
)
from .skip import BlockCost, SkipPlan, apply_skip_plan, fastv_pruning, plan_flops
from .testbed import GRID, VLM_6L, VLM_8L, VLM_QUICK, DigitVQA, TinyVLM, answer_correct, digit_vqa, load_tiny_vlm
from .trace import collect_trace, find_blocks


@dataclass(frozen=True)
class Sizes:
    models: tuple           # TinyVLM configs; the first is the main model (plans, FastV, ShortGPT)
    n_calib: int            # held-out pairs for the measures
    n_eval: int             # held-out pairs for the accuracies
    probe_folds: int
    fastv_K: int            # FastV prunes after this many blocks


SIZES = {
    Budget.QUICK: Sizes((VLM_QUICK,), 300, 300, 3, 1),
    Budget.STANDARD: Sizes((VLM_6L, VLM_8L), 600, 800, 5, 2),
    Budget.FULL: Sizes((VLM_6L, VLM_8L), 720, 1075, 5, 2),
}
TAU_R, EPS_U = 0.97, 0.02                  # decision thresholds of the spec (fixed before any run)
#: tau_A relative to |V|/N (issue 30): text attends to V at most half as much as uniform attention would. The spec's
#: absolute 0.05 was set for LLaVA-scale inputs (|V|/N ~ 0.9) and cannot fire with 16 of 20 tokens visual; 0.5 is
#: our choice, made after the first runs had shown A near the uniform share, so every value of the sweep below is
#: reported next to it.
TAU_A_REL = 0.5
TAU_A_SWEEP = (0.055, 0.25, 0.5, 0.75, 1.0)   # 0.055 = the spec's 0.05 at LLaVA's |V|/N ~ 0.9
SPEARMAN_MIN = 0.6                          # spec: "Spearman ... >= 0.6 in both models"
BEST_MAX_DROP, WORST_MIN_DROP = 0.02, 0.05  # spec: best-2 costs <= 2 points, worst-2 >= 5 points
KEEP_FRACTION = 0.98                        # spec: the chosen exit keeps >= 98% accuracy
N_PLAN = 2                                  # blocks skipped for V in the best / worst plans


def _split(data: DigitVQA, n_calib: int, n_eval: int, seed: int) -> tuple[DigitVQA, DigitVQA]:
    held = torch.nonzero(~data.train).squeeze(1)
    images = torch.unique(data.image[held])
    perm = images[torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))]
    calib_img = set(perm[: int(0.4 * len(perm))].tolist())     # 40% of the held-out images for the measures
    in_calib = torch.tensor([int(i) in calib_img for i in data.image[held]])
    g = torch.Generator().manual_seed(seed + 1)
    c, e = held[in_calib], held[~in_calib]
    c = c[torch.randperm(len(c), generator=g)[:n_calib]]
    e = e[torch.randperm(len(e), generator=g)[:n_eval]]
    return data.subset(c), data.subset(e)


def _acc_under(model, data: DigitVQA, vm: torch.Tensor, plan: SkipPlan | None = None,
               fastv: tuple[int, float] | None = None) -> torch.Tensor:
    if fastv is not None:
        with fastv_pruning(model, vm, K=fastv[0], keep=fastv[1]):
            return answer_correct(model, data)
    if plan is None:
        return answer_correct(model, data)
    with apply_skip_plan(model, plan, vm):
        return answer_correct(model, data)


def _analyse(model, calib: DigitVQA, ev: DigitVQA, sizes: Sizes, seed: int) -> dict:
    """Measures on ``calib`` and ground-truth accuracies on ``ev`` for one model."""
    vm = model.vision_mask
    L = len(find_blocks(model))
    tr = collect_trace(model, calib.inputs(), vm)
    R_v = layer_redundancy(tr, "vision").numpy()
    R_t = layer_redundancy(tr, "text").numpy()
    BI = block_influence(tr, "all").numpy()
    A = cross_modal_attention(tr).numpy()
    D_ex = adjacent_token_redundancy(tr, GRID, per_example=True).numpy()   # [L+1, B]
    D = D_ex.mean(1)
    U = unique_information_probe(tr, calib.answer, n_folds=sizes.probe_folds, seed=seed)
    per_ex = per_example_redundancy(tr, "vision").numpy()        # [L, B]
    report = RedundancyReport(R_vision=R_v, R_text=R_t, A=A, D=D, U=U, A_uniform=uniform_vision_share(vm))
    base = answer_correct(model, ev)
    skip_v = [_acc_under(model, ev, vm, SkipPlan(skip_vision=(i,))) for i in range(L)]
    skip_a = [_acc_under(model, ev, vm, SkipPlan(skip_all=(i,))) for i in range(L)]
    exits = [_acc_under(model, ev, vm, SkipPlan(vision_exit=e)) for e in range(L + 1)]
    entries = [_acc_under(model, ev, vm, SkipPlan(vision_entry=s)) for s in range(L + 1)]
    return dict(L=L, trace=tr, R_v=R_v, R_t=R_t, BI=BI, A=A, D=D, D_ex=D_ex, U=U, per_ex=per_ex, report=report,
                base=base,
                skip_v=skip_v, skip_a=skip_a, exits=exits, entries=entries)


def _u_shape(r: dict) -> tuple[float, float, list[float]]:
    """U-shape of R(V) over blocks: min(R_V first block, R_V last block) vs mean R_V of the middle blocks, with
    per-calibration-example differences (reported, secondary)."""
    pe = r["per_ex"]
    ends = np.minimum(pe[0], pe[-1])
    mid = pe[1:-1].mean(0) if pe.shape[0] > 2 else np.full_like(ends, np.nan)
    return float(min(r["R_v"][0], r["R_v"][-1])), float(np.mean(r["R_v"][1:-1])) if pe.shape[0] > 2 else float("nan"), \
        (ends - mid).tolist()


def _u_shape_D(D_ex: np.ndarray) -> tuple[float, float, list[float], dict[str, float]]:
    """U-shape of the inter-token redundancy D over the block outputs h_1..h_L (the spec's "low cosine distance"
    of early and late vision tokens): both ends above the middle, i.e. min(mean D_1, mean D_L) against the mean of
    D_2..D_{L-1}; the paired differences are the per-calibration-pair (D_end - mid) of the end with the lower mean,
    so their mean is exactly measured - reference. ``D_ex`` is [L+1, B] (h_0..h_L per pair). Also returns both
    ends' per-pair means and the per-pair-minimum reading (mean of min(D_1, D_L), which sits below the
    min-of-means by about E|D_1 - D_L| / 2 and so can read "no U" where both ends are clearly above the middle:
    third fresh-eyes review, vlm-8L seed 0, +0.019 and +0.037 per end against -0.004 for the per-pair minimum)."""
    d = D_ex[1:]                                                    # [L, B]: h_1..h_L
    if d.shape[0] <= 2:
        return float(min(d[0].mean(), d[-1].mean())), float("nan"), np.full(d.shape[1], np.nan).tolist(), {}
    mid = d[1:-1].mean(0)
    first, last = d[0] - mid, d[-1] - mid
    lower = first if d[0].mean() <= d[-1].mean() else last
    extra = {"first_minus_mid": float(first.mean()), "last_minus_mid": float(last.mean()),
             "per_pair_min_minus_mid": float((np.minimum(d[0], d[-1]) - mid).mean())}
    return float(min(d[0].mean(), d[-1].mean())), float(mid.mean()), lower.tolist(), extra


def _untrained_D(cfg, calib: DigitVQA, seed: int) -> np.ndarray:
    """Per-pair D [L+1, B] of the same architecture at its random initialisation (the U-shape claim's control:
    no training, so any U there comes from the architecture, not from what the model learned)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyVLM(cfg).eval()
    tr = collect_trace(model, calib.inputs(), model.vision_mask)
    return adjacent_token_redundancy(tr, GRID, per_example=True).numpy()


def _checks(model, data: DigitVQA, r: dict) -> list[Claim]:
    """Exactness checks on a few pairs (true by construction)."""
    vm = model.vision_mask
    small = data.subset(torch.arange(min(64, len(data))))
    x = small.inputs()
    blocks = find_blocks(model)
    with torch.no_grad():
        before = model(**x)
        with apply_skip_plan(model, SkipPlan(), vm):
            empty = model(**x)
        with apply_skip_plan(model, SkipPlan(vision_exit=len(blocks)), vm):
            exit_l = model(**x)
        after = model(**x)
        i = len(blocks) // 2
        with apply_skip_plan(model, SkipPlan(skip_all=(i,)), vm):
            skipped = model(**x)
        deleted = copy.deepcopy(model)
        del deleted.layers[i]
        removed = deleted(**x)
        with apply_skip_plan(model, SkipPlan(skip_vision=(len(blocks) - 1,)), vm):
            last_free = model(**x)
    left = sum(len(b._forward_hooks) + len(b._forward_pre_hooks) + len(b.self_attn._forward_hooks) for b in blocks)
    tr = r["trace"]
    attn = tr.attn
    brute = np.zeros(r["L"])
    vmask, tmask = tr.vision_mask[0], tr.text_mask[0]
    for layer in range(r["L"]):
        brute[layer] = attn[layer][:, :, tmask][..., vmask].sum(-1).mean().item()
    row_err = float((attn.sum(-1) - 1).abs().max())
    diff = lambda a, b: float((a - b).abs().max())  # noqa: E731
    mk = lambda s, m, op, ref, base, note="": Claim(s, m, op, ref, baseline=base, kind="check", note=note)  # noqa: E731
    return [
        mk("An empty skip plan leaves the logits identical (max |diff|)", diff(empty, before), "<=", 0.0,
           "the model without hooks"),
        mk("Hooks are removed afterwards: identical outputs before/after, no hooks left",
           diff(after, before) + left, "<=", 0.0, "0 (max |diff| + number of hooks left)"),
        mk("Skipping block i for all tokens equals deleting block i (max |diff|)", diff(skipped, removed), "<=",
           1e-5, "forward pass with the block deleted"),
        mk("Vision exit at L equals the base model (max |diff|)", diff(exit_l, before), "<=", 0.0, "base model"),
        mk("Skipping the last block for V leaves every text position's logits unchanged (max |diff|)",
           diff(last_free[:, ~vm], before[:, ~vm]), "<=", 0.0, "base model",
           "V's outputs of the last block are never read, so block L-1 is free for every ranking"),
        mk("A_i matches a brute-force sum over the attention probabilities; rows sum to 1 (max error)",
           float(np.abs(brute - r["A"]).max()) + row_err, "<=", 1e-5, "explicit sum"),
    ]


def _fig_layers(r: dict, name: str):
    from matplotlib.figure import Figure

    L = r["L"]
    fig = Figure(figsize=(10, 3.6))
    ax1, ax2 = fig.subplots(1, 2)
    blocks = np.arange(L)
    ax1.plot(blocks, r["R_v"], "o-", label="R_i(V) (Skip-It)")
    ax1.plot(blocks, r["R_t"], "s-", label="R_i(T)")
    ax1.plot(blocks, 1 - r["BI"], "^--", label="1 - BI_i (ShortGPT, all tokens)")
    ax1.plot(blocks, r["A"], "d-", label="A_i (text->vision attention)")
    ax1.plot(np.arange(L + 1) - 0.5, r["U"], "x:", label="U_l (nats, at h_l)")
    ax1.set_xlabel("block i")
    ax1.set_title(f"{name}: measures (calibration)")
    ax1.legend(fontsize=7)
    base = r["base"].mean().item()
    ax2.bar(blocks - 0.2, [base - a.mean().item() for a in r["skip_v"]], 0.4, label="skip block for V")
    ax2.bar(blocks + 0.2, [base - a.mean().item() for a in r["skip_a"]], 0.4, label="remove block (all tokens)")
    ax2.set_xlabel("block i")
    ax2.set_ylabel("accuracy drop")
    ax2.set_title("ground truth (evaluation)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fig_tradeoff(curves: dict[str, list[tuple[float, float]]]):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4))
    ax = fig.subplots()
    for name, pts in curves.items():
        pts = sorted(pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=name, ms=3)
    ax.set_xlabel("block FLOPs (fraction of full)")
    ax.set_ylabel("accuracy (evaluation)")
    ax.legend(fontsize=7)
    ax.set_title("[A14] accuracy vs FLOPs, main model")
    fig.tight_layout()
    return fig


def reproduce(budget: Budget, seed: int) -> Outcome:
    sizes = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    data = digit_vqa(sizes.models[0].split_seed)
    calib, ev = _split(data, sizes.n_calib, sizes.n_eval, seed)
    claims: list[Claim] = []
    metrics: dict[str, float] = {}
    tables: dict[str, list[dict]] = {}
    figures: dict = {}
    results = []
    with limit_threads(1):
        for cfg in sizes.models:
            cfg = replace(cfg, seed=seed)           # the seed retrains the model (initialisation, batch order)
            model = load_tiny_vlm(cfg)
            r = _analyse(model, calib, ev, sizes, seed)
            results.append((cfg, model, r))
    # per-model: rank correlation, ShortGPT comparison, U-shape
    for cfg, model, r in results:
        name = cfg.name
        base = r["base"].mean().item()
        acc_v = np.array([a.mean().item() for a in r["skip_v"]])
        acc_a = np.array([a.mean().item() for a in r["skip_a"]])
        # blocks 0..L-2 only: block L-1's outputs at V are never read (the answer is read at the last text position
        # and attends to V's *inputs* of each block), so its V-skip is free for every ranking (a check below)
        nc = r["L"] - 1
        rho = spearman(r["R_v"][:nc], acc_v[:nc])
        rho_bi = spearman(1 - r["BI"][:nc], acc_v[:nc])
        rho_depth = spearman(np.arange(nc), acc_v[:nc])           # "later blocks are safer to skip": no measurement
        rho_bi_own = spearman(1 - r["BI"], acc_a)
        ends_r, mid_r, _ = _u_shape(r)
        ends, mid, paired_u, u_ends = _u_shape_D(r["D_ex"])
        c_ends, c_mid, c_paired, _ = _u_shape_D(_untrained_D(cfg, calib, seed))
        metrics.update({f"{name}_base_acc": base, f"{name}_spearman_RV": rho, f"{name}_spearman_BI": rho_bi,
                        f"{name}_spearman_depth": rho_depth, f"{name}_spearman_BI_own_removal": rho_bi_own,
                        f"{name}_ushape_D_ends": ends, f"{name}_ushape_D_middle": mid,
                        f"{name}_ushape_RV_ends": ends_r, f"{name}_ushape_RV_middle": mid_r,
                        f"{name}_acc_skipV_last_block": float(acc_v[-1])})
        tables[f"{name}_layers"] = [
            {"block": i, "R_V": float(r["R_v"][i]), "R_T": float(r["R_t"][i]), "BI_all": float(r["BI"][i]),
             "A": float(r["A"][i]), "A_over_uniform": float(r["A"][i] / r["report"].A_uniform),
             "U_in": float(r["U"][i]), "D_in": float(r["D"][i]), "D_out": float(r["D"][i + 1]),
             "acc_skip_V": float(acc_v[i]), "acc_remove_block": float(acc_a[i])} for i in range(r["L"])]
        tables[f"{name}_exit_entry"] = [
            {"layer": e, "acc_vision_exit": r["exits"][e].mean().item(), "acc_late_entry": r["entries"][e].mean().item(),
             "flops_exit": plan_flops(SkipPlan(vision_exit=e), model.vision_mask, r["L"], _cost(model)),
             "flops_entry": plan_flops(SkipPlan(vision_entry=e), model.vision_mask, r["L"], _cost(model))}
            for e in range(r["L"] + 1)]
        claims.append(Claim(
            f"{name}: redundancy R_l(V) rank-correlates with accuracy after skipping block l for V (Spearman >= 0.6)",
            rho, ">=", SPEARMAN_MIN, baseline="spec's bar 0.6",
            metric=f"Spearman over blocks 0..{nc - 1} (block {nc}'s V-skip is free by construction)",
            paper="conditions align with actual degradation", falsifier="Spearman < 0.6", bar=True,
            control=rho_depth, control_arm="block depth as the ranking (later = safer; no measurement)",
            note=f"base accuracy {base:.3f}; NaN when every skip gives the same accuracy"))
        claims.append(Claim(
            f"{name}: R_l(V) ranks V-skip damage at least as well as the strongest label-free alternative",
            rho, ">=", baselines={"ShortGPT 1 - BI (all tokens)": rho_bi, "block depth": rho_depth},
            baseline="strongest of: ShortGPT's all-token block influence, block depth; same blocks, same run",
            metric="Spearman of R_l(V) with the V-skip accuracy", falsifier="a lower Spearman than the best alternative",
            note=f"BI against its own whole-block removal: Spearman {rho_bi_own:.3f}; NaN when every skip gives "
                 "the same accuracy"))
        claims.append(Claim(
            f"{name}: both early and late vision tokens are redundant (U-shape of the adjacent-token similarity D)",
            ends, ">", mid, baseline="mean D of the middle layers h_2..h_{L-1}",
            metric="min(mean D at h_1, mean D at h_L): cosine similarity of adjacent vision tokens",
            paper="early and late vision tokens are redundant across models",
            falsifier="mean D after the first or the last block not above the middle layers' mean (paired per "
                      "calibration pair on the lower end)",
            paired=paired_u, control=mid + (c_ends - c_mid), control_paired=c_paired,
            control_arm="the same architecture untrained (random initialisation, same calibration pairs), its "
                        "lower end minus its own middle, placed on this reference (middle + difference)",
            note=(f"per calibration pair, end minus middle: first {u_ends.get('first_minus_mid', float('nan')):+.4f}, "
                  f"last {u_ends.get('last_minus_mid', float('nan')):+.4f}; mean of the per-pair min(D_1, D_L) "
                  f"minus middle {u_ends.get('per_pair_min_minus_mid', float('nan')):+.4f}; untrained: ends "
                  f"{c_ends:.3f} vs its own middle {c_mid:.3f}. The spec asks to report, not assert, this. Secondary "
                  f"reading, R(V) over blocks: ends {ends_r:.3f} vs middle {mid_r:.3f}")))
    # main model: plans at equal FLOPs, exit rule, FastV and ShortGPT
    cfg, model, r = results[0]
    claims += _plan_claims(model, ev, r, sizes, metrics, tables, figures)
    claims += _checks(model, ev, r)
    for cfg, _, r in results:
        figures[f"{cfg.name}_layers"] = _fig_layers(r, cfg.name)
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures=figures)


def _cost(model) -> BlockCost:
    return BlockCost(d=model.cfg.hidden_size, d_ff=model.cfg.ffn_size, mlp_mats=2)


def _plan_claims(model, ev: DigitVQA, r: dict, sizes: Sizes, metrics: dict, tables: dict, figures: dict) -> list[Claim]:
    vm, L, cost = model.vision_mask, r["L"], _cost(model)
    base_c = r["base"]
    base = base_c.mean().item()
    nc = L - 1                                                     # candidate blocks 0..L-2 (block L-1 is free)
    order = np.argsort(-r["R_v"][:nc], kind="stable")              # most redundant first
    k = max(1, min(N_PLAN, nc - 1))
    best = SkipPlan(skip_vision=tuple(sorted(int(i) for i in order[:k])))
    worst = SkipPlan(skip_vision=tuple(sorted(int(i) for i in order[-k:])))
    best_c, worst_c = _acc_under(model, ev, vm, best), _acc_under(model, ev, vm, worst)
    # label-free baselines at the same FLOPs (every V-skip of k blocks costs the same): skip the last k real blocks
    # (L-1-k..L-2), and a random k-subset of 0..L-2 (its expectation: the mean over all C(L-1, k) subsets, per pair)
    last = SkipPlan(skip_vision=tuple(range(nc - k, nc)))
    last_c = _acc_under(model, ev, vm, last)
    subsets = list(itertools.combinations(range(nc), k))
    sub_c = torch.stack([_acc_under(model, ev, vm, SkipPlan(skip_vision=sb)) for sb in subsets])
    rand_c = sub_c.mean(0)
    metrics.update({"lastk_acc": last_c.mean().item(), "random_k_acc": rand_c.mean().item(),
                    "random_k_acc_min": float(sub_c.mean(1).min()), "random_k_acc_max": float(sub_c.mean(1).max()),
                    "best_k_rank_among_subsets": float((sub_c.mean(1) > best_c.mean()).sum().item() + 1)})
    f_best = plan_flops(best, vm, L, cost)
    # peers at equal or larger FLOPs than the best plan
    n_v = int(vm.sum())
    fastv_keep = next(n for n in range(n_v + 1) if plan_flops(SkipPlan(), vm, L, cost, fastv=(sizes.fastv_K, n)) >= f_best
                      - 1e-12)
    fastv_c = _acc_under(model, ev, vm, fastv=(sizes.fastv_K, fastv_keep / n_v))
    f_fastv = plan_flops(SkipPlan(), vm, L, cost, fastv=(sizes.fastv_K, fastv_keep))
    bi_order = np.argsort(r["BI"], kind="stable")                 # ShortGPT removes the lowest-BI blocks
    n_rm = max(n for n in range(L) if plan_flops(SkipPlan(skip_all=tuple(int(i) for i in bi_order[:n])), vm, L, cost)
               >= f_best - 1e-12)
    short_plan = SkipPlan(skip_all=tuple(sorted(int(i) for i in bi_order[:n_rm])))
    short_c = _acc_under(model, ev, vm, short_plan)
    f_short = plan_flops(short_plan, vm, L, cost)
    fastv_half = _acc_under(model, ev, vm, fastv=(sizes.fastv_K, 0.5)).mean().item()
    # the rule-chosen plan: spec's tau_R and eps_U; tau_A relative to the uniform vision share |V|/N
    rep = r["report"]
    chosen = rep.recommend(TAU_R, TAU_A_REL, EPS_U, relative_A=True)
    chosen_c = _acc_under(model, ev, vm, chosen)
    f_chosen = plan_flops(chosen, vm, L, cost)
    exit_plan = SkipPlan(vision_exit=chosen.vision_exit)
    exit_c = _acc_under(model, ev, vm, exit_plan)
    has_exit = chosen.vision_exit is not None
    # control for the exit: an exit block drawn uniformly from 0..L-1 (the rule's choice removed), per pair
    rand_exit_c = torch.stack([r["exits"][e] for e in range(L)]).mean(0)
    sweep = []
    for rho_a in TAU_A_SWEEP:
        pl = rep.recommend(TAU_R, rho_a, EPS_U, relative_A=True)
        e = L if pl.vision_exit is None else pl.vision_exit
        sweep.append({"tau_A_relative": rho_a, "tau_A_absolute": rho_a * rep.A_uniform, "exit": e,
                      "acc_exit": r["exits"][e].mean().item(),
                      "flops_saved": 1 - plan_flops(SkipPlan(vision_exit=pl.vision_exit), vm, L, cost)})
    tables["exit_rule_sweep"] = sweep
    metrics.update({"base_acc": base, "best2_acc": best_c.mean().item(), "worst2_acc": worst_c.mean().item(),
                    "best2_flops": f_best, "fastv_matched_acc": fastv_c.mean().item(), "fastv_matched_flops": f_fastv,
                    "fastv_matched_keep": float(fastv_keep), "fastv_half_acc": fastv_half,
                    "shortgpt_matched_acc": short_c.mean().item(), "shortgpt_matched_flops": f_short,
                    "shortgpt_removed": float(n_rm), "chosen_acc": chosen_c.mean().item(),
                    "chosen_flops_saved": 1 - f_chosen, "chosen_exit": float(chosen.vision_exit if has_exit else L),
                    "chosen_entry": float(chosen.vision_entry), "chosen_skips": float(len(chosen.skip_vision)),
                    "exit_acc": exit_c.mean().item(), "exit_flops_saved": 1 - plan_flops(exit_plan, vm, L, cost)})
    # context for the exit rule: what U alone would pick, the accuracy-oracle exit, A under uniform attention
    U = r["U"]
    u_exit = next(e for e in range(L + 1) if all(U[layer] <= EPS_U for layer in range(e, L + 1)) or e == L)
    ok = [e for e in range(L + 1) if r["exits"][e].mean().item() >= KEEP_FRACTION * base]
    metrics.update({"exit_by_U_only": float(u_exit), "exit_by_U_only_acc": r["exits"][u_exit].mean().item(),
                    "exit_oracle_98": float(min(ok)) if ok else float(L),
                    "A_uniform_attention": float(rep.A_uniform), "A_min": float(np.min(r["A"])),
                    "A_over_uniform_min": float(np.min(r["A"]) / rep.A_uniform),
                    "random_exit_acc": rand_exit_c.mean().item()})
    tables["plans"] = [
        {"plan": "full model", "blocks": "-", "acc": base, "flops": 1.0},
        {"plan": f"Skip-It best-{k} (V skip)", "blocks": str(best.skip_vision), "acc": best_c.mean().item(), "flops": f_best},
        {"plan": f"Skip-It worst-{k} (V skip)", "blocks": str(worst.skip_vision), "acc": worst_c.mean().item(),
         "flops": plan_flops(worst, vm, L, cost)},
        {"plan": f"skip the last {k} (V skip)", "blocks": str(last.skip_vision), "acc": last_c.mean().item(),
         "flops": plan_flops(last, vm, L, cost)},
        {"plan": f"random {k}-subset (V skip, mean of {len(subsets)})", "blocks": "-", "acc": rand_c.mean().item(),
         "flops": f_best},
        {"plan": f"FastV K={sizes.fastv_K}, keep {fastv_keep}/{n_v}", "blocks": "-", "acc": fastv_c.mean().item(),
         "flops": f_fastv},
        {"plan": f"ShortGPT remove {n_rm}", "blocks": str(short_plan.skip_all), "acc": short_c.mean().item(),
         "flops": f_short},
        {"plan": "rule-chosen", "blocks": str(chosen), "acc": chosen_c.mean().item(), "flops": f_chosen},
    ]
    # accuracy vs FLOPs curves
    curves = {
        "Skip-It: skip k most redundant for V": [(plan_flops(SkipPlan(skip_vision=tuple(int(i) for i in order[:j])), vm,
                                                   L, cost),
                                                   _acc_under(model, ev, vm, SkipPlan(skip_vision=tuple(
                                                       int(i) for i in order[:j]))).mean().item())
                                                  for j in range(min(nc, 4) + 1)],
        "vision exit at e": [(plan_flops(SkipPlan(vision_exit=e), vm, L, cost), r["exits"][e].mean().item())
                             for e in range(L + 1)],
        f"FastV K={sizes.fastv_K}": [(plan_flops(SkipPlan(), vm, L, cost, fastv=(sizes.fastv_K, n)),
                                      _acc_under(model, ev, vm, fastv=(sizes.fastv_K, n / n_v)).mean().item())
                                     for n in range(0, n_v + 1, 4)],
        "ShortGPT remove n": [(plan_flops(SkipPlan(skip_all=tuple(int(i) for i in bi_order[:n])), vm, L, cost),
                               _acc_under(model, ev, vm, SkipPlan(skip_all=tuple(int(i) for i in bi_order[:n]))
                                          ).mean().item()) for n in range(min(L, 4))],
    }
    figures["accuracy_vs_flops"] = _fig_tradeoff(curves)
    ev_n = len(base_c)
    tol = lambda c, t: ((base_c - c) - t).tolist()  # noqa: E731
    rand_arm = f"a random {k}-subset of blocks 0..{nc - 1} skipped for V, same FLOPs (mean over all {len(subsets)} subsets)"
    last_arm = (f"skip the last {k} real blocks {last.skip_vision} for V (depth, no measurement), same FLOPs; the "
                f"random {k}-subset drops {base - rand_c.mean().item():.4f}")
    peers = {f"skip the last {k}": last_c, f"random {k}-subset": rand_c, f"least-redundant {k}": worst_c,
             f"FastV (K={sizes.fastv_K}, keep {fastv_keep}/{n_v}, FLOPs {f_fastv:.3f})": fastv_c,
             f"ShortGPT (remove {n_rm}, FLOPs {f_short:.3f})": short_c}
    out = [
        Claim(f"Skipping the {k} most redundant blocks for V costs <= 2 accuracy points", base - best_c.mean().item(),
              "<=", BEST_MAX_DROP, baseline="spec's bound 0.02", metric=f"accuracy drop ({ev_n} evaluation pairs)",
              falsifier="a drop above 2 points", paired=tol(best_c, BEST_MAX_DROP), bar=True,
              control=base - last_c.mean().item(), control_arm=last_arm, control_paired=tol(last_c, BEST_MAX_DROP),
              note=f"blocks {best.skip_vision} of 0..{nc - 1}, block FLOPs {f_best:.3f} of full"),
        Claim(f"Skipping the {k} least redundant blocks for V costs >= 5 accuracy points", base - worst_c.mean().item(),
              ">=", WORST_MIN_DROP, baseline="spec's bound 0.05", metric="accuracy drop",
              falsifier="a drop below 5 points", paired=tol(worst_c, WORST_MIN_DROP), bar=True,
              control=base - rand_c.mean().item(), control_arm=rand_arm, control_paired=tol(rand_c, WORST_MIN_DROP),
              note=f"blocks {worst.skip_vision} of 0..{nc - 1}, the same FLOPs as the best plan"),
        Claim("The redundancy-ranked V-skip plan is at least as accurate as the strongest baseline at equal or "
              "more FLOPs",
              best_c.mean().item(), ">=", baselines={n: c.mean().item() for n, c in peers.items()},
              paired={n: (best_c - c).tolist() for n, c in peers.items()},
              baseline=f"strongest of: skip the last {k}, a random {k}-subset, the least-redundant {k} (equal FLOPs); "
                       "FastV and ShortGPT at equal or more FLOPs",
              metric=f"accuracy (Skip-It FLOPs {f_best:.3f})", falsifier="lower accuracy than the best baseline",
              note="FastV / ShortGPT: our framing (the abstract makes no comparison with them)"),
        Claim(f"The vision exit chosen from A (tau_A = {TAU_A_REL} x |V|/N) and U keeps >= 98% of full accuracy",
              exit_c.mean().item() if has_exit else float("nan"), ">=", KEEP_FRACTION * base,
              baseline="0.98 x full-model accuracy", metric="accuracy with vision exit",
              falsifier="accuracy below 98% of the full model's", bar=True,
              paired=(exit_c - KEEP_FRACTION * base_c).tolist() if has_exit else None,
              control=rand_exit_c.mean().item(), control_arm="an exit block drawn uniformly from 0..L-1",
              control_paired=(rand_exit_c - KEEP_FRACTION * base_c).tolist(),
              note=(f"exit at block {chosen.vision_exit} of {L}, block FLOPs saved "
                    f"{metrics['exit_flops_saved']:.3f}" if has_exit else
                    f"NaN: no exit satisfies A <= {TAU_A_REL} x {rep.A_uniform:.3f} and U <= {EPS_U} nats (min A / "
                    f"uniform over blocks {metrics['A_over_uniform_min']:.3f}, last block "
                    f"{float(r['A'][-1]) / rep.A_uniform:.3f})")),
    ]
    return out
