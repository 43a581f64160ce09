"""Which trained testbeds each paper's reproduction needs, what each costs once, and how to build it.

The single place that maps papers to trained testbed artefacts (``icml26 prepare`` builds them up front;
``icml26 reproduce`` builds them before it starts its jobs, so the jobs find them cached). It is read from the
reproductions' own ``load_causal_lm(...)`` / ``load_masked_diffusion_lm(...)`` calls and their per-budget
sizes; ``tests/harness/test_cli_prepare.py`` checks it against those calls. Papers not listed need no trained
testbed (their data are synthetic, bundled, or the standard library's source read directly).

Importing this module is cheap: torch and the testbed modules load only when a testbed is checked or built.

    >>> [t.name for t in testbeds_for(["B11"], "quick")]
    ['toy-4L', 'toy-4L-v1024', 'b11-regex-lm']
    >>> [t.name for t in testbeds_for(["B11"], "standard")]
    ['small-8L', 'small-8L-v1024', 'b11-regex-lm']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

BUDGETS = ("quick", "standard", "full")


@dataclass(frozen=True)
class Testbed:
    """A trained artefact shared by reproductions, cached on disk after its first build.

    Attributes:
        name: short name used in progress lines and in ``icml26 prepare`` (e.g. ``"toy-4L"``).
        kind: ``"causal_lm"`` (a tiny Llama + its BPE tokenizer, ``testbeds.causal_lm``),
            ``"masked_diffusion_lm"`` (``testbeds.diffusion_lm``), or ``"artefact"``: any other cached artefact,
            built by calling ``loader(config)``, which stores it with ``cache.load_cached(cache_kind, asdict(config),
            ...)`` (e.g. [A09]'s MoE LM, the learning-curve pools of [A16] / [A18]).
        ref: the config: a ``CausalLMConfig`` constant's name in ``testbeds.causal_lm``, the task of a default
            ``DLMTrainConfig`` or a ``"module:NAME"`` DLMTrainConfig constant, or for artefacts ``"module:NAME"`` (a config constant, or a config class whose
            defaults are used).
        description: what it is, in words.
        est_cpu_s: approximate one-time build cost in CPU seconds on one core (training steps measured with
            ``measure_step_cost``, plus the one-off data work; see the comment above ``TESTBEDS``).
        loader: artefacts only, ``"module:function"`` that loads (building once) the artefact from its config.
        cache_kind: artefacts only, the cache kind ``loader`` stores it under.
        seed: for an artefact built per seed, its seed; a run with ``--seeds N`` needs those with ``seed < N``.
    """

    name: str
    kind: str
    ref: str
    description: str
    est_cpu_s: float
    loader: str = ""
    cache_kind: str = ""
    seed: int | None = None  # a per-seed artefact (e.g. [B04]'s drafts): needed only by runs with more seeds

    @property
    def threads(self) -> int:
        """Threads its build trains on (the small tier trains on 2; everything else on 1)."""
        return int(getattr(self.config(), "train_threads", 1))

    @property
    def est_wall_s(self) -> float:
        """Approximate one-time build wall time on an idle machine: ``est_cpu_s`` spread over its threads."""
        return self.est_cpu_s / self.threads

    def config(self) -> Any:
        if self.kind == "causal_lm":
            from . import causal_lm

            return getattr(causal_lm, self.ref)
        if self.kind == "artefact":
            obj = _resolve(self.ref)
            return obj() if isinstance(obj, type) else obj
        if ":" in self.ref:  # a DLMTrainConfig constant, "module:NAME"
            return _resolve(self.ref)
        from .diffusion_lm.model import DLMTrainConfig

        return DLMTrainConfig(task=self.ref)

    def cache_entries(self) -> list[tuple[str, dict[str, Any]]]:
        """``(kind, config dict)`` of the cache entries this testbed's build fills (its tokenizer's too)."""
        cfg = self.config()
        if self.kind == "causal_lm":
            return [("tokenizer", asdict(cfg.tokenizer)), ("causal_lm", cfg.cache_key())]
        if self.kind == "artefact":  # an artefact built on the shared testbed tokenizer fills its cache entry too
            from .causal_lm import TokenizerConfig

            tok = getattr(cfg, "tokenizer", None)
            shared = isinstance(tok, TokenizerConfig)
            key = cfg.cache_key() if hasattr(cfg, "cache_key") else asdict(cfg)  # a config may define its own key
            return ([("tokenizer", asdict(tok))] if shared else []) + [(self.cache_kind, key)]
        return [("masked_diffusion_lm", asdict(cfg))]

    def is_cached(self) -> bool:
        """Whether every artefact of this testbed is in the cache and intact (see ``testbeds.cache``)."""
        from .cache import is_cached

        return all(is_cached(kind, cfg) for kind, cfg in self.cache_entries())

    def build(self) -> None:
        """Build the artefact if it is not cached (a no-op when it is); progress goes to ``logging``."""
        if self.kind == "causal_lm":
            from .causal_lm import load_causal_lm

            load_causal_lm(self.config())
        elif self.kind == "artefact":
            _resolve(self.loader)(self.config())
        else:
            from .diffusion_lm.model import load_masked_diffusion_lm

            load_masked_diffusion_lm(self.config())


def _resolve(path: str) -> Any:
    """``"package.module:NAME"`` -> the object (imported on demand, so the registry itself stays cheap)."""
    import importlib

    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"expected 'module:NAME', got {path!r}")
    return getattr(importlib.import_module(module), name)


# est_cpu_s: training steps from ``measure_step_cost`` (one thread, on a loaded 2-core machine, so on the high
# side: toy-1L 17 s, toy-4L 82 s, toy-8L 137 s) plus the tokenizer (~6 s) and tokenizing 6 MB (~3 s); the
# diffusion LM from its recipe's measured ~0.055 CPU-s per step (1500 steps) plus sampling its pool (~3 s).
TESTBEDS: dict[str, Testbed] = {t.name: t for t in (
    Testbed("toy-4L", "causal_lm", "TOY_4L", "4-layer Llama (d=128, 300 steps) + BPE-512 on stdlib code", 90.0),
    Testbed("toy-8L", "causal_lm", "TOY_8L", "8-layer Llama (d=128, 300 steps) + BPE-512 on stdlib code", 145.0),
    Testbed("toy-1L", "causal_lm", "TOY_1L", "1-layer Llama (d=64, 300 steps) + BPE-512 on stdlib code", 25.0),
    Testbed("toy-4L-v1024", "causal_lm", "TOY_4L_V1024", "4-layer Llama (d=128, 300 steps) + BPE-1024", 95.0),
    # the small tier (issue 12): est_cpu_s from the timed cold builds on 2 threads while nothing else ran
    # (small-8L: 1,145 s wall, 2.0 s per step, evaluations included; small-8L-v1024: ~17 min wall from 1.3 s per
    # step idle, its real build shared the cores; small-1L: 116 s on 1 thread)
    Testbed("small-8L", "causal_lm", "SMALL_8L",
            "8-layer Llama (d=256, 6.9M params, 560 steps) + BPE-2048 on stdlib code, the standard/full tier", 2300.0),
    Testbed("small-8L-v1024", "causal_lm", "SMALL_8L_V1024",
            "8-layer Llama (d=192, 800 steps) + BPE-1024: a second small-tier tokenizer ([B11]'s ensemble)", 2000.0),
    Testbed("small-1L", "causal_lm", "SMALL_1L",
            "1-layer Llama (d=128, 400 steps) + the same BPE-2048: a same-tokenizer assistant for small-8L", 120.0),
    Testbed("dlm-t1c", "masked_diffusion_lm", "t1c", "tiny masked diffusion LM on T1c translation, 1500 steps", 85.0),
    Testbed("dlm-t1c-strong", "masked_diffusion_lm", "icml26.testbeds.diffusion_lm.model:DLM_T1C_STRONG",
            "stronger masked diffusion LM on T1c (d=128, d_ff=256, 1500 steps of batch 128), A15/B01 standard+full", 500.0),
    # artefacts: est_cpu_s from a timed cold build (MoE LMs, CPU seconds) or from per-step timings (curve pools:
    # their cold builds took 155-1,111 s wall on a machine at load 10-17, about 1-1.5 min CPU each by step timings)
    Testbed("moe-4L", "artefact", "icml26.lm.moe_sparsity.testbed:MOE_4L",
            "4-layer Mixtral (8 experts, top-2, d=128, 500 steps) + BPE-512 on stdlib code [A09]", 125.0,
            loader="icml26.lm.moe_sparsity.testbed:load_moe_lm", cache_kind="moe_lm"),
    Testbed("moe-2L", "artefact", "icml26.lm.moe_sparsity.testbed:MOE_2L",
            "2-layer Mixtral (d=64, 60 steps) + BPE-512, the quick-budget MoE [A09]", 15.0,
            loader="icml26.lm.moe_sparsity.testbed:load_moe_lm", cache_kind="moe_lm"),
    Testbed("lm-curves", "artefact", "icml26.testbeds.learning_curves:LMCurvePoolConfig",
            "learning curves of 24 tiny Llamas (4 widths x 2 depths x 3 lrs, 192 steps) on stdlib code [A16]", 90.0,
            loader="icml26.testbeds.learning_curves:lm_curve_pool", cache_kind="lm_curves"),
    Testbed("digits-curves", "artefact", "icml26.testbeds.learning_curves:DigitsCurvePoolConfig",
            "learning curves of 40 MLPs (5 widths x 2 depths x 4 lrs) on digits [A16]", 30.0,
            loader="icml26.testbeds.learning_curves:digits_curve_pool", cache_kind="digits_curves"),
    Testbed("mixture-runs", "artefact", "icml26.testbeds.learning_curves:MixtureRunsConfig",
            "tiny LMs of 4 widths x 9 mixtures of three stdlib domains, loss on email/ [A18]", 90.0,
            loader="icml26.testbeds.learning_curves:mixture_runs", cache_kind="mixture_runs"),
    # est_cpu_s below: from timed training steps on a machine at load 8-13 (rough, on the high side)
    Testbed("ahn-copy-4L", "artefact", "icml26.lm.ahn.testbed:COPY_4L",
            "4-layer Llama (1000 steps) trained with planted 85-token copy spans, AHN's frozen base [A07]", 300.0,
            loader="icml26.lm.ahn.testbed:load_copy_lm", cache_kind="ahn_base"),
    Testbed("ahn-copy-2L", "artefact", "icml26.lm.ahn.testbed:COPY_2L",
            "2-layer Llama (d=64, 1000 steps) with planted 32-token copy spans, the quick-budget AHN base [A07]", 30.0,
            loader="icml26.lm.ahn.testbed:load_copy_lm", cache_kind="ahn_base"),
    Testbed("vlm-6L", "artefact", "icml26.interpret.layer_skip.testbed:VLM_6L",
            "6-block vision-language transformer (d=64, 1200 steps) on digit-patch VQA [A14]", 150.0,
            loader="icml26.interpret.layer_skip.testbed:load_tiny_vlm", cache_kind="tiny_vlm"),
    Testbed("vlm-8L", "artefact", "icml26.interpret.layer_skip.testbed:VLM_8L",
            "8-block vision-language transformer (d=64, 1200 steps) on digit-patch VQA [A14]", 180.0,
            loader="icml26.interpret.layer_skip.testbed:load_tiny_vlm", cache_kind="tiny_vlm"),
    Testbed("vlm-4L-d32", "artefact", "icml26.interpret.layer_skip.testbed:VLM_QUICK",
            "4-block vision-language transformer (d=32, 800 steps), the quick-budget VLM [A14]", 40.0,
            loader="icml26.interpret.layer_skip.testbed:load_tiny_vlm", cache_kind="tiny_vlm"),
    Testbed("b11-regex-lm", "artefact", "icml26.lm.byte_lm.tokenizers_regex:GPT2_REGEX_LM",
            "2-layer Llama (d=128, 250 steps) with a GPT-2-regex BPE-512 tokenizer on stdlib code [B11]", 60.0,
            loader="icml26.lm.byte_lm.tokenizers_regex:regex_causal_lm", cache_kind="b11-regex-lm"),
    # [B04]'s EAGLE-3 drafts on small-8L (regenerated target data + trained drafts), one per seed, built on 2
    # threads like their target; est_cpu_s from the idle builds (about 7.5 min wall per seed)
    *(Testbed(f"b04-drafts-s{s}", "artefact", f"icml26.lm.eagle3.reproduce:STANDARD_DRAFTS_S{s}",
              f"EAGLE-3 + ablation drafts trained on small-8L's own continuations, seed {s} (standard) [B04]", 900.0,
              loader="icml26.lm.eagle3.reproduce:load_drafts", cache_kind="b04_eagle3_draft", seed=s)
      for s in range(3)),
    Testbed("herl-sft", "artefact", "icml26.agents.herl.task:SFTConfig",
            "stage-0 tiny Llama policy for the rubric task (SFT with guided revisions) [B07]", 150.0,
            loader="icml26.agents.herl.task:load_sft_policy", cache_kind="herl_sft"),
)}

# paper id -> budget -> testbed names (read from each reproduce.py's loads and its per-budget sizes)
_BOTH = ("standard", "full")
NEEDS: dict[str, dict[str, tuple[str, ...]]] = {
    "A05": {"standard": ("toy-4L",), "full": ("toy-4L",)},  # quick runs no LM loop
    "A07": {"quick": ("ahn-copy-2L",), "standard": ("ahn-copy-4L",), "full": ("ahn-copy-4L",)},
    "A09": {"quick": ("moe-2L",), "standard": ("moe-4L",), "full": ("moe-4L",)},
    "A14": {"quick": ("vlm-4L-d32",), "standard": ("vlm-6L", "vlm-8L"), "full": ("vlm-6L", "vlm-8L")},
    "A16": {"standard": ("lm-curves", "digits-curves")},  # quick is synthetic only; full's larger pools build in-job
    "A18": {"standard": ("mixture-runs",)},  # quick is synthetic only; full's larger design builds in-job
    "A15": {b: ("dlm-t1c-strong",) for b in _BOTH},  # the "t1c-trained" setting (standard, full)
    "A19": {"quick": ("toy-4L",), "standard": ("small-8L",), "full": ("small-8L",)},
    "B01": {b: ("dlm-t1c-strong",) for b in _BOTH},  # n_trained > 0 at standard and full
    "B04": {"quick": ("toy-4L", "toy-1L"), "standard": ("small-8L", "small-1L", "b04-drafts-s0", "b04-drafts-s1",
                                                         "b04-drafts-s2"),
            "full": ("small-8L", "small-1L", "toy-4L", "toy-8L")},  # full: the speed-up-vs-depth tiers too
    "B07": {b: ("herl-sft",) for b in _BOTH},  # quick trains a 1-layer stage-0 policy in-job
    "B11": {"quick": ("toy-4L", "toy-4L-v1024", "b11-regex-lm"),
            **{b: ("small-8L", "small-8L-v1024", "b11-regex-lm") for b in _BOTH}},  # A = small-8L, B = small-8L-v1024
}


def testbeds_for(paper_ids: Iterable[str], budget: str = "standard",
                 seeds: int | Iterable[int] | None = None) -> list[Testbed]:
    """The testbeds the given papers' reproductions load at ``budget``, each once, in first-use order; with
    ``seeds`` (a count N for seeds ``0 .. N - 1``, or the seeds themselves), per-seed artefacts only for those
    seeds (without it, every registered seed)."""
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; choose one of: {', '.join(BUDGETS)}")
    wanted = None if seeds is None else set(range(seeds)) if isinstance(seeds, int) else {int(x) for x in seeds}
    names: list[str] = []
    for pid in paper_ids:
        for n in NEEDS.get(str(pid).upper(), {}).get(budget, ()):
            if wanted is not None and TESTBEDS[n].seed is not None and TESTBEDS[n].seed not in wanted:
                continue
            if n not in names:
                names.append(n)
    return [TESTBEDS[n] for n in names]


def measure_step_cost(testbed: Testbed, steps: tuple[int, int] = (4, 24)) -> float:
    """CPU seconds of ``testbed``'s full step count, from the CPU-time difference of two short trainings
    (``steps[1] - steps[0]`` steps; model set-up and data cancel out) after a warm-up one (lazy imports and
    first-call costs are paid there). Builds nothing and excludes the one-off
    data work (tokenizer training, tokenizing, sampling the training pool), which ``est_cpu_s`` adds. Run it on an
    idle machine with ``OMP_NUM_THREADS=1``."""
    import resource
    from dataclasses import replace

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    if testbed.kind == "artefact":
        raise ValueError(f"{testbed.name}: step costs are measured for the LM testbeds only; an artefact's "
                         "est_cpu_s comes from a timed cold build")
    cfg = testbed.config()
    if testbed.kind == "causal_lm":
        from .causal_lm import load_tokenizer, train_causal_lm

        tok = load_tokenizer(cfg.tokenizer)

        def train(n: int) -> None:
            train_causal_lm(replace(cfg, steps=n, train_bytes=200_000), tok)
    else:
        from .diffusion_lm.model import train_masked_diffusion_lm

        def train(n: int) -> None:
            train_masked_diffusion_lm(replace(cfg, steps=n, pool_size=256))

    train(1)
    used = []
    for n in steps:
        c0 = cpu()
        train(n)
        used.append(cpu() - c0)
    return (used[1] - used[0]) / (steps[1] - steps[0]) * cfg.steps


__all__ = ["Testbed", "TESTBEDS", "NEEDS", "BUDGETS", "testbeds_for", "measure_step_cost"]
