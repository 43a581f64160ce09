"""Tool-use environment with textual tool descriptions and per-episode inventories [B18] (our construction).

State: an integer value mod 31. A task = a start value and 2-4 instructed operations, each a (family,
parameter) pair written as words, e.g. ``start v12 ; add k7 ; lookup k3 ; reverse none``. Tools:

- arithmetic: ``add k``, ``sub k``, ``mul k``   (v + k, v - k, v * k mod 31)
- lookup:     ``lookup k``                       (v -> table_k[v], a fixed random permutation of 0..30)
- string:     ``append k``, ``reverse``, ``digitsum`` on the decimal string of v (then mod 31)

Every (family, parameter) combination has a ``stable`` tool and a near-duplicate ``legacy`` tool that returns a
uniformly random value with probability 0.5. A tool's description is a bag of words: ``tool``, the family word,
two random synonyms of it, the parameter word and the reliability word. 60% of the combinations are *seen*
(training tasks and inventories use only them); the rest are *unseen*, known only through their descriptions.
Each episode gets its own inventory of M tools (needed tools, their legacy twins, hard distractors sharing the
family or the parameter, random fill). Reward at the end: 1 if the final value equals the target, minus 0.02 per
tool call.

Context layout (fixed length, so a batch steps in lockstep and one forward pass gives every decision's anchor):
``[bos, v_start, fam_1, par_1, ..., fam_4, par_4, sep]`` then per step ``[<tool>, fam, par, rel, v_result]``; the
anchor of step t is the ``<tool>`` token at position PREFIX + 5 t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from icml26.harness import validate as v

__all__ = ["ToolCatalog", "build_catalog", "Tasks", "sample_tasks", "EnvState", "ToolEnv", "MOD", "MAX_OPS",
           "PREFIX", "BLOCK"]

MOD = 31
MAX_OPS = 4
PREFIX = 2 + 2 * MAX_OPS + 1          # bos, start value, (family, parameter) x MAX_OPS, sep
BLOCK = 5                             # <tool>, family, parameter, reliability, result value
LEGACY_FAIL = 0.5
CALL_COST = 0.02

FAMILIES = {  # family word -> synonyms (textual descriptions use the word and two synonyms)
    "add": ("plus", "increase", "sum"), "sub": ("minus", "decrease", "subtract"),
    "mul": ("times", "multiply", "scale"), "lookup": ("table", "map", "fetch"),
    "append": ("concat", "attach", "suffix"), "reverse": ("flip", "mirror", "backwards"),
    "digitsum": ("digits", "total", "collapse"),
}
PARAMS = {"add": range(1, 10), "sub": range(1, 10), "mul": range(2, 10), "lookup": range(1, 10),
          "append": range(1, 10), "reverse": (None,), "digitsum": (None,)}
SPECIALS = ("<pad>", "<bos>", "<sep>", "<tool>", "tool", "stable", "legacy", "none")


def _vocab() -> dict[str, int]:
    words = list(SPECIALS) + [f"v{i}" for i in range(MOD)] + [f"k{i}" for i in range(1, 10)]
    for fam, syn in FAMILIES.items():
        words += [fam, *syn]
    return {w: i for i, w in enumerate(words)}


VOCAB = _vocab()


def _apply(fam: str, k: int | None, tables: np.ndarray) -> np.ndarray:
    v = np.arange(MOD)
    if fam == "add":
        return (v + k) % MOD
    if fam == "sub":
        return (v - k) % MOD
    if fam == "mul":
        return (v * k) % MOD
    if fam == "lookup":
        return tables[k - 1]
    if fam == "append":
        return np.array([int(f"{x}{k}") % MOD for x in v])
    if fam == "reverse":
        return np.array([int(str(x)[::-1]) % MOD for x in v])
    return np.array([sum(map(int, str(x))) % MOD for x in v])     # digitsum


@dataclass(frozen=True)
class ToolCatalog:
    """All tools. Arrays are indexed by tool id; combos by combination id.

    Attributes:
        vocab: word -> token id (shared by instructions, histories and descriptions).
        combo_words: ``[C, 2]`` (family, parameter) token ids of each combination.
        seen: ``[C]`` bool, combinations allowed in training.
        tool_combo: ``[N]`` combination of each tool; tool ``2c`` is stable, ``2c + 1`` its legacy twin.
        legacy: ``[N]`` bool.
        table: ``[N, 31]`` the tool's (stable) function as a lookup table.
        desc: ``[N, 6]`` description token ids (``tool``, family, 2 synonyms, parameter, reliability).
    """

    vocab: dict
    combo_words: np.ndarray
    combo_names: tuple
    seen: np.ndarray
    tool_combo: np.ndarray
    legacy: np.ndarray
    table: np.ndarray
    desc: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.vocab, dict) or not self.vocab:
            raise TypeError(f"ToolCatalog.vocab must be a non-empty dict word -> token id, got {v.describe(self.vocab)}")
        n = len(np.asarray(self.tool_combo))
        v.positive_int("number of tools (len(tool_combo))", n)
        for name, lead in (("legacy", n), ("table", n), ("desc", n), ("seen", len(np.asarray(self.combo_words)))):
            a = np.asarray(getattr(self, name))
            if a.ndim < 1 or a.shape[0] != lead:
                raise ValueError(f"ToolCatalog.{name} must have {lead} rows, got shape {a.shape}")

    @property
    def n_tools(self) -> int:
        return int(self.tool_combo.shape[0])

    @property
    def seen_tools(self) -> np.ndarray:
        return self.seen[self.tool_combo]

    def describe(self, tool: int) -> str:
        """The description of ``tool`` as text."""
        inv = {i: w for w, i in self.vocab.items()}
        return " ".join(inv[int(t)] for t in self.desc[tool])


def build_catalog(seed: int = 0, seen_fraction: float = 0.6) -> ToolCatalog:
    """The tool catalogue: 46 (family, parameter) combinations x {stable, legacy} = 92 tools [B18].

    The seen/unseen split keeps every family and every parameter word in some seen combination, so unseen tools
    are new *combinations* of known words (what an embedding-anchored selector can generalise to).
    """
    if not 0.0 < seen_fraction < 1.0:
        raise ValueError(f"seen_fraction must lie in (0, 1), got {seen_fraction!r}")
    rng = np.random.default_rng(seed)
    tables = np.stack([rng.permutation(MOD) for _ in range(9)])
    combos = [(f, k) for f, ks in PARAMS.items() for k in ks]
    n_seen = int(round(seen_fraction * len(combos)))
    for _ in range(1000):
        seen = np.zeros(len(combos), dtype=bool)
        seen[rng.permutation(len(combos))[:n_seen]] = True
        fams = {combos[i][0] for i in np.flatnonzero(seen)}
        pars = {combos[i][1] for i in np.flatnonzero(seen)}
        if len(fams) == len(FAMILIES) and len(pars) == 10:
            break
    else:  # pragma: no cover - only for tiny seen fractions
        raise ValueError(f"seen_fraction {seen_fraction} too small to cover every family and parameter")
    words = np.array([[VOCAB[f], VOCAB["none" if k is None else f"k{k}"]] for f, k in combos])
    tool_combo = np.repeat(np.arange(len(combos)), 2)
    legacy = np.tile([False, True], len(combos))
    table = np.stack([_apply(*combos[c], tables) for c in tool_combo])
    desc = np.zeros((len(tool_combo), 6), dtype=np.int64)
    for t, c in enumerate(tool_combo):
        f, k = combos[c]
        syn = rng.choice(FAMILIES[f], size=2, replace=False)
        desc[t] = [VOCAB["tool"], VOCAB[f], VOCAB[syn[0]], VOCAB[syn[1]], words[c, 1],
                   VOCAB["legacy" if legacy[t] else "stable"]]
    names = tuple(f"{f} {'' if k is None else k}".strip() for f, k in combos)
    return ToolCatalog(VOCAB, words, names, seen, tool_combo, legacy, table, desc)


@dataclass
class Tasks:
    """A batch of tasks: start ``[B]``, ops ``[B, 4]`` (combination ids, -1 = none), n_ops ``[B]``, target
    ``[B]``, inventory ``[B, M]`` (tool ids, -1 = empty slot)."""

    start: Tensor
    ops: Tensor
    n_ops: Tensor
    target: Tensor
    inventory: Tensor

    def __post_init__(self) -> None:
        for name in ("start", "ops", "n_ops", "target", "inventory"):
            if not isinstance(getattr(self, name), Tensor):
                raise TypeError(f"Tasks.{name} must be a torch.Tensor, got {v.describe(getattr(self, name))}")
        b = self.start.shape[0] if self.start.ndim == 1 else -1
        for name, nd in (("start", 1), ("ops", 2), ("n_ops", 1), ("target", 1), ("inventory", 2)):
            t = getattr(self, name)
            if t.ndim != nd or t.shape[0] != b:
                raise ValueError(f"Tasks.{name} must be {nd}-d with the batch size B = {b} first, got shape "
                                 f"{tuple(t.shape)}")
        if self.ops.shape[1] != MAX_OPS:
            raise ValueError(f"Tasks.ops must be [B, {MAX_OPS}], got {tuple(self.ops.shape)}")

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def repeat(self, g: int) -> "Tasks":
        """Each task ``g`` times, group-contiguous (task i's copies adjacent)."""
        return Tasks(*(x.repeat_interleave(g, 0) for x in (self.start, self.ops, self.n_ops, self.target,
                                                               self.inventory)))

    def select(self, idx: Tensor) -> "Tasks":
        return Tasks(*(x[idx] for x in (self.start, self.ops, self.n_ops, self.target, self.inventory)))


def sample_tasks(cat: ToolCatalog, n: int, *, split: str = "seen", inventory_size: int = 20,
                 ops_range: tuple[int, int] = (2, 4), rng: np.random.Generator | int = 0) -> Tasks:
    """``n`` tasks whose operations are seen (``split="seen"``) or unseen (``"unseen"``) combinations.

    Seen tasks draw distractors from seen tools only (training never shows an unseen tool); unseen tasks draw
    them from the whole catalogue (an evolving toolset mixing old and new tools).
    """
    if not isinstance(cat, ToolCatalog):
        raise TypeError(f"cat must be a ToolCatalog (build_catalog()), got {v.describe(cat)}")
    n = v.positive_int("n", n)
    if split not in ("seen", "unseen"):
        raise ValueError(f"split must be 'seen' or 'unseen', got {split!r}")
    if isinstance(inventory_size, bool) or not isinstance(inventory_size, int) or inventory_size < 1:
        raise ValueError(f"inventory_size must be a positive int (an inventory of size 0 offers no tool to "
                         f"call), got {inventory_size!r}")
    lo, hi = ops_range
    if not 1 <= lo <= hi <= MAX_OPS:
        raise ValueError(f"ops_range must satisfy 1 <= lo <= hi <= {MAX_OPS}, got {ops_range!r}")
    if inventory_size < 2 * hi:
        raise ValueError(f"inventory_size {inventory_size} must hold the needed tools and their legacy twins "
                         f"(>= {2 * hi})")
    rng = np.random.default_rng(rng)
    pool = np.flatnonzero(cat.seen if split == "seen" else ~cat.seen)
    tool_pool = np.flatnonzero(cat.seen_tools) if split == "seen" else np.arange(cat.n_tools)
    fam_of = cat.combo_words[cat.tool_combo, 0]
    par_of = cat.combo_words[cat.tool_combo, 1]
    start = rng.integers(0, MOD, n)
    n_ops = rng.integers(lo, hi + 1, n)
    ops = np.full((n, MAX_OPS), -1)
    target = start.copy()
    inv = np.full((n, inventory_size), -1)
    # per combination: the pool's tools that share its family or its parameter word (hard distractors)
    same = [[tool_pool[(fam_of[tool_pool] == cat.combo_words[c, 0]) & (cat.tool_combo[tool_pool] != c)],
             tool_pool[(par_of[tool_pool] == cat.combo_words[c, 1]) & (cat.tool_combo[tool_pool] != c)]]
            for c in range(len(cat.seen))]
    for i in range(n):
        cs = rng.choice(pool, n_ops[i])
        ops[i, :n_ops[i]] = cs
        chosen = dict.fromkeys([int(x) for c in cs for x in (2 * c, 2 * c + 1)])
        for c in cs:
            for cand in same[c]:
                if len(cand) and len(chosen) < inventory_size:
                    chosen.setdefault(int(cand[rng.integers(len(cand))]))
        for x in rng.permutation(tool_pool):
            if len(chosen) >= inventory_size:
                break
            chosen.setdefault(int(x))
        if len(chosen) < inventory_size:
            raise ValueError(f"inventory_size {inventory_size} exceeds the {len(tool_pool)} tools available")
        inv[i] = rng.permutation(list(chosen))
        for c in cs:
            target[i] = cat.table[2 * c, target[i]]
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.long)  # noqa: E731
    return Tasks(t(start), t(ops), t(n_ops), t(target), t(inv))


@dataclass
class EnvState:
    """Batched episode state: the tasks, current value ``[B]``, steps taken ``[B]`` and history tokens
    ``[B, 5 * MAX_OPS]`` (zeros where not yet played)."""

    tasks: Tasks
    value: Tensor
    step: Tensor
    hist: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, Tasks):
            raise TypeError(f"EnvState.tasks must be Tasks, got {v.describe(self.tasks)}")
        b = len(self.tasks)
        for name, shp in (("value", (b,)), ("step", (b,)), ("hist", (b, BLOCK * MAX_OPS))):
            v.shape(f"EnvState.{name}", getattr(self, name), shp)

    @property
    def done(self) -> Tensor:
        return self.step >= self.tasks.n_ops

    def select(self, idx: Tensor) -> "EnvState":
        return EnvState(self.tasks.select(idx), self.value[idx], self.step[idx], self.hist[idx])


class ToolEnv:
    """Batched tool-calling environment over a :class:`ToolCatalog` [B18].

    ``reset(tasks)`` -> state; ``step(state, choice, generator)`` -> (state, reward, done) where ``choice [B]`` indexes
    each episode's inventory; ``fork(state, idx)`` copies episodes mid-way (e.g. to try candidate tools). Episodes
    already done are left unchanged and cost nothing. ``env_steps`` counts every tool call executed (the budget that
    the arms share); ``episodes`` counts every episode started by ``reset`` or ``fork`` (sampled trajectories).
    """

    def __init__(self, catalog: ToolCatalog):
        if not isinstance(catalog, ToolCatalog):
            raise TypeError(f"catalog must be a ToolCatalog (build_catalog()), got {v.describe(catalog)}")
        self.cat = catalog
        self.table = torch.as_tensor(catalog.table, dtype=torch.long)
        self.legacy = torch.as_tensor(catalog.legacy)
        self.words = torch.as_tensor(catalog.combo_words, dtype=torch.long)[torch.as_tensor(catalog.tool_combo)]
        self.rel_tok = torch.where(self.legacy, VOCAB["legacy"], VOCAB["stable"])
        self.env_steps = 0
        self.episodes = 0

    def reset(self, tasks: Tasks) -> EnvState:
        if not isinstance(tasks, Tasks):
            raise TypeError(f"reset expects Tasks (see sample_tasks), got {type(tasks).__name__}")
        if tasks.inventory.ndim != 2 or tasks.inventory.shape[1] == 0:
            raise ValueError("the tool inventory has size 0: every episode needs at least one tool to call; "
                             "pass an inventory of shape [B, M] with M >= 1")
        if bool(((tasks.inventory < 0).all(1)).any()):
            raise ValueError("an episode's tool inventory is empty (all slots -1): give it at least one tool")
        if bool((tasks.inventory >= self.cat.n_tools).any()):
            raise ValueError(f"inventory holds tool ids >= the catalogue size {self.cat.n_tools}")
        b = len(tasks)
        self.episodes += b
        return EnvState(tasks, tasks.start.clone(), torch.zeros(b, dtype=torch.long),
                        torch.zeros(b, BLOCK * MAX_OPS, dtype=torch.long))

    def fork(self, state: EnvState, idx: Tensor) -> EnvState:
        """Copies of the episodes ``idx`` in their current state (counted as new episodes)."""
        self.episodes += int(idx.numel())
        return state.select(idx)

    def context(self, state: EnvState, t: int) -> Tensor:
        """Token ids ``[B, PREFIX + 5 t + 1]``: instruction, the first t steps, and the ``<tool>`` anchor."""
        tk = state.tasks
        fam_par = torch.where(tk.ops[:, :, None] >= 0, torch.as_tensor(self.cat.combo_words)[tk.ops.clamp_min(0)],
                              VOCAB["none"]).flatten(1)
        b = len(tk)
        head = torch.cat([torch.full((b, 1), VOCAB["<bos>"]), VOCAB["v0"] + tk.start[:, None], fam_par,
                          torch.full((b, 1), VOCAB["<sep>"])], 1)
        return torch.cat([head, state.hist[:, :BLOCK * t], torch.full((b, 1), VOCAB["<tool>"])], 1)

    def full_context(self, state: EnvState) -> Tensor:
        """``[B, PREFIX + 5 * MAX_OPS]``: the whole trajectory; anchors at PREFIX + 5 t."""
        return self.context(state, MAX_OPS)[:, :-1]

    def step(self, state: EnvState, choice: Tensor, generator: torch.Generator | None = None
             ) -> tuple[EnvState, Tensor, Tensor]:
        inv = state.tasks.inventory
        if choice.shape != (inv.shape[0],):
            raise ValueError(f"choice must be [B] = [{inv.shape[0]}] inventory slots, got {tuple(choice.shape)}")
        tool = inv.gather(1, choice[:, None]).squeeze(1)
        active = ~state.done
        if bool((active & (tool < 0)).any()):
            raise ValueError("choice selects an empty inventory slot")
        tool = tool.clamp_min(0)
        out = self.table[tool, state.value]
        fail = self.legacy[tool] & (torch.rand(out.shape, generator=generator) < LEGACY_FAIL)
        out = torch.where(fail, torch.randint(0, MOD, out.shape, generator=generator), out)
        value = torch.where(active, out, state.value)
        block = torch.stack([torch.full_like(tool, VOCAB["<tool>"]), self.words[tool, 0], self.words[tool, 1],
                             self.rel_tok[tool], VOCAB["v0"] + value], 1)
        hist = state.hist.clone()
        rows = torch.nonzero(active).squeeze(1)
        if rows.numel():
            cols = BLOCK * state.step[rows, None] + torch.arange(BLOCK)
            hist[rows[:, None], cols] = block[rows]
        self.env_steps += int(active.sum())
        new = EnvState(state.tasks, value, state.step + active.long(), hist)
        done = new.done
        reward = torch.where(done, (value == state.tasks.target).float() - CALL_COST * state.tasks.n_ops.float(),
                             torch.zeros(value.shape))
        return new, reward, done
