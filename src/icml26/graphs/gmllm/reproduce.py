"""Reproduction of [A04] GMLLM: graph-guided context for localising cross-file malicious code.

Data (``synth.py``): synthetic projects (4-8 files of one standard-library package, read as text) with look-alike
decoys and one chain slot in every project: a malicious project holds an inert behaviour chain split across 2-3
files there, a benign one the same template's *mirror* (same functions, files, behaviour tags and calls; its
sinks see only constants), so counts, names and tags carry no label. Training projects use 4 chain templates;
**test projects use 3 held-out templates** (file -> network, download -> persistence, hex -> process). Nothing is
imported or executed.

Pipeline: code graph (``ast``) -> node features (hashing encoder + structure + behaviour tags) -> relational GCN
trained on project labels only -> attribution (gradient x input; GNNExplainer as the paper's option) -> top-5
functions + 1-hop neighbours packed into a budget of T tokens -> analyser (``ChainAnalyzer``, a CPU stand-in for
the LLM) -> ranked functions.

Claims are decided against the strongest baseline the run has, and against controls with the contribution
removed: the same GNN untrained (random weights) and trained on shuffled project labels, with the same
attribution and packing. Interpretation is also tested where the truth is structural: BA trees with a planted
house motif (``motifs.py``). Speed: the builder's CPU time against bare ``ast.parse`` of the same files,
interleaved, with a same-work control (``compare_times``).
"""

from __future__ import annotations

import ast
import gc
import re
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from icml26.harness import Budget, Claim, Outcome, compare_times, seed_everything

from .analysis import (
    SINKS,
    SOURCES,
    ChainAnalyzer,
    file_recall_at_k,
    keyword_scores,
    localise,
    order_guided,
    order_keyword,
    order_random,
    order_whole,
    recall_at_k,
)
from .codegraph import (
    EDGE_TYPES,
    ENCODERS,
    TAGS,
    build_code_graph,
    degree_columns,
    iter_stdlib_files,
    structure_dim,
    tags_of_call,
)
from .model import HashingEncoder, explain_edges, node_attribution, node_texts, predict_proba, to_pyg, train_gnn
from .motifs import make_motif_dataset, motif_edge_auroc, node_to_edge_scores
from .synth import HELD_OUT_TEMPLATES, NOUNS, SEEN_TEMPLATES, VERBS, make_dataset


@dataclass(frozen=True)
class Sizes:
    train: int                # training projects (seen templates)
    test: int                 # test projects (held-out templates)
    test_seen: int            # test projects on the seen templates (new projects and base code)
    epochs: int
    hid: int
    explain_projects: int     # malicious test projects explained with GNNExplainer too
    explain_epochs: int
    motif_train: int
    motif_explain: int
    timing_files: int         # standard-library files for the builder-vs-parse timing
    timing_repeats: int


SIZES = {
    Budget.QUICK: Sizes(24, 12, 12, 25, 32, 3, 30, 60, 4, 8, 21),
    Budget.STANDARD: Sizes(100, 40, 40, 30, 64, 8, 100, 200, 10, 20, 21),
    Budget.FULL: Sizes(400, 200, 200, 80, 64, 60, 100, 400, 40, 200, 21),
}

BUDGET_T = 512          # analyser context, tokens
TOP_K = 5               # functions scored by recall@k; guided context seeds
TIMING_BAR = 10.0       # the spec's "1,000 files in < 60 s" at this machine's parse floor (5.1 s CPU / 1,000)
TAINT = "taint rule (source->sink flow paths, untrained)"
_GEN_NAME = re.compile(rf"^_({'|'.join(VERBS)})_({'|'.join(NOUNS)})_\d+$")


# helper functions

def null_band(y: np.ndarray, k: float = 3.0) -> tuple[float, float]:
    """0.5 +- k standard deviations of the AUROC of an uninformative score on labels ``y`` (Hanley-McNeil null
    variance (n0 + n1 + 1) / (12 n0 n1)): where a chance-level detector lands at this test size."""
    n1 = int(np.sum(y))
    n0 = len(y) - n1
    sd = float(np.sqrt((n0 + n1 + 1) / (12.0 * max(n0, 1) * max(n1, 1))))
    return 0.5 - k * sd, 0.5 + k * sd


def _auroc(y: np.ndarray, p: np.ndarray) -> float:
    return float(roc_auc_score(y, p)) if len(set(np.asarray(y).tolist())) == 2 else float("nan")


def project_features(g) -> np.ndarray:
    """Tabular project summary for the non-graph detector: function/string counts, functions per behaviour tag,
    edges per type (no graph learning)."""
    funcs = g.functions()
    tags = [sum(t in n.tags for n in funcs) for t in TAGS]
    edges = [sum(1 for *_, et in g.edges if et == t) for t in EDGE_TYPES]
    return np.log1p(np.array([len(funcs), sum(n.kind == "string" for n in g.nodes)] + tags + edges, float))


def generated_name_count(g) -> int:
    """Functions whose short name has the generator's ``_verb_noun_NN`` style (the leak the old data had)."""
    return sum(bool(_GEN_NAME.match(n.name.rsplit("::", 1)[-1].rsplit(".", 1)[-1])) for n in g.functions())


def is_taint_source(node) -> bool:
    """A function that brings in data from outside or hidden in the code: it reads the environment, a file or the
    network, or it *decodes* (``b64decode``, ``fromhex``, ``chr``, ...). A function whose only ``decode``-tagged
    calls are encoders (``codegraph.ENCODERS``: ``b64encode``) is a transform, not a source: it passes taint on
    along a path but starts none (the env -> network mirror encodes a constant and sends it)."""
    if set(node.tags) & (SOURCES - {"decode"}):
        return True
    return any("decode" in tags_of_call(c) and c.rsplit(".", 1)[-1] not in ENCODERS for c in node.calls)


def _taint_paths(g) -> list[tuple[int, int, set[int]]]:
    """Source -> ... -> sink ``flow`` paths: one ``(source, sink, nodes)`` per source function and sink-tagged
    function reachable from it along ``flow`` edges (the source itself excluded), ``nodes`` being the nodes on
    some such path (both ends included). Intermediate functions (encoders, wrappers) pass the flow on whatever their tags."""
    fn = {n.id: n for n in g.functions()}
    import networkx as nx

    flow = nx.DiGraph((a, b) for a, b, t in g.edges if t == "flow")
    out = []
    for s in sorted(fn):
        if s not in flow or not is_taint_source(fn[s]):
            continue
        down = nx.descendants(flow, s) | {s}
        for d in sorted(down - {s}):
            if d in fn and set(fn[d].tags) & SINKS:
                out.append((s, d, down & (nx.ancestors(flow, d) | {d})))
    return out


def taint_count(g) -> float:
    """Untrained taint rule on the code graph: the number of (source, sink) pairs joined by a ``flow`` path
    (``_taint_paths``). In the chain slot a malicious template has such a path and its benign mirror none
    (tested on every template), so this is the strongest training-free detector on our data; outside the slot
    the standard-library base code may add paths to either class."""
    return float(len(_taint_paths(g)))


def taint_function_scores(g) -> np.ndarray:
    """Per-node taint scores: +1 for each source -> sink path (``_taint_paths``) a function lies on, ties broken by
    0.01 x the keyword score. Fed to the same ``order_guided`` packing as the GNN's attribution."""
    sc = np.zeros(g.num_nodes)
    kw = keyword_scores(g)
    fn = {n.id for n in g.functions()}
    for n in g.functions():
        sc[n.id] = 0.01 * kw.get(n.name, 0.0)
    for _, _, on_path in _taint_paths(g):
        for v in on_path & fn:
            sc[v] += 1.0
    return sc


def keyword_node_scores(g) -> np.ndarray:
    """The keyword scanner's function scores as a node array (for the equal-packing keyword arm)."""
    sc = np.zeros(g.num_nodes)
    kw = keyword_scores(g)
    for n in g.functions():
        sc[n.id] = kw.get(n.name, 0.0)
    return sc


def _drop_edges(ds):
    """Copies of the data with every edge removed (the graph-off control), including what the node features know
    of the edges: the log in / out degree columns are zeroed (a malicious chain's source differs from its benign
    mirror by exactly its flow out-edges, so its degree alone carried the label's edge into a graph-free model).
    What stays: the node's depth, type one-hot, behaviour tags and its text (identifier words and call names),
    none computed from edges. A reviewer's scratch run that also zeroed the text columns (standard sizes) stayed at
    chance like this control: seen AUROC 0.645 / 0.427 / 0.588 on seeds 0 / 1 / 2."""
    cols = degree_columns()
    out = []
    for d in ds:
        e = d.clone()
        e.edge_index = d.edge_index[:, :0]
        e.edge_type = d.edge_type[:0]
        off = e.x.shape[1] - structure_dim()
        e.x[:, off + cols.start:off + cols.stop] = 0.0
        out.append(e)
    return out


def _stdlib_sources(n: int) -> dict[str, str]:
    out = {}
    for rel, p in iter_stdlib_files():
        out[rel] = p.read_text(encoding="utf-8", errors="replace")
        if len(out) >= n:
            break
    return out


def _parse_all(srcs: dict[str, str]) -> None:
    for s in srcs.values():
        try:
            ast.parse(s.removeprefix("\ufeff"))
        except (SyntaxError, ValueError):
            pass


# main

def reproduce(budget: Budget, seed: int) -> Outcome:
    sz = Budget.parse(budget).pick(SIZES)
    seed_everything(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng([seed, 18])     # a stream distinct from the generators'

    train = make_dataset(sz.train, [seed, 0], templates=SEEN_TEMPLATES)
    test = make_dataset(sz.test, [seed, 1], templates=HELD_OUT_TEMPLATES)
    test_seen = make_dataset(sz.test_seen, [seed, 2], templates=SEEN_TEMPLATES)
    g_tr = [build_code_graph(p.files) for p in train]
    g_te = [build_code_graph(p.files) for p in test]
    g_ts = [build_code_graph(p.files) for p in test_seen]
    y_tr = np.array([p.label for p in train])
    y_te = np.array([p.label for p in test])
    y_ts = np.array([p.label for p in test_seen])
    enc = HashingEncoder(dim=32, random_state=seed).fit([t for g in g_tr for t in node_texts(g)])
    d_tr = [to_pyg(g, enc, int(lab)) for g, lab in zip(g_tr, y_tr)]
    d_te = [to_pyg(g, enc, int(lab)) for g, lab in zip(g_te, y_te)]
    d_ts = [to_pyg(g, enc, int(lab)) for g, lab in zip(g_ts, y_ts)]

    # models: trained, untrained (random weights), shuffled labels; the official layout (GCN) as an option
    model = train_gnn(d_tr, hid=sz.hid, epochs=sz.epochs, seed=seed)
    untrained = train_gnn(d_tr, hid=sz.hid, epochs=0, seed=seed)
    y_shuf = rng.permutation(y_tr)
    d_shuf = [to_pyg(g, enc, int(lab)) for g, lab in zip(g_tr, y_shuf)]
    shuffled = train_gnn(d_shuf, hid=sz.hid, epochs=sz.epochs, seed=seed)
    gcn = train_gnn(d_tr, hid=64, epochs=sz.epochs, seed=seed, arch="gcn")
    graph_off = train_gnn(_drop_edges(d_tr), hid=sz.hid, epochs=sz.epochs, seed=seed)

    sc = StandardScaler().fit(np.array([project_features(g) for g in g_tr]))
    lr = LogisticRegression(max_iter=2000).fit(sc.transform([project_features(g) for g in g_tr]), y_tr)
    det: dict[str, dict[str, float]] = {}
    for split, gs, ds, ys in (("seen", g_ts, d_ts, y_ts), ("held-out", g_te, d_te, y_te)):
        det[split] = {
            "GNN (project labels)": _auroc(ys, predict_proba(model, ds)),
            "official GCN layout": _auroc(ys, predict_proba(gcn, ds)),
            TAINT: _auroc(ys, np.array([taint_count(g) for g in gs])),
            "keyword scanner (max rule)": _auroc(ys, np.array([max(keyword_scores(g).values(), default=0.0)
                                                               for g in gs])),
            "logistic regression on project counts": _auroc(
                ys, lr.predict_proba(sc.transform([project_features(g) for g in gs]))[:, 1]),
            "generated-name count (leak probe)": _auroc(ys, np.array([generated_name_count(g) for g in gs], float)),
            "function count (leak probe)": _auroc(ys, np.array([len(g.functions()) for g in gs], float)),
            "GNN on shuffled labels (control)": _auroc(ys, predict_proba(shuffled, ds)),
            "untrained GNN (control)": _auroc(ys, predict_proba(untrained, ds)),
            "GNN with all edges removed (graph-off control)": _auroc(ys, predict_proba(graph_off,
                                                                                         _drop_edges(ds))),
        }
    auroc, auroc_seen = det["held-out"]["GNN (project labels)"], det["seen"]["GNN (project labels)"]
    auroc_shuf = det["held-out"]["GNN on shuffled labels (control)"]
    y_all = np.concatenate([y_ts, y_te])
    auroc_names = _auroc(y_all, np.array([generated_name_count(g) for g in g_ts + g_te], float))
    n_funcs = {lab: [len(_injected(p)) for p in test + test_seen if p.label == lab] for lab in (0, 1)}

    models = {"trained": model, "untrained": untrained, "shuffled": shuffled}
    loc = {split: _localisation(projects, graphs, data, models, sz, seed, rng, explain=(split == "seen"))
           for split, projects, graphs, data in (("seen", test_seen, g_ts, d_ts), ("held-out", test, g_te, d_te))}
    r, h, frec = loc["seen"]["recall"], loc["seen"]["hit"], loc["seen"]["file_recall"]
    rh = loc["held-out"]["recall"]
    max_tokens = max(loc["seen"]["max_tokens"], loc["held-out"]["max_tokens"])
    mal = loc["held-out"]["n"]

    # planted motifs: which attribution localises the structure the classifier decides on
    m_tr = make_motif_dataset(sz.motif_train, [seed, 3])
    m_ex = [d for d in make_motif_dataset(4 * sz.motif_explain, [seed, 4]) if int(d.y) == 1][: sz.motif_explain]
    m_model = train_gnn(m_tr, hid=32, epochs=60, seed=seed, arch="gcn")
    m_untr = train_gnn(m_tr, hid=32, epochs=0, seed=seed, arch="gcn")
    motif = {a: [] for a in ("gnnexplainer", "grad_x_input", "random", "gnnexplainer_untrained",
                             "grad_x_input_untrained")}
    for d in m_ex:
        t = d.edge_truth.numpy()
        motif["gnnexplainer"].append(motif_edge_auroc(explain_edges(m_model, d.x, d.edge_index, seed=seed).numpy(), t))
        motif["gnnexplainer_untrained"].append(motif_edge_auroc(explain_edges(m_untr, d.x, d.edge_index, seed=seed)
                                                                .numpy(), t))
        motif["grad_x_input"].append(motif_edge_auroc(node_to_edge_scores(node_attribution(m_model, d),
                                                                          d.edge_index), t))
        motif["grad_x_input_untrained"].append(motif_edge_auroc(node_to_edge_scores(node_attribution(m_untr, d),
                                                                                    d.edge_index), t))
        motif["random"].append(motif_edge_auroc(rng.random(len(t)), t))
    mo = {a: np.array(v) for a, v in motif.items()}
    m_acc = float(np.mean((predict_proba(m_model, m_ex) > 0.5)))

    # builder speed: CPU time against bare ast.parse of the same files, interleaved, same-work control
    srcs = _stdlib_sources(sz.timing_files)
    gc.collect()
    gc.disable()            # a collection would be charged to whichever arm triggers it
    try:
        tc = compare_times(lambda: build_code_graph(srcs), lambda: _parse_all(srcs), repeats=sz.timing_repeats,
                           warmup=1, clock="cpu")
    finally:
        gc.enable()

    metrics = {f"auroc {k} [{split}]": v for split, dd in det.items() for k, v in dd.items()}
    metrics.update({
        "injected_functions_benign": float(np.mean(n_funcs[0])),
        "injected_functions_malicious": float(np.mean(n_funcs[1])),
        "max_context_tokens": float(max_tokens), "motif_classifier_accuracy_on_explained": m_acc,
        "builder_over_parse_cpu_ratio": tc.ratio, "timing_same_work_ratio": tc.control_ratio,
        "timing_files": float(len(srcs)), "test_malicious_projects_held_out": float(mal),
        "test_malicious_projects_seen": float(loc["seen"]["n"])})
    for split, lo in loc.items():
        for a, v in lo["hit"].items():
            metrics[f"top5_hit {a} [{split}]"] = float(v.mean())
        for a, v in lo["recall"].items():
            metrics[f"recall@{TOP_K} {a} [{split}]"] = float(v.mean()) if len(v) else float("nan")
    for a, v in frec.items():
        metrics[f"file_recall@2 {a}"] = float(np.mean(v))
    for a, v in mo.items():
        metrics[f"motif_edge_auroc {a}"] = float(v.mean())

    G = r["graph-guided"]
    ctrl_name = max(("untrained GNN (control)", "shuffled-label GNN (control)"), key=lambda a: float(r[a].mean()))
    hit_ctrl = max(("untrained", "shuffled"), key=lambda a: float(h[a].mean()))
    base_loc = ("taint rule + 1-hop packing", "keyword + 1-hop packing", "keyword scanner", "whole project",
                "random guidance")
    det_base = (TAINT, "keyword scanner (max rule)",
                "logistic regression on project counts")
    hit_base = {"taint rule top-5": "taint", "keyword scanner top-5": "keyword", "random top-5": "random"}
    claims = [
        Claim("GNN trained on project labels only detects malicious projects (AUROC > 0.9; new projects, seen "
              "chain templates, benign mirrors with the same tags and calls)", measured=auroc_seen, op=">",
              reference=0.9, bar=True,
              baseline=f"spec target 0.9; the untrained taint rule on the same split: {det['seen'][TAINT]:.3f}",
              control=det["seen"]["GNN on shuffled labels (control)"],
              control_arm="the same GNN trained on shuffled labels", paper="outperforms existing approaches",
              metric="project AUROC, seen templates", falsifier="AUROC at or below 0.9 (or the control above it)",
              note="the bar says the GNN learns the label from project labels; whether it beats the untrained "
                   "taint rule is the strongest-detector claim"),
        Claim("The GNN also detects projects whose chain template it never saw (AUROC > 0.9)", measured=auroc,
              op=">", reference=0.9, bar=True, baseline="spec target 0.9", control=auroc_shuf,
              control_arm="the same GNN trained on shuffled labels", paper="outperforms existing approaches",
              metric=f"project AUROC, held-out templates {HELD_OUT_TEMPLATES}",
              falsifier="AUROC at or below 0.9 (or the control above it)",
              note=f"the untrained taint rule on the same split: {det['held-out'][TAINT]:.3f}"),
        Claim("The GNN detects malicious projects better than the strongest untrained detector (taint rule on the "
              "same graph) and the non-graph detectors", measured=auroc_seen, op=">",
              baselines={k: det["seen"][k] for k in det_base},
              control=det["seen"]["GNN with all edges removed (graph-off control)"],
              control_arm="the same GNN trained and tested with all edges removed (graph off)",
              paper="consistently outperforms existing approaches", metric="project AUROC, seen templates",
              falsifier="GNN AUROC at or below the strongest baseline's (the taint rule included)"),
        Claim("The GNN detects held-out-template projects better than the strongest untrained detector and the "
              "non-graph detectors", measured=auroc, op=">",
              baselines={k: det["held-out"][k] for k in det_base},
              control=det["held-out"]["GNN with all edges removed (graph-off control)"],
              control_arm="the same GNN trained and tested with all edges removed (graph off)",
              paper="consistently outperforms existing approaches", metric="project AUROC, held-out templates",
              falsifier="GNN AUROC at or below the strongest baseline's (the taint rule included)"),
        Claim("Training adds to localisation: guided context from the trained GNN beats the strongest non-GNN "
              "context at the same budget, and the untrained / shuffled-label GNN with the same attribution does not "
              "(seen templates)",
              measured=float(G.mean()), op=">", baselines={a: float(r[a].mean()) for a in base_loc},
              paired={a: list(G - r[a]) for a in base_loc}, control=float(r[ctrl_name].mean()),
              control_arm=f"{ctrl_name.replace(' (control)', '')}, same attribution and packing (the stronger of "
                          "the untrained and shuffled-label GNNs)",
              paper="reduces interference from irrelevant context",
              metric=f"recall@{TOP_K} of the injected chain's functions at T = {BUDGET_T} (same analyser), seen "
                     "templates",
              falsifier="guided recall at or below the strongest baseline's, or paired interval containing 0"),
        Claim("Training adds to localisation on held-out chain templates too", measured=float(rh["graph-guided"].mean()),
              op=">", baselines={a: float(rh[a].mean()) for a in base_loc},
              paired={a: list(rh["graph-guided"] - rh[a]) for a in base_loc},
              control=float(max(rh["untrained GNN (control)"].mean(), rh["shuffled-label GNN (control)"].mean())),
              control_arm="the stronger of the untrained and shuffled-label GNNs, same attribution and packing",
              paper="reduces interference from irrelevant context",
              metric=f"recall@{TOP_K} at T = {BUDGET_T}, held-out templates",
              falsifier="guided recall at or below the strongest baseline's, or paired interval containing 0"),
        Claim("The trained GNN's explanation (top-5 attributed functions) hits the chain more often than the "
              "strongest non-GNN ranking, and an untrained / shuffled-label GNN's does not",
              measured=float(h["trained"].mean()), op=">",
              baselines={b: float(h[a].mean()) for b, a in hit_base.items()},
              paired={b: list(h["trained"] - h[a]) for b, a in hit_base.items()},
              control=float(h[hit_ctrl].mean()),
              control_arm=f"{hit_ctrl} GNN, same attribution (the stronger of untrained and shuffled-label)",
              paper="interpreting predictions identifies key code sections", metric="top-5 hit rate of the chain",
              falsifier="explanation hit rate at or below the strongest baseline's, or paired interval containing 0"),
        Claim("GNNExplainer (the paper's explainer) localises a planted house motif better than the other "
              "attributions", measured=float(mo["gnnexplainer"].mean()), op=">",
              baselines={"gradient x input": float(mo["grad_x_input"].mean()), "random": float(mo["random"].mean())},
              paired={"gradient x input": list(mo["gnnexplainer"] - mo["grad_x_input"]),
                      "random": list(mo["gnnexplainer"] - mo["random"])},
              control=float(mo["gnnexplainer_untrained"].mean()), control_arm="GNNExplainer on the untrained GCN",
              paper="GNNExplainer picks the key subgraph (official code)",
              metric="motif-edge AUROC on BA tree + house graphs (official GCN layout)",
              falsifier="GNNExplainer's motif-edge AUROC at or below the strongest other attribution's"),
        tc.claim(f"The code-graph builder costs at most {TIMING_BAR:g}x bare ast.parse on the same files (the spec's "
                 "'1,000 files in under a minute' at this machine's parse floor)", "<=", TIMING_BAR, as_="ratio",
                 bar=True, control_arm="none: a cost ratio has no arm without the contribution; the same-work "
                                       "control (ast.parse timed against itself) guards the timing",
                 baseline=f"ast.parse of the same {len(srcs)} standard-library files, interleaved",
                 falsifier=f"builder CPU time above {TIMING_BAR:g}x bare parsing (paired over repeats)"),
        Claim("The analyser never receives more than T tokens", kind="check", measured=float(max_tokens),
              op="<=", reference=float(BUDGET_T), metric="largest packed context (tokens)"),
        Claim("No leakage: a GNN trained on shuffled project labels is at chance", kind="check",
              measured=det["seen"]["GNN on shuffled labels (control)"], op="in", reference=null_band(y_ts),
              metric="AUROC on seen-template test projects, shuffled training labels",
              note="band: 0.5 +- 3 null standard deviations of the AUROC at this test size"),
        Claim("No name leak: counting generator-style function names does not detect malicious projects",
              kind="check", measured=auroc_names, op="in", reference=null_band(y_all),
              metric="AUROC of the count of _verb_noun_NN functions, both test splits",
              note="benign projects get the same template's mirror, so the counts have one distribution; band: "
                   "0.5 +- 3 null standard deviations"),
    ]
    tables = {
        f"localisation [{split}]": [{"context": a, f"recall@{TOP_K}": round(float(v.mean()), 4) if len(v) else None,
                                     "projects": int(len(v))} for a, v in lo["recall"].items()]
        for split, lo in loc.items()}
    tables["detection"] = [{"detector": k, "auroc seen": round(det["seen"][k], 4),
                            "auroc held-out": round(det["held-out"][k], 4)} for k in det["seen"]]
    tables["motif localisation"] = [{"attribution": a, "motif_edge_auroc": round(float(v.mean()), 4)}
                                    for a, v in mo.items()]
    return Outcome(metrics=metrics, claims=claims, tables=tables,
                   notes=f"timing: {tc.to_dict()}; test templates {HELD_OUT_TEMPLATES}")


ARMS = ("graph-guided", "graph-guided (GNNExplainer)", "untrained GNN (control)", "shuffled-label GNN (control)",
        "taint rule + 1-hop packing", "keyword + 1-hop packing", "keyword scanner", "whole project", "random guidance", "unbounded whole project")


def _localisation(projects, graphs, data, models, sz, seed, rng, explain: bool) -> dict:
    """recall@5 of every context arm and top-5 hit of every ranking on the malicious projects of one test split."""
    analyzer = ChainAnalyzer()
    mal = [i for i, p in enumerate(projects) if p.label == 1]
    rec = {a: [] for a in ARMS}
    frec = {a: [] for a in ("graph-guided", "keyword scanner", "whole project", "random guidance")}
    hit = {a: [] for a in ("trained", "untrained", "shuffled", "taint", "keyword", "random")}
    max_tokens = 0
    for j, i in enumerate(mal):
        g, truth, d = graphs[i], projects[i].truth_functions, data[i]
        scores = {k: node_attribution(m, d) for k, m in models.items()}
        orders = {"graph-guided": order_guided(g, scores["trained"], TOP_K),
                  "untrained GNN (control)": order_guided(g, scores["untrained"], TOP_K),
                  "shuffled-label GNN (control)": order_guided(g, scores["shuffled"], TOP_K),
                  "taint rule + 1-hop packing": order_guided(g, taint_function_scores(g), TOP_K),
                  "keyword + 1-hop packing": order_guided(g, keyword_node_scores(g), TOP_K),
                  "keyword scanner": order_keyword(g), "whole project": order_whole(g),
                  "random guidance": order_random(g, rng)}
        if explain and j < sz.explain_projects:
            ge = node_attribution(models["trained"], d, "gnnexplainer", epochs=sz.explain_epochs, seed=seed)
            orders["graph-guided (GNNExplainer)"] = order_guided(g, ge, TOP_K)
        for a, order in orders.items():
            res = localise(g, order, analyzer, BUDGET_T)
            max_tokens = max(max_tokens, res.tokens)
            rec[a].append(recall_at_k(res.ranked, truth, TOP_K))
            if a in frec:
                frec[a].append(file_recall_at_k(res.ranked, projects[i].truth_files, 2))
        rec["unbounded whole project"].append(recall_at_k(localise(g, orders["whole project"], analyzer, 10 ** 9)
                                                          .ranked, truth, TOP_K))
        funcs = {n.name: n.id for n in g.functions()}
        for a in ("trained", "untrained", "shuffled"):
            hit[a].append(recall_at_k(sorted(funcs, key=lambda n: -float(scores[a][funcs[n]])), truth, TOP_K))
        tsc = taint_function_scores(g)
        hit["taint"].append(recall_at_k(sorted(funcs, key=lambda n: -float(tsc[funcs[n]])), truth, TOP_K))
        hit["keyword"].append(recall_at_k(orders["keyword scanner"], truth, TOP_K))
        hit["random"].append(recall_at_k(orders["random guidance"], truth, TOP_K))
    return {"recall": {a: np.array(v) for a, v in rec.items()}, "hit": {a: np.array(v) for a, v in hit.items()},
            "file_recall": {a: np.array(v) for a, v in frec.items()}, "max_tokens": max_tokens, "n": len(mal)}


def _injected(p) -> list[str]:
    """Functions injected by the generator (decoys, mirror / chain) of a project."""
    return p.decoy_functions + p.truth_functions
