"""GMLLM: code graph + GNN under sparse supervision + interpretation to guide an analyser [A04].

Gao et al., "Efficient Code Analysis via Graph-Guided Large Language Models" (arXiv 2601.12890). Projects are
parsed (never executed) into typed code graphs; a relational GCN trained on project labels flags malicious
projects; gradient x input attribution picks the key functions, whose source is packed into a token budget for a
pluggable analyser (an LLM client via ``CallableAnalyzer``, or the CPU stand-in ``ChainAnalyzer``).
"""

from .analysis import (
    AnalysisResult,
    Analyzer,
    CallableAnalyzer,
    ChainAnalyzer,
    Section,
    count_tokens,
    file_recall_at_k,
    keyword_scores,
    localise,
    order_guided,
    order_keyword,
    order_random,
    order_whole,
    pack,
    recall_at_k,
    sections_of,
)
from .codegraph import BEHAVIOURS, EDGE_TYPES, NODE_TYPES, CodeGraph, CodeNode, build_code_graph, read_project
from .model import CodeGNN, HashingEncoder, NodeEncoder, node_attribution, predict_proba, to_pyg, train_gnn
from .synth import Project, make_dataset, make_project

__all__ = [
    "build_code_graph", "read_project", "CodeGraph", "CodeNode", "NODE_TYPES", "EDGE_TYPES", "BEHAVIOURS",
    "NodeEncoder", "HashingEncoder", "to_pyg", "CodeGNN", "train_gnn", "predict_proba", "node_attribution",
    "Section", "sections_of", "pack", "count_tokens", "keyword_scores", "order_guided", "order_whole",
    "order_keyword", "order_random", "Analyzer", "AnalysisResult", "ChainAnalyzer", "CallableAnalyzer",
    "localise", "recall_at_k", "file_recall_at_k", "Project", "make_project", "make_dataset",
]
