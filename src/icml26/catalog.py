"""The catalogue of the 38 ICML 2026 papers (ids A01-A19, B01-B19; see ``abstracts.md``).

Whether a paper is implemented is *computed*: it is implemented when its folder
``icml26/<area>/<slug>/`` has a ``reproduce.py``. Unimplemented papers are listed as planned. The check reads
the file system only (no paper package, no torch is imported), so ``icml26 list`` starts fast.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable


@dataclass(frozen=True)
class Paper:
    id: str
    area: str
    slug: str
    method: str
    reference: str
    claim: str  # the abstract's headline claim, one sentence

    @property
    def module(self) -> str:
        return f"icml26.{self.area}.{self.slug}"

    @property
    def code_path(self) -> str:
        return f"src/icml26/{self.area}/{self.slug}/"

    @property
    def test_path(self) -> str:
        return f"tests/{self.area}/test_{self.slug}.py"

    @property
    def folder(self) -> Traversable:
        """The paper's package folder inside the installed ``icml26`` (it may not exist: planned papers)."""
        return resources.files("icml26").joinpath(self.area, self.slug)

    @property
    def implemented(self) -> bool:
        return self.folder.joinpath("reproduce.py").is_file()

    @property
    def status(self) -> str:
        return "implemented" if self.implemented else "planned"

    @property
    def abstract(self) -> str:
        return _abstracts().get(self.id, "")

    @property
    def readme(self) -> str:
        """The paper folder's README (empty when planned)."""
        p = self.folder.joinpath("README.md")
        return p.read_text() if self.implemented and p.is_file() else ""

    def testbeds(self, budget: str = "standard") -> tuple[str, ...]:
        """Names of the trained testbeds its reproduction loads at ``budget`` (see ``testbeds.registry``)."""
        from .testbeds.registry import BUDGETS, NEEDS

        if budget not in BUDGETS:
            raise ValueError(f"unknown budget {budget!r}; choose one of: {', '.join(BUDGETS)}")
        return NEEDS.get(self.id, {}).get(budget, ())


_P = Paper
PAPERS: tuple[Paper, ...] = (
    _P("A01", "generation", "token_search", "Coarse-to-fine ordered tokens + verifier-guided test-time search", "arXiv 2604.15453",
       "AR models on coarse-to-fine ordered 1D tokens scale better with verifier-guided test-time search than on 2D grid tokens."),
    _P("A02", "theory", "nngp_dmft", "DMFT of NNGP regression learning dynamics", "arXiv 2602.23039",
       "A dynamical mean-field theory reduces NNGP learning dynamics to independent eigenmodes and predicts the generalization-error dynamics, scaling laws and early stopping."),
    _P("A03", "sampling", "srk_lmc", "SRK-LMC: Hessian-free stochastic Runge-Kutta Langevin Monte Carlo", "arXiv 2605.07939",
       "A strong-order-1.5 stochastic Runge-Kutta LMC with only 2 gradient evaluations per step, cheaper than Li et al.'s 3, with O(d^1.5 h^1.5) W2 error beyond log-concavity."),
    _P("A04", "graphs", "gmllm", "GMLLM: code graph + GNN to guide an LLM to cross-file malicious code", "arXiv 2601.12890; github Epiphaniespt/GMLLM",
       "A code graph and GNN that point an LLM at the relevant cross-file context detect malicious code better than existing approaches."),
    _P("A05", "data", "synthetic_loops", "Information-open vs information-closed synthetic-data loops", "arXiv 2605.16379",
       "Learning converges to the most information-efficient signal component, which accelerates learning when intended and causes reward hacking when a spurious pattern is simpler."),
    _P("A06", "theory", "dropout_meanfield", "Mean-field dropout at the edge of chaos; front-loaded dropout schedules", "arXiv 2605.21648",
       "Mean-field theory of dropout yields saturated dropout profiles under a fixed budget and selects front-loaded schedules, with accuracy gains as a secondary effect."),
    _P("A07", "lm", "ahn", "Artificial Hippocampus Networks: sliding-window KV + RNN memory", "arXiv 2510.07318; github ByteDance-Seed/AHN",
       "Sliding-window attention plus an RNN memory of evicted tokens beats sliding-window baselines and matches full attention at a fraction of FLOPs and cache."),
    _P("A08", "decisions", "drao", "Distributionally robust assortment optimization (TV / KL / chi-square)", "ICML 2026 poster (no arXiv found)",
       "Strong duality gives polynomial-time robust assortment algorithms under TV, KL and chi-square ambiguity with sample-complexity bounds."),
    _P("A09", "lm", "moe_sparsity", "MoE complete expert partition + threshold token-expert dropping", "related arXiv 2508.18376",
       "Dual-threshold token-expert dropping with expert partitioning speeds MoE layers up to 1.41x with <0.5% accuracy loss."),
    _P("A10", "learning", "hald", "HALD: hard labels against local semantic drift", "arXiv 2512.15647; github Jiacheng8/HALD",
       "Mixing hard labels into soft-label training corrects local semantic drift from few crops, beating soft-only labels at 100x less soft-label storage."),
    _P("A11", "data", "grad_mimic", "Grad-Mimic: mimic-score data re-weighting and filtering", "arXiv 2501.06708",
       "Re-weighting samples by the alignment of their gradients with a reference model's direction improves data efficiency, convergence and filtering."),
    _P("A12", "learning", "hosfl", "HO-SFL: hybrid-order split federated learning", "arXiv 2603.14773",
       "Zeroth-order clients with a first-order server converge about as fast as first-order split FL with far less communication and client memory."),
    _P("A13", "theory", "spectral_position", "Spectral position / spectral reach of the empirical NTK", "arXiv 2605.31244",
       "Larger models keep learning on weak spectral directions of the empirical NTK (spectral reach), enabled by feature learning."),
    _P("A14", "interpret", "layer_skip", "Redundancy conditions for layer skipping in VLMs (\"Skip-It?\")", "arXiv 2509.25584",
       "Measurable redundancy conditions predict which VLM layers can be skipped for vision tokens and align with actual performance degradation."),
    _P("A15", "dlm", "swordsman", "Swordsman: entropy-driven adaptive block decoding for diffusion LMs", "arXiv 2602.04399",
       "Entropy-shift adaptive blocks aligned with constituent boundaries and dynamic in-block thresholds improve diffusion-LM decoding quality and speed."),
    _P("A16", "scaling", "successive_halving", "Successive halving + surrogates for scaling-law compute allocation", "arXiv 2605.17234",
       "Successive halving with learning-curve surrogates allocates compute for scaling-law fits at up to 98.7% less cost than exhaustive training."),
    _P("A17", "learning", "unifast_hgr", "UniFast-HGR / OptFast-HGR maximal-correlation surrogate", "ICLR 2026 submission (no arXiv found)",
       "A whitening-free HGR surrogate in local-batch Gram space costs O(m^2 K), stays stable at extreme feature dimensions and matches or beats covariance-based HGR/CCA."),
    _P("A18", "scaling", "camel", "CAMEL capacity-aware mixture law + loss-to-benchmark law", "arXiv 2603.08022",
       "A capacity-aware data-mixture law fitted on small models predicts the optimal mixture for large MoEs at half the optimization cost."),
    _P("A19", "lm", "early_exit", "Geometric early exit (step size + direction stability)", "ICML 2026 poster (no arXiv found)",
       "Exiting when hidden-state updates become small and aligned saves 30-35% FLOPs with >98% of full-depth accuracy at O(d) overhead per layer."),
    _P("B01", "dlm", "ete", "Explore-Then-Exploit decoding for diffusion LMs; bits-to-rounds", "arXiv 2511.21103",
       "Rounds of diffusion-LM decoding are bounded below by total information / per-round budget, and Explore-Then-Exploit needs fewer rounds than confidence-only decoding at equal quality."),
    _P("B02", "interpret", "geometric_memory", "Geometric vs associative memory of atomic facts", "arXiv 2510.26745; github Shahriarnz14/Geometric_Memory",
       "Transformers memorise atomic facts geometrically (embeddings encode global structure) rather than as a lookup table, via a natural spectral bias."),
    _P("B03", "interpret", "modality_following", "Modality following: relative preference uncertainty, balance point", "arXiv 2511.02243",
       "Modality following is governed by relative preference uncertainty; training on boundary cases is what makes preference steering generalise."),
    _P("B04", "lm", "eagle3", "SpecForge: EAGLE-3 draft training + speculative decoding", "EAGLE-3 arXiv 2503.01840; github sgl-project/SpecForge",
       "EAGLE-3 draft heads trained with training-time test give long acceptance lengths and multi-x end-to-end speculative-decoding speed-ups."),
    _P("B05", "embodied", "skillnet", "SkillNet: hierarchical skill-routed mixture of experts", "github VIPL-VSU/SkillNet",
       "Skill-routed mixtures of experts with skill embeddings improve zero/few-shot transfer by 16.0% / 23.9%."),
    _P("B06", "agents", "retro_expert", "Retro-Expert: interpretable retrosynthesis by collaborative reasoning + RL", "arXiv 2508.10967",
       "Collaborative LLM + specialist reasoning refined by knowledge-grounded RL beats LLM-based and specialised retrosynthesis models with interpretable paths."),
    _P("B07", "agents", "herl", "HeRL: hindsight-experience guided RL with rubric rewards", "arXiv 2603.20046; github sikelifei/HeRL",
       "Guiding RL with hindsight experience of unmet rubric items yields better gradient estimates and higher performance than baselines."),
    _P("B08", "graphs", "h2cl", "H2CL: heterogeneity-aware hypergraph contrastive learning", "github sxu-yaokx/HHCL",
       "Heterogeneity-weighted hypergraph contrastive learning is competitive or better than baselines and robust to structural noise."),
    _P("B09", "theory", "gp_bandit", "SE-kernel GP bandits on the hypersphere: regret lower bound, information gain", "arXiv 2602.17940",
       "SE-kernel GP bandits on the hypersphere need Omega(eps^-2 (ln 1/eps)^d (ln ln 1/eps)^-d) steps, and information gain is O((ln T)^(d+1) (ln ln T)^-d)."),
    _P("B10", "decisions", "quantumboost", "QuantumBoost: lazy approximate Bregman-projection boosting", "arXiv 2510.05089",
       "Boosting with approximate Bregman projections performed lazily (rarely) keeps smooth-boosting guarantees with fewer projections."),
    _P("B11", "lm", "byte_lm", "Exact byte-level LM from a BPE LM (prompt boundary problem)", "arXiv 2506.14123",
       "Any BPE LM converts exactly into a byte-level LM at inference time, solving the prompt boundary problem and enabling ensembles across tokenizers."),
    _P("B12", "decisions", "ocmb", "OCMB: ordering-constrained Markov-blanket causal discovery", "github williamyuan86/ocmb",
       "Ordering-constrained Markov-blanket search keeps conditioning sets bounded with hubs and improves precision over PC/GES in high dimensions."),
    _P("B13", "sampling", "extended_score", "Extended score for diffusion models trained on noisy data", "arXiv 2509.24710",
       "An extended score computed from the standard score removes small off-manifold noise variations while keeping large variations."),
    _P("B14", "theory", "oak", "Optimizer-Aware Kernel: NTK with an adaptive-optimizer preconditioner", "(paper not found)",
       "An NTK with the adaptive optimizer's preconditioner (OAK) describes fine-tuning, with kernel-regime collapse explained by cumulative training and task discrepancy."),
    _P("B15", "embodied", "mvista4d", "MVISTA-4D: multi-view RGBD world model + test-time action inference", "arXiv 2602.09878",
       "A multi-view RGBD world model with test-time action inference and residual inverse dynamics performs strongly on 4D generation and manipulation."),
    _P("B16", "learning", "wne", "Wrapped Normalization Equivariance", "arXiv 2605.08193; github YoussefSaied/normalization_equivariance",
       "A parameter-free normalise-backbone-denormalise wrapper exactly parameterises NE functions and improves denoising robustness to noise-level mismatch without overhead."),
    _P("B17", "learning", "rdmreg", "RDMReg / Rectified LpJEPA", "arXiv 2602.01456; github YilunKuang/rectified-lp-jepa",
       "Matching representations to a rectified generalized Gaussian yields sparse non-negative JEPA features with a favourable sparsity-performance trade-off."),
    _P("B18", "agents", "autotool", "AutoTool: dynamic tool selection, KL-regularized Plackett-Luce ranking", "arXiv 2512.13278",
       "Dynamic tool selection trained with KL-regularised Plackett-Luce ranking outperforms LLM agents and tool-integration methods and generalises to unseen tools."),
    _P("B19", "learning", "flat_minima", "Flat-minima pretraining (SAM, large LR, short annealing) against forgetting", "arXiv 2605.02105",
       "Flat-minima pretraining (SAM, large LR, short annealing) cuts forgetting after post-training and 4-bit quantization by up to 80%."),
)

_BY_ID = {p.id: p for p in PAPERS}


def get_paper(paper_id: str) -> Paper:
    """Look up a paper by id (case-insensitive); unknown ids raise ``ValueError`` naming the closest ids."""
    if not isinstance(paper_id, str):
        raise TypeError(f"paper id must be a str like 'A03', got {type(paper_id).__name__}")
    key = paper_id.strip().upper()
    if key in _BY_ID:
        return _BY_ID[key]
    by_slug = {p.slug: p for p in PAPERS}
    if paper_id.strip().lower() in by_slug:
        return by_slug[paper_id.strip().lower()]
    close = difflib.get_close_matches(key, list(_BY_ID), n=3, cutoff=0.3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; run `icml26 list` to see every id"
    raise ValueError(f"unknown paper id {paper_id!r}{hint}")


def implemented() -> list[Paper]:
    return [p for p in PAPERS if p.implemented]


@lru_cache(maxsize=1)
def _abstracts() -> dict[str, str]:
    text = resources.files("icml26").joinpath("abstracts.md").read_text()
    parts = re.split(r"^## ([AB]\d\d)\s*$", text, flags=re.M)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


__all__ = ["Paper", "PAPERS", "get_paper", "implemented"]
