"""Tests for [A04] GMLLM: code graph on hand-written projects, parse-only safety, generator, encoder, GNN,
context packing, analysers, metrics and the quick reproduction."""

import base64
import functools
import math
import re
import sys

import numpy as np
import pytest

from icml26.graphs.gmllm import (
    CallableAnalyzer,
    ChainAnalyzer,
    HashingEncoder,
    Section,
    build_code_graph,
    count_tokens,
    keyword_scores,
    localise,
    make_dataset,
    make_project,
    node_attribution,
    order_guided,
    order_keyword,
    order_whole,
    pack,
    predict_proba,
    read_project,
    recall_at_k,
    sections_of,
    to_pyg,
    train_gnn,
)
from icml26.graphs.gmllm.codegraph import degree_features
from icml26.graphs.gmllm.synth import CHAINS, HELD_OUT_TEMPLATES, SEEN_TEMPLATES
from icml26.harness import Budget, Outcome

PROJECT = {
    "pkg/__init__.py": "",
    "pkg/a.py": "import base64\n_B = 'aW5lcnQgcGxhY2Vob2xkZXI='\n\ndef load():\n    return base64.b64decode(_B).decode()\n",
    "pkg/b.py": (
        "from .a import load\nfrom pkg import a\n\n"
        "def run():\n    exec(compile(load(), '<m>', 'exec'))\n\n"
        "def other():\n    x = a.load()\n    helper(x)\n\n"
        "def helper(s):\n    return len(s)\n\n"
        "def cb():\n    return sorted([], key=helper)\n\n"
        "class C:\n    def m(self):\n        return self.n()\n\n    def n(self):\n"
        "        return 'https://example.invalid/x'\n"),
}


def _edges(g):
    return {(g.nodes[s].name.split("::")[-1], g.nodes[d].name.split("::")[-1], t) for s, d, t in g.edges}


def test_code_graph_known_nodes_and_edges():
    g = build_code_graph(PROJECT)
    kinds = {n.name: n.kind for n in g.nodes}
    assert kinds["pkg/a.py::load"] == "function" and kinds["pkg/b.py::C"] == "class"
    assert kinds["pkg/b.py::C.m"] == "function" and kinds["pkg/b.py"] == "module"
    e = _edges(g)
    assert ("run", "load", "call") in e                    # relative import resolved across files
    assert ("other", "load", "call") in e                  # module-alias attribute call
    assert ("other", "helper", "call") in e
    assert ("load", "helper", "flow") in e                 # x = a.load(); helper(x)
    assert ("load", "run", "flow") in e                    # load()'s result reaches compile/exec in run
    assert ("cb", "helper", "reference") in e              # passed as a callback
    assert ("C.m", "C.n", "call") in e                     # self.method
    assert ("pkg/b.py", "pkg/a.py", "import") in e
    assert ("pkg/b.py", "run", "contains") in e and ("C", "C.m", "contains") in e
    assert g.node_by_name("pkg/a.py::load").tags == {"decode"}
    assert g.node_by_name("pkg/b.py::run").tags == {"exec"}
    strings = [n for n in g.nodes if n.kind == "string"]
    assert {next(iter(n.tags)) for n in strings} == {"b64_literal", "url"}
    nx_g = g.to_networkx()
    assert nx_g.number_of_nodes() == g.num_nodes and nx_g.number_of_edges() == len(g.edges)
    f = degree_features(g)
    assert f.shape[0] == g.num_nodes and np.isfinite(f).all()


def test_bad_projects_are_reported(caplog):
    with pytest.raises(ValueError, match="empty project"):
        build_code_graph({})
    with pytest.raises(ValueError, match="no file"):
        build_code_graph({"x.py": "def (:"})
    with pytest.raises(TypeError):
        build_code_graph([("x.py", "")])
    g = build_code_graph({**PROJECT, "pkg/broken.py": "def f(:\n  pass\n"})
    assert "pkg/broken.py" in g.skipped and "SyntaxError" in g.skipped["pkg/broken.py"]
    assert "skipped pkg/broken.py" in caplog.text
    assert all(n.file != "pkg/broken.py" for n in g.nodes)


def test_parse_only_never_executes(tmp_path):
    sentinel = tmp_path / "ran.txt"
    src = (f"open({str(sentinel)!r}, 'w').write('x')\nimport sys\nsys.exit(3)\n"
           f"def f():\n    open({str(sentinel)!r}, 'w').write('y')\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "evil_mod_i18.py").write_text(src)
    files = read_project(tmp_path / "proj")
    g = build_code_graph(files)
    enc = HashingEncoder(dim=4).fit([n.text for n in g.nodes] + ["a b", "c d"])
    to_pyg(g, enc, 1)
    localise(g, order_whole(g), ChainAnalyzer(), 256)
    assert not sentinel.exists()
    assert "evil_mod_i18" not in sys.modules


def test_generator_is_inert_and_records_truth():
    rng = np.random.default_rng(0)
    for malicious in (True, False, True, True, True, True):
        p = make_project(rng, malicious)
        g = build_code_graph(p.files)
        assert not g.skipped
        injected = "\n".join(g.source_of(g.node_by_name(n)) for n in p.truth_functions + p.decoy_functions)
        hosts = re.findall(r"https?://([^/'\"]+)", injected)
        assert hosts == [h for h in hosts if h.endswith(".invalid")]          # placeholder hosts only
        for blob in re.findall(r"'([A-Za-z0-9+/=]{16,})'", injected):
            if re.fullmatch(r"[0-9a-f]+", blob):
                assert bytes.fromhex(blob).decode().startswith("# inert")    # hex payloads too
            else:
                assert base64.b64decode(blob).decode().startswith("# inert")  # payloads decode to a comment
        if malicious:
            nodes = [g.node_by_name(n) for n in p.truth_functions]          # every chain node is in the graph
            assert len({n.file for n in nodes}) >= 2                        # split across >= 2 files
            ids = {n.id for n in nodes}
            linked = {(s, d) for s, d, t in g.edges if t in ("call", "flow") and s in ids and d in ids}
            assert linked                                                   # connected across files
        else:
            assert p.truth_functions == [] and p.label == 0
        assert len(p.decoy_functions) >= 5


@pytest.mark.parametrize("template", sorted(CHAINS))
def test_mirror_matches_chain_except_flow(template):
    """A benign project's mirror has the chain's function count, files, behaviour tags and call edges; only the
    flow out of the chain's source differs (this removed the old leak: malicious projects had 2-3 extra generator-named
    functions, and counting them gave AUROC 0.89)."""
    shape = {}
    for mirror in (False, True):
        p = make_project(np.random.default_rng(7), not mirror, templates=[template])
        g = build_code_graph(p.files)
        names = p.truth_functions if not mirror else p.decoy_functions[-len(shape[False]["names"]):]
        pos = {g.node_by_name(n).id: k for k, n in enumerate(names)}      # position in the template
        ids = set(pos)
        shape[mirror] = dict(
            names=names, count=len(p.decoy_functions) + len(p.truth_functions),
            files=[g.node_by_name(n).file for n in names], tags=[g.node_by_name(n).tags for n in names],
            calls={(pos[s], pos[d]) for s, d, t in g.edges if t == "call" and s in ids and d in ids},
            flows={(pos[s], pos[d]) for s, d, t in g.edges if t == "flow" and s in ids and d in ids})
    chain, mirror = shape[False], shape[True]
    assert chain["count"] == mirror["count"] and chain["files"] == mirror["files"] and chain["tags"] == mirror["tags"]
    assert chain["calls"] == mirror["calls"] and chain["calls"]
    assert mirror["flows"] < chain["flows"]                       # the mirror lacks a flow the chain has ...
    assert not any(s == 0 for s, _ in mirror["flows"])            # ... the one out of the source


def test_no_count_or_name_leak():
    from sklearn.metrics import roc_auc_score

    from icml26.graphs.gmllm.reproduce import generated_name_count

    projects = make_dataset(60, 11)
    graphs = [build_code_graph(p.files) for p in projects]
    y = np.array([p.label for p in projects])
    injected = np.array([len(p.decoy_functions) + len(p.truth_functions) for p in projects])
    names = np.array([generated_name_count(g) for g in graphs])
    assert (names == injected).all()                 # the probe counts exactly the injected functions
    assert 0.3 < roc_auc_score(y, names) < 0.7       # the old generator gave 0.89 on this probe


def test_templates_are_held_out_and_validated():
    assert set(SEEN_TEMPLATES).isdisjoint(HELD_OUT_TEMPLATES)
    assert set(SEEN_TEMPLATES) | set(HELD_OUT_TEMPLATES) == set(CHAINS)
    ps = make_dataset(8, 0, templates=HELD_OUT_TEMPLATES)
    assert all(p.kind.removeprefix("benign/") in HELD_OUT_TEMPLATES for p in ps)
    with pytest.raises(ValueError, match="templates"):
        make_dataset(8, 0, templates=["nope"])


def test_nested_function_call_and_no_contains_to_strings():
    src = ("def outer():\n    def inner():\n        return 'https://x.invalid/aaaaaaaa'\n    return inner()\n\n"
           "def inner():\n    return 2\n\nclass K:\n    def a(self):\n        def h():\n            return 0\n"
           "        return h()\n")
    g = build_code_graph({"m.py": src})
    e = _edges(g)
    assert ("outer", "outer.inner", "call") in e and ("outer", "inner", "call") not in e   # Python's scoping
    assert ("K.a", "K.a.h", "call") in e
    strings = {n.id for n in g.nodes if n.kind == "string"}
    assert strings and {t for s, d, t in g.edges if d in strings} == {"uses"}


def test_relational_layer_matches_rgcnconv_and_explainers_run():
    """Our explain-compatible relational layer computes torch_geometric's RGCNConv (mean aggregation); both
    classifiers train, and both attributions give one finite score per node."""
    import torch
    from torch_geometric.nn import RGCNConv

    from icml26.graphs.gmllm.model import CodeGNN, OfficialGCN

    projects = make_dataset(6, 2)
    graphs = [build_code_graph(p.files) for p in projects]
    enc = HashingEncoder(dim=8).fit([t for g in graphs for t in (n.text for n in g.nodes)])
    data = [to_pyg(g, enc, p.label) for g, p in zip(graphs, projects)]
    conv = CodeGNN(data[0].x.shape[1], 8).convs[0]
    ref = RGCNConv(conv.in_dim, conv.out_dim, conv.num_relations, aggr="mean")
    with torch.no_grad():
        ref.weight.copy_(conv.weight)
        ref.root.copy_(conv.root)
        ref.bias.copy_(conv.bias)
    d = data[0]
    assert torch.allclose(ref(d.x, d.edge_index, d.edge_type), conv(d.x, d.edge_index, d.edge_type), atol=1e-5)
    for arch, cls in (("rgcn", CodeGNN), ("gcn", OfficialGCN)):
        m = train_gnn(data, hid=8, epochs=1, seed=0, arch=arch)
        assert isinstance(m, cls)
        for method in ("grad_x_input", "gnnexplainer"):
            a = node_attribution(m, d, method, epochs=5)
            assert a.shape == (graphs[0].num_nodes,) and np.isfinite(a).all()
    with pytest.raises(ValueError, match="attribution"):
        node_attribution(m, d, "saliency")
    with pytest.raises(ValueError, match="arch"):
        train_gnn(data, arch="gat")


def test_motif_graphs_and_auroc():
    from icml26.graphs.gmllm.motifs import make_motif_dataset, motif_edge_auroc, node_to_edge_scores

    ds = make_motif_dataset(6, 0)
    assert sum(int(d.y) for d in ds) == 3
    for d in ds:
        truth = d.edge_truth.numpy()
        assert truth.sum() == 2 * (6 if int(d.y) else 5)          # house 6 edges, cycle 5, both directions
        assert motif_edge_auroc(truth.astype(float), truth) == 1.0
        assert node_to_edge_scores(np.zeros(d.num_nodes), d.edge_index).shape == truth.shape
    with pytest.raises(ValueError):
        motif_edge_auroc(np.zeros(3), np.zeros(3))


def test_dataset_is_seeded_and_balanced():
    a, b = make_dataset(8, 3), make_dataset(8, 3)
    assert [p.files for p in a] == [p.files for p in b]
    assert sum(p.label for p in a) == 4
    with pytest.raises(ValueError):
        make_dataset(2, 0)


def test_hashing_encoder_is_deterministic():
    texts = ["function load config call_base64_b64decode", "module pkg a", "class C", "function run call_exec"]
    z1 = HashingEncoder(dim=3).fit(texts).transform(texts)
    z2 = HashingEncoder(dim=3).fit(list(texts)).transform(texts)
    assert np.array_equal(z1, z2) and z1.shape == (4, 3)
    with pytest.raises(RuntimeError):
        HashingEncoder().transform(texts)


def test_pack_respects_budget_and_order():
    secs = [Section(f"f{i}", "x.py", i, "def f():\n    return " + " + ".join(["1"] * (i + 1))) for i in range(8)]
    out = pack(secs, 40)
    assert sum(count_tokens(s.text) for s in out) <= 40
    assert [s.name for s in out] == sorted((s.name for s in out), key=lambda n: int(n[1:]))
    with pytest.raises(ValueError):
        pack(secs, 0)


def test_orders_and_analysers():
    g = build_code_graph(PROJECT)
    sc = np.zeros(g.num_nodes)
    sc[g.node_by_name("pkg/b.py::run").id] = 5.0
    order = order_guided(g, sc, k=1)
    assert order[0] == "pkg/b.py::run" and order[1] == "pkg/a.py::load"      # top-1 then its neighbour
    assert sorted(order) == sorted(order_whole(g))
    kw = keyword_scores(g)
    assert kw["pkg/b.py::run"] > kw["pkg/b.py::helper"]
    assert order_keyword(g)[0] == "pkg/b.py::run"
    res = localise(g, order, ChainAnalyzer(), 10_000)
    assert set(res.ranked[:2]) == {"pkg/b.py::run", "pkg/a.py::load"}          # decode -> exec chain found
    secs = sections_of(g)
    with pytest.raises(ValueError, match="exceeds"):
        ChainAnalyzer().analyze(list(secs.values()), 5)
    seen = {}

    def fake_llm(prompt):
        seen["prompt"] = prompt
        return "pkg/b.py::run\nnot a function\npkg/a.py::load"

    res = CallableAnalyzer(fake_llm).analyze(pack(list(secs.values()), 500), 500)
    assert res.ranked == ["pkg/b.py::run", "pkg/a.py::load"] and "# pkg/b.py:" in seen["prompt"]
    with pytest.raises(TypeError):
        CallableAnalyzer("not callable")


def test_recall_metrics():
    assert recall_at_k(["a", "b", "c"], ["c", "d"], 3) == 0.5
    assert recall_at_k(["a", "b", "c"], ["c"], 2) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(["a"], [], 1)


def test_gnn_trains_on_graph_labels_and_attribution_is_deterministic():
    projects = make_dataset(8, 1)
    graphs = [build_code_graph(p.files) for p in projects]
    enc = HashingEncoder(dim=8).fit([t for g in graphs for t in (n.text for n in g.nodes)])
    data = [to_pyg(g, enc, p.label) for g, p in zip(graphs, projects)]
    m1 = train_gnn(data, hid=8, epochs=2, seed=0)
    m2 = train_gnn(data, hid=8, epochs=2, seed=0)
    p1, p2 = predict_proba(m1, data), predict_proba(m2, data)
    assert np.allclose(p1, p2) and ((p1 >= 0) & (p1 <= 1)).all()
    a = node_attribution(m1, data[0])
    assert a.shape == (graphs[0].num_nodes,) and np.isfinite(a).all()
    assert np.allclose(a, node_attribution(m2, data[0]))
    with pytest.raises(ValueError):
        train_gnn([])


def test_reproduce_quick_is_well_formed():
    from icml26.graphs.gmllm.reproduce import reproduce

    out = reproduce(Budget.QUICK, 0)
    assert isinstance(out, Outcome)
    claims = [c for c in out.claims if c.kind == "claim"]
    assert len(claims) == 9 and len(out.checks) == 3
    for c in out.claims:
        assert math.isfinite(c.measured), c.statement
        assert c.verdict in ("holds", "does not hold", "inconclusive")
    for c in claims:                          # every claim has a same-run baseline set or a control
        assert c.baselines or c.control is not None or c.control_arm.startswith("none:"), c.statement
    timing = next(c for c in claims if "ast.parse" in c.statement)
    assert timing.timing_control is not None and timing.paired      # a CPU-time ratio, never an absolute time
    assert out.metrics["max_context_tokens"] <= 512
    assert {"localisation [seen]", "localisation [held-out]", "detection", "motif localisation"} <= set(out.tables)
    # the strongest training-free baseline (the taint rule) is in every comparison
    det = [c for c in claims if "strongest untrained detector" in c.statement]
    assert len(det) == 2 and all(any(k.startswith("taint rule") for k in c.baselines) for c in det)
    assert all("graph off" in c.control_arm for c in det)
    loc = [c for c in claims if c.statement.startswith("Training adds to localisation")]
    assert len(loc) == 2 and all({"taint rule + 1-hop packing", "keyword + 1-hop packing"} <= set(c.baselines)
                                 for c in loc)
    hit = next(c for c in claims if "explanation (top-5" in c.statement)
    assert "taint rule top-5" in hit.baselines
    motif = next(c for c in claims if "house motif" in c.statement)
    assert "better than" in motif.statement and motif.op == ">"       # statement and operator agree


def test_byte_order_mark_is_not_a_syntax_error():
    g = build_code_graph({"m.py": "\ufeffdef f():\n    return 1\n"})
    assert not g.skipped and g.functions()[0].name == "m.py::f"


@pytest.mark.parametrize("template", list(SEEN_TEMPLATES) + list(HELD_OUT_TEMPLATES))
def test_taint_rule_is_the_label_and_no_url_scheme_leak(template):
    """A malicious chain has a source -> sink flow path, so the taint rule is a baseline (and ranks the chain's
    functions first); and the raw text carries no URL-scheme signal (malicious chains once used http://, mirrors
    https://)."""
    from icml26.graphs.gmllm.reproduce import taint_count, taint_function_scores

    p = make_project(np.random.default_rng(3), True, templates=[template])
    g = build_code_graph(p.files)
    assert taint_count(g) > 0                                # the chain's source -> sink flow is present
    sc = taint_function_scores(g)
    top = sorted(g.functions(), key=lambda n: -sc[n.id])[:len(p.truth_functions)]
    assert {n.name for n in top} & set(p.truth_functions)
    schemes = {}
    for mirror in (False, True):                             # the chain and its mirror use the same URL schemes
        parts, _, _ = CHAINS[template](np.random.default_rng(5), set(), ["m0", "m1", "m2"], mirror=mirror)
        schemes[mirror] = sorted(re.findall(r"(https?)://", "\n".join(code for _, code in parts)))
    assert schemes[False] == schemes[True]
    assert "https" not in schemes[False]


def _template_graph(template, mirror, seed):
    parts, names, _ = CHAINS[template](np.random.default_rng(seed), set(), ["m0", "m1", "m2"], mirror=mirror)
    files: dict[str, str] = {}
    for slot, code in parts:
        files[f"m{slot}.py"] = files.get(f"m{slot}.py", "") + code + "\n\n"
    return build_code_graph(files), names


@pytest.mark.parametrize("template", sorted(CHAINS))
def test_taint_rule_is_zero_on_every_mirror_and_positive_on_every_chain(template):
    """The taint rule once counted source -> sink flow *edges* with ``b64encode`` (tagged decode) as a source, so
    the env -> network mirror (it encodes a constant and sends it) had one such edge, exactly like the chain, and
    every benign project the rule flagged was that mirror. Encoders are transforms now and the rule follows paths:
    0 on every template's mirror, > 0 on every chain, alone and inside whole projects."""
    from icml26.graphs.gmllm.reproduce import _taint_paths, is_taint_source, taint_count

    for seed in range(3):
        g, _ = _template_graph(template, True, seed)
        assert taint_count(g) == 0, (template, "mirror", seed)
        g, names = _template_graph(template, False, seed)
        assert taint_count(g) > 0, (template, "chain", seed)
        assert {g.nodes[s].name.split("::")[1] for s, _, _ in _taint_paths(g)} <= set(names)
    for seed in range(4):                 # in a whole project: no path touches the mirror; one runs along the chain
        for malicious in (False, True):
            p = make_project(np.random.default_rng(40 + seed), malicious, templates=[template])
            g = build_code_graph(p.files)
            slot = set(p.truth_functions) if malicious else set(p.decoy_functions[-len(names):])
            on = [{g.nodes[v].name for v in nodes} & slot for _, _, nodes in _taint_paths(g)]
            assert any(on) == malicious, (template, malicious, seed)
    if template == "env->network":         # the encoder passes taint on but starts none
        g, names = _template_graph(template, True, 0)
        assert not is_taint_source(g.node_by_name(f"m1.py::{names[1]}"))
        assert "decode" in g.node_by_name(f"m1.py::{names[1]}").tags


def test_edge_mask_is_symmetrised():
    """(M + M^T) / 2 as in the official GNNExplainer; an edge without a reverse keeps its value."""
    import torch

    from icml26.graphs.gmllm.model import symmetrise_edge_mask

    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 3]])
    m = torch.tensor([0.2, 0.6, 0.9, 0.4])
    out = symmetrise_edge_mask(m, ei)
    assert torch.allclose(out, torch.tensor([0.4, 0.4, 0.9, 0.4]))
    with pytest.raises(ValueError):
        symmetrise_edge_mask(m[:3], ei)


@functools.lru_cache(maxsize=1)
def _bad_input_cases():
    import icml26.graphs.gmllm as h
    from icml26.graphs.gmllm.model import node_texts

    g = h.build_code_graph(h.make_dataset(4, 0)[0].files)
    enc = h.HashingEncoder().fit(node_texts(g))
    d = h.to_pyg(g, enc, label=1)
    gnn = h.CodeGNN(in_dim=d.x.shape[1])
    nodes = len(g.nodes)
    return [
        (lambda: h.build_code_graph(["x = 1"]), TypeError, "mapping"),
        (lambda: h.build_code_graph({"a.py": "x = 1"}, n_jobs=0), ValueError, "n_jobs"),               # was silent
        (lambda: h.build_code_graph({}), ValueError, "empty project"),
        (lambda: h.read_project("/nonexistent/dir"), ValueError, "not a directory"),
        (lambda: h.read_project("/tmp", max_files=0), ValueError, "max_files"),                     # read everything
        (lambda: h.HashingEncoder(dim=0), ValueError, "dim must be an integer >= 1"),                # was silent
        (lambda: h.HashingEncoder(n_features=0), ValueError, "n_features"),
        (lambda: h.to_pyg(g, enc, label=5), ValueError, "label must be 0"),                          # was silent
        (lambda: h.to_pyg(g, object()), TypeError, "fitted NodeEncoder"),                            # AttributeError
        (lambda: h.CodeGNN(in_dim=0), ValueError, "in_dim"),                                         # was silent
        (lambda: h.CodeGNN(in_dim=32, layers=0), ValueError, "layers"),                              # was silent
        (lambda: h.train_gnn([]), ValueError, "no training graphs"),
        (lambda: h.train_gnn([d], arch="bogus"), ValueError, "unknown arch"),
        (lambda: h.train_gnn([d], batch_size=0), ValueError, "batch_size"),
        (lambda: h.predict_proba(gnn, []), ValueError, "no graphs to score"),                        # torch.cat error
        (lambda: h.node_attribution(gnn, d, method="bogus"), ValueError, "unknown attribution"),
        (lambda: h.pack(list(h.sections_of(g).values()), -1), ValueError, "budget"),
        (lambda: h.order_guided(g, np.zeros(3)), ValueError, "one number per graph node"),          # IndexError
        (lambda: h.order_guided(g, np.full(nodes, np.nan)), ValueError, "NaN"),                      # was silent
        (lambda: h.order_guided(g, np.zeros(nodes), k=0), ValueError, "k must be"),                  # was silent
        (lambda: h.localise(g, h.order_whole(g), h.ChainAnalyzer(), 0), ValueError, "budget"),
        (lambda: h.recall_at_k(["a"], ["a"], 0), ValueError, "k must be an integer >= 1"),           # returned 0.0
        (lambda: h.recall_at_k(["a"], [], 3), ValueError, "at least one true item"),
        (lambda: h.file_recall_at_k(["a"], ["a"], -1), ValueError, "k must be"),                     # returned 0.0
        (lambda: h.CallableAnalyzer(3), TypeError, "callable"),
        (lambda: h.make_project(np.random.default_rng(0), True, n_files=(5, 2)), ValueError, "n_files"),
        (lambda: h.make_dataset(0, 0), ValueError, "at least 4 projects"),
    ]


@pytest.mark.parametrize("case", range(27))
def test_public_entry_points_refuse_bad_input(case):
    cases = _bad_input_cases()
    assert len(cases) == 27
    call, error, fragment = cases[case]
    with pytest.raises(error, match=re.escape(fragment)):
        call()


def test_graph_off_control_also_removes_what_node_features_know_of_the_edges():
    """The graph-off control emptied edge_index but kept the log in/out degrees in the node features; a chain's
    source differs from its benign mirror by exactly its flow out-edges, so the degree alone told them apart."""
    from icml26.graphs.gmllm.codegraph import degree_columns, structure_dim
    from icml26.graphs.gmllm.reproduce import _drop_edges

    projects = make_dataset(4, 1)
    graphs = [build_code_graph(p.files) for p in projects]
    enc = HashingEncoder(dim=8).fit([t for g in graphs for t in (n.text for n in g.nodes)])
    data = [to_pyg(g, enc, p.label) for g, p in zip(graphs, projects)]
    off = _drop_edges(data)
    cols = degree_columns()
    for d, e in zip(data, off):
        base = d.x.shape[1] - structure_dim()
        assert e.edge_index.shape[1] == 0 and d.edge_index.shape[1] > 0
        assert float(d.x[:, base + cols.start:base + cols.stop].abs().sum()) > 0  # the original kept them
        assert float(e.x[:, base + cols.start:base + cols.stop].abs().sum()) == 0
        keep = [i for i in range(d.x.shape[1]) if not base + cols.start <= i < base + cols.stop]
        assert (e.x[:, keep] == d.x[:, keep]).all()  # everything else (text, type, depth, tags) unchanged


def test_train_gnn_official_recipe_options():
    """[A04] the official distinguish_GNN_2.py recipe (plain cross-entropy, weight decay 1e-3, batch 128) is an
    option; it changes the trained weights, and bad values are refused."""
    import torch

    from icml26.graphs.gmllm.model import train_gnn

    projects = make_dataset(6, 2)
    graphs = [build_code_graph(p.files) for p in projects]
    enc = HashingEncoder(dim=8).fit([t for g in graphs for t in (n.text for n in g.nodes)])
    data = [to_pyg(g, enc, p.label) for g, p in zip(graphs, projects)]
    ours = train_gnn(data, hid=8, epochs=2, seed=0, arch="gcn")
    off = train_gnn(data, hid=8, epochs=2, seed=0, arch="gcn", batch_size=128, weight_decay=1e-3,
                    class_weighted=False)
    again = train_gnn(data, hid=8, epochs=2, seed=0, arch="gcn", batch_size=128, weight_decay=1e-3,
                      class_weighted=False)
    w = lambda m: torch.cat([p.detach().flatten() for p in m.parameters()])  # noqa: E731
    assert not torch.equal(w(ours), w(off)) and torch.equal(w(off), w(again))
    with pytest.raises(ValueError, match="weight_decay"):
        train_gnn(data, epochs=1, weight_decay=-1.0)
    with pytest.raises(TypeError, match="class_weighted"):
        train_gnn(data, epochs=1, class_weighted="no")
