"""The reasoner of [B06]: a Hugging Face causal LM that reads the decision space and writes a rationale + answer.

Prompt (decision space D(P), our serialisation; one token per field):

    <bos> <c0> <t_t> <i_a> <j_b> <s_decile> <stk_n> <sz_bin> <c1> ... <sep>

with template t, centre atoms (a, b) of P (a < b; two token families, first and second atom), the specialist's score decile, how many of the candidate's reactants are
in stock, and the size bin of its smallest reactant. Completion (the rationale, then the answer):

    <t_t> <i_a> <j_b> <a_k> <eos>        "reaction class t, centre bond (a, b), so candidate k"

The *no-decision-space* policy (the "LLM-only" arm) reads the product SMILES, each atom followed by its index token
(``<bos> C <i0> C <i1> ( = O <i2> ) ... <sep>``), and must state ``<t_t> <i_a> <j_b> <eos>`` itself; its answer
is what RDKit produces when it executes that template at that centre.

Decoding is constrained to this grammar (``GrammarConstrainedLM``, our choice): the allowed next tokens depend only
on the previous token (``<sep>`` -> a class, class -> first atom, first atom -> second atom, second atom -> an
answer or ``<eos>``, answer -> ``<eos>``), applied as a -1e4 logit bias, so the policy's distribution *is* the
constrained one in sampling, in the GRPO loss and in evaluation. A random-init tiny LM otherwise never samples a
well-formed rationale (a pretrained LLM has format from pretraining), and r_fmt alone gives GRPO no signal.

The tokenizer is a word-level ``PreTrainedTokenizerFast`` (SMILES atoms, bonds, ring closures, and these
rationale tokens); the policy is a tiny ``LlamaForCausalLM`` built from a config (random init, no download), so
any HF causal LM with the same tokenizer can take its place.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

import torch
from torch import nn

from icml26.harness import validate as v
from icml26.testbeds.llama import tiny_llama

from .chemistry import Centre, canonical_smiles
from .specialist import Candidate

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>", "<sep>"]
SMILES_TOKENS = ["C", "c", "N", "n", "O", "o", "S", "s", "P", "p", "F", "Cl", "Br", "I", "B", "b", "[nH]", "[NH]",
                 "[N+]", "[O-]", "[n+]", "[Si]", "[Se]", "[se]", "[S+]", "[P+]", "[C-]", "[N-]", "=", "#", "-", "(",
                 ")", "/", "\\", ".", ":", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                 # the other bracket atoms of RDKit's NCI catalogue (radicals, explicit H, metals), so that every
                 # product built from it tokenises (before: 20 of the 1,200 standard products held an <unk>)
                 "[NH2]", "[O]", "[As]", "[Cl]", "[c]", "[Hg]", "[C]", "[CH2]", "[S]", "[OH]", "[Co]", "[Cu]", "[PH]",
                 "[Cr]", "[Ni]", "[I]", "[Sn]", "[Fe]", "[CH]", "[Ti]", "[Pt]", "[F]", "[Zn]", "[Bi]", "[Sb]"]
_SMILES_RE = re.compile(r"(\[[^\]]+\]|Br|Cl|%\d\d|[BCNOPSFIbcnops]|[=#\-\(\)/\\\.:~@+]|\d)")
_SMILES_SET = frozenset(SMILES_TOKENS)
_ATOM_RE = re.compile(r"^(\[[^\]]+\]|Br|Cl|[BCNOPSFIbcnops])$")
SIZE_BINS = (3, 6, 10, 15)            # heavy atoms of the smallest reactant: <=3, <=6, <=10, <=15, more


@dataclass(frozen=True)
class Vocab:
    """Sizes that fix the rationale vocabulary."""

    k: int = 5
    n_templates: int = 6
    max_atoms: int = 40

    def __post_init__(self) -> None:
        for name in ("k", "n_templates", "max_atoms"):
            v.positive_int(f"Vocab.{name}", getattr(self, name))


def build_tokenizer(vocab: Vocab = Vocab()):
    """Word-level tokenizer over SMILES tokens + rationale tokens, as a ``PreTrainedTokenizerFast``."""
    _vocab(vocab)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = (SPECIALS + SMILES_TOKENS + [f"<c{i}>" for i in range(vocab.k)] + [f"<a{i}>" for i in range(vocab.k)]
             + [f"<t{i}>" for i in range(vocab.n_templates)] + [f"<s{i}>" for i in range(10)]
             + [f"<stk{i}>" for i in range(3)] + [f"<sz{i}>" for i in range(len(SIZE_BINS) + 1)]
             + [f"<i{i}>" for i in range(vocab.max_atoms)] + [f"<j{i}>" for i in range(vocab.max_atoms)])
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>",
                                   eos_token="<eos>", padding_side="left")


def make_policy(tokenizer, *, hidden: int = 64, layers: int = 2, heads: int = 4, seed: int = 0):
    """A tiny random-init Llama policy for ``tokenizer`` (our choice of sizes)."""
    _tokenizer(tokenizer)
    hidden, layers, heads = v.positive_int("hidden", hidden), v.positive_int("layers", layers), v.positive_int("heads", heads)
    if hidden % heads or (hidden // heads) % 2:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads}) with an even head size")
    v.non_negative_int("seed", seed)
    return tiny_llama(len(tokenizer), hidden_size=hidden, num_layers=layers, num_heads=heads, max_positions=256,
                      pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, seed=seed)


# argument checks

def _vocab(vocab) -> "Vocab":
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a Vocab(k, n_templates, max_atoms), got {v.describe(vocab)}")
    return vocab


def _tokenizer(tokenizer) -> None:
    if not (hasattr(tokenizer, "get_vocab") and hasattr(tokenizer, "convert_tokens_to_ids")):
        raise TypeError(f"tokenizer must be the tokenizer from build_tokenizer(...), got {v.describe(tokenizer)}")
    if "<sep>" not in tokenizer.get_vocab():
        raise ValueError("tokenizer has no <sep> token: use the tokenizer from build_tokenizer(...)")


def _check_candidate(name: str, c, vocab: "Vocab") -> None:
    if not isinstance(c, Candidate):
        raise TypeError(f"{name} must be a Candidate (from SpecialistModel.decision_space), got {v.describe(c)}")
    if not 0 <= c.template_id < vocab.n_templates:
        raise ValueError(f"{name}.template_id must be in [0, {vocab.n_templates}) (Vocab.n_templates), got "
                         f"{c.template_id}")
    if max(c.centre) >= vocab.max_atoms:
        raise ValueError(f"{name}.centre {c.centre} names an atom index >= Vocab.max_atoms = {vocab.max_atoms}: the "
                         "prompt has no token for it (pass Vocab(max_atoms=...) large enough for the product)")


# prompts

def _size_bin(n: int) -> int:
    return sum(n > b for b in SIZE_BINS)


def ds_prompt(cands: list[Candidate], stock: Container[str], vocab: Vocab = Vocab()) -> str:
    """The decision-space prompt (see module docstring). ``ValueError`` when a candidate's centre or template has
    no token in ``vocab`` (an atom index >= ``vocab.max_atoms``; before, it was silently clamped to the last one)."""
    from rdkit import Chem

    _vocab(vocab)
    if not isinstance(cands, (list, tuple)):
        raise TypeError(f"cands must be a list of Candidate, got {v.describe(cands)}")
    if len(cands) > vocab.k:
        raise ValueError(f"{len(cands)} candidates exceed the vocabulary's k={vocab.k}")
    if not isinstance(stock, Container) or isinstance(stock, str):
        raise TypeError(f"stock must support `molecule in stock` (a Stock, set or list of SMILES), got "
                        f"{v.describe(stock)}")
    for i, c in enumerate(cands):
        _check_candidate(f"cands[{i}]", c, vocab)
    parts = ["<bos>"]
    for i, c in enumerate(cands):
        n_stock = min(2, sum(r in stock for r in c.reactants))
        small = min(Chem.MolFromSmiles(r).GetNumHeavyAtoms() for r in c.reactants)
        a, b = c.centre
        parts += [f"<c{i}>", f"<t{c.template_id}>", f"<i{a}>", f"<j{b}>", f"<s{min(9, int(c.score * 10))}>",
                  f"<stk{n_stock}>", f"<sz{_size_bin(small)}>"]
    return " ".join(parts + ["<sep>"])


def product_prompt(product: str, vocab: Vocab = Vocab()) -> str:
    """The no-decision-space prompt: SMILES tokens, each atom followed by its RDKit index token. ``ValueError`` for a
    SMILES token the tokenizer lacks (stereo ``[C@H]``, charges other than the listed ones, ``%10`` ring closures;
    before, it became ``<unk>``) or a product with more than ``vocab.max_atoms`` atoms (before, the excess atoms all
    got the last index token)."""
    from rdkit import Chem

    _vocab(vocab)
    canonical_smiles(product, what="product")            # a parseable SMILES, or ValueError naming it
    n = Chem.MolFromSmiles(product).GetNumAtoms()
    if n > vocab.max_atoms:
        raise ValueError(f"product has {n} atoms, more than Vocab.max_atoms = {vocab.max_atoms} index tokens "
                         "(pass Vocab(max_atoms=...) and build the tokenizer from it)")
    toks = _SMILES_RE.findall(product)
    if "".join(toks) != product:
        raise ValueError(f"product {product!r} holds characters the SMILES tokenizer does not split")
    bad = sorted({t for t in toks if t not in _SMILES_SET})
    if bad:
        raise ValueError(f"product {product!r} holds SMILES tokens the tokenizer lacks: {bad} (remove "
                         "stereochemistry with Chem.RemoveStereochemistry, or extend SMILES_TOKENS)")
    out, atom = ["<bos>"], 0
    for t in toks:
        out.append(t)
        if _ATOM_RE.match(t):
            out.append(f"<i{atom}>")
            atom += 1
    return " ".join(out + ["<sep>"])


def grounded_completion(c: Candidate, k_index: int | None, vocab: Vocab = Vocab()) -> str:
    """The rationale that states candidate ``c`` (its template and centre) and, with a decision space, picks it.
    ``ValueError`` when a field has no token in ``vocab`` (before, an atom index >= ``max_atoms`` gave ``<unk>``)."""
    _vocab(vocab)
    _check_candidate("c", c, vocab)
    if k_index is not None:
        k_index = v.non_negative_int("k_index", k_index)
        if k_index >= vocab.k:
            raise ValueError(f"k_index must be in [0, {vocab.k}) (Vocab.k) or None, got {k_index}")
    ans = [] if k_index is None else [f"<a{k_index}>"]
    return " ".join([f"<t{c.template_id}>", f"<i{c.centre[0]}>", f"<j{c.centre[1]}>"] + ans + ["<eos>"])


@dataclass(frozen=True)
class Parsed:
    """A parsed completion; ``answer`` is the candidate index (decision-space arm) or None."""

    template_id: int
    centre: Centre
    answer: int | None


_PAT = re.compile(r"^<t(\d+)> <i(\d+)> <j(\d+)>(?: <a(\d+)>)? <eos>$")


def parse_completion(text: str, *, with_answer: bool) -> Parsed | None:
    """``Parsed`` for a well-formed completion (r_fmt = 1), else None."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a completion string, got {v.describe(text)}")
    if not isinstance(with_answer, bool):
        raise TypeError(f"with_answer must be True or False, got {v.describe(with_answer)}")
    m = _PAT.match(text.strip())
    if m is None or (m.group(4) is not None) != with_answer:
        return None
    i, j = int(m.group(2)), int(m.group(3))
    return Parsed(int(m.group(1)), (min(i, j), max(i, j)), None if m.group(4) is None else int(m.group(4)))


# grammar-constrained decoding

def grammar_bias(tokenizer, *, decision_space: bool, penalty: float = -1e4) -> torch.Tensor:
    """[V, V] additive logit bias: row = previous token, 0 on the allowed next tokens, ``penalty`` elsewhere
    (rows of tokens outside the rationale grammar are all 0: unconstrained)."""
    _tokenizer(tokenizer)
    if not isinstance(decision_space, bool):
        raise TypeError(f"decision_space must be True or False, got {v.describe(decision_space)}")
    if v.finite_number("penalty", penalty) >= 0:
        raise ValueError(f"penalty must be a negative number (a logit bias that masks a token), got {penalty}")
    vocab = tokenizer.get_vocab()
    V = len(tokenizer)
    fam = {p: [i for w, i in vocab.items() if re.fullmatch(rf"<{p}\d+>", w)] for p in ("t", "i", "j", "a")}
    eos, sep = tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<sep>")
    rules = {sep: fam["t"], **{t: fam["i"] for t in fam["t"]}, **{t: fam["j"] for t in fam["i"]},
             **{t: (fam["a"] if decision_space else [eos]) for t in fam["j"]}, **{t: [eos] for t in fam["a"]}}
    bias = torch.zeros(V, V)
    for prev, allowed in rules.items():
        bias[prev] = penalty
        bias[prev, allowed] = 0.0
    return bias


class GrammarConstrainedLM(nn.Module):
    """Wraps a HF causal LM: ``logits[b, t] += bias[input_ids[b, t]] + cite[b]`` [B06, our choice].

    ``bias`` is the grammar (:func:`grammar_bias`). ``cite`` ("cite only what you read") restricts, per row, the
    class tokens to the classes named in the row, the atom tokens (either family) to the atom indices named in
    the row, and the answers to ``<a0>..<a{n-1}>`` for n candidates -- each only when the row names any (the
    no-decision-space prompt names atoms but no classes or candidates). A call with more than one new token
    (prefill, or a whole sequence) computes ``cite`` from ``input_ids`` and keeps it for the cached one-token steps
    that follow; a completion only cites tokens its prompt named, so the full sequence gives the same ``cite``.
    """

    def __init__(self, model: nn.Module, bias: torch.Tensor, tokenizer=None, *, penalty: float = -1e4):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module (a Hugging Face causal LM), got {v.describe(model)}")
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"bias must be a [V, V] tensor from grammar_bias(...), got {v.describe(bias)}")
        if bias.dim() != 2 or bias.shape[0] != bias.shape[1]:
            raise ValueError(f"bias must be [V, V], got {tuple(bias.shape)}")
        v.finite("bias", bias)
        if v.finite_number("penalty", penalty) >= 0:
            raise ValueError(f"penalty must be a negative number, got {penalty}")
        if tokenizer is not None:
            _tokenizer(tokenizer)
            if len(tokenizer) != bias.shape[0]:
                raise ValueError(f"bias is [{bias.shape[0]}, {bias.shape[0]}] but the tokenizer has {len(tokenizer)} "
                                 "tokens: build both from the same tokenizer")
        self.model, self.penalty = model, penalty
        self.register_buffer("bias", bias, persistent=False)
        self._cite = None
        self._fam = None
        if tokenizer is not None:
            vocab = tokenizer.get_vocab()
            V = bias.shape[0]
            fam = {}
            for p in ("t", "i", "j", "a", "c"):
                ids = torch.full((V,), -1, dtype=torch.long)
                for w, i in vocab.items():
                    m = re.fullmatch(rf"<{p}(\d+)>", w)
                    if m:
                        ids[i] = int(m.group(1))
                fam[p] = ids
            self._fam = fam

    def _cite_bias(self, input_ids: torch.Tensor) -> torch.Tensor:
        fam, B, V = self._fam, input_ids.shape[0], self.bias.shape[0]
        allowed = torch.ones(B, V, dtype=torch.bool, device=input_ids.device)

        def named(f: str | tuple[str, ...]) -> torch.Tensor:        # [B, max index + 1]: index named in row
            fs = (f,) if isinstance(f, str) else f
            n = int(max(fam[x].max() for x in fs)) + 1
            hit = torch.zeros(B, n + 1, dtype=torch.bool, device=input_ids.device)
            for x in fs:
                idx = fam[x].to(input_ids.device)[input_ids]          # [B, T], -1 when not in the family
                hit.scatter_(1, torch.where(idx >= 0, idx, n), True)
            return hit[:, :n]

        for fams, targets in ((("t",), ("t",)), (("i", "j"), ("i", "j"))):
            hit = named(fams)
            any_named = hit.any(1, keepdim=True)
            for tf in targets:
                cols = (fam[tf] >= 0).nonzero().squeeze(1)
                ok = hit[:, fam[tf][cols]] | ~any_named
                allowed[:, cols] = ok
        n_c = named("c").sum(1, keepdim=True)                           # number of candidates in the row
        cols = (fam["a"] >= 0).nonzero().squeeze(1)
        allowed[:, cols] = (fam["a"][cols][None, :] < n_c) | (n_c == 0)
        return torch.where(allowed, 0.0, self.penalty)

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None,
                **kwargs):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, use_cache=use_cache, **kwargs)
        logits = out.logits + self.bias[input_ids]
        if self._fam is not None:
            if input_ids.shape[1] > 1 or self._cite is None or self._cite.shape[0] != input_ids.shape[0]:
                self._cite = self._cite_bias(input_ids)
            logits = logits + self._cite[:, None, :]
        out.logits = logits
        return out
