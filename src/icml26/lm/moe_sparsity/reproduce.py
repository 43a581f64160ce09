"""[A09] Reproduction: threshold / dual-threshold token-expert dropping and complete expert partition on two tiny
MoE code LMs trained on the standard-library corpus, their MoE blocks run by SparseMoE:

- ``moe-4L``: a Hugging Face Mixtral (renormalised top-2 of 8). Here ratio skip at beta is the threshold at
  tau = beta / (1 + beta) and static top-1 is the threshold at tau = 0.5, so these baselines cannot differ from
  threshold dropping at its own rate;
- ``olmoe-4L``: an OLMoE-style model (top-4 of 8, softmax over all experts, no renormalisation), where threshold,
  ratio skip, capacity, random and static top-3 dropping all differ at 25% of the pairs.

On disjoint calibration / evaluation windows of the validation split (picked by the seed; one trained testbed
per model: seeds change the windows and random draws, not the model):

1. held-out loss and top-1 accuracy vs compute dropped: threshold (calibrated to each target drop) vs random
   dropping at the threshold's *measured* pair rate on the evaluation windows; at ~25%: every baseline at the same
   drop (capacity factor / beta bisected on calibration data; static top-3 on the OLMoE model drops exactly 25%);
   on both models (each reconstructed: neurons sorted by calibration importance) dual threshold against the
   strongest of single threshold and the fixed partial rule ``TopKPartial`` (top experts in full, the rest at their
   major half, ignoring the weights), with the same dual threshold on the model without reconstruction as control;
2. (a check) MoE-layer speed-up at 25%: ``compare_times`` (interleaved, process CPU time, same-work control) of
   the grouped layer with and without dropping; a table of every policy's thread-CPU speed-up beside it;
3. post-training (standard and full budgets): the Mixtral testbed and its P = 4 complete partition fine-tuned on
   asyncio/ + email/ with equal steps, held-out loss compared; each then with threshold dropping (metrics);
4. checks: threshold 0 = no dropping, dual with tau_lo = tau_hi = single threshold, reconstruction exact,
   complete partition (P = 2, 4) exact at initialisation (with and without dropping), drop rate monotone in tau,
   and the HF adapters (tiny Mixtral / OLMoE / Qwen2-MoE / Qwen3-MoE built from configs) unchanged at threshold 0.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import nn

from icml26.harness import Budget, Claim, Outcome, compare_times, limit_threads, seed_everything
from icml26.testbeds.causal_lm import encode_split

from .calibrate import _layer_error, calibrate_drop, calibrate_layers, moe_inputs
from .moe import SparseMoE, convert_hf_moe, model_stats, moe_layers, set_drop_policy
from .partition import neuron_importance, partition_experts, reconstruct_experts
from .policies import (
    CapacityDrop,
    DropPolicy,
    DualThresholdDrop,
    RandomDrop,
    RatioSkip,
    ThresholdDrop,
    TopKPartial,
    TopKReduce,
)
from .posttrain import post_train
from .testbed import MOE_2L, MOE_4L, OLMOE_2L, OLMOE_4L, load_moe_lm


@dataclass(frozen=True)
class Sizes:
    model: str              # the renormalised top-2 (Mixtral) testbed
    olmoe: str              # the top-4, not renormalised (OLMoE-style) testbed
    val_bytes: int          # characters of the validation split encoded
    seq_len: int            # tokens per window
    n_calib: int            # calibration windows
    n_eval: int             # evaluation windows
    sweep: tuple            # target compute drops for the loss-vs-drop curve
    timing_tokens: int      # tokens in the timed MoE-layer batch
    timing_iters: int       # rounds of the all-policies speed-up table
    timing_repeats: int     # compare_times repeats of the speed-up check
    post_steps: int         # post-training steps per model (0: skip)
    post_parts: tuple       # partitions compared with the original in post-training
    post_seq: int           # post-training sequence length
    post_test: int          # held-out windows scoring post-training


SIZES = {
    Budget.QUICK: Sizes("moe-2L", "olmoe-2L", 300_000, 64, 8, 16, (0.25,), 1024, 3, 3, 0, (4,), 64, 8),
    Budget.STANDARD: Sizes("moe-4L", "olmoe-4L", 2_000_000, 128, 32, 128, (0.1, 0.25, 0.4, 0.5), 4096, 10, 7,
                           60, (4,), 64, 64),
    Budget.FULL: Sizes("moe-4L", "olmoe-4L", 3_000_000, 128, 64, 160, (0.05, 0.1, 0.15, 0.25, 0.35, 0.4, 0.5), 8192,
                       40, 15, 150, (2, 4), 128, 64),
}
MODELS = {"moe-2L": MOE_2L, "moe-4L": MOE_4L, "olmoe-2L": OLMOE_2L, "olmoe-4L": OLMOE_4L}
HEADLINE = 0.25            # "about 25% compute drop" (spec) / issue's 25% of token-expert pairs
LOSS_TOL = 0.01            # spec: loss raised by <= 1% relative at ~25%
ACC_TOL = 0.005            # abstract: accuracy loss < 0.5%
FAR_LESS = 0.5             # "far less than random": at most half of random dropping's loss increase (our factor)
SPEEDUP = 1.25             # issue's acceptance figure (abstract: 1.19x Mixtral, up to 1.41x OLMoE); a check


# helper functions

def _windows(tokens: torch.Tensor, seq_len: int, n: int, gen: torch.Generator) -> torch.Tensor:
    total = (len(tokens) - 1) // (seq_len + 1)
    if total < n:
        raise ValueError(f"split too short: {total} windows of {seq_len + 1} tokens, need {n}")
    idx = torch.randperm(total, generator=gen)[:n]
    return tokens[: total * (seq_len + 1)].view(total, seq_len + 1)[idx]


@torch.no_grad()
def _evaluate(model: nn.Module, win: torch.Tensor, policy: DropPolicy | None) -> dict:
    """Per-window loss and top-1 accuracy with ``policy`` on every layer, and the measured drop rates."""
    layers = set_drop_policy(model, policy)
    logits = model(input_ids=win[:, :-1], use_cache=False).logits
    tgt = win[:, 1:]
    ce = nn.functional.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
    stats = model_stats(layers)
    set_drop_policy(model, None)
    return {"loss_w": ce.mean(1).numpy(), "acc_w": (logits.argmax(-1) == tgt).float().mean(1).numpy(),
            "loss": float(ce.mean()), "acc": float((logits.argmax(-1) == tgt).float().mean()), "logits": logits,
            **stats}


def _match(make: Callable[[float], DropPolicy], lo: float, hi: float, target: float, layers, xs, refs,
           increasing: bool) -> DropPolicy:
    """Bisection on a policy parameter until its calibration compute drop reaches ``target``."""
    for _ in range(14):
        mid = 0.5 * (lo + hi)
        _, drop = _layer_error(layers, xs, refs, make(mid))
        if (drop < target) == increasing:
            lo = mid
        else:
            hi = mid
    return make(hi if increasing else lo)


def _replace_layers(model: nn.Module, fn: Callable[[SparseMoE], SparseMoE]) -> nn.Module:
    out = copy.deepcopy(model)
    for parent in list(out.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, SparseMoE):
                setattr(parent, name, fn(child))
    return out


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def hf_adapter_diffs(seed: int) -> dict[str, float]:
    """Max |logit difference| between tiny HF Mixtral / OLMoE / Qwen2-MoE / Qwen3-MoE models and their SparseMoE
    conversions with ThresholdDrop(0) (and, for comparison, the conversion at threshold 0.3)."""
    from transformers import (
        MixtralConfig,
        MixtralForCausalLM,
        OlmoeConfig,
        OlmoeForCausalLM,
        Qwen2MoeConfig,
        Qwen2MoeForCausalLM,
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
    )

    common = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64)
    builds = {
        "mixtral": lambda: MixtralForCausalLM(MixtralConfig(**common, intermediate_size=48, num_local_experts=6,
                                                            num_experts_per_tok=2)),
        "olmoe": lambda: OlmoeForCausalLM(OlmoeConfig(**common, intermediate_size=48, num_experts=8,
                                                      num_experts_per_tok=3, norm_topk_prob=False)),
        "qwen2_moe": lambda: Qwen2MoeForCausalLM(Qwen2MoeConfig(**common, intermediate_size=64,
                                                               moe_intermediate_size=24, num_experts=6,
                                                               num_experts_per_tok=2,
                                                               shared_expert_intermediate_size=40)),
        "qwen3_moe": lambda: Qwen3MoeForCausalLM(Qwen3MoeConfig(**common, intermediate_size=64, moe_intermediate_size=24,
                                                               num_experts=8, num_experts_per_tok=2, head_dim=8,
                                                               norm_topk_prob=True)),
    }
    out = {}
    for name, build in builds.items():
        torch.manual_seed(seed)
        hf = build().eval()
        ids = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(seed))
        ours = convert_hf_moe(hf)
        with torch.no_grad():
            ref = hf(input_ids=ids).logits
            set_drop_policy(ours, ThresholdDrop(0.0, keep_top1=False))
            out[name] = _max_diff(ours(input_ids=ids).logits, ref)
            set_drop_policy(ours, ThresholdDrop(0.3))
            out[f"{name}_tau0.3"] = _max_diff(ours(input_ids=ids).logits, ref)
    return out


def _time_layer(layer: SparseMoE, x: torch.Tensor, policies: dict[str, DropPolicy | None], iters: int
                ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Median wall time and median thread CPU time per policy, timed interleaved (ABC..ABC.., the order rotated
    each round so no policy always runs first), and the compute drop each had on ``x``."""
    drops: dict[str, float] = {}
    wall: dict[str, list[float]] = {k: [] for k in policies}
    cpu: dict[str, list[float]] = {k: [] for k in policies}
    names = list(policies)
    with torch.no_grad(), limit_threads(1):
        for k in names:                         # warm-up, and the drop each policy has on this batch
            layer.drop_policy = policies[k]
            layer.output(x)
            drops[k] = layer.last_stats["compute_drop"]
        for r in range(iters):
            for k in names[r % len(names):] + names[: r % len(names)]:
                layer.drop_policy = policies[k]
                t0, c0 = time.perf_counter(), time.thread_time()
                layer.output(x)
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.thread_time() - c0)
    layer.drop_policy = None
    return ({k: float(np.median(v)) for k, v in wall.items()}, {k: float(np.median(v)) for k, v in cpu.items()},
            drops)


def _figure(rows: list[dict], rows_o: list[dict], speed: list[dict]) -> Figure:
    fig = Figure(figsize=(13.5, 3.8))
    axes = fig.subplots(1, 3)
    for ax, rr, title in ((axes[0], rows, "Mixtral-style (renormalised top-2)"),
                          (axes[1], rows_o, "OLMoE-style (top-4, not renormalised)")):
        for method, style in (("threshold", "o-"), ("random", "s--"), ("dual threshold", "D"),
                              ("dual threshold, no reconstruction", "d"),
                              ("fixed partial (top-k full, rest major half)", "P"), ("capacity", "^"), ("ratio skip", "v"),
                              ("static top-k", "x")):
            pts = sorted((r["compute_drop"], r["loss"]) for r in rr if r["method"] == method)
            if pts:
                ax.plot(*zip(*pts), style, label=method)
        ax.axhline(next(r["loss"] for r in rr if r["method"] == "none"), color="k", ls=":", lw=0.8, label="no drop")
        ax.set_xlabel("routed expert compute dropped")
        ax.set_ylabel("held-out loss (nats)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    a2 = axes[2]
    pts = sorted((r["compute_drop"], r["cpu_speedup"]) for r in speed)
    a2.plot(*zip(*pts), "o", label="measured (thread CPU time)")
    xs = np.linspace(0, max(p[0] for p in pts) + 0.02, 50)
    a2.plot(xs, 1 / (1 - xs), "k:", lw=0.8, label="ideal 1/(1-drop)")
    a2.set_xlabel("routed expert compute dropped")
    a2.set_ylabel("MoE layer speed-up")
    a2.legend(fontsize=7)
    fig.suptitle("[A09] token-expert dropping on the tiny MoE code LMs")
    fig.tight_layout()
    return fig


def matched_random_rate(threshold_result: dict) -> float:
    """The pair rate for the random-dropping arm: the threshold's *measured* pair drop on the evaluation windows
    (its tau is calibrated on other windows, so its eval drop differs from the target), so both drop the same
    work."""
    return float(threshold_result["pair_drop_rate"])


def _dual_suite(recon: nn.Module, raw: nn.Module, calib: torch.Tensor, evalw: torch.Tensor, res: dict,
                partial_k: int) -> tuple[dict, list[dict]]:
    """Dual threshold (calibrated to HEADLINE) on the reconstructed model, the same calibration on the model
    without reconstruction (control), and the fixed partial rule ``TopKPartial(partial_k)`` on the reconstructed
    model (the top ``partial_k`` experts in full, the rest at their major half: HEADLINE of the compute, whatever
    the weights); adds them to ``res`` and returns the calibrations and table rows."""
    cal = {"dual": calibrate_drop(recon, calib, HEADLINE, dual=True),
           "dual_raw": calibrate_drop(raw, calib, HEADLINE, dual=True)}
    res["dual"] = _evaluate(recon, evalw, cal["dual"].policy)
    res["dual_raw"] = _evaluate(raw, evalw, cal["dual_raw"].policy)
    res["partial"] = _evaluate(recon, evalw, TopKPartial(partial_k))
    rows = []
    for key, method in (("dual", "dual threshold"), ("dual_raw", "dual threshold, no reconstruction"),
                        ("partial", "fixed partial (top-k full, rest major half)")):
        r = res[key]
        param = (f"tau_lo={cal[key].policy.tau_lo:.4f}, tau_hi={cal[key].policy.tau_hi:.4f}" if key in cal
                 else f"k={partial_k}")
        rows.append({"method": method, "target": HEADLINE, "compute_drop": r["compute_drop"], "param": param,
                     "pair_drop": r["pair_drop_rate"], "moe_compute_drop": r["moe_compute_drop"], "loss": r["loss"],
                     "acc": r["acc"]})
    return cal, rows


def _dual_claim(res: dict, cal: dict, tag: str, partial_k: int) -> Claim:
    """Dual threshold with reconstruction against the strongest of single threshold and the fixed partial rule,
    at the same compute; control: the same calibrated dual threshold without reconstruction."""
    thr, dual, raw, part = res[f"thr{HEADLINE}"], res["dual"], res["dual_raw"], res["partial"]
    pol = cal["dual"].policy
    skipped = dual["pair_drop_rate"]
    return Claim(
        f"[{tag}] Dual threshold with reconstruction is no worse than the strongest single-level or fixed-partial "
        "policy at equal compute",
        dual["loss"], "<=", baselines={"single threshold": thr["loss"], "fixed partial": part["loss"]},
        paired={"single threshold": list(dual["loss_w"] - thr["loss_w"]),
                "fixed partial": list(dual["loss_w"] - part["loss_w"])},
        metric="held-out loss, dual threshold",
        control=raw["loss"], control_arm="dual threshold without reconstruction (major part = the first half of "
        "the neurons in their trained order), calibrated the same way",
        control_paired=list(raw["loss_w"] - min((thr, part), key=lambda r: r["loss"])["loss_w"]),
        note=f"compute dropped: dual {dual['compute_drop']:.3f} (no reconstruction {raw['compute_drop']:.3f}), "
             f"single {thr['compute_drop']:.3f}, fixed partial {part['compute_drop']:.3f}; "
             f"(tau_lo, tau_hi) = ({pol.tau_lo:.3f}, {pol.tau_hi:.3f}) by grid search on calibration output MSE, "
             f"{skipped:.1%} of the pairs skipped outright. Fixed partial = TopKPartial({partial_k}): the top "
             f"{partial_k} expert(s) in full, every other selected expert at its major half, ignoring the weights "
             "(with renormalised top-2 and tau_lo = 0, tau_hi >= 0.5 the dual threshold is this rule).",
        falsifier="dual threshold's held-out loss above the strongest of single threshold and the fixed partial "
                  "rule at equal compute")


def _policy_suite(model: nn.Module, calib: torch.Tensor, evalw: torch.Tensor, sweep: tuple, seed: int,
                  static_k: int) -> tuple[dict, list[dict], dict]:
    """Threshold and random dropping over ``sweep`` and every baseline at HEADLINE on ``model``: per-key evaluation
    results, the table rows and the calibrated taus."""
    layers = moe_layers(model)
    xs = moe_inputs(model, calib)
    with torch.no_grad():
        refs = [m.output(x) for m, x in zip(layers, xs)]
    res = {"none": _evaluate(model, evalw, None)}
    rows = [{"method": "none", "target": 0.0, "param": "", "compute_drop": 0.0, "pair_drop": 0.0,
             "moe_compute_drop": 0.0, "loss": res["none"]["loss"], "acc": res["none"]["acc"]}]

    def add(key: str, method: str, target: float, policy: DropPolicy, param: str) -> dict:
        r = _evaluate(model, evalw, policy)
        res[key] = r
        rows.append({"method": method, "target": target, "param": param, "compute_drop": r["compute_drop"],
                     "pair_drop": r["pair_drop_rate"], "moe_compute_drop": r["moe_compute_drop"], "loss": r["loss"],
                     "acc": r["acc"]})
        return r

    k = layers[0].top_k
    static_drop = 1.0 - static_k / k
    taus = {}
    for t in sorted(set(sweep) | {HEADLINE, static_drop}):
        cal = calibrate_drop(model, calib, t)
        taus[t] = cal.policy.tau
        thr = add(f"thr{t}", "threshold", t, cal.policy, f"tau={cal.policy.tau:.4f}")
        rate = matched_random_rate(thr)
        add(f"rand{t}", "random", t, RandomDrop(rate, seed=seed), f"rate={rate:.4f}")
    cap = _match(CapacityDrop, 0.05, 4.0, HEADLINE, layers, xs, refs, increasing=False)
    add("cap", "capacity", HEADLINE, cap, f"capacity_factor={cap.capacity_factor:.3f}")
    ratio = _match(RatioSkip, 0.0, 1.0, HEADLINE, layers, xs, refs, increasing=True)
    add("ratio", "ratio skip", HEADLINE, ratio, f"beta={ratio.beta:.3f}")
    add("static", "static top-k", static_drop, TopKReduce(static_k), f"k={static_k} of {k}")
    res["_static_drop"] = static_drop
    return res, rows, taus


def _inference_claims(res: dict, tag: str) -> list[Claim]:
    """The three loss / accuracy claims at HEADLINE on one testbed; the fixed bars carry random dropping at the same
    pair rate as their control (the method's contribution, *which* pairs to drop, removed)."""
    thr, rnd, none = res[f"thr{HEADLINE}"], res[f"rand{HEADLINE}"], res["none"]
    mean_none = float(none["loss_w"].mean())
    d_thr, d_rnd = thr["loss_w"] - none["loss_w"], rnd["loss_w"] - none["loss_w"]
    at = f"{tag}; at {thr['compute_drop']:.1%} of the routed compute dropped (target {HEADLINE:.0%})"
    ctrl = "random dropping at the same pair rate (top expert kept)"
    return [
        Claim(f"[{tag}] At ~25% of token-expert pairs dropped, threshold dropping raises held-out loss by <= 1% "
              "relative", thr["loss"] / none["loss"], "<=", 1 + LOSS_TOL, baseline="no dropping, same windows",
              metric="held-out loss ratio, threshold / no drop", paper="<0.5% accuracy loss (OLMoE, DeepSeek)",
              paired=list((thr["loss_w"] - (1 + LOSS_TOL) * none["loss_w"]) / mean_none), bar=True,
              control=rnd["loss"] / none["loss"], control_arm=ctrl,
              control_paired=list((rnd["loss_w"] - (1 + LOSS_TOL) * none["loss_w"]) / mean_none),
              note=f"{at}; tau calibrated on separate windows",
              falsifier="held-out loss with threshold dropping more than 1% above no dropping"),
        Claim(f"[{tag}] At ~25% dropped, threshold dropping costs < 0.5 points of top-1 accuracy",
              none["acc"] - thr["acc"], "<", ACC_TOL, baseline="no dropping, same windows",
              metric="top-1 accuracy drop (next token)", paper="<0.5% accuracy loss", bar=True,
              paired=list(none["acc_w"] - thr["acc_w"] - ACC_TOL), control=none["acc"] - rnd["acc"],
              control_arm=ctrl, control_paired=list(none["acc_w"] - rnd["acc_w"] - ACC_TOL), note=at,
              falsifier="next-token accuracy falls by 0.5 points or more"),
        Claim(f"[{tag}] Threshold dropping raises loss far less (<= 1/2) than random dropping at the same rate",
              float(d_thr.mean()), "<=", FAR_LESS * float(d_rnd.mean()),
              baseline=f"{FAR_LESS:g} x random dropping's loss increase", metric="loss increase, threshold",
              paired=list(d_thr - FAR_LESS * d_rnd), note=f"{at}; random drop at pair rate {HEADLINE:.0%} "
              f"(top expert kept, as for threshold). 'Far less' = at most half (our factor).",
              falsifier="threshold's loss increase more than half of random dropping's"),
    ]


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    gen = torch.Generator().manual_seed(seed)
    model, tok = load_moe_lm(MODELS[sz.model])
    model_o, _ = load_moe_lm(MODELS[sz.olmoe])
    tokens = encode_split(tok, "val", sz.val_bytes)
    win = _windows(tokens, sz.seq_len, sz.n_calib + sz.n_eval, gen)
    calib, evalw = win[: sz.n_calib, :-1], win[sz.n_calib:]

    # Mixtral testbed. Reconstruction: neurons sorted by calibration importance (exact), major part = top half
    xs = moe_inputs(model, calib)
    imps = iter([neuron_importance(m, x) for m, x in zip(moe_layers(model), xs)])
    recon = _replace_layers(model, lambda m: reconstruct_experts(m, next(imps), 0.5))
    layers = moe_layers(recon)
    base = _evaluate(model, evalw, None)
    res, rows, taus = _policy_suite(recon, calib, evalw, sz.sweep, seed, static_k=1)
    dual_cal, dual_rows = _dual_suite(recon, model, calib, evalw, res, partial_k=1)
    rows += dual_rows
    dual = dual_cal["dual"]
    thr, none = res[f"thr{HEADLINE}"], res["none"]

    # OLMoE-style testbed: top-4 of 8, raw softmax weights; static top-3 and the fixed partial rule (top 2 in full,
    # the other 2 at their major half) drop exactly 25%; reconstructed the same way
    xs_o = moe_inputs(model_o, calib)
    imps_o = iter([neuron_importance(m, x) for m, x in zip(moe_layers(model_o), xs_o)])
    recon_o = _replace_layers(model_o, lambda m: reconstruct_experts(m, next(imps_o), 0.5))
    res_o, rows_o, taus_o = _policy_suite(recon_o, calib, evalw, (HEADLINE,), seed, static_k=3)
    dual_cal_o, dual_rows_o = _dual_suite(recon_o, model_o, calib, evalw, res_o, partial_k=2)
    rows_o += dual_rows_o
    for r in rows:
        r["testbed"] = sz.model
    for r in rows_o:
        r["testbed"] = sz.olmoe

    # checks
    tau0 = _evaluate(recon, evalw, ThresholdDrop(0.0, keep_top1=False))
    dual_eq = _evaluate(recon, evalw, DualThresholdDrop(taus[HEADLINE], taus[HEADLINE]))
    part = {p: _evaluate(_replace_layers(model, lambda m, p=p: partition_experts(m, p)), evalw, None) for p in (2, 4)}
    part_o = _replace_layers(model_o, lambda m: partition_experts(m, 2))
    part_o_thr = _evaluate(part_o, evalw, ThresholdDrop(taus_o[HEADLINE]))
    sweep_thr = sorted((r["target"], r["compute_drop"]) for r in rows if r["method"] == "threshold")
    monotone = all(b[1] >= a[1] - 1e-12 for a, b in zip(sweep_thr, sweep_thr[1:]))
    hf = hf_adapter_diffs(seed)
    with torch.no_grad():
        w_top = layers[0].route(xs[0])[0]
        w_top_o = moe_layers(model_o)[0].route(xs_o[0])[0]

    # timing (a check: time follows kept work, random dropping gets the same): the middle MoE layer on captured
    # hidden states of evaluation tokens, thresholds calibrated on that layer's calibration inputs
    li = len(layers) // 2
    lay, x_cal = layers[li], moe_inputs(recon, calib)[li]
    x_eval = moe_inputs(recon, evalw[:, :-1])[li]
    reps = math.ceil(sz.timing_tokens / len(x_eval))
    x_time = x_eval.repeat(reps, 1)[: sz.timing_tokens].contiguous()
    with torch.no_grad():
        ref_l = [lay.output(x_cal)]
    timed_pol = {"none": None, "threshold": calibrate_layers([lay], [x_cal], HEADLINE).policy,
                 "dual threshold": calibrate_layers([lay], [x_cal], HEADLINE, dual=True).policy,
                 "random": RandomDrop(HEADLINE, seed=seed),
                 "capacity": _match(CapacityDrop, 0.05, 4.0, HEADLINE, [lay], [x_cal], ref_l, increasing=False),
                 "ratio skip": _match(RatioSkip, 0.0, 1.0, HEADLINE, [lay], [x_cal], ref_l, increasing=True),
                 "fixed partial": TopKPartial(1),
                 "threshold 50%": calibrate_layers([lay], [x_cal], 0.5).policy, "top-1": TopKReduce(1)}
    _, ctimes, tdrop = _time_layer(lay, x_time, timed_pol, sz.timing_iters)
    # thread CPU time only: on the shared machine the wall-clock medians of one layer call are noise (the review
    # measured 5.6x "speed-ups" at 25% dropped against an ideal 1.33x)
    speed = [{"policy": k, "compute_drop": tdrop[k], "median_cpu_s": ctimes[k],
              "cpu_speedup": ctimes["none"] / ctimes[k], "ideal": 1.0 / max(1.0 - tdrop[k], 1e-9)} for k in ctimes]
    sp_cpu = {r["policy"]: r["cpu_speedup"] for r in speed}

    def run_layer(policy: DropPolicy | None) -> Callable[[], object]:
        def fn() -> None:
            lay.drop_policy = policy
            with torch.no_grad():
                lay.output(x_time)
        return fn

    with limit_threads(1):
        tc = compare_times(run_layer(timed_pol["threshold"]), run_layer(None), repeats=sz.timing_repeats, warmup=1,
                           clock="cpu")
    lay.drop_policy = None

    # post-training: the original and its P-part partitions, equal steps and data on asyncio/ + email/
    post = {}
    if sz.post_steps:
        held = encode_split(tok, "heldout")
        cut = int(0.8 * len(held))
        test = _windows(held[cut:], sz.post_seq, sz.post_test, torch.Generator().manual_seed(seed + 1))
        for p in (1, *sz.post_parts):
            m = copy.deepcopy(model) if p == 1 else _replace_layers(model, lambda x, p=p: partition_experts(x, p))
            post[p] = {"before": _evaluate(m, test, None)}
            with limit_threads(1):
                post_train(m, held[:cut], steps=sz.post_steps, lr=5e-4, seq_len=sz.post_seq, seed=seed)
            post[p]["after"] = _evaluate(m, test, None)
            # post-training then inference dropping (the abstract's combined setting, threshold only): tau
            # calibrated to HEADLINE on the calibration windows of the validation split
            post[p]["after_thr"] = _evaluate(m, test, calibrate_drop(m, calib, HEADLINE).policy)

    # claims
    claims = _inference_claims(res, sz.model) + _inference_claims(res_o, sz.olmoe)
    thr_o = res_o[f"thr{HEADLINE}"]
    names = {"random": f"rand{HEADLINE}", "capacity": "cap", "ratio skip": "ratio", "static top-3": "static"}
    claims.append(Claim(
        f"[{sz.olmoe}] Threshold dropping is no worse than the strongest baseline policy at ~25% dropped",
        thr_o["loss"], "<=", baselines={n: res_o[k]["loss"] for n, k in names.items()},
        paired={n: list(thr_o["loss_w"] - res_o[k]["loss_w"]) for n, k in names.items()},
        metric="held-out loss with threshold dropping",
        note=f"top-4 of 8, weights not renormalised, where the baselines differ from a threshold; compute dropped: "
             f"threshold {thr_o['compute_drop']:.3f}, " + ", ".join(f"{n} {res_o[k]['compute_drop']:.3f}" for n, k in names.items()),
        falsifier="a baseline (random, capacity, NAEE ratio skip, static top-3) reaches lower held-out loss at the "
                  "same compute"))
    claims.append(_dual_claim(res, dual_cal, sz.model, partial_k=1))
    claims.append(_dual_claim(res_o, dual_cal_o, sz.olmoe, partial_k=2))
    for parts in sorted(post)[1:]:
        gap = post[parts]["after"]["loss_w"] - post[1]["after"]["loss_w"]
        claims.append(Claim(
            f"[{sz.model}] Post-training the P={parts} complete partition reaches lower loss than the original",
            post[parts]["after"]["loss"], "<", post[1]["after"]["loss"],
            baseline="original MoE fine-tuned with equal steps, data and learning rate",
            metric="held-out loss after fine-tuning", paper="+1% avg accuracy (Mixtral-8x7B)", paired=list(gap),
            note=f"{sz.post_steps} steps of 8 x {sz.post_seq} tokens on asyncio/ + email/ (80%), tested on "
                 f"{sz.post_test} windows of the other 20%; identical before fine-tuning "
                 f"({post[parts]['before']['loss']:.4f} vs {post[1]['before']['loss']:.4f}). One trained testbed: "
                 "seeds change the fine-tuning batches and test windows, not the model.",
            falsifier="partitioned model's held-out loss at or above the original's"))
    tol = 1e-4
    claims += [
        tc.claim(f"MoE layer is >= {SPEEDUP:g}x faster at 25% of token-expert pairs dropped (real skipping)", ">=",
                 SPEEDUP, kind="check", baseline="same grouped layer without dropping (compare_times, interleaved)",
                 paper="1.19x (Mixtral), up to 1.41x (OLMoE)",
                 note=f"a check: time follows the kept work (random dropping at the same rate: "
                      f"{sp_cpu['random']:.2f}x). Layer {li}, {len(x_time)} tokens, one thread; compute dropped "
                      f"{tdrop['threshold']:.3f}; ideal {1 / (1 - tdrop['threshold']):.2f}x; same-work control "
                      f"{tc.control_ratio:.3f}"),
        Claim("Threshold 0 equals no dropping", _max_diff(tau0["logits"], none["logits"]), "<=", 1e-6, kind="check",
              baseline="no dropping", metric="max |logit difference|", note="every pair kept: the same computation"),
        Claim("Neuron reconstruction alone is exact", _max_diff(none["logits"], base["logits"]), "<=", tol,
              kind="check", baseline="model before reconstruction", metric="max |logit difference|",
              note="a permutation of each expert's neurons"),
        Claim("Dual threshold with tau_lo = tau_hi equals single threshold",
              _max_diff(dual_eq["logits"], thr["logits"]), "<=", 1e-6, kind="check",
              baseline="single threshold", metric="max |logit difference|"),
        Claim("Complete expert partition (P = 2) equals the original at initialisation",
              _max_diff(part[2]["logits"], base["logits"]), "<=", tol, kind="check", baseline="original model",
              metric="max |logit difference|", note="float rounding only"),
        Claim("Complete expert partition (P = 4) equals the original at initialisation",
              _max_diff(part[4]["logits"], base["logits"]), "<=", tol, kind="check", baseline="original model",
              metric="max |logit difference|"),
        Claim(f"[{sz.olmoe}] P = 2 partition equals the original under threshold dropping (all children of the top "
              "expert kept)", _max_diff(part_o_thr["logits"], thr_o["logits"]), "<=", tol, kind="check",
              baseline="original OLMoE-style model, same threshold", metric="max |logit difference|"),
        Claim("Drop rate is monotone in tau", float(monotone), ">=", 1.0, kind="check", baseline="1 = monotone",
              metric="calibrated sweep monotone (0/1)"),
        Claim("HF adapters leave outputs unchanged at threshold 0 (Mixtral, OLMoE, Qwen2-MoE, Qwen3-MoE)",
              max(hf[k] for k in ("mixtral", "olmoe", "qwen2_moe", "qwen3_moe")), "<=", tol, kind="check",
              baseline="the HF model's own MoE blocks", metric="max |logit difference| over the four",
              note=", ".join(f"{k} {v:.1e}" for k, v in hf.items())),
    ]

    metrics = {"loss_none": none["loss"], "acc_none": none["acc"], "loss_threshold_25": thr["loss"],
               "loss_random_25": res[f"rand{HEADLINE}"]["loss"], "loss_dual_25": res["dual"]["loss"],
               "loss_dual_no_recon_25": res["dual_raw"]["loss"], "loss_capacity_25": res["cap"]["loss"],
               "loss_ratio_skip_25": res["ratio"]["loss"], "loss_top1": res["static"]["loss"],
               "loss_threshold_50": res["thr0.5"]["loss"], "loss_fixed_partial_25": res["partial"]["loss"],
               "pair_drop_threshold_25": thr["pair_drop_rate"], "pair_drop_random_25": res[f"rand{HEADLINE}"]["pair_drop_rate"],
               "pair_drop_dual_25": res["dual"]["pair_drop_rate"], "dual_tau_lo": dual.policy.tau_lo,
               "dual_tau_hi": dual.policy.tau_hi, "olmoe_dual_tau_lo": dual_cal_o["dual"].policy.tau_lo,
               "olmoe_dual_tau_hi": dual_cal_o["dual"].policy.tau_hi,
               "olmoe_pair_drop_dual_25": res_o["dual"]["pair_drop_rate"],
               "compute_drop_threshold_25": thr["compute_drop"], "moe_compute_drop_threshold_25": thr["moe_compute_drop"],
               "compute_drop_dual_25": res["dual"]["compute_drop"], "tau_25": taus[HEADLINE],
               "mean_top1_weight_layer0": float(w_top[:, 0].mean()), "mean_top2_weight_layer0": float(w_top[:, 1].mean()),
               "olmoe_mean_top1_weight_layer0": float(w_top_o[:, 0].mean()),
               "olmoe_mean_weight_sum_layer0": float(w_top_o.sum(1).mean()), "olmoe_tau_25": taus_o[HEADLINE],
               **{f"olmoe_loss_{k}": res_o[k]["loss"] for k in ("none", f"thr{HEADLINE}", f"rand{HEADLINE}", "cap",
                                                                  "ratio", "static", "dual", "dual_raw", "partial")},
               "speedup_check_cpu": tc.speedup, "speedup_check_control_ratio": tc.control_ratio,
               **{f"cpu_speedup_{k.replace(' ', '_')}": v for k, v in sp_cpu.items()},
               **{f"hf_diff_{k}": v for k, v in hf.items()}}
    for p, r in post.items():
        metrics[f"post_loss_P{p}_before"] = r["before"]["loss"]
        metrics[f"post_loss_P{p}_after"] = r["after"]["loss"]
        metrics[f"post_loss_P{p}_after_threshold_25"] = r["after_thr"]["loss"]
        metrics[f"post_compute_drop_P{p}_after_threshold_25"] = r["after_thr"]["compute_drop"]
    hist = torch.histc(w_top[:, 1].float(), bins=10, min=0.0, max=0.5)
    tables = {"loss_vs_drop": rows, "loss_vs_drop_olmoe": rows_o, "speedup": speed, "dual_grid": dual.grid,
              "second_weight_histogram_layer0": [{"bin": f"[{i * 0.05:.2f}, {(i + 1) * 0.05:.2f})",
                                                  "share": float(h / hist.sum())} for i, h in enumerate(hist)]}
    if post:
        tables["post_training"] = [{"parts": p, "loss_before": r["before"]["loss"], "loss_after": r["after"]["loss"],
                                    "loss_after_threshold_25": r["after_thr"]["loss"],
                                    "compute_drop_threshold_25": r["after_thr"]["compute_drop"]}
                                   for p, r in post.items()]
    return Outcome(metrics=metrics, claims=claims, tables=tables,
                   figures={"loss_and_speed_vs_drop": _figure(rows, rows_o, speed)})
