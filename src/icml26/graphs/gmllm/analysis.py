"""Context selection under a token budget and pluggable analysers [A04 "attention acquisition"].

A *section* is one function's source with a ``# file:line`` header. A context strategy orders the project's
functions; ``pack`` keeps sections in that order while the total stays within ``budget`` tokens; the analyser
sees only the packed text and returns a project score and ranked function names. Strategies:
    guided   : the GNN's top-k attributed functions, then their 1-hop call/flow/reference neighbours
    whole    : the whole project in file order (what a plain long-context prompt sees, truncated)
    keyword  : functions ranked by a bandit-style rule scanner (severity-weighted dangerous-call hits)
    random   : a random order (random-guidance control)
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from icml26.harness import validate

from .codegraph import CodeGraph, _dotted, tags_of_call

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Tokens of a simple code tokenizer (identifiers, numbers and single punctuation marks)."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Section:
    name: str        # qualified function name, "path::qual"
    file: str
    lineno: int
    code: str

    @property
    def text(self) -> str:
        return f"# {self.file}:{self.lineno}\n{self.code}\n"


def sections_of(g: CodeGraph) -> dict[str, Section]:
    """One section per function node (source lines from the parsed file; nothing is executed)."""
    return {n.name: Section(n.name, n.file, n.lineno, g.source_of(n)) for n in g.functions()}


def pack(sections: Sequence[Section], budget: int, tokenizer: Callable[[str], int] = count_tokens
         ) -> list[Section]:
    """Greedy packing in the given order: keep a section when it still fits in ``budget`` tokens."""
    if budget <= 0:
        raise ValueError(f"budget must be a positive number of tokens, got {budget}")
    out, used = [], 0
    for s in sections:
        t = tokenizer(s.text)
        if used + t <= budget:
            out.append(s)
            used += t
    return out


# bandit-style keyword scanner

SEVERITY = {"exec": 3.0, "process": 3.0, "network": 2.0, "decode": 1.0, "env": 1.0, "file_read": 1.0,
            "persistence": 2.0}


def keyword_scores(g: CodeGraph) -> dict[str, float]:
    """Rule score per function: sum of severities of its dangerous-call categories (bandit B102/B307/B310/B404
    /B602-style rules, on names only), plus 1 per suspicious literal it contains."""
    out = {}
    lit = {d for s, d, t in g.edges if t == "uses"}
    owner = {d: s for s, d, t in g.edges if t == "uses"}
    n_lit: dict[int, int] = {}
    for d in lit:
        n_lit[owner[d]] = n_lit.get(owner[d], 0) + 1
    for n in g.functions():
        out[n.name] = sum(SEVERITY.get(t, 0.0) for t in n.tags) + n_lit.get(n.id, 0)
    return out


# context strategies

def order_whole(g: CodeGraph) -> list[str]:
    return [n.name for n in sorted(g.functions(), key=lambda n: (n.file, n.lineno))]


def order_keyword(g: CodeGraph) -> list[str]:
    sc = keyword_scores(g)
    return sorted(order_whole(g), key=lambda n: -sc[n])      # stable: ties keep file order


def order_random(g: CodeGraph, rng: np.random.Generator) -> list[str]:
    names = order_whole(g)
    return [names[i] for i in rng.permutation(len(names))]


def order_guided(g: CodeGraph, scores: np.ndarray, k: int = 5) -> list[str]:
    """Top-k functions by attribution score, each followed by its 1-hop call/flow/reference neighbours, then
    the remaining functions by score."""
    k = validate.positive_int("k", k)
    scores = validate.finite("scores", np.asarray(scores, dtype=float))
    if scores.shape != (len(g.nodes),):
        raise ValueError(f"scores must hold one number per graph node ({len(g.nodes)}), got shape {scores.shape}")
    funcs = g.functions()
    ranked = sorted(funcs, key=lambda n: -float(scores[n.id]))
    nbrs: dict[int, list[int]] = {}
    for s, d, t in g.edges:
        if t in ("call", "flow", "reference"):
            nbrs.setdefault(s, []).append(d)
            nbrs.setdefault(d, []).append(s)
    out, seen = [], set()
    for n in ranked[:k]:
        for m in [n.id] + sorted(nbrs.get(n.id, []), key=lambda j: -float(scores[j])):
            if g.nodes[m].kind == "function" and m not in seen:
                seen.add(m)
                out.append(g.nodes[m].name)
    out += [n.name for n in ranked if n.id not in seen]
    return out


# analysers

@dataclass
class AnalysisResult:
    score: float
    ranked: list[str]
    tokens: int


class Analyzer(Protocol):
    def analyze(self, sections: Sequence[Section], budget: int) -> AnalysisResult: ...


def _section_facts(s: Section) -> tuple[set[str], set[str]]:
    """(behaviour tags, called/imported names) of one section, by parsing its code (never executing it)."""
    try:
        tree = ast.parse(textwrap.dedent(s.code))
    except SyntaxError:
        return set(), set()
    tags, called = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            tags |= tags_of_call(name)
            called.add(name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.ImportFrom):
            called |= {a.name for a in node.names}
        elif isinstance(node, ast.Attribute) and node.attr == "environ":
            tags.add("env")
    return tags, called


SOURCES, SINKS = {"decode", "env", "file_read", "network"}, {"exec", "network", "process", "persistence"}


class ChainAnalyzer:
    """Default CPU stand-in for the LLM: reads only the sections it is given and ranks functions by behaviour
    evidence, boosting source -> sink chains it can see *within its context* (a function calling another shown
    function, where one side reads/decodes/fetches and the other executes/sends). Project score = best
    function score. Deterministic; it never sees code outside the packed context."""

    def __init__(self, tokenizer: Callable[[str], int] = count_tokens) -> None:
        self.tokenizer = tokenizer

    def analyze(self, sections: Sequence[Section], budget: int) -> AnalysisResult:
        tokens = sum(self.tokenizer(s.text) for s in sections)
        if tokens > budget:
            raise ValueError(f"context of {tokens} tokens exceeds the budget {budget}; pack() it first")
        facts = {s.name: _section_facts(s) for s in sections}
        short = {s.name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]: s.name for s in sections}
        score = {n: float(sum(SEVERITY.get(t, 0.0) for t in tg)) for n, (tg, _) in facts.items()}
        for n, (tg, called) in facts.items():
            for c in called:
                m = short.get(c)
                if m is None or m == n:
                    continue
                other = facts[m][0]
                if (other & SOURCES and tg & SINKS) or (tg & SOURCES and other & SINKS) or \
                        (other & SOURCES and tg & SOURCES and tg & SINKS):
                    score[n] += 4.0
                    score[m] += 4.0
        ranked = sorted(score, key=lambda n: -score[n])
        return AnalysisResult(max(score.values(), default=0.0), ranked, tokens)


class CallableAnalyzer:
    """Adapter for any text model: ``fn(prompt) -> reply``; the reply lists suspicious functions one per line
    as ``path::name`` (anything else is ignored). Use it with a client for your own LLM."""

    PROMPT = ("You are a security analyst. The code below is from one project. List the functions that take part "
              "in malicious behaviour, one 'path::name' per line, most suspicious first.\n\n")

    def __init__(self, fn: Callable[[str], str], tokenizer: Callable[[str], int] = count_tokens) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable: prompt str -> reply str")
        self.fn, self.tokenizer = fn, tokenizer

    def analyze(self, sections: Sequence[Section], budget: int) -> AnalysisResult:
        body = "".join(s.text for s in sections)
        tokens = self.tokenizer(body)
        if tokens > budget:
            raise ValueError(f"context of {tokens} tokens exceeds the budget {budget}; pack() it first")
        known = {s.name for s in sections}
        reply = self.fn(self.PROMPT + body)
        ranked = [ln.strip() for ln in str(reply).splitlines() if ln.strip() in known]
        return AnalysisResult(float(bool(ranked)), list(dict.fromkeys(ranked)), tokens)


def localise(g: CodeGraph, order: Sequence[str], analyzer: Analyzer, budget: int,
             tokenizer: Callable[[str], int] = count_tokens) -> AnalysisResult:
    """Pack the sections in ``order`` into ``budget`` tokens and run the analyser on them."""
    secs = sections_of(g)
    return analyzer.analyze(pack([secs[n] for n in order], budget, tokenizer), budget)


def recall_at_k(ranked: Sequence[str], truth: Sequence[str], k: int) -> float:
    """Share of the true items among the first k ranked."""
    k = validate.positive_int("k", k)
    if not truth:
        raise ValueError("recall@k needs at least one true item")
    return len(set(ranked[:k]) & set(truth)) / len(truth)


def file_recall_at_k(ranked: Sequence[str], truth_files: Sequence[str], k: int) -> float:
    files = list(dict.fromkeys(n.split("::", 1)[0] for n in ranked))
    return recall_at_k(files, truth_files, k)
