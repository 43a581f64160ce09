"""A causal LM retrained on its own code lines, with a syntax checker as the open signal [A05].

The unit is one line of Python (sampled after a newline, cut at the next newline), the unit the toy LM on stdlib
code sometimes gets right (whole programs it never does). Signals on a line l:

- binary (coarse): ``line_is_valid(l)``: ``ast.parse`` accepts the stripped line as a non-empty statement (a line
  opening a block, ending in ``:``, is completed with `` pass``; a comment-only line is not a statement);
- fine among acceptable outputs (our choice): ``FormRubric(real lines)``: 0 for an invalid line; a valid line
  gets the frequency of its statement form among real code lines relative to the most common form (an
  assignment scores 1, an ``if`` or a call about 1/3, a bare name or constant under 0.01). It is finer supervision *among acceptable lines*, as the abstract
  contrasts; it gives no credit to a line that does not parse;
- partial credit (the earlier graded score, kept for reference): ``line_score(l)`` = mean of three checks (the
  line tokenizes, its brackets balance, it parses), which credits lines that do not parse.

One generation: sample lines from p_theta_t, weight them by the signal (closed loop: weight 1), fine-tune a copy of
the model on the weighted lines (weighted next-token cross-entropy, AdamW). Recorded per generation: validity of the
model's lines, held-out code cross-entropy per window (quality: its change is minus the change of information the
model holds about real code), and the fraction of distinct lines.
"""

from __future__ import annotations

import ast
import copy
import io
import tokenize
from collections import Counter
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from icml26.harness import validate as chk

_PAIRS = {")": "(", "]": "[", "}": "{"}


def line_is_valid(line: str) -> bool:
    """Whether ``line`` is one syntactically valid Python statement (see the module docstring) [A05]."""
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, got {type(line).__name__}")
    s = line.strip()
    if not s:
        return False
    if s.endswith(":"):
        s += " pass"
    try:
        return len(ast.parse(s).body) > 0
    except (SyntaxError, ValueError):          # ValueError: null bytes
        return False


def _tokenizes(s: str) -> bool:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(s + "\n").readline))
        return all(t.type != tokenize.ERRORTOKEN for t in toks)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return False


def _balanced(s: str) -> bool:
    stack: list[str] = []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if not stack or stack.pop() != _PAIRS[ch]:
                return False
    return not stack


def line_score(line: str) -> float:
    """Graded syntax score in [0, 1]: mean of (tokenizes, brackets balance, parses) [A05]."""
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, got {type(line).__name__}")
    s = line.strip()
    if not s:
        return 0.0
    if line_is_valid(s):
        return 1.0
    return (_tokenizes(s) + _balanced(s)) / 3.0


def _lines(name: str, lines: object) -> list[str]:
    if isinstance(lines, (str, bytes)) or not isinstance(lines, Sequence):
        raise TypeError(f"{name} must be a sequence of str lines, got {chk.describe(lines)}")
    bad = [i for i, s in enumerate(lines) if not isinstance(s, str)]
    if bad:
        raise TypeError(f"{name} must hold str lines; entry {bad[0]} is {chk.describe(lines[bad[0]])}")
    return list(lines)


def _lm(model: object, tokenizer: object) -> None:
    if not callable(getattr(model, "generate", None)):
        raise TypeError(f"model must be a causal LM with .generate (transformers), got {chk.describe(model)}")
    if not callable(tokenizer):
        raise TypeError(f"tokenizer must be a callable tokenizer (transformers), got {chk.describe(tokenizer)}")


def sample_lines(model, tokenizer, n: int, max_new_tokens: int = 24, seed: int = 0, batch: int = 128,
                 prompt: str = "\n") -> list[str]:
    """n lines sampled (temperature 1, no truncation) after ``prompt``, each cut at its first newline."""
    chk.positive_int("n", n)
    chk.positive_int("max_new_tokens", max_new_tokens)
    chk.positive_int("batch", batch)
    chk.non_negative_int("seed", seed)
    if not isinstance(prompt, str) or not prompt:
        raise TypeError(f"prompt must be a non-empty str, got {chk.describe(prompt)}")
    _lm(model, tokenizer)
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    if ids.shape[1] == 0:
        raise ValueError("the prompt must encode to at least one token")
    torch.manual_seed(seed)
    out: list[str] = []
    model.eval()
    with torch.no_grad():
        for i in range(0, n, batch):
            b = min(batch, n - i)
            gen = model.generate(ids.repeat(b, 1), attention_mask=torch.ones(b, ids.shape[1], dtype=torch.long),
                                 do_sample=True, top_k=0, top_p=1.0, temperature=1.0, max_new_tokens=max_new_tokens,
                                 pad_token_id=tokenizer.convert_tokens_to_ids("<eos>"))
            out += [t.split("\n")[0] for t in tokenizer.batch_decode(gen[:, ids.shape[1]:], skip_special_tokens=True)]
    return out


def finetune_on_lines(model, tokenizer, lines: Sequence[str], weights: np.ndarray, steps: int, lr: float = 5e-4,
                      batch: int = 32, seed: int = 0):
    """A copy of ``model`` after ``steps`` AdamW steps on the weighted lines (each as "\\n" + line + "\\n").

    Loss: sum_i w_i sum_t CE_it / sum_i w_i T_i over a minibatch drawn uniformly from the lines with w > 0. Returns
    the model itself (unchanged) when no line has weight.
    """
    lines = _lines("lines", lines)
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or len(w) != len(lines) or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite, non-negative and one per line")
    steps = chk.non_negative_int("steps", steps)
    chk.positive("lr", lr)
    batch = chk.positive_int("batch", batch)
    chk.non_negative_int("seed", seed)
    keep = np.flatnonzero(w > 0)
    if len(keep) == 0 or steps == 0:
        return model
    model = copy.deepcopy(model)
    enc = tokenizer(["\n" + lines[i] + "\n" for i in keep], add_special_tokens=False)["input_ids"]
    L = max(len(e) for e in enc)
    X = torch.zeros(len(enc), L, dtype=torch.long)
    M = torch.zeros(len(enc), L, dtype=torch.bool)
    for j, e in enumerate(enc):
        X[j, : len(e)] = torch.tensor(e)
        M[j, : len(e)] = True
    W = torch.tensor(w[keep], dtype=torch.float32)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        idx = torch.randint(len(enc), (min(batch, len(enc)),), generator=g)
        x, m, wb = X[idx], M[idx], W[idx]
        logits = model(input_ids=x, attention_mask=m.long(), use_cache=False).logits[:, :-1]
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
        tm = m[:, 1:].float()
        loss = (ce * tm * wb[:, None]).sum() / (tm * wb[:, None]).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


@torch.no_grad()
def window_losses(model, tokens: torch.Tensor, seq_len: int = 128, windows: int = 32) -> np.ndarray:
    """Mean next-token cross-entropy (nats) of each of the first ``windows`` non-overlapping windows of ``tokens``."""
    n = min(windows, (len(tokens) - 1) // seq_len)
    if n < 1:
        raise ValueError("not enough tokens for one window")
    x = tokens[: n * seq_len + 1]
    logits = model(input_ids=x[:-1].view(n, seq_len), use_cache=False).logits
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[1:].view(n, seq_len), reduction="none")
    return ce.mean(1).numpy()


def syntax_loop(model, tokenizer, signal: Callable[[list[str]], np.ndarray] | None, rounds: int, n_lines: int,
                steps: int, heldout: torch.Tensor, seed: int = 0, windows: int = 32,
                rewrite: Callable[[list[str], int], list[str]] | None = None,
                transfer_prompt: str | None = None) -> list[dict]:
    """History (generations 0..rounds) of a generation-training loop on lines [A05].

    ``signal(lines) -> weights`` (None: closed loop, weight 1); ``rewrite(lines, seed) -> lines`` replaces the
    sampled lines by reference lines before training (instance-level imitation; weight 1). Each record: ``valid``
    (0/1 per sampled line of that generation's model), ``score`` (graded score per line), ``nll`` (held-out window
    losses), ``distinct`` (fraction of distinct non-empty lines), ``forms`` (statement kinds of the valid lines),
    ``nontrivial`` (fraction of lines valid and more than a bare name or constant), ``kept`` (mean weight given to
    the lines it trained on), ``top`` (most common lines) and, at generations 0
    and ``rounds`` when ``transfer_prompt`` is given, ``valid_transfer``: validity of lines sampled after that prompt.
    """
    if rounds < 0 or n_lines < 1 or steps < 0:
        raise ValueError(f"need rounds >= 0, n_lines >= 1, steps >= 0; got {rounds}, {n_lines}, {steps}")
    if signal is not None and rewrite is not None:
        raise ValueError("pass a signal (filter or weights) or a rewrite (imitation), not both")
    for name, f in (("signal", signal), ("rewrite", rewrite)):
        if f is not None and not callable(f):
            raise TypeError(f"{name} must be a callable or None, got {chk.describe(f)}")
    chk.positive_int("windows", windows)
    chk.non_negative_int("seed", seed)
    if not isinstance(heldout, torch.Tensor) or heldout.ndim != 1 or heldout.dtype.is_floating_point:
        raise TypeError(f"heldout must be a 1-D tensor of token ids, got {chk.describe(heldout)}")
    if transfer_prompt is not None and (not isinstance(transfer_prompt, str) or not transfer_prompt):
        raise TypeError(f"transfer_prompt must be a non-empty str or None, got {chk.describe(transfer_prompt)}")
    _lm(model, tokenizer)
    hist = []
    for t in range(rounds + 1):
        lines = sample_lines(model, tokenizer, n_lines, seed=seed * 1000 + t)
        valid = np.array([line_is_valid(s) for s in lines], dtype=float)
        rec = {"generation": t, "valid": valid, "score": np.array([line_score(s) for s in lines]),
               "nll": window_losses(model, heldout, windows=windows),
               "distinct": len({s.strip() for s in lines if s.strip()}) / len(lines), "kept": float("nan"),
               "top": Counter(s.strip() for s in lines).most_common(3),
               "forms": Counter(statement_kind(s) for s, v in zip(lines, valid) if v)}
        rec["nontrivial"] = rec["valid"].mean() - (rec["forms"]["Expr:Name"] + rec["forms"]["Expr:Constant"]) / len(lines)
        if transfer_prompt is not None and t in (0, rounds):
            pre = transfer_prompt.split("\n")[-1]
            rec["valid_transfer"] = np.array([line_is_valid(pre + s) for s in sample_lines(
                model, tokenizer, n_lines, seed=seed * 1000 + 500 + t, prompt=transfer_prompt)], dtype=float)
        if t < rounds:
            train = lines if rewrite is None else rewrite(lines, seed * 1000 + t)
            w = np.ones(len(train)) if signal is None else np.asarray(signal(lines), dtype=float)
            rec["kept"] = float(w.mean())
            model = finetune_on_lines(model, tokenizer, train, w, steps, seed=seed * 1000 + t)
        hist.append(rec)
    return hist


def statement_kind(line: str) -> str:
    """The AST node type of a valid line's statement (``Assign``, ``Return``, ...; an expression statement as
    ``Expr:<its node>``, e.g. ``Expr:Name`` for a bare name); "" if invalid."""
    if not line_is_valid(line):
        return ""
    s = line.strip()
    node = ast.parse(s + " pass" if s.endswith(":") else s).body[0]
    if isinstance(node, ast.Expr):
        return f"Expr:{type(node.value).__name__}"
    return type(node).__name__


def form_entropy(forms: Counter) -> float:
    """Entropy (nats) of the statement kinds of the valid lines (0 when there are none)."""
    if not isinstance(forms, Mapping):
        raise TypeError(f"forms must be a Counter of statement kinds, got {chk.describe(forms)}")
    if any(not isinstance(k, str) for k in forms) or any(not isinstance(c, (int, float)) or c < 0 or c != c
                                                          for c in forms.values()):
        raise ValueError("forms must map statement kinds (str) to counts >= 0")
    c = np.array([v for k, v in forms.items() if k], dtype=float)
    if c.sum() == 0:
        return 0.0
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def real_lines(max_bytes: int = 300_000, max_len: int = 60) -> list[str]:
    """Real code lines of every form: the stripped, non-empty, valid lines of at most ``max_len`` characters of
    the training split of the stdlib corpus (the control loop fine-tunes on these instead of its own samples)."""
    from icml26.testbeds.code_corpus import corpus_texts

    chk.positive_int("max_bytes", max_bytes)
    chk.positive_int("max_len", max_len)
    out = [ln.strip() for t in corpus_texts("train", max_bytes=max_bytes) for ln in t.split("\n")]
    return [ln for ln in out if ln and len(ln) <= max_len and line_is_valid(ln)]


class FormRubric:
    """Fine signal among acceptable lines [A05]: weight(l) = 1[l valid] f(kind(l)) / max_k f(k), with f the
    frequency of each statement form (``statement_kind``) among real lines; forms never seen in real code get 0.
    An invalid line always gets 0 (no partial credit outside the acceptable set)."""

    def __init__(self, references: Sequence[str]) -> None:
        references = _lines("references", references)
        kinds = Counter(statement_kind(s) for s in references)
        kinds.pop("", None)
        # bare constants among single real lines are docstring fragments, not statements: they get the weight of
        # the other bare expression, a bare name
        kinds.pop("Expr:Constant", None)
        if not kinds:
            raise ValueError("need at least one valid reference line (other than a bare constant)")
        top = max(kinds.values())
        self.weights = {k: v / top for k, v in kinds.items()}
        self.weights["Expr:Constant"] = self.weights.get("Expr:Name", 0.0)

    def __call__(self, lines: list[str]) -> np.ndarray:
        return np.array([self.weights.get(statement_kind(s), 0.0) for s in _lines("lines", lines)])


def reference_lines(max_bytes: int = 300_000, max_len: int = 60) -> list[str]:
    """One surface form for imitation (our choice): valid assignment lines ``name = value`` (at most ``max_len``
    characters) from the training split of the stdlib corpus."""
    import re

    from icml26.testbeds.code_corpus import corpus_texts

    chk.positive_int("max_bytes", max_bytes)
    chk.positive_int("max_len", max_len)
    pat = re.compile(r"^[A-Za-z_][A-Za-z_0-9.]* = \S.*$")
    out = [ln.strip() for t in corpus_texts("train", max_bytes=max_bytes) for ln in t.split("\n")]
    return [ln for ln in out if len(ln) <= max_len and pat.match(ln) and line_is_valid(ln)]


class ImitateReference:
    """Instance-level supervision: every sampled line is replaced by a reference line drawn at random."""

    def __init__(self, references: Sequence[str]) -> None:
        references = _lines("references", references)
        if len(references) == 0:
            raise ValueError("need at least one reference line")
        self.references = references

    def __call__(self, lines: list[str], seed: int) -> list[str]:
        lines = _lines("lines", lines)
        chk.non_negative_int("seed", seed)
        idx = np.random.default_rng(seed).integers(len(self.references), size=len(lines))
        return [self.references[i] for i in idx]


class MatchedRandomFilter:
    """Information-closed control of the syntax checker [A05]: keeps as many lines as the checker would keep
    (the count of valid lines, at least one) but chooses them uniformly at random, blind to validity."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(chk.non_negative_int("seed", seed))

    def __call__(self, lines: list[str]) -> np.ndarray:
        lines = _lines("lines", lines)
        chk.non_empty("lines", lines)
        k = max(int(binary_signal(lines).sum()), 1)
        w = np.zeros(len(lines))
        w[self.rng.choice(len(lines), min(k, len(lines)), replace=False)] = 1.0
        return w


def binary_signal(lines: list[str]) -> np.ndarray:
    """Coarse: 1 for a valid line, 0 otherwise."""
    return np.array([line_is_valid(s) for s in lines], dtype=float)


def graded_signal(lines: list[str]) -> np.ndarray:
    """Partial credit (the earlier "fine" signal): the graded score of each line; credits lines that do not parse."""
    return np.array([line_score(s) for s in lines])
