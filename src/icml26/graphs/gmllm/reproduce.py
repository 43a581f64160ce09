"""Reproduction of [A04] GMLLM: graph-guided context for localising cross-file malicious code.

Data: synthetic projects (3-5 files of one standard-library package, read as text) with look-alike decoys in
every project and, in half of them, one inert behaviour chain split across 2-3 files (``synth.py``). Nothing is
imported or executed. Train/test split 60/40 by project.

Pipeline: code graph (``ast``) -> node features (hashing encoder + structure + behaviour tags) -> relational GCN
trained on project labels only -> gradient x input attribution -> top-5 functions + 1-hop neighbours packed into
a budget of T tokens -> analyser (``ChainAnalyzer``, a CPU stand-in for the LLM) -> ranked functions.

Compared at the same budget T on every malicious test project: graph-guided context; whole-project context in
file order (truncated); keyword-scanner-ranked context (bandit-style rules); random guidance (control). Control:
the GNN retrained on shuffled project labels. Speed: the code-graph builder on the whole standard library.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from icml26.harness import Budget, Claim, Outcome, seed_everything

from .analysis import ChainAnalyzer, file_recall_at_k, keyword_scores, localise, order_guided, order_keyword, \
    order_random, order_whole, recall_at_k
from .codegraph import build_code_graph, iter_stdlib_files
from .model import HashingEncoder, node_attribution, node_texts, predict_proba, to_pyg, train_gnn
from .synth import make_dataset


@dataclass(frozen=True)
class Sizes:
    projects: int
    epochs: int
    hid: int
    stdlib_files: int | None      # files for the builder timing (None: the whole standard library)
    floor_files: int              # files for the parse-only floor (same first files)


SIZES = {
    Budget.QUICK: Sizes(40, 25, 32, 100, 50),
    Budget.STANDARD: Sizes(160, 30, 64, 1000, 200),
    Budget.FULL: Sizes(600, 80, 64, None, 500),
}

BUDGET_T = 512          # analyser context, tokens
TOP_K = 5               # functions scored by recall@k; guided context seeds
TRAIN_SHARE = 0.6
STRATEGIES = ("graph-guided", "whole project", "keyword scanner", "random guidance")


# helper functions

def stdlib_build_time(n_files: int | None, n_jobs: int = 2) -> tuple[float, int, int]:
    """Seconds to read and parse standard-library files into one code graph; (seconds, files, nodes)."""
    t0 = time.perf_counter()
    files = {}
    for rel, p in iter_stdlib_files():
        files[rel] = p.read_text(encoding="utf-8", errors="replace")
        if n_files is not None and len(files) >= n_files:
            break
    g = build_code_graph(files, n_jobs=n_jobs)
    return time.perf_counter() - t0, len(files), g.num_nodes


def parse_floor(n_files: int | None) -> float:
    """Seconds for ``ast.parse`` alone on the same files, one process: the floor of any ast-based builder on
    this machine at this moment (shows how loaded it is)."""
    import ast

    srcs = []
    for rel, p in iter_stdlib_files():
        srcs.append(p.read_text(encoding="utf-8", errors="replace"))
        if n_files is not None and len(srcs) >= n_files:
            break
    t0 = time.perf_counter()
    for s in srcs:
        try:
            ast.parse(s)
        except (SyntaxError, ValueError):
            pass
    return time.perf_counter() - t0


def _auroc(y: np.ndarray, p: np.ndarray) -> float:
    return float(roc_auc_score(y, p)) if len(set(y.tolist())) == 2 else float("nan")


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng([seed, 18])     # a stream distinct from the generator's (same seed)

    projects = make_dataset(sz.projects, seed)
    graphs = [build_code_graph(p.files) for p in projects]
    y = np.array([p.label for p in projects])
    n_tr = int(TRAIN_SHARE * len(projects))
    tr, te = list(range(n_tr)), list(range(n_tr, len(projects)))
    enc = HashingEncoder(dim=32, random_state=seed).fit([t for i in tr for t in node_texts(graphs[i])])
    data = [to_pyg(g, enc, int(l)) for g, l in zip(graphs, y)]
    model = train_gnn([data[i] for i in tr], hid=sz.hid, epochs=sz.epochs, seed=seed)
    p_te = predict_proba(model, [data[i] for i in te])
    auroc = _auroc(y[te], p_te)
    # keyword scanner as a project-level detector too (max rule score)
    kw_proj = np.array([max(keyword_scores(graphs[i]).values(), default=0.0) for i in te])
    auroc_kw = _auroc(y[te], kw_proj)

    # shuffled-label control
    y_shuf = y.copy()
    y_shuf[tr] = rng.permutation(y[tr])
    data_shuf = [to_pyg(graphs[i], enc, int(y_shuf[i])) for i in tr]
    model_shuf = train_gnn(data_shuf, hid=sz.hid, epochs=sz.epochs, seed=seed)
    auroc_shuf = _auroc(y[te], predict_proba(model_shuf, [data[i] for i in te]))

    analyzer = ChainAnalyzer()
    mal = [i for i in te if y[i] == 1]
    rec = {s: [] for s in STRATEGIES + ("graph-guided (shuffled-label GNN)", "unbounded whole project")}
    frec = {s: [] for s in STRATEGIES}
    attr_hit, kw_hit, rnd_hit, max_tokens = [], [], [], 0
    for i in mal:
        g, truth = graphs[i], projects[i].truth_functions
        sc = node_attribution(model, data[i])
        orders = {"graph-guided": order_guided(g, sc, TOP_K), "whole project": order_whole(g),
                  "keyword scanner": order_keyword(g), "random guidance": order_random(g, rng)}
        for s, order in orders.items():
            res = localise(g, order, analyzer, BUDGET_T)
            max_tokens = max(max_tokens, res.tokens)
            rec[s].append(recall_at_k(res.ranked, truth, TOP_K))
            frec[s].append(file_recall_at_k(res.ranked, projects[i].truth_files, 2))
        res = localise(g, order_guided(g, node_attribution(model_shuf, data[i]), TOP_K), analyzer, BUDGET_T)
        rec["graph-guided (shuffled-label GNN)"].append(recall_at_k(res.ranked, truth, TOP_K))
        res = localise(g, orders["whole project"], analyzer, 10 ** 9)
        rec["unbounded whole project"].append(recall_at_k(res.ranked, truth, TOP_K))
        # the explainer's own top-5 (before the analyser) vs keyword and random top-5
        funcs = {n.name: n.id for n in g.functions()}
        top_attr = sorted(funcs, key=lambda n: -float(sc[funcs[n]]))
        attr_hit.append(recall_at_k(top_attr, truth, TOP_K))
        kw_hit.append(recall_at_k(orders["keyword scanner"], truth, TOP_K))
        rnd_hit.append(recall_at_k(orders["random guidance"], truth, TOP_K))

    secs, n_files, n_nodes = stdlib_build_time(sz.stdlib_files)
    per_1000 = secs / n_files * 1000.0
    floor_1000 = parse_floor(sz.floor_files) / min(sz.floor_files, n_files) * 1000.0

    r = {s: np.array(v) for s, v in rec.items()}
    metrics = {"auroc_gnn": auroc, "auroc_keyword_max_rule": auroc_kw, "auroc_shuffled_label_gnn": auroc_shuf,
               "explainer_top5_hit": float(np.mean(attr_hit)), "keyword_top5_hit": float(np.mean(kw_hit)),
               "random_top5_hit": float(np.mean(rnd_hit)), "max_context_tokens": float(max_tokens),
               "stdlib_build_seconds": secs, "stdlib_files": float(n_files), "stdlib_nodes": float(n_nodes),
               "seconds_per_1000_files": per_1000,
               "parse_only_seconds_per_1000_files_1proc": floor_1000, "test_malicious_projects": float(len(mal))}
    for s, v in r.items():
        metrics[f"recall@{TOP_K} {s}"] = float(v.mean())
    for s, v in frec.items():
        metrics[f"file_recall@2 {s}"] = float(np.mean(v))

    G = r["graph-guided"]
    claims = [
        Claim("GNN trained on project labels only detects malicious projects (AUROC > 0.9)", measured=auroc, op=">",
              reference=0.9, baseline="spec target; the keyword scanner's max-rule AUROC is reported alongside",
              paper="outperforms existing approaches", metric="project AUROC on held-out projects",
              falsifier="AUROC at or below 0.9"),
        Claim("Graph-guided context localises the malicious functions better than whole-project context at the "
              "same token budget", measured=float(G.mean()), op=">", reference=float(r["whole project"].mean()),
              paired=list(G - r["whole project"]), baseline=f"whole project in file order, truncated to {BUDGET_T} "
              "tokens, same analyser", paper="reduces interference from irrelevant context",
              metric=f"recall@{TOP_K} of the injected chain's functions",
              falsifier="guided recall at or below whole-project recall, or paired interval containing 0"),
        Claim("Graph-guided context beats keyword-scanner-ranked context at the same budget",
              measured=float(G.mean()), op=">", reference=float(r["keyword scanner"].mean()),
              paired=list(G - r["keyword scanner"]), baseline="bandit-style rule ranking, same analyser and budget",
              paper="consistently outperforms existing approaches", metric=f"recall@{TOP_K}",
              falsifier="guided recall at or below the keyword-ranked context's, or paired interval containing 0"),
        Claim("The GNN explanation (top-5 attributed functions) hits the chain far more often than random guidance",
              measured=float(np.mean(attr_hit)), op=">", reference=float(np.mean(rnd_hit)),
              paired=list(np.array(attr_hit) - np.array(rnd_hit)), baseline="random top-5 (control)",
              paper="interpreting predictions identifies key code sections", metric="top-5 hit rate",
              falsifier="explanation hit rate at or below random, or paired interval containing 0"),
        Claim("Acceptance: the code-graph builder parses ~1,000 standard-library files in under a minute",
              measured=per_1000, op="<", reference=60.0, baseline="60 s per 1,000 files",
              metric=f"seconds per 1,000 files ({n_files} files, {n_nodes} nodes, 2 processes)",
              falsifier="more than 60 s per 1,000 files"),
        Claim("The analyser never receives more than T tokens", kind="check", measured=float(max_tokens),
              op="<=", reference=float(BUDGET_T), metric="largest packed context (tokens)"),
        Claim("Control: a GNN trained on shuffled project labels is at chance (no leakage)", kind="check",
              measured=auroc_shuf, op="in", reference=(0.25, 0.75), metric="held-out AUROC, shuffled training labels",
              note="band 0.5 +- 0.25 (about 3 standard errors at the standard test size)"),
    ]
    tables = {"localisation": [{"context": s, f"recall@{TOP_K}": round(float(v.mean()), 4),
                                "file_recall@2": round(float(np.mean(frec[s])), 4) if s in frec else None}
                               for s, v in r.items()],
              "detection": [{"detector": "GNN (project labels)", "auroc": round(auroc, 4)},
                            {"detector": "keyword scanner (max rule score)", "auroc": round(auroc_kw, 4)},
                            {"detector": "GNN on shuffled labels (control)", "auroc": round(auroc_shuf, 4)}]}
    return Outcome(metrics=metrics, claims=claims, tables=tables,
                   notes=f"stdlib graph: {n_files} files, {n_nodes} nodes in {secs:.1f} s")
