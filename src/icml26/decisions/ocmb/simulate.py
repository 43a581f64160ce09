"""Data for OCMB [B12]: hub-dominated scale-free SEMs, pgmpy's bundled benchmark networks, graph metrics.

- ``scale_free_dag``: Barabasi-Albert graph (each new node attaches to m existing ones, preferring high
  degree), every edge oriented from the older node to the newer one, so early nodes are hubs with many
  children (as in the official data generator); labels are then shuffled so column order says nothing.
- ``simulate_sem``: X_j = sum_i W[i, j] f(X_i) + e_j with W[i, j] = +-U[0.5, 2] on edges, f = identity
  (linear) or tanh (additive-noise model), e ~ N(0, s_j^2) (or Laplace), s_j = 1 when ``equal_var``.
- ``load_bundled_bn``: the bnlearn networks that ship as files inside the pgmpy wheel, read offline.
  ecoli70, arth150, magic-niab, magic-irri are linear-Gaussian (coefficients, intercepts, variances from the
  file); the discrete ones (alarm, pathfinder, ...) give only their DAG, and get random linear-Gaussian
  weights (``weights_from_file=False``).
- ``graph_metrics``: directed precision / recall / F1, skeleton F1 and SHD against the true DAG.
- ``varsortability``: the fraction of edges i -> j with Var(X_j) > Var(X_i) (ties count 1/2), after Reisach,
  Seiler & Weichwald (2021), here over edges rather than all directed paths. Near 1, sorting by marginal
  variance alone recovers the order, which the equal-variance orderer exploits; standardising makes it 1/2.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

from icml26.harness import validate

from ._extras import CAUSAL_EXTRA

GAUSSIAN_NETWORKS = ("ecoli70", "arth150", "magic-niab", "magic-irri")

# helper functions


def _rng(random_state) -> np.random.Generator:
    return random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)


def _check_dag(adj) -> np.ndarray:
    A = np.asarray(adj)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"adjacency must be a square (d, d) matrix, got shape {A.shape}")
    A = (A != 0).astype(int)
    if np.any(np.diag(A)) or not nx.is_directed_acyclic_graph(nx.from_numpy_array(A, create_using=nx.DiGraph)):
        raise ValueError("adjacency must be a DAG (no self-loops, no directed cycles)")
    return A


def topological_order(adj: np.ndarray) -> np.ndarray:
    """A topological order of the DAG ``adj`` (adj[i, j] != 0 means i -> j)."""
    g = nx.from_numpy_array(_check_dag(adj), create_using=nx.DiGraph)
    return np.array(list(nx.lexicographical_topological_sort(g)), dtype=int)


# graphs and SEMs


def scale_free_dag(d: int, m: int = 2, random_state=None) -> np.ndarray:
    """Hub-dominated Barabasi-Albert DAG on ``d`` nodes (old -> new), labels shuffled; returns adj (d, d)."""
    if not isinstance(d, (int, np.integer)) or not isinstance(m, (int, np.integer)) or not 1 <= m < d:
        raise ValueError(f"need integers 1 <= m < d, got d={d!r}, m={m!r}")
    rng = _rng(random_state)
    g = nx.barabasi_albert_graph(int(d), int(m), seed=int(rng.integers(2**31)))
    perm = rng.permutation(d)
    A = np.zeros((d, d), dtype=int)
    for i, j in g.edges():
        a, b = min(i, j), max(i, j)
        A[perm[a], perm[b]] = 1
    return A


def simulate_sem(adj: np.ndarray, n: int, kind: str = "linear-gaussian", equal_var: bool = True,
                 weight_range: tuple[float, float] = (0.5, 2.0), random_state=None) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``n`` rows from a SEM on the DAG ``adj``; returns (X, W) with W[i, j] the weight of i -> j.

    kind: 'linear-gaussian' | 'linear-laplace' (non-Gaussian, for DirectLiNGAM) | 'anm' (tanh mechanisms,
    Gaussian noise). equal_var=True gives unit noise variances (identifiable by the EqVar orderer), else
    noise standard deviations ~ U[0.5, 1.5].
    """
    A = _check_dag(adj)
    if kind not in ("linear-gaussian", "linear-laplace", "anm"):
        raise ValueError(f"unknown kind {kind!r}; use 'linear-gaussian', 'linear-laplace' or 'anm'")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    lo, hi = weight_range
    if not 0 <= lo <= hi:
        raise ValueError(f"weight_range must satisfy 0 <= lo <= hi, got {weight_range}")
    rng = _rng(random_state)
    d = A.shape[0]
    W = A * rng.uniform(lo, hi, (d, d)) * rng.choice([-1.0, 1.0], (d, d))
    sd = np.ones(d) if equal_var else rng.uniform(0.5, 1.5, d)
    if kind == "linear-laplace":
        E = rng.laplace(0.0, 1.0 / np.sqrt(2.0), (n, d)) * sd
    else:
        E = rng.standard_normal((n, d)) * sd
    f = np.tanh if kind == "anm" else (lambda v: v)
    X = np.zeros((n, d))
    for j in topological_order(A):
        X[:, j] = f(X) @ W[:, j] + E[:, j]
    return X, W


# bundled benchmark networks


@dataclass(frozen=True)
class BundledNetwork:
    """A benchmark network read from pgmpy's bundled files: DAG plus linear-Gaussian parameters."""

    name: str
    nodes: tuple[str, ...]
    adjacency: np.ndarray  # adjacency[i, j] = 1 for i -> j
    weights: np.ndarray  # weights[i, j]: coefficient of i in j's equation
    intercepts: np.ndarray
    variances: np.ndarray
    weights_from_file: bool

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """n rows from X_j = b_j + sum_i W[i, j] X_i + N(0, v_j)."""
        n = validate.positive_int("n", n)
        rng = _rng(random_state)
        d = len(self.nodes)
        E = rng.standard_normal((n, d)) * np.sqrt(self.variances)
        X = np.zeros((n, d))
        for j in topological_order(self.adjacency):
            X[:, j] = self.intercepts[j] + X @ self.weights[:, j] + E[:, j]
        return X


def _models_dir():
    """The folder of bnlearn files inside the installed pgmpy wheel, located without importing pgmpy."""
    try:
        spec = importlib.util.find_spec("pgmpy")
    except (ImportError, ValueError):  # ValueError: a module entry without a spec (e.g. blocked in sys.modules)
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"load_bundled_bn (it reads the networks bundled in the pgmpy wheel) needs the causal "
                          f"extra: {CAUSAL_EXTRA}")
    return Path(next(iter(spec.submodule_search_locations))) / "utils" / "example_models"


def load_bundled_bn(name: str, random_state=None) -> BundledNetwork:
    """Read a bnlearn network shipped inside the pgmpy wheel (offline, no download).

    Linear-Gaussian files (ecoli70, arth150, magic-niab, magic-irri) keep their fitted coefficients; for a
    discrete BIF (alarm, pathfinder, hepar2, ...) only the DAG is used, with weights +-U[0.5, 2] and unit
    variances drawn from ``random_state``.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    folder = _models_dir()
    if name in GAUSSIAN_NETWORKS:
        spec = json.loads((folder / f"{name}.json").read_text())
        nodes = tuple(spec["nodes"])
        idx = {v: i for i, v in enumerate(nodes)}
        d = len(nodes)
        W, A = np.zeros((d, d)), np.zeros((d, d), dtype=int)
        b, v = np.zeros(d), np.ones(d)
        for child, cpd in spec["cpds"].items():
            j = idx[child]
            b[j] = cpd["coefficients"].get("(Intercept)", [0.0])[0]
            v[j] = cpd["variance"][0]
            for parent in cpd["parents"]:
                W[idx[parent], j] = cpd["coefficients"][parent][0]
                A[idx[parent], j] = 1
        return BundledNetwork(name, nodes, A, W, b, v, True)
    path = folder / f"{name}.bif.gz"
    if not path.is_file():
        known = sorted(p.name.split(".")[0] for p in folder.iterdir() if p.name.endswith((".json", ".bif.gz")))
        raise ValueError(f"no bundled network {name!r} in pgmpy; available: {known}")
    text = gzip.decompress(path.read_bytes()).decode()
    nodes = tuple(re.findall(r"^variable\s+(\S+)\s*\{", text, flags=re.M))
    idx = {v: i for i, v in enumerate(nodes)}
    d = len(nodes)
    A = np.zeros((d, d), dtype=int)
    for child, parents in re.findall(r"probability\s*\(\s*([^|\s)]+)\s*(?:\|\s*([^)]*))?\)", text):
        for p in (parents or "").replace(",", " ").split():
            A[idx[p], idx[child]] = 1
    rng = _rng(random_state)
    W = A * rng.uniform(0.5, 2.0, (d, d)) * rng.choice([-1.0, 1.0], (d, d))
    return BundledNetwork(name, nodes, A, W, np.zeros(d), np.ones(d), False)


# metrics


def varsortability(X: np.ndarray, adj: np.ndarray) -> float:
    """Fraction of the DAG's edges i -> j whose child has the larger marginal variance (ties, to a relative
    1e-9, count 1/2)."""
    A = _check_dag(adj)
    X = np.asarray(validate.finite("X", X), dtype=float)
    if X.ndim != 2 or X.shape[1] != A.shape[0] or X.shape[0] < 2:
        raise ValueError(f"X must be (n_samples >= 2, {A.shape[0]}) to match adj, got shape {X.shape}")
    src, dst = np.nonzero(A)
    if len(src) == 0:
        raise ValueError("varsortability needs a graph with at least one edge")
    v = X.var(0)
    tie = np.isclose(v[dst], v[src], rtol=1e-9, atol=0.0)  # standardised columns: equal up to rounding
    return float(np.mean(np.where(tie, 0.5, v[dst] > v[src])))


def graph_metrics(true_adj: np.ndarray, est_adj: np.ndarray) -> dict[str, float]:
    """Directed precision/recall/F1, skeleton F1 and SHD of ``est_adj`` against the DAG ``true_adj``.

    est_adj[i, j] = 1 means i -> j; est_adj[i, j] = est_adj[j, i] = 1 is an *undirected* edge (a CPDAG's
    i - j, as from PC or GES). An undirected edge counts as one predicted edge and, when the true graph has
    i -> j or j -> i, as a correctly oriented one (benefit of the doubt, as gCastle's MetricsDAG does).
    SHD = extra + missing + wrongly oriented edges, counted once per unordered pair.
    """
    T = np.asarray(validate.finite("true_adj", true_adj)) != 0
    E = np.asarray(validate.finite("est_adj", est_adj)) != 0
    if T.shape != E.shape or T.ndim != 2 or T.shape[0] != T.shape[1]:
        raise ValueError(f"true_adj and est_adj must be square and of the same shape, got {T.shape}, {E.shape}")
    iu = np.triu_indices(T.shape[0], 1)
    t_fw, t_bw = T[iu], T.T[iu]
    e_fw, e_bw = E[iu], E.T[iu]
    t_edge, e_edge = t_fw | t_bw, e_fw | e_bw
    undirected = e_fw & e_bw
    correct = e_edge & t_edge & (undirected | ((e_fw == t_fw) & (e_bw == t_bw)))
    n_pred, n_true, tp = int(e_edge.sum()), int(t_edge.sum()), int(correct.sum())
    skel_tp = int((e_edge & t_edge).sum())
    prec = tp / n_pred if n_pred else 0.0
    rec = tp / n_true if n_true else 0.0
    sp = skel_tp / n_pred if n_pred else 0.0
    sr = skel_tp / n_true if n_true else 0.0
    return {
        "precision": prec, "recall": rec, "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0,
        "skeleton_f1": 2 * sp * sr / (sp + sr) if sp + sr else 0.0,
        "shd": float(int((e_edge & ~t_edge).sum()) + int((t_edge & ~e_edge).sum())
                     + int((e_edge & t_edge & ~correct).sum())),
        "n_edges": float(n_pred),
    }
