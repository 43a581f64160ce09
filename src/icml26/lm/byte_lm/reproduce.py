"""[B11] Reproduction: the prompt boundary problem, exactness, and an ensemble across tokenizers.

Models (per budget, ``Sizes.model_a`` / ``model_b``): at standard and full, A = the small tier ``SMALL_8L`` (8 layers,
d = 256, byte-level BPE vocab 2048) and B = ``SMALL_8L_V1024`` (8 layers, d = 192, BPE-1024: a different tokenizer
and a model about as strong per byte, for the ensemble); the quick budget keeps the toys A = ``TOY_4L`` (BPE-512)
and B = ``TOY_4L_V1024``. All are trained on the standard-library code corpus; text is the held-out split
(``asyncio``, ``email``).

- Exp I (prompt boundary): cut points drawn uniformly over the bytes of held-out files; the prefix (up to
  ``context_bytes`` before the cut) is given to three next-byte predictors of model A: naive (first byte of the next
  token after encode(prefix)), token healing, and the exact byte-level LM. Accuracy of the argmax and bits on the
  true next byte, split by whether the cut is a token boundary of the text's own canonical encoding.
- Exactness: byte-level log P(text, EOS) summed byte by byte vs the token-level log p~(encode(text) || EOS), with
  a float64 copy of model A (so the comparison is not limited by float32 KV-cache round-off).
- Exp II (ensemble): teacher-forced bits per byte of A, B and the 50/50 mixture of their next-byte distributions on
  held-out chunks (each scored from the start of the chunk).
- Speed: sampled generation (temperature 1), bytes/s of the byte-level LM (byte by byte, batched tree expansion;
  also one model call per node, and the covering sampler) vs the token-level model (KV-cached), interleaved.
- Exp III (production-style tokenizer): Exp I and the exactness check again on a tiny Llama trained with a GPT-2
  regex pre-tokenizer (look-ahead, digit runs, contractions, special tokens; ``GPT2_REGEX_LM``), where tokens never
  cross pre-token boundaries and canonicity is no longer pairwise; the byte LM both renormalised (p~) and with
  ``renormalize=False`` (raw probabilities summed over the prefix-canonical cover), naive and token healing on the
  same model.
- Exp IV (production-size vocabularies, issue 34): GPT-2-regex BPE tokenizers of 1k, 8k, 32k and 64k tokens trained
  offline on the installed packages' sources and docs (``testbeds.production_tokenizers``), each with a
  random-weight 2-layer Llama (hidden 128; at standard and full also an 8-layer d = 512 one); per V and per
  held-out prompt (1 at quick, 3 at standard, 5 at full; distinct files), greedy byte-by-byte generation against
  token-level greedy generation of the same bytes (KV cache), timed with ``compare_times`` (process CPU time,
  interleaved, a same-work control) and decided on the interval over prompts; and the growth of the per-byte time
  of next-byte distributions from 8k to the largest V, divided by the same model's token-level growth. Before
  every timed call every memo is reset to its state after a warm-up on other held-out text.

Speed claims (issue 29 item 6) are decided by ``compare_times``: both arms produce the *same bytes* (the byte LM's
seeded output, and the token-level model stepping through the canonical tokens of those bytes with its own
sampling op), so the ratio of CPU times is the ratio of per-byte costs, paired over repeats.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from icml26.harness import Budget, Claim, Outcome, compare_times, interleaved_times, seed_everything
from icml26.testbeds.causal_lm import (
    SMALL_8L,
    SMALL_8L_V1024,
    TOY_4L,
    TOY_4L_V1024,
    CausalLMConfig,
    corpus_texts,
    load_causal_lm,
)
from icml26.testbeds.production_tokenizers import production_tokenizer, random_llama

from .baselines import naive_next_byte_logprobs, token_healing_next
from .combine import ByteEnsemble
from .lm import ByteLevelLM, canonical_token_logprob
from .official import OfficialGreedy, load_official
from .tokenizers_regex import GPT2_REGEX_LM, regex_causal_lm


@dataclass(frozen=True)
class Sizes:
    n_cuts: int            # Exp I cut points
    context_bytes: int     # prefix bytes before a cut
    n_chunks: int          # Exp II held-out chunks
    chunk_bytes: int       # bytes per chunk (scored from the chunk start)
    exact_texts: int       # strings for the float64 exactness check
    exact_bytes: int
    gen_bytes: int         # bytes generated per timing call
    timing_iters: int
    regex_cuts: int        # Exp III cut points (GPT-2 regex tokenizer)
    regex_context: int     # prefix bytes before an Exp III cut
    regex_exact_bytes: int  # bytes of the Exp III exactness string
    model_a: CausalLMConfig = TOY_4L          # Exp I, exactness, speed, ensemble member A
    model_b: CausalLMConfig = TOY_4L_V1024    # ensemble member B (a different tokenizer)
    prod_vocabs: tuple = (1024,)              # Exp IV: GPT-2-regex production tokenizer sizes
    prod_gen_bytes: int = 8                   # Exp IV: greedy bytes generated per timed call
    prod_repeats: int = 3                     # Exp IV: compare_times repeats
    prod_warm_bytes: int = 3000               # Exp IV: other held-out bytes that warm the per-tokenizer caches
    prod_models: tuple = ("d128-2L",)         # Exp IV: timing models (keys of PROD_MODELS)
    prod_prompts: int = 1                     # Exp IV: held-out prompts per V (timed verdicts over prompts if > 1)
    prod_official: bool = False               # Exp IV: time the official byte-sampler too, when it is installed
    row_iters: int = 5                        # interleaved repeats of the table-only speed rows (covering sampler)


SIZES = {
    Budget.QUICK: Sizes(12, 48, 1, 60, 1, 48, 24, 9, 6, 24, 32, prod_gen_bytes=16, prod_repeats=5,
                        prod_warm_bytes=1000, row_iters=3),
    Budget.STANDARD: Sizes(400, 128, 6, 500, 4, 300, 96, 5, 80, 48, 150, model_a=SMALL_8L, model_b=SMALL_8L_V1024,
                           prod_vocabs=(1024, 8192, 32768, 65536), prod_gen_bytes=32, prod_repeats=3,
                           prod_models=("d128-2L", "d512-8L"), prod_prompts=3, prod_official=True),
    Budget.FULL: Sizes(2000, 192, 20, 600, 10, 600, 256, 5, 400, 96, 400, model_a=SMALL_8L, model_b=SMALL_8L_V1024,
                       prod_vocabs=(1024, 8192, 32768, 65536), prod_gen_bytes=64, prod_repeats=5,
                       prod_models=("d128-2L", "d512-8L"), prod_prompts=5, prod_official=True),
}
LN2 = math.log(2)
logger = logging.getLogger(__name__)
GAIN = 0.15     # the spec's ">= 15 points above naive at mid-token cuts"
SPEED = 2.0     # issue 12: byte-by-byte generation within 2x of the token model's bytes/s
PROD_SPEED = 3.0   # issue 34: within 3x of token-level throughput at every V (regex tokenizer)
PROD_GROWTH = 1.5  # issue 34: per-byte time grows by at most 1.5x from V = 8k to the largest V (claimed relative to
#                    the model's own token-level growth over the same V; the raw growth is reported beside it)
MARGIN = 0.02   # the spec's "+-2 points" at token boundaries, also the non-inferiority margin against token healing


# helper functions

def _token_ends(lm: ByteLevelLM, data: bytes) -> set[int]:
    ends = np.cumsum([len(lm.bpe.token_bytes[t]) for t in lm.bpe.encode(data)])
    return set(int(e) for e in ends)


def _cut_points(files: list[bytes], n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(file, position) pairs uniform over bytes (position >= 1, a next byte exists)."""
    sizes = np.array([len(f) - 1 for f in files])
    flat = rng.choice(int(sizes.sum()), size=n, replace=False)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    fi = np.searchsorted(starts, flat, side="right") - 1
    return [(int(f), int(x - starts[f]) + 1) for f, x in zip(fi, flat)]


def _prompt_boundary(lm: ByteLevelLM, files: list[bytes], n_cuts: int, context: int, rng,
                     extra: dict[str, ByteLevelLM] | None = None) -> list[dict]:
    """Next-byte predictions at cut points (at character starts, so every prefix is valid UTF-8 text)."""
    rows = []
    for f, c in _cut_points(files, n_cuts, rng):
        data = files[f]
        while c > 1 and data[c] & 0xC0 == 0x80:   # a cut inside a UTF-8 character: move to its start
            c -= 1
        start = max(0, c - context)
        while data[start] & 0xC0 == 0x80:
            start += 1
        end = min(len(data), c + 64)
        while end < len(data) and data[end] & 0xC0 == 0x80:
            end += 1
        prefix, target = data[start:c], data[c]
        boundary = (c - start) in _token_ends(lm, data[start:end])
        preds = {"naive": naive_next_byte_logprobs(lm.model, lm.bpe, prefix, bos_token_id=lm.bos_id),
                 "healing": token_healing_next(lm.model, lm.bpe, prefix, bos_token_id=lm.bos_id),
                 "bytelm": lm.next_byte_logprobs(prefix)}
        for k, other in (extra or {}).items():
            preds[k] = other.next_byte_logprobs(prefix)
        row = {"boundary": boundary, "sum_error": abs(float(torch.logsumexp(preds["bytelm"].double(), 0).exp()) - 1.0)}
        for k, lp in preds.items():
            row[f"{k}_correct"] = float(int(torch.argmax(lp)) == target)
            row[f"{k}_bits"] = float(-lp[target] / LN2)
        rows.append(row)
    return rows


def _table(rows: list[dict], methods: tuple[str, ...], metrics: dict, prefix: str = "") -> list[dict]:
    table = []
    groups = {"mid-token": [r for r in rows if not r["boundary"]], "boundary": [r for r in rows if r["boundary"]],
              "all": rows}
    for where, sel in groups.items():
        row = {"cuts": where, "n": len(sel)}
        for k in methods:
            acc = float(np.mean([r[f"{k}_correct"] for r in sel])) if sel else float("nan")
            bits = float(np.mean([r[f"{k}_bits"] for r in sel])) if sel else float("nan")
            metrics[f"{prefix}acc_{k}_{where}"], metrics[f"{prefix}bits_{k}_{where}"] = acc, bits
            row[f"{k} acc"], row[f"{k} bits/byte"] = round(acc, 4), round(bits, 4)
        table.append(row)
    return table


def _chunks(texts: list[bytes], n: int, size: int, rng: np.random.Generator) -> list[bytes]:
    """``n`` chunks of ~``size`` bytes, one per file while files last, each starting at a random line start (so
    the shared licence headers of the held-out files do not dominate)."""
    out = []
    for t in texts:
        if len(out) == n:
            break
        if len(t) >= 2 * size:
            start = t.rfind(b"\n", 0, int(rng.integers(0, len(t) - size))) + 1
            end = t.rfind(b"\n", start, start + size) + 1 or start + size
            out.append(t[start:end])
    return out


@torch.no_grad()
def _token_generate(lm: ByteLevelLM, prompt: bytes, n_tokens: int, seed: int) -> tuple[int, int]:
    """Token-level sampling (temperature 1) with a KV cache; returns (bytes produced, tokens produced)."""
    gen = torch.Generator().manual_seed(seed)
    ids = [lm.bos_id] + lm.bpe.encode(prompt)
    logits, cache = lm._forward(ids)
    n, k = 0, 0
    for k in range(1, n_tokens + 1):
        t = int(torch.multinomial(torch.softmax(logits[-1, : lm.bpe.vocab_size].double(), 0), 1, generator=gen))
        if t == lm.bpe.eos_id:
            break
        n += len(lm.bpe.token_bytes[t] or b"")
        logits, cache = lm._forward([t], cache)
    return n, k


@torch.no_grad()
def _token_replay(lm: ByteLevelLM, prompt: bytes, data: bytes, seed: int, greedy: bool = False) -> int:
    """Token-level generation cost of producing ``data`` after ``prompt``: prefill the canonical tokens shared by
    encode(prompt) and encode(prompt + data), then one KV-cached forward per remaining token, each preceded by the
    sampling step token generation does (softmax + multinomial, or argmax with ``greedy``); the sampled token is
    discarded and the canonical one fed, so the work is that of generating exactly these bytes. Returns the
    number of token steps."""
    gen = torch.Generator().manual_seed(seed)
    p_ids, ids = lm.bpe.encode(prompt), lm.bpe.encode(prompt + data)
    k = 0
    while k < min(len(p_ids), len(ids)) and p_ids[k] == ids[k]:
        k += 1
    x = torch.tensor([[lm.bos_id] + ids[:k]], dtype=torch.long, device=lm.device)
    try:     # prefill as generate does: only the last position through the output head
        o = lm.model(input_ids=x, use_cache=True, logits_to_keep=1)
        logits, cache = o.logits[0], getattr(o, lm._cache_kw)
    except TypeError:
        logits, cache = lm._forward([lm.bos_id] + ids[:k])
    for t in ids[k:]:
        z = logits[-1, : lm.bpe.vocab_size].double()
        _ = int(torch.argmax(z)) if greedy else int(torch.multinomial(torch.softmax(z, 0), 1, generator=gen))
        logits, cache = lm._forward([t], cache)
    return len(ids) - k


def _per_unit(method, baseline, repeats: int, min_s: float = 0.1, both: bool = False):
    """``compare_times(method, baseline)`` where the baseline (much cheaper here) runs ``r`` times per timed call so
    that each call lasts at least ``min_s`` CPU seconds (short calls make the same-work control noisy); the
    baseline and control times are divided by ``r`` again, so ratios stay per unit of work. ``r`` is fixed from
    one untimed call before timing starts. ``both``: the method runs ``r`` times per call too (two cheap arms)."""
    import time

    from icml26.harness import TimedComparison

    t0 = time.process_time()
    baseline()
    r = max(1, math.ceil(min_s / max(time.process_time() - t0, 1e-4)))
    m = (lambda: [method() for _ in range(r)]) if both else method
    tc = compare_times(m, lambda: [baseline() for _ in range(r)], repeats=repeats, warmup=1, clock="cpu")
    return TimedComparison([x / r for x in tc.method] if both else tc.method, [b / r for b in tc.baseline],
                           [c / r for c in tc.control], clock=tc.clock, tolerance=tc.tolerance), r


def _memos(lm: ByteLevelLM) -> dict[str, dict]:
    """Every memo a byte-LM call reads and fills: the LM's short-encoding memo (look-ahead paths), and for a regex
    tokenizer the per-node prefix-canonicity states, the pre-tokenizer's BPE-of-piece, segmentation and hypothesis
    memos, and the array masks' per-class-string outcomes, entries and merge-validity rows / columns."""
    bpe, out = lm.bpe, {"enc_memo": lm._enc_memo}
    if bpe.pretok is not None:
        p = bpe.pretok
        out.update(mask_cache=bpe._mask_cache, piece_cache=p._piece_cache, seg_cache=p._seg_cache,
                   hyp_cache=p._hyp_cache)
        if bpe._arrays:
            pc = bpe.pc_masks
            out.update(lc_cache=pc._lc_cache, entry_cache=pc._entry_cache, valid_rows=pc.valid._rows,
                       valid_cols=pc.valid._cols)
    return out


def _snapshot(lm: ByteLevelLM) -> dict[str, dict]:
    """A copy of every memo (``_memos``) as it is now, for ``_restored``."""
    return {k: dict(d) for k, d in _memos(lm).items()}


def _reset_memos(memos: dict[str, dict], snap: dict[str, dict] | None = None) -> None:
    """Every memo of ``memos`` (``_memos(lm)``) back to ``snap`` (a ``_snapshot``), or emptied when ``snap`` is None."""
    for k, d in memos.items():
        d.clear()
        if snap is not None:
            d.update(snap[k])


def _restored(lm: ByteLevelLM, snap: dict[str, dict], fn):
    """``fn`` with every memo put back to ``snap`` (taken after the warm-up on *other* text) before each call: a
    timed call on the timed text keeps nothing that an earlier call, timed or untimed, learnt from that text, and
    pays for its own nodes, pre-token outcomes and encodings as new text does."""
    memos = _memos(lm)   # looked up once, outside the timed call

    def run():
        _reset_memos(memos, snap)
        return fn()
    return run


def _warm(lm: ByteLevelLM, text: bytes) -> float:
    """Push ``text`` (other held-out text) through a pre-token tree, deciding every node's mask: fills the
    per-tokenizer caches as any longer use does. Returns the CPU seconds it took."""
    import time

    from .tree import PretokTree

    t0 = time.process_time()
    tree = PretokTree(lm.bpe)
    for b in text:
        tree.push(b)
        for u in tree.nodes:
            tree.full_mask(u)
    lm.bpe._mask_cache.clear()
    return time.process_time() - t0


def _whole_chars(lm: ByteLevelLM, prompt: bytes, n: int) -> tuple[int, bytes, int]:
    """Greedy output of the byte LM for ``n`` bytes, extended by up to 3 bytes to end on a whole UTF-8 character
    (the token arm encodes the same bytes as text). Returns (bytes generated per call, the bytes, model calls of
    the call that made them)."""
    for m in range(n, n + 4):
        c0 = lm.model_calls
        out = lm.generate(prompt, m, greedy=True).data
        calls = lm.model_calls - c0
        try:
            out.decode("utf-8")
            return m, out, calls
        except UnicodeDecodeError:
            continue
    return m, out, calls


def _prompts(texts: list[bytes], n: int, rng, seed: int) -> list[tuple[bytes, bytes]]:
    """``n`` held-out (file, line start) pairs, each file at least 4 kB, one prompt per file: the first drawn from
    ``rng`` (one draw, as before multi-prompt timing, so the runs after it see the same stream), the others from
    their own generator. Returns (file, offset) pairs."""
    big = [t for t in texts if len(t) >= 4000]
    if len(big) < n:
        raise ValueError(f"Exp IV wants {n} prompts from distinct held-out files of >= 4 kB; there are {len(big)}")
    rest = np.random.default_rng([seed, 34])
    out = []
    for k, src in enumerate(big[:n]):
        g = rng if k == 0 else rest
        out.append((src, src.rfind(b"\n", 0, int(g.integers(1000, len(src) - 1000))) + 1))
    return out


def _utf8_cut(data: bytes) -> bytes:
    while data and data[-1] & 0xC0 == 0x80:
        data = data[:-1]
    return data


# Exp IV's timing models (random weights; speed does not depend on them): the d = 128 2-layer Llama, where the V x 128
# output head is most of a forward at large V, and a d = 512 8-layer one, where the transformer layers are most of it
# up to 32k (the head's share of a forward's multiply-adds is a table column)
PROD_MODELS = {
    "d128-2L": dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=344),
    "d512-8L": dict(hidden_size=512, num_layers=8, num_heads=8, intermediate_size=1376),
}


def _head_share(V: int, hidden_size: int, num_layers: int, intermediate_size: int, **_) -> float:
    """The output head's share of one token's forward multiply-adds (V x d against per layer 4 d^2 + 3 d f)."""
    head = V * hidden_size
    return head / (head + num_layers * (4 * hidden_size ** 2 + 3 * hidden_size * intermediate_size))


def _pooled_control(tcs) -> float:
    """Median over every repeat of every comparison of (control / baseline): the same-work control of a verdict
    that pools several ``compare_times`` runs (one per prompt)."""
    return float(np.median([c / b for tc in tcs for c, b in zip(tc.control, tc.baseline) if b > 0]))


def _over_prompts(values: list[float], per_repeat: list[float], reference: float) -> tuple[float, list[float], str]:
    """(measured, paired, what the interval is over) of a timed claim: with several prompts, the mean of the
    per-prompt values and one difference per prompt; with one prompt, that prompt's value and the differences of
    its repeats (as ``TimedComparison.claim`` does)."""
    if len(values) > 1:
        return float(np.mean(values)), [v - reference for v in values], f"the {len(values)} prompts"
    return float(values[0]), [p - reference for p in per_repeat], f"the {len(per_repeat)} repeats of one prompt"


def production_benchmark(vocabs=(1024, 8192, 32768, 65536), gen_bytes: int = 32, repeats: int = 3, seed: int = 0,
                         texts: list[bytes] | None = None, rng=None, warm_bytes: int = 3000,
                         models: tuple = ("d128-2L",), n_prompts: int = 1, official: bool = False):
    """Exp IV (issue 34): per V, a GPT-2-regex tokenizer of V tokens (``production_tokenizer``) and, per entry of
    ``models`` (keys of ``PROD_MODELS``), a random-weight Llama (``random_llama``); greedy byte-by-byte generation of
    ``gen_bytes`` bytes after each of ``n_prompts`` 64-byte held-out prompts (distinct files) against token-level
    greedy generation of the same bytes (KV cache, prefill with ``logits_to_keep=1`` as ``generate`` does), by
    ``compare_times`` per prompt (process CPU time, interleaved, same-work control), decided over prompts when
    there are several; then, per model, the growth of next-byte-distribution time from V = 8192 to the largest V
    on the ``gen_bytes`` held-out bytes after each prompt, against the same model's token-level growth. Every
    memo is reset before each timed call to its state after a warm-up on other held-out text. ``official``: on the
    first model, also time greedy generation against the official byte-sampler on the same model, tokenizer and
    prompts (:mod:`.official`; skipped, with ``prod_official_available = 0``, when it is not installed). Returns
    (claims, table rows, metrics)."""
    if texts is None:
        texts = [t.encode("utf-8") for t in corpus_texts("heldout")]
    rng = np.random.default_rng(seed) if rng is None else rng
    metrics: dict[str, float] = {}
    spots = _prompts(texts, n_prompts, rng, seed)
    prompts = [_utf8_cut(src[a: a + 64]) for src, a in spots]
    follow = [_utf8_cut(src[a + 64: a + 64 + gen_bytes]) for src, a in spots]   # the growth claim's bytes
    used = {id(src) for src, _ in spots}
    other = b"".join(t for t in texts if id(t) not in used)[:warm_bytes]   # warm-up text, not the timed text
    claims, rows, lms, snaps = [], [], {}, {}
    for V in vocabs:
        tok = production_tokenizer("gpt2", V)
        bpe, warm_s = None, 0.0
        for name in models:
            cfg = PROD_MODELS[name]
            lm = ByteLevelLM(random_llama(tok.get_vocab_size(), seed=seed, **cfg), tok if bpe is None else bpe)
            if bpe is None:     # the per-tokenizer caches are shared by every model of this tokenizer
                bpe, warm_s = lm.bpe, _warm(lm, other)
            lm.generate(other[-64:], 4, greedy=True)   # the one-time checks (tree mask, split head), on other text
            lm.bpe._mask_cache.clear()
            lms[name, V], snaps[name, V] = lm, _snapshot(lm)
            claim, row, m = _production_row(lm, snaps[name, V], name, V, prompts, gen_bytes, repeats, seed, warm_s,
                                            len(other))
            row["head share of a forward"] = round(_head_share(tok.get_vocab_size(), **cfg), 2)
            claims.append(claim)
            if official and name == models[0]:
                off = _official_row(lm, snaps[name, V], tok, name, V, prompts, gen_bytes, repeats, other)
                if off is not None:
                    claims.extend(off[0])
                    row.update(off[1])
                    pre = f"prod_v{V}_" if name == "d128-2L" else f"prod_{name}_v{V}_"
                    metrics.update({pre + k: x for k, x in off[2].items()})
            rows.append(row)
            pre = f"prod_v{V}_" if name == "d128-2L" else f"prod_{name}_v{V}_"
            metrics.update({pre + k: x for k, x in m.items()})
    if official:
        metrics["prod_official_available"] = float(load_official()[0] is not None)
    big = max(vocabs)
    for name in models:
        if (name, 8192) not in lms or big <= 8192:
            continue
        claim, m = _growth(lms[name, big], lms[name, 8192], snaps[name, big], snaps[name, 8192], name, big, prompts,
                           follow, repeats, seed)
        claims.append(claim)
        pre = "prod_" if name == "d128-2L" else f"prod_{name}_"
        metrics.update({pre + k: x for k, x in m.items()})
    return claims, rows, metrics


def _growth(lb: ByteLevelLM, ls: ByteLevelLM, snap_b: dict, snap_s: dict, name: str, big: int, prompts: list[bytes],
            follow: list[bytes], repeats: int, seed: int):
    """The growth claim of one model: per prompt, the CPU time of next-byte distributions along the bytes after it
    at V = ``big`` over V = 8192 (byte LM), and the same for token-level greedy generation of those bytes; the claim
    is on their quotient, the byte LM's growth beyond the model's own. Returns (claim, metrics)."""
    tgs, tts = [], []
    for prompt, text in zip(prompts, follow):
        tgs.append(compare_times(_restored(lb, snap_b, lambda lb=lb, p=prompt, t=text: lb.byte_logprobs(t, prompt=p)),
                                 _restored(ls, snap_s, lambda ls=ls, p=prompt, t=text: ls.byte_logprobs(t, prompt=p)),
                                 repeats=repeats, warmup=1, clock="cpu"))
        tts.append(_per_unit(lambda p=prompt, t=text: _token_replay(lb, p, t, seed, greedy=True),
                             lambda p=prompt, t=text: _token_replay(ls, p, t, seed, greedy=True), repeats,
                             both=True)[0])
    g_byte = [tg.ratio for tg in tgs]
    g_tok = [tt.ratio for tt in tts]
    rel = [b / t for b, t in zip(g_byte, g_tok)]
    per_rep = [b / t for b, t in zip(tgs[0].ratios, tts[0].ratios)]
    measured, paired, over = _over_prompts(rel, per_rep, PROD_GROWTH)
    ctl_b, ctl_t = _pooled_control(tgs), _pooled_control(tts)
    ctl = ctl_b if abs(ctl_b - 1) >= abs(ctl_t - 1) else ctl_t
    m = {"growth_ratio": float(np.mean(g_byte)), "growth_timing_control": ctl_b,
         "growth_ratio_token_level": float(np.mean(g_tok)), "growth_token_timing_control": ctl_t,
         "growth_relative_to_token_level": measured}
    m.update({f"growth_relative_p{i}": x for i, x in enumerate(rel)})
    on = "" if name == "d128-2L" else f" (random {name} Llama)"
    per = "; per prompt (byte LM / token level): " + ", ".join(f"{b:.2f} / {t:.2f}" for b, t in zip(g_byte, g_tok)) \
        if len(rel) > 1 else ""
    claim = Claim(
        f"From V = 8k to V = {big} the byte LM's per-byte time grows at most 1.5x as much as the model's own "
        f"token-level per-byte time{on}", measured, "<=", PROD_GROWTH, bar=True, paired=paired,
        timing_control=ctl, timing_tolerance=tgs[0].tolerance,
        baseline=f"token-level greedy generation of the same bytes on the same model, V = {big} over V = 8192",
        metric=f"(byte-LM CPU time per next-byte distribution, V = {big} / V = 8192) / (token-level CPU time for the "
               "same bytes, same ratio); medians of interleaved repeats per prompt",
        paper="issue 34's goal (vocabulary-size-independent per-byte cost), restated against the model's own growth: "
              "the issue's raw bar (byte-LM growth <= 1.5x) cannot be met when the model's own V x d output head "
              "grows more than 1.5x over the same V",
        falsifier=f"the byte LM's growth from V = 8192 to V = {big} more than 1.5x the token-level growth of the same "
                  "model over the same V and bytes (bookkeeping that grows with V beyond the model's head)",
        control_arm="none: a growth bar between two vocabularies of the same run, normalised by the same model's "
                    "token-level growth; the same-work controls (8k timed twice, both arms) guard the timing "
                    "(the one further from 1 is the claim's)",
        note=f"interval over {over}; {len(follow[0])} held-out bytes after each 64-byte prompt, teacher-forced, "
             f"every memo reset to its warm state before each call; random {name} Llama; issue 34's raw goal "
             f"(byte-LM growth <= 1.5x) measured {np.mean(g_byte):.2f}x (not met) against token-level growth "
             f"{np.mean(g_tok):.2f}x (the model's own V x d head){per}; controls: byte LM {ctl_b:.3f}, token level "
             f"{ctl_t:.3f}")
    return claim, m


def _over_agreeing_prompts(ratios: list[float], tcs, same: list[bool]) -> tuple[float, list[float], str]:
    """``_over_prompts`` against parity (1.0) over the prompts on which both samplers produced the same bytes (the
    others are different work); not finite when no prompt agrees."""
    kept = [k for k, s in enumerate(same) if s]
    if not kept:
        return math.nan, [], "no prompt (every prompt's greedy bytes differ)"
    return _over_prompts([ratios[k] for k in kept], tcs[kept[0]].ratios, 1.0)


def _official_row(lm: ByteLevelLM, snap: dict, tok, name: str, V: int, prompts: list[bytes], gen_bytes: int,
                  repeats: int, other: bytes):
    """Ours against the official byte-sampler (``OfficialGreedy``) on the same model, tokenizer and prompts: greedy
    generation of the same number of bytes, ``compare_times`` per prompt (ours as method, process CPU time,
    interleaved, same-work control), our memos reset to their warm state before each call and the official sampler
    given a fresh sampler (KV cache) per call with its per-tokenizer caches warm. Timed twice: for ``gen_bytes``
    bytes (the claim) and for one byte (prompt intake, a table column and metric: the per-call cost of taking in a
    prompt differs from the per-byte cost; a second claim). A prompt whose greedy bytes differ between the two is different work:
    it is left out of the verdict (every prompt differs: the claim is not finite, so inconclusive). ``None`` when
    the official sampler is not installed (the reason is logged). Returns ([claim, intake claim], table columns,
    metrics)."""
    mod, why = load_official()
    if mod is None:
        logger.warning("Exp IV: official byte-sampler arm skipped: %s", why)
        return None
    off = OfficialGreedy(lm.model, tok)
    off.generate(other[-64:], 4)   # its per-tokenizer caches, on other text (ours were warmed the same way)
    tcs, t1s, ratios, same, ms_ours, ms_off, first, same1 = [], [], [], [], [], [], [], []
    for prompt in prompts:
        n, ours_out, _ = _whole_chars(lm, prompt, gen_bytes)
        off_out = off.generate(prompt, n)
        same.append(off_out == ours_out)
        tc = compare_times(_restored(lm, snap, lambda p=prompt, n=n: lm.generate(p, n, greedy=True)),
                           lambda p=prompt, n=n: off.generate(p, n), repeats=repeats, warmup=1, clock="cpu")
        t1 = compare_times(_restored(lm, snap, lambda p=prompt: lm.generate(p, 1, greedy=True)),
                           lambda p=prompt: off.generate(p, 1), repeats=repeats, warmup=1, clock="cpu")
        same1.append(off.generate(prompt, 1) == ours_out[:1])
        tcs.append(tc)
        t1s.append(t1)
        ratios.append(tc.ratio)
        first.append(t1.ratio)
        ms_ours.append(1e3 * float(np.median(tc.method)) / max(1, len(ours_out)))
        ms_off.append(1e3 * float(np.median(tc.baseline)) / max(1, len(off_out)))
    measured, paired, over = _over_agreeing_prompts(ratios, tcs, same)
    ctl = _pooled_control(tcs)
    m1, paired1, over1 = _over_agreeing_prompts(first, t1s, same1)
    ctl1 = _pooled_control(t1s)
    m = {"official_ratio": measured, "official_timing_control": ctl, "official_same_bytes": float(np.mean(same)),
         "official_ms_per_byte": float(np.mean(ms_off)), "official_ours_ms_per_byte": float(np.mean(ms_ours)),
         "official_first_byte_ratio": m1, "official_first_byte_timing_control": ctl1,
         "official_setup_s": off.setup_s}
    m.update({f"official_ratio_p{i}": x for i, x in enumerate(ratios)})
    cols = {"ours ms/byte (vs official)": round(float(np.mean(ms_ours)), 2),
            "official ms/byte": round(float(np.mean(ms_off)), 2), "ours / official": round(measured, 2),
            "ours / official, 1 byte": round(m1, 2),
            "official same-work control": round(ctl, 3),
            "same greedy bytes as official": f"{sum(same)}/{len(same)} prompts"}
    on = "" if name == "d128-2L" else f" (random {name} Llama)"
    claim = Claim(
        f"With a GPT-2-regex tokenizer of V = {V} tokens byte-by-byte generation of {gen_bytes} bytes is at least as "
        f"fast as the official byte-sampler on identical inputs{on}", measured, "<=", 1.0, bar=True, paired=paired,
        timing_control=ctl, timing_tolerance=tcs[0].tolerance,
        baseline="the official byte-sampler (SewoongLab/byte-sampler, do_gc=False), same model, tokenizer, prompts "
                 "and number of greedy bytes",
        metric="our CPU time / the official sampler's CPU time for the same greedy bytes (median of interleaved "
               "repeats per prompt" + (", mean over the prompts whose bytes agree)" if len(prompts) > 1 else ")"),
        paper="issue 34's goal (at least as fast as the official byte-sampler at every V where both run)",
        falsifier=f"our greedy byte-by-byte generation of {gen_bytes} bytes after a 64-byte prompt takes more CPU "
                  f"time than the official sampler's at V = {V}",
        control_arm="none: a speed ratio against the same-run official sampler; the same-work control (the official "
                    "sampler timed twice, pooled over prompts) guards the timing",
        note=f"interval over {over}; same greedy bytes on {sum(same)}/{len(same)} prompts (the others are left out); "
             f"one byte after the prompt (prompt intake): ours / official {np.mean(first):.2f}; official set-up "
             f"{off.setup_s:.2f} s CPU (not timed); per prompt " + " / ".join(f"{r:.2f}" for r in ratios))
    intake = Claim(
        f"With a GPT-2-regex tokenizer of V = {V} tokens taking in a 64-byte prompt and generating its first byte is "
        f"at least as fast as the official byte-sampler on identical inputs{on}", m1, "<=", 1.0, bar=True,
        paired=paired1, timing_control=ctl1, timing_tolerance=t1s[0].tolerance,
        baseline="the official byte-sampler (do_gc=False), same model, tokenizer and prompts, one greedy byte",
        metric="our CPU time / the official sampler's for one greedy byte after the prompt (median of interleaved "
               "repeats per prompt" + (", mean over the prompts whose first bytes agree)" if len(prompts) > 1 else ")"),
        paper="issue 34's goal, for the shortest generation: the per-call cost of taking in a prompt",
        falsifier=f"our prompt intake plus first byte takes more CPU time than the official sampler's at V = {V}",
        control_arm="none: a speed ratio against the same-run official sampler; the same-work control (the official "
                    "sampler timed twice, pooled over prompts) guards the timing",
        note=f"interval over {over1}; same first byte on {sum(same1)}/{len(same1)} prompts; per prompt "
             + " / ".join(f"{r:.2f}" for r in first))
    return [claim, intake], cols, m


def _production_row(lm: ByteLevelLM, snap: dict, name: str, V: int, prompts: list[bytes], gen_bytes: int,
                    repeats: int, seed: int, warm_s: float, warm_len: int):
    """One Exp IV row: (claim, table row, metrics) of greedy byte-by-byte generation against token-level greedy
    generation of the same bytes on one model and tokenizer, one ``compare_times`` per prompt."""
    import time

    tcs, ratios, per_byte, per_tok_byte, bpt, calls, r_used = [], [], [], [], [], [], []
    for prompt in prompts:
        n, out, c = _whole_chars(lm, prompt, gen_bytes)
        tc, r = _per_unit(_restored(lm, snap, lambda p=prompt, n=n: lm.generate(p, n, greedy=True)),
                          lambda p=prompt, o=out: _token_replay(lm, p, o, seed, greedy=True), repeats)
        n_tok = _token_replay(lm, prompt, out, seed, greedy=True)
        tcs.append(tc)
        ratios.append(tc.ratio)
        per_byte.append(float(np.median(tc.method)) / max(1, len(out)))
        per_tok_byte.append(float(np.median(tc.baseline)) / max(1, len(out)))
        bpt.append(len(out) / max(1, n_tok))
        calls.append(c / max(1, len(out)))
        r_used.append(r)
    # every memo empty (the per-tokenizer ones too), one untimed-order call on the first prompt, for the record
    _reset_memos(_memos(lm))
    n0 = _whole_chars(lm, prompts[0], gen_bytes)[0]
    _reset_memos(_memos(lm))
    t0 = time.process_time()
    out0 = lm.generate(prompts[0], n0, greedy=True).data
    cold = (time.process_time() - t0) / max(1, len(out0))
    _reset_memos(_memos(lm), snap)   # back to the warm state for whatever runs next on this tokenizer
    measured, paired, over = _over_prompts(ratios, tcs[0].ratios, PROD_SPEED)
    ctl = _pooled_control(tcs)
    mb, mt = float(np.mean(per_byte)), float(np.mean(per_tok_byte))
    m = {"ms_per_byte_bytelm": 1e3 * mb, "ms_per_byte_bytelm_all_memos_cold": 1e3 * cold,
         "ms_per_byte_bytelm_first_prompt": 1e3 * per_byte[0],
         "ms_per_byte_token": 1e3 * mt, "ratio": measured, "timing_control": ctl,
         "bytes_per_token": float(np.mean(bpt)), "model_calls_per_byte": float(np.mean(calls)), "warmup_s": warm_s}
    m.update({f"ratio_p{i}": x for i, x in enumerate(ratios)})
    row = {"model": name, "V": V, "byte-level ms/byte": round(1e3 * mb, 2),
           "first prompt: warm / every memo cold": f"{1e3 * per_byte[0]:.2f} / {1e3 * cold:.2f}",
           "token-level ms/byte": round(1e3 * mt, 3),
           "bytes per token": round(float(np.mean(bpt)), 2),
           "model calls per byte (byte LM)": round(float(np.mean(calls)), 2),
           "byte / token cost": round(measured, 2),
           "per prompt": " / ".join(f"{x:.2f}" for x in ratios),
           "same-work control": round(ctl, 3)}
    on = "" if name == "d128-2L" else f" (random {name} Llama)"
    claim = Claim(
        f"With a GPT-2-regex tokenizer of V = {V} tokens byte-by-byte generation is within 3x of token-level "
        f"generation throughput{on}", measured, "<=", PROD_SPEED, bar=True, paired=paired, timing_control=ctl,
        timing_tolerance=tcs[0].tolerance,
        baseline=f"token-level greedy generation of the same bytes with a KV cache, same random-weight {name} Llama",
        metric="byte-level CPU time / token-level CPU time for the same bytes (median of interleaved repeats per "
               "prompt" + (", mean over prompts)" if len(prompts) > 1 else ")"),
        paper="issue 34's goal (the abstract gives no size)",
        falsifier=f"byte-by-byte generation more than 3x the token-level CPU time for the same bytes at V = {V}",
        control_arm="none: a cost bar against the same-run token model; the same-work control (token-level "
                    "timed twice, pooled over prompts) guards the timing",
        note=f"interval over {over}; {len(prompts)} held-out 64-byte prompts (distinct files), ~{gen_bytes} greedy "
             f"bytes each, {repeats} repeats per prompt, every memo reset before each call to its state after a "
             f"warm-up on {warm_len} B of other text ({warm_s:.1f} s), the token arm run {max(r_used)}x per timed "
             f"call at most; per prompt {row['per prompt']}; {1e3 * mb:.2f} ms/byte vs {1e3 * mt:.3f} ms/byte "
             f"({np.mean(bpt):.2f} bytes per token), {np.mean(calls):.2f} model calls per byte; first prompt "
             f"{1e3 * per_byte[0]:.2f} ms/byte warm, {1e3 * cold:.2f} with every memo cold (one call)")
    return claim, row, m


def production_table(vocabs=(1024, 8192, 32768, 65536), gen_bytes: int = 32, repeats: int = 3,
                     seed: int = 0, models: tuple = tuple(PROD_MODELS), n_prompts: int = 3,
                     official: bool = True) -> str:
    """Exp IV on its own, as the markdown table in the README (``python -c "from icml26.lm.byte_lm.reproduce
    import production_table; print(production_table())"``); the official sampler's columns where it is installed
    (``official.ENV``)."""
    claims, rows, metrics = production_benchmark(vocabs, gen_bytes, repeats, seed, models=models,
                                                 n_prompts=n_prompts, official=official)
    cols = list(dict.fromkeys(c for r in rows for c in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "—")) for c in cols) + " |" for r in rows]
    lines += ["", *(f"- {c.statement}: {c.verdict}{f' ({c.reason})' if c.reason else ''} (measured "
                    f"{c.measured:.3g}, bar {c.reference})" for c in claims)]
    for k, x in metrics.items():
        if k.endswith("growth_ratio"):
            lines.append(f"- {k}: byte-LM growth {x:.2f}x, token-level growth "
                         f"{metrics[k + '_token_level']:.2f}x over the same V")
    return "\n".join(lines)


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = budget.pick(SIZES)
    rng = seed_everything(seed)
    model_a, tok_a = load_causal_lm(sz.model_a)
    model_b, tok_b = load_causal_lm(sz.model_b)
    lm_a, lm_b = ByteLevelLM(model_a, tok_a), ByteLevelLM(model_b, tok_b)
    name_a = f"A ({sz.model_a.name}, BPE-{sz.model_a.tokenizer.vocab_size})"
    name_b = f"B ({sz.model_b.name}, BPE-{sz.model_b.tokenizer.vocab_size})"
    texts = [t.encode("utf-8") for t in corpus_texts("heldout")]
    order = rng.permutation(len(texts))
    texts = [texts[i] for i in order]
    metrics: dict[str, float] = {}

    # Exp I draws its cuts from the first n_cut_files files, Exp II its chunks from the files after a gap of 8, so
    # the two never share a file; n_cut_files leaves Exp II two files per chunk (the full budget's 2,000 cuts
    # would otherwise take every held-out file)
    n_cut_files = min(max(8, sz.n_cuts // 10), len(texts) - 8 - 2 * sz.n_chunks)

    # Exp I: the prompt boundary problem
    rows = _prompt_boundary(lm_a, texts[:n_cut_files], sz.n_cuts, sz.context_bytes, rng)
    table_pb = _table(rows, ("naive", "healing", "bytelm"), metrics)
    groups = {"mid-token": [r for r in rows if not r["boundary"]]}
    metrics["frac_mid_token"] = float(np.mean([not r["boundary"] for r in rows]))

    # exactness: float64 copy of A, byte-by-byte vs one token-level forward pass
    lm64 = ByteLevelLM(copy.deepcopy(model_a).to(torch.float64), tok_a)
    exact_texts = _chunks(texts[-sz.exact_texts * 3:], sz.exact_texts, sz.exact_bytes, rng)
    diffs, gaps = [], []
    for t in exact_texts:
        byte_lp = lm64.logprob(t, add_eos=True)
        tok_lp = canonical_token_logprob(lm64, t)
        diffs.append(abs(byte_lp - tok_lp) / len(t) / LN2)
        raw = canonical_token_logprob(lm64, t, masked=False)
        gaps.append((tok_lp - raw) / len(t) / LN2)
    metrics["exactness_max_abs_diff_bits_per_byte"] = float(max(diffs))
    metrics["noncanonical_mass_bits_per_byte"] = float(np.mean(gaps))

    # Exp II: ensemble of two differently tokenised models (mixture of next-byte distributions)
    ens = ByteEnsemble([lm_a, lm_b], mode="mixture")
    prod = ByteEnsemble([lm_a, lm_b], mode="product")
    bits = {name_a: [], name_b: [], "mixture A+B": [], "product A+B": []}
    chunk_bits: list[dict[str, float]] = []   # per chunk: mean bits/byte of each model (the paired unit)
    n_bytes = 0
    chunks = _chunks(texts[n_cut_files + 8:], sz.n_chunks, sz.chunk_bytes, rng)
    if len(chunks) < sz.n_chunks:
        raise ValueError(f"the held-out split has {len(chunks)} files long enough for Exp II's {sz.n_chunks} chunks "
                         f"of {sz.chunk_bytes} bytes: lower n_chunks or chunk_bytes")
    for t in chunks:
        start = {k: len(v) for k, v in bits.items()}
        sa, sb = lm_a.stream(), lm_b.stream()
        for b in t:
            la, lb = sa.logprobs(), sb.logprobs()
            bits[name_a].append(-float(la[b]) / LN2)
            bits[name_b].append(-float(lb[b]) / LN2)
            bits["mixture A+B"].append(-float(ens.combine([la, lb])[b]) / LN2)
            bits["product A+B"].append(-float(prod.combine([la, lb])[b]) / LN2)
            sa.push(b)
            sb.push(b)
        n_bytes += len(t)
        chunk_bits.append({k: float(np.mean(v[start[k]:])) for k, v in bits.items()})
    bpb = {k: float(np.mean(v)) for k, v in bits.items()}
    metrics.update({f"bpb {k}": v for k, v in bpb.items()})
    metrics["ensemble_bytes"] = float(n_bytes)

    # speed: sampled generation (temperature 1), byte-level vs token-level, same model, same prompt. The claim is
    # decided by compare_times on the *same bytes*: the byte LM's seeded output, and the token model stepping
    # through those bytes' canonical tokens with its own sampling op (process CPU time, interleaved, a same-work
    # control); its control arm is one model call per tree node (speculate=1, batched tree expansion removed),
    # timed the same way. The covering sampler is a table row (interleaved medians).
    prompt = _chunks(texts, 1, 200, rng)[0]
    lm_a1 = ByteLevelLM(model_a, lm_a.bpe, speculate=1)
    gen_byte = lm_a.generate(prompt, sz.gen_bytes, seed=seed, method="bytewise").data
    tc, _ = _per_unit(lambda: lm_a.generate(prompt, sz.gen_bytes, seed=seed, method="bytewise"),
                      lambda: _token_replay(lm_a, prompt, gen_byte, seed), sz.timing_iters + 2)
    gen_1call = lm_a1.generate(prompt, sz.gen_bytes, seed=seed, method="bytewise").data
    tc1, _ = _per_unit(lambda: lm_a1.generate(prompt, sz.gen_bytes, seed=seed, method="bytewise"),
                       lambda: _token_replay(lm_a, prompt, gen_1call, seed), sz.timing_iters + 2)
    gen_out = {}
    n_tok = max(1, sz.gen_bytes // 2)
    runs = {
        "covering": lambda: gen_out.__setitem__("covering", lm_a.generate(prompt, sz.gen_bytes, seed=seed,
                                                                          method="covering").data),
        "token": lambda: gen_out.__setitem__("token", _token_generate(lm_a, prompt, n_tok, seed)),
    }
    times = interleaved_times(runs, n_iter=sz.row_iters, warmup=1, clock="cpu")
    bps = {k: (gen_out[k][0] if k == "token" else len(gen_out[k])) / float(np.median(times[k])) for k in runs}
    byte_bps = len(gen_byte) / float(np.median(tc.method))
    token_bps = len(gen_byte) / float(np.median(tc.baseline))
    metrics["bytes_per_s_bytelm"], metrics["bytes_per_s_token"] = byte_bps, token_bps
    metrics["slowdown_token_over_byte"] = tc.ratio
    metrics["timing_control_ratio"] = tc.control_ratio
    metrics["bytes_per_s_bytelm_one_call_per_node"] = len(gen_1call) / float(np.median(tc1.method))
    metrics["slowdown_token_over_byte_one_call_per_node"] = tc1.ratio
    metrics["bytes_per_s_covering_sampler"] = bps["covering"]
    metrics["slowdown_token_over_covering_sampler"] = bps["token"] / bps["covering"]
    n_steps = _token_replay(lm_a, prompt, gen_byte, seed)
    metrics["token_gen_bytes_per_token"] = len(gen_byte) / max(1, n_steps)
    # model calls per generated byte (one untimed pass each; the same seeds give the same bytes)
    for key, lm_x in (("byte", lm_a), ("byte_1call", lm_a1)):
        c0 = lm_x.model_calls
        n_gen = len(lm_x.generate(prompt, sz.gen_bytes, seed=seed, method="bytewise").data)
        metrics[f"model_calls_per_byte_{key}"] = (lm_x.model_calls - c0) / max(1, n_gen)
    metrics["model_calls_per_byte_token"] = (n_steps + 1) / max(1, len(gen_byte))

    # Exp IV: production-size vocabularies (issue 34)
    prod_claims, table_prod, prod_metrics = production_benchmark(sz.prod_vocabs, sz.prod_gen_bytes, sz.prod_repeats,
                                                                 seed, texts, rng, sz.prod_warm_bytes,
                                                                 models=sz.prod_models, n_prompts=sz.prod_prompts,
                                                                 official=sz.prod_official)
    metrics.update(prod_metrics)

    # Exp III: the same on a model trained with a GPT-2 regex pre-tokenizer (production-style tokenization)
    model_r, tok_r = regex_causal_lm(GPT2_REGEX_LM)
    lm_r = ByteLevelLM(model_r, tok_r)
    lm_r_raw = ByteLevelLM(model_r, lm_r.bpe, renormalize=False)
    rows_r = _prompt_boundary(lm_r, texts[: max(8, sz.regex_cuts // 10)], sz.regex_cuts, sz.regex_context, rng,
                              extra={"bytelm_raw": lm_r_raw})
    table_re = _table(rows_r, ("naive", "healing", "bytelm", "bytelm_raw"), metrics, prefix="regex_")
    mid_r = [r for r in rows_r if not r["boundary"]]
    metrics["regex_frac_mid_token"] = float(np.mean([not r["boundary"] for r in rows_r]))
    lm_r64 = ByteLevelLM(copy.deepcopy(model_r).to(torch.float64), lm_r.bpe)
    src = next(t for t in texts[-6:] if len(t) >= 4 * sz.regex_exact_bytes)
    a = src.rfind(b"\n", 0, int(rng.integers(sz.regex_exact_bytes, len(src) - 2 * sz.regex_exact_bytes))) + 1
    b = a + sz.regex_exact_bytes
    while src[b] & 0xC0 == 0x80:   # end on a character boundary
        b += 1
    t_r = src[a:b]
    r_byte, r_tok = lm_r64.logprob(t_r), canonical_token_logprob(lm_r64, t_r)
    metrics["regex_exactness_abs_diff_bits_per_byte"] = abs(r_byte - r_tok) / len(t_r) / LN2
    metrics["regex_noncanonical_mass_bits_per_byte"] = (r_tok - canonical_token_logprob(lm_r64, t_r, masked=False)) \
        / len(t_r) / LN2
    metrics["regex_exactness_pretokens"] = float(len(lm_r.bpe.pretok.boundaries(t_r.decode(), t_r)))

    mid = lambda k: metrics[f"acc_{k}_mid-token"]  # noqa: E731
    bnd = lambda k: metrics[f"acc_{k}_boundary"]  # noqa: E731
    mid_rows = groups["mid-token"]
    metrics["max_next_byte_sum_error"] = float(max(r["sum_error"] for r in rows))
    best = min((name_a, name_b), key=lambda k: bpb[k])
    per_cut = f"paired interval over the {len(mid_rows)} mid-token cuts of model A ({sz.model_a.name})"
    claims = [
        Claim("At mid-token prompt boundaries the byte-level LM predicts the next byte far better than naive "
              "token-level prompting (>= 15 points)", measured=mid("bytelm") - mid("naive"), op=">=", reference=GAIN,
              baseline="naive: first byte of the next token after encode(prefix), same model and cuts",
              metric="next-byte accuracy gain over naive at mid-token cuts",
              paper="abstract: 'efficiently solves the PBP' (no size); 15 points is the spec's threshold",
              paired=[r["bytelm_correct"] - r["naive_correct"] - GAIN for r in mid_rows],
              falsifier="the accuracy gain over naive at mid-token cuts below 15 points", note=per_cut),
        Claim("... and at least as well as token healing (non-inferiority, 2-point margin)", measured=mid("bytelm"),
              op=">=", reference=mid("healing") - MARGIN,
              baseline="token healing (back up one token, constrain), same cuts, minus the 2-point margin",
              metric="next-byte accuracy, mid-token cuts",
              paired=[r["bytelm_correct"] - r["healing_correct"] + MARGIN for r in mid_rows],
              falsifier="byte-level accuracy more than 2 points below token healing's (or an interval that cannot rule "
                        "that out)", note=per_cut),
        Claim("At token boundaries the byte-level LM matches naive prompting (within 2 points)",
              measured=bnd("bytelm") - bnd("naive"), op="in", reference=(-MARGIN, MARGIN), bar=False,
              baseline="naive at boundary cuts", metric="accuracy difference at boundary cuts",
              falsifier="the accuracy difference at boundary cuts outside +-2 points",
              note=f"{sum(r['boundary'] for r in rows)} boundary cuts; binomial noise is a few points at this count"),
        Claim("With a GPT-2 regex pre-tokenizer the byte-level LM still beats naive prompting at mid-token cuts "
              "(>= 15 points)", measured=metrics["regex_acc_bytelm_mid-token"] - metrics["regex_acc_naive_mid-token"],
              op=">=", reference=GAIN,
              baseline="naive on the same regex-tokenized model and cuts",
              metric="next-byte accuracy gain over naive at mid-token cuts (GPT2_REGEX_LM)",
              paper="abstract: 'any autoregressive LM with a BPE tokenizer'; the lead's issue 11 (production tokenizers)",
              paired=[r["bytelm_correct"] - r["naive_correct"] - GAIN for r in mid_r],
              falsifier="the accuracy gain over naive at mid-token cuts below 15 points",
              note=f"paired interval over the {len(mid_r)} mid-token cuts; token healing "
                   f"{metrics['regex_acc_healing_mid-token']:.3f}, raw cover sum (renormalize=False) "
                   f"{metrics['regex_acc_bytelm_raw_mid-token']:.3f} vs renormalised "
                   f"{metrics['regex_acc_bytelm_mid-token']:.3f}"),
        Claim("With a GPT-2 regex pre-tokenizer the byte-level LM is exact across pre-token boundaries",
              measured=metrics["regex_exactness_abs_diff_bits_per_byte"], op="<", reference=1e-6, kind="check",
              baseline="token-level log p~(encode(text) || EOS), one forward pass (float64 model copy)",
              metric="|byte-level - token-level| bits per byte",
              note=f"{len(t_r)} bytes, {int(metrics['regex_exactness_pretokens'])} pre-tokens; true by construction "
                   "(prefix-canonical covering tree, telescoping); the raw model puts "
                   f"{metrics['regex_noncanonical_mass_bits_per_byte']:.2e} bits/byte on non-canonical tokens"),
        Claim("The byte-level LM is exact: its bits equal the token-level NLL of the canonical encoding",
              measured=metrics["exactness_max_abs_diff_bits_per_byte"], op="<", reference=1e-6, kind="check",
              baseline="token-level log p~(encode(text) || EOS) in one forward pass (float64 model copy)",
              metric="max |byte-level - token-level| bits per byte",
              note="true by construction (the covering-tree sum telescopes); p~ is the model restricted to canonical "
                   f"continuations; the raw model puts {metrics['noncanonical_mass_bits_per_byte']:.2e} bits/byte on "
                   "non-canonical tokens"),
        Claim("The next-byte distribution (256 bytes + EOS) sums to 1",
              measured=metrics["max_next_byte_sum_error"], op="<", reference=1e-6, kind="check",
              baseline="1e-6", metric="max |sum_b P(b | prefix) - 1| over the Exp I prefixes",
              note="true by construction (the byte probabilities partition the prefix's covering set)"),
        Claim("An ensemble of two LMs with different tokenizers beats each alone", measured=bpb["mixture A+B"], op="<",
              reference=bpb[best], baseline=f"the better single model on the same bytes ({best})",
              metric="bits per byte, 50/50 mixture of next-byte distributions",
              paired=[c["mixture A+B"] - c[best] for c in chunk_bits],
              falsifier="the mixture's bits per byte at or above the better single model's",
              note=f"teacher-forced on {n_bytes} held-out bytes; paired interval over the {len(chunk_bits)} chunks"),
        tc.claim("Byte-level generation is within 2x of token-level throughput (batched tree expansion)", "<=", SPEED,
                 as_="ratio", bar=True, control=tc1.ratio,
                 control_arm="one model call per tree node (speculate=1: batched tree expansion removed), timed the "
                             "same way against the token model on its own (identical) bytes",
                 baseline="token-level sampling of the same bytes with a KV cache, same model and prompt",
                 metric="byte-level CPU time / token-level CPU time for the same bytes (median of interleaved repeats)",
                 paper="abstract: 'efficiently solves the PBP' (no size); 2x is issue 12's target",
                 falsifier="byte-level generation more than 2x the token-level CPU time for the same bytes",
                 note=f"model {sz.model_a.name}, {len(gen_byte)} sampled bytes (T=1); model calls per generated byte: "
                      f"byte LM {metrics['model_calls_per_byte_byte']:.3f}, one call per node "
                      f"{metrics['model_calls_per_byte_byte_1call']:.3f}, token level "
                      f"{metrics['model_calls_per_byte_token']:.3f} ({metrics['token_gen_bytes_per_token']:.2f} bytes "
                      f"per token); the exact covering sampler (T=1) at "
                      f"{metrics['slowdown_token_over_covering_sampler']:.2f}x (interleaved medians)"),
        *prod_claims,
    ]
    tables = {"prompt_boundary": table_pb, "prompt_boundary_gpt2_regex": table_re,
              "ensemble": [{"model": k, "bits/byte": round(v, 4)} for k, v in bpb.items()],
              "speed": [{"method": "byte-level LM, byte by byte (batched tree expansion)", "bytes/s": round(byte_bps, 1),
                         "model calls/byte": round(metrics["model_calls_per_byte_byte"], 3)},
                        {"method": "byte-level LM, byte by byte, one model call per node",
                         "bytes/s": round(metrics["bytes_per_s_bytelm_one_call_per_node"], 1),
                         "model calls/byte": round(metrics["model_calls_per_byte_byte_1call"], 3)},
                        {"method": "byte-level LM, covering sampler (T=1)", "bytes/s": round(bps["covering"], 1),
                         "model calls/byte": None},
                        {"method": "token-level", "bytes/s": round(token_bps, 1),
                         "model calls/byte": round(metrics["model_calls_per_byte_token"], 3)}],
              "production_vocabularies": table_prod}
    return Outcome(metrics=metrics, claims=claims, tables=tables, figures={"prompt_boundary": _figure(table_pb, bpb)})


def _figure(table_pb: list[dict], bpb: dict):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.4))
    ax1, ax2 = fig.subplots(1, 2)
    methods = ["naive", "healing", "bytelm"]
    x = np.arange(len(table_pb))
    for i, m in enumerate(methods):
        ax1.bar(x + (i - 1) * 0.27, [r[f"{m} acc"] for r in table_pb], 0.27, label=m)
    ax1.set_xticks(x, [f"{r['cuts']} (n={r['n']})" for r in table_pb])
    ax1.set_ylabel("next-byte accuracy")
    ax1.set_title("Prompt boundary (model A)")
    ax1.legend(fontsize=8)
    ax2.bar(list(bpb), list(bpb.values()), color=["C0", "C1", "C2", "C3"])
    ax2.tick_params(axis="x", labelsize=7)
    ax2.set_ylabel("bits per byte")
    ax2.set_ylim(min(bpb.values()) * 0.9, max(bpb.values()) * 1.03)
    ax2.set_title("Ensemble across tokenizers")
    fig.tight_layout()
    return fig
