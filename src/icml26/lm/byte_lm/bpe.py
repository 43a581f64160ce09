"""Byte-level BPE as a set of byte strings with ordered merges: canonicity and pair validity [B11].

A token sequence t is *canonical* when encode(decode(t)) = t. For byte-level BPE without a regex pre-tokenizer
canonicity factorises over adjacent pairs (Hayase et al. 2025, [B11]):

    t canonical  <=>  every pair (t_i, t_{i+1}) is valid,   valid(a, b)  <=>  encode(decode(a) || decode(b)) = [a, b].

The validity table is computed from the merge list, not by encoding all V^2 pairs. Encoding decode(a)||decode(b)
runs BPE's merges in rank order (ties left-first). Until a merge crosses the a|b boundary each side evolves as it
would alone, so the rightmost symbol of the left side walks down a's *right spine* a = r_0 > r_1 > ... (r_{i+1} is
the right child of r_i in a's merge tree) and the leftmost symbol of the right side walks down b's *left spine*
l_0 = b > l_1 > ... . Symbol r_i is present during ranks (rank(r_i), rank(r_{i-1})) and l_j during
(rank(l_j), rank(l_{j-1})] (a tie with a merge inside b goes to the crossing pair, which lies further left).
The pair is invalid iff some merge m = (r_i, l_j) has its rank inside both windows.

No V x V table is built (issue 34: at V = 64k a bool table is 4 GB): ``PairValidity`` answers a whole row
valid(a, .) (or the start row) and single pairs on demand from ``pcmask.MergeValidity`` (the same spine windows
with array operations, the rows the regex path uses), caching rows up to about 128 MB.
"""

from __future__ import annotations

import json
import logging
import os
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np

from .pcmask import MergeValidity
from .pretok import GPT2_PATTERN, Pretokenizer

__all__ = ["ByteBPE", "PCState", "PairValidity", "bytes_to_unicode", "is_valid_pair", "is_canonical",
           "validity_table"]

_EOS_NAMES = ("<eos>", "</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "<|eot_id|>")
NO_MERGE = -1          # rank of a single-byte token: present from the start
NEVER = np.iinfo(np.int64).max


# helper functions

@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-character map used by byte-level BPE vocabularies."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _as_bytes(text: bytes | bytearray | str, what: str = "text") -> bytes:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    if isinstance(text, str):
        return text.encode("utf-8")
    raise TypeError(f"{what} must be bytes (or a str, encoded as UTF-8), got {type(text).__name__}")


# main class

@dataclass(eq=False)
class ByteBPE:
    """The byte-level view of a Hugging Face byte-level BPE tokenizer: pure BPE (``ByteLevel(use_regex=False)``,
    pairwise canonicity) or with a GPT-2 / Llama-3 style regex pre-tokenizer (``pretok``; see pretok.py).
    Accepts a ``PreTrainedTokenizerFast``, a ``tokenizers.Tokenizer`` or the path of a ``tokenizer.json``.
    Added and special tokens are not byte tokens (their text is ordinary bytes); EOS is the tokenizer's.
    ``masks``: with a regex pre-tokenizer, ``"arrays"`` (default) decides each tree node's prefix-canonical next
    tokens with array operations (``pcmask.py``; GPT-2 and Llama-3 patterns), ``"reference"`` token by token.

    Attributes:
        token_bytes: bytes of each token id (``None`` for special/added tokens such as ``<eos>``).
        eos_id: the end-of-sequence token id.
        order: byte-token ids sorted lexicographically by their bytes (tokens sharing a prefix are contiguous).
        byte_at: ``byte_at[k, d]`` = byte ``d`` of token ``order[k]``, or -1 past its end (shape [n, max_len + 1],
            int16, a column-major view: ``byte_at[lo:hi, d]`` is contiguous).
        valid: a ``PairValidity`` (on demand, no V x V array): ``valid[a]`` the bool [V] row of a in 0..V-1, the
            start row ``valid[V]`` (tokens allowed first), ``valid[a, b]`` one pair; ``None`` with a regex
            pre-tokenizer.
        pretok: the ``Pretokenizer`` (regex, per-pre-token BPE, prefix-canonicity), or ``None``.
    """

    tokenizer: object
    masks: str = "arrays"
    token_bytes: list = field(init=False)
    eos_id: int = field(init=False)

    def __post_init__(self) -> None:
        if self.masks not in ("arrays", "reference"):
            raise ValueError(f"masks must be 'arrays' or 'reference', got {self.masks!r}")
        if isinstance(self.tokenizer, (str, os.PathLike)) and str(self.tokenizer).endswith(".json") \
                and os.path.isfile(self.tokenizer):
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(str(self.tokenizer))
        backend = getattr(self.tokenizer, "backend_tokenizer", self.tokenizer)
        if not hasattr(backend, "to_str") or not hasattr(backend, "model"):
            raise TypeError("tokenizer must be a Hugging Face fast tokenizer (PreTrainedTokenizerFast), a "
                            "tokenizers.Tokenizer or the path of a tokenizer.json file, got "
                            f"{type(self.tokenizer).__name__} {str(self.tokenizer)[:60]!r}")
        spec = json.loads(backend.to_str())
        pattern = _check_byte_bpe(spec)
        self._bpe_model = backend.model
        vocab: dict[str, int] = spec["model"]["vocab"]
        added = {t["id"]: t["content"] for t in spec.get("added_tokens", [])}
        self.vocab_size = max(list(vocab.values()) + list(added) + [-1]) + 1
        u2b = {c: b for b, c in bytes_to_unicode().items()}
        self.token_bytes = [None] * self.vocab_size
        for s, i in vocab.items():
            if i in added:
                continue
            try:
                self.token_bytes[i] = bytes(u2b[c] for c in s)
            except KeyError:
                raise ValueError(f"token {s!r} (id {i}) is not written in the byte-level alphabet: the tokenizer is "
                                 "not byte-level BPE") from None
        self.token_id = {b: i for i, b in enumerate(self.token_bytes) if b is not None}
        missing = [b for b in range(256) if bytes([b]) not in self.token_id]
        if missing:
            raise ValueError(f"{len(missing)} of the 256 single bytes have no token (e.g. {missing[0]}): the tokenizer "
                             "is not byte-level BPE")
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is None:
            eos = next((i for i, c in added.items() if c in _EOS_NAMES), None)
        if eos is None:
            raise ValueError("the tokenizer has no end-of-sequence token; set tokenizer.eos_token")
        self.eos_id = int(eos)
        # merges: rank -> (left id, right id, new id)
        merges = []
        for rank, m in enumerate(spec["model"]["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            merges.append((vocab[a], vocab[b], vocab[a + b]))
        self.merges = merges
        # sorted vocabulary for prefix ranges
        byte_ids = [i for i, b in enumerate(self.token_bytes) if b is not None]
        byte_ids.sort(key=lambda i: self.token_bytes[i])
        self.order = np.array(byte_ids, dtype=np.int64)
        self.sorted_bytes = [self.token_bytes[i] for i in byte_ids]
        self.max_len = max(len(b) for b in self.sorted_bytes)
        # stored by column (byte position) so that byte_at[lo:hi, d] is contiguous; int16 (-1 = past the end)
        byte_col = np.full((self.max_len + 1, len(byte_ids)), -1, dtype=np.int16)
        for k, b in enumerate(self.sorted_bytes):
            byte_col[: len(b), k] = np.frombuffer(b, dtype=np.uint8)
        self.byte_at = byte_col.T
        self.start_row = self.vocab_size
        self.added = added
        if pattern is None:
            self.pretok = None
            byte_ids = sorted(self.token_id.values())
            mv = MergeValidity(self.token_bytes, self.merges, lambda b: tuple(self.encode(b)), byte_ids,
                               row_cap=max(64, 2**27 // self.vocab_size))
            self.valid = PairValidity(mv, self.start_row)
            self.reachable = mv.reach
        else:  # canonicity factorises over pre-tokens (pretok.py); no pairwise table
            plain = None
            if spec["model"].get("ignore_merges"):
                from tokenizers import models as tk_models
                plain = tk_models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                                                           for m in spec["model"]["merges"]])
            self.pretok = Pretokenizer(pattern, backend.model, bytes_to_unicode(), self.token_bytes, plain)
            if not self.pretok._known:
                logging.getLogger(__name__).warning(
                    "pre-tokenizer regex %r is not the GPT-2 or Llama-3 pattern: exactness relies on every pre-token "
                    "boundary but the last staying a boundary when text is appended (tested for those two only)",
                    pattern[:80])
            self._byte_ids = [i for i, b in enumerate(self.token_bytes) if b is not None]
            self._mask_cache: dict = {}
            # array-based masks for the two tested patterns; masks="reference" decides token by token
            self._arrays = self.pretok._known and self.masks == "arrays"
            self._mask_cap = max(1000, 2**28 // self.vocab_size)   # states cached (masks: about 256 MB at most)
            self._pc = None
            self.valid = None
            self.reachable = np.array([b is not None for b in self.token_bytes])

    # encoding

    def encode(self, text: bytes | str) -> list[int]:
        """Canonical BPE encoding via the tokenizer's own BPE model: of arbitrary bytes without a pre-tokenizer,
        of UTF-8 text pre-token by pre-token with one (added/special tokens are never produced: their text is
        ordinary bytes, as with ``split_special_tokens=True``)."""
        data = _as_bytes(text)
        if not data:
            return []
        if self.pretok is not None:
            try:
                return self.pretok.encode(data)[0]
            except UnicodeDecodeError:
                raise ValueError("with a regex pre-tokenizer only valid UTF-8 text can be encoded") from None
        b2u = bytes_to_unicode()
        return [t.id for t in self._bpe_model.tokenize("".join(b2u[b] for b in data))]

    def decode(self, ids: Sequence[int]) -> bytes:
        try:
            return b"".join(self.token_bytes[i] for i in ids)
        except (TypeError, IndexError):
            raise ValueError("ids must be byte-token ids of this tokenizer (no special tokens)") from None

    def prefix_range(self, q: bytes, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
        """Positions [lo, hi) in ``order`` of the tokens whose bytes start with ``q``."""
        hi = len(self.sorted_bytes) if hi is None else hi
        if not q:
            return lo, hi
        lo = bisect_left(self.sorted_bytes, q, lo, hi)
        j = len(q)
        while j and q[j - 1] == 255:
            j -= 1
        hi = bisect_left(self.sorted_bytes, q[: j - 1] + bytes([q[j - 1] + 1]), lo, hi) if j else hi
        return lo, hi

    # validity

    def pretok_state(self, suffix: tuple) -> "PCState":
        """Shared prefix-canonicity state of token ids ``suffix`` after a stable cut (regex pre-tokenizers only;
        cached): ``state.range(lo, hi)`` decides the tokens ``order[lo:hi]``, ``state.full()`` all V, and
        ``state.can_end`` says ``suffix`` is canonical."""
        st = self._mask_cache.get(suffix)
        if st is None:
            if len(self._mask_cache) >= self._mask_cap:
                self._mask_cache.clear()
            st = self._mask_cache[suffix] = PCState(self, suffix)
        return st

    @property
    def pc_masks(self):
        """The array-based prefix-canonicity masks of this tokenizer (``pcmask.py``; GPT-2 and Llama-3 patterns;
        built on first use, a second or two at V = 64k)."""
        if self._pc is None:
            from .pcmask import PrefixCanonicalMasks
            from .pretok import PROBES

            self._pc = PrefixCanonicalMasks(self.pretok, self.token_bytes, self.token_id, self.merges, self.order,
                                            self.vocab_size, PROBES)
        return self._pc

    def pretok_allowed(self, suffix: tuple, tokens, stop_at_first: bool = False) -> np.ndarray:
        """allowed[tokens] for ``suffix``: suffix + (v,) is prefix-canonical (``stop_at_first`` is accepted for
        compatibility; every answer is exact)."""
        return self.pretok_state(suffix).full()[np.asarray(tokens, dtype=np.int64)]

    def pretok_mask(self, suffix: tuple) -> tuple[np.ndarray, bool]:
        """(allowed [V], can_end) for token ids ``suffix`` after a stable cut, all tokens decided."""
        st = self.pretok_state(suffix)
        return st.full(), st.can_end

    def pretok_mask_reference(self, suffix: tuple) -> np.ndarray:
        """allowed [V] for ``suffix`` decided token by token with ``Pretokenizer.prefix_canonical`` (the reference
        the array-based masks are tested against; not cached)."""
        ids, data = list(suffix), self.decode(suffix)
        out = np.zeros(self.vocab_size, dtype=bool)
        for v in self._byte_ids:
            out[v] = self.pretok.prefix_canonical(ids + [v], data + self.token_bytes[v])
        return out

    def row(self, ids: Sequence[int]) -> int:
        """Row of ``valid`` for the token that follows ``ids`` (the start row for an empty sequence)."""
        return ids[-1] if len(ids) else self.start_row

    def is_canonical(self, ids: Sequence[int]) -> bool:
        """Pairwise test (every token reachable and every adjacent pair valid); with a regex pre-tokenizer,
        encode(decode(ids)) = ids."""
        ids = list(ids)
        if not ids:
            return True
        if any(i < 0 or i >= self.vocab_size or self.token_bytes[i] is None for i in ids):
            return False
        if self.pretok is not None:
            return self.pretok.canonical(ids, self.decode(ids))
        valid = self.valid
        return bool(valid.pair(self.start_row, ids[0]) and all(valid.pair(a, b) for a, b in zip(ids, ids[1:])))


class PairValidity:
    """The pair-validity table of a pure byte-level BPE, answered on demand with no V x V array [B11].

    ``valid[a]`` (or ``row(a)``): bool [V] (read-only), valid(a, b) for every b, for a token id a in 0..V-1 (all
    False for special and unreachable tokens) or the start row a = V (the reachable tokens, allowed first);
    ``valid[a, b]`` (or ``pair(a, b)``): one bool. Rows are computed from the merge list by
    ``pcmask.MergeValidity`` (about 0.2 ms each at V = 32k) and cached; ``dense()`` stacks all V + 1 rows (small V only).
    """

    __slots__ = ("mv", "start_row", "shape")

    def __init__(self, mv: MergeValidity, start_row: int) -> None:
        self.mv, self.start_row = mv, int(start_row)
        self.shape = (mv.V + 1, mv.V)
        mv.reach.flags.writeable = False

    def __len__(self) -> int:
        return self.shape[0]

    def _index(self, a) -> int:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"validity rows are indexed by an int token id (or the start row), got {a!r}")
        a = int(a)
        if not 0 <= a <= self.start_row:
            raise IndexError(f"row {a} is out of range 0..{self.start_row} (the start row is {self.start_row})")
        return a

    def row(self, a: int) -> np.ndarray:
        a = self._index(a)
        return self.mv.reach if a == self.start_row else self.mv.row(a)

    def pair(self, a: int, b: int) -> bool:
        b = self._index(b)
        if b == self.start_row:
            raise IndexError(f"column {b} is out of range 0..{self.start_row - 1}")
        return bool(self.row(a)[b])

    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) != 2:
                raise IndexError(f"index valid[a] or valid[a, b], got {len(key)} indices")
            return self.pair(*key)
        return self.row(key)

    def dense(self) -> np.ndarray:
        """bool [V + 1, V]: every row (O(V^2) memory: for small vocabularies and tests)."""
        return np.stack([self.row(a) for a in range(self.shape[0])])


class PCState:
    """Prefix-canonicity of ``suffix + (v,)`` for the tokens v of a regex pre-tokenizer (token ids ``suffix`` after a
    stable cut). With the GPT-2 or Llama-3 pattern the per-node work runs once (``PrefixCanonicalMasks.prepare``)
    and any range of the byte-sorted vocabulary is then decided with array operations; other patterns use the
    per-token reference (``Pretokenizer.prefix_canonical``), memoised."""

    __slots__ = ("bpe", "suffix", "data", "can_end", "_prep", "_full", "_known")

    def __init__(self, bpe: ByteBPE, suffix: tuple) -> None:
        self.bpe, self.suffix = bpe, tuple(suffix)
        self.data = bpe.decode(self.suffix)
        self.can_end = bpe.pretok.canonical(list(self.suffix), self.data)
        self._prep = self._full = self._known = None

    def _state(self):
        if self._prep is None:
            self._prep = self.bpe.pc_masks.prepare(self.suffix, self.data)
        return self._prep

    def range(self, lo: int, hi: int) -> np.ndarray:
        """bool [hi - lo]: the tokens ``order[lo:hi]``."""
        if self._full is not None:
            return self._full[self.bpe.order[lo:hi]]
        if self.bpe._arrays:
            return self.bpe.pc_masks.evaluate(self._state(), lo, hi)
        return self._reference(self.bpe.order[lo:hi])

    def full(self) -> np.ndarray:
        """bool [V] (read-only): every token; special tokens False."""
        if self._full is None:
            if self.bpe._arrays:
                out = self.bpe.pc_masks.mask(self.suffix, self.data, self._state())
            else:
                self._reference(np.asarray(self.bpe._byte_ids, dtype=np.int64))
                out = self._known[1]
            out.flags.writeable = False
            self._full = out
        return self._full

    def _reference(self, tokens: np.ndarray) -> np.ndarray:
        if self._known is None:
            self._known = (~self.bpe.reachable, np.zeros(self.bpe.vocab_size, dtype=bool))
        known, allowed = self._known
        ids = list(self.suffix)
        for v in tokens[~known[tokens]].tolist():
            allowed[v] = self.bpe.pretok.prefix_canonical(ids + [v], self.data + self.bpe.token_bytes[v])
            known[v] = True
        return allowed[tokens]


def _check_byte_bpe(spec: dict) -> str | None:
    """Raise ValueError unless the tokenizer is byte-level BPE that we support; return its pre-tokenizer regex
    (None for none). Supported: ByteLevel(use_regex=False) (pure BPE), ByteLevel(use_regex=True) (GPT-2), and
    Sequence[Split(Regex, "Isolated"), ByteLevel(use_regex=False)] (Llama-3, Qwen2 style), no normalizer."""
    model = spec.get("model") or {}
    pre = spec.get("pre_tokenizer") or {}
    fix = ("Supported: byte-level BPE with pre_tokenizers.ByteLevel (with or without the GPT-2 regex) or "
           "Sequence([Split(Regex(...), 'isolated'), ByteLevel(use_regex=False)]), no normalizer.")
    if model.get("type") != "BPE":
        raise ValueError(f"tokenizer model is {model.get('type')!r}, not byte-level BPE. {fix}")
    pattern = None
    if pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers") or []
        if len(steps) != 2 or steps[0].get("type") != "Split" or steps[1].get("type") != "ByteLevel" \
                or steps[1].get("use_regex", True):
            raise ValueError(f"unsupported pre-tokenizer sequence {[p.get('type') for p in steps]}. {fix}")
        split, pre = steps
        if split.get("behavior") != "Isolated" or split.get("invert"):
            raise ValueError(f"Split behavior {split.get('behavior')!r} (invert={split.get('invert')}) is not "
                             f"supported. {fix}")
        pat = split.get("pattern") or {}
        if "Regex" not in pat:
            raise ValueError(f"Split needs a Regex pattern, got {pat}. {fix}")
        pattern = pat["Regex"]
    elif pre.get("type") != "ByteLevel":
        raise ValueError(f"pre-tokenizer is {pre.get('type')!r}, not ByteLevel. {fix}")
    elif pre.get("use_regex", True):
        pattern = GPT2_PATTERN
    if pre.get("add_prefix_space"):
        raise ValueError(f"add_prefix_space=True changes the bytes encoded. {fix}")
    if spec.get("normalizer") is not None:
        raise ValueError(f"the tokenizer has a normalizer ({spec['normalizer'].get('type')}). {fix}")
    if model.get("dropout") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") \
            or model.get("byte_fallback"):
        raise ValueError(f"BPE options dropout/subword prefixes/byte_fallback are not supported. {fix}")
    if model.get("ignore_merges") and pattern is None:
        raise ValueError(f"ignore_merges without a pre-tokenizer would encode whole texts as single tokens. {fix}")
    return pattern


def _dense_validity(bpe: ByteBPE) -> np.ndarray:
    """The dense bool [V + 1, V] table (rows 0..V-1 and the start row V) from the merge list, as ``ByteBPE`` built
    it before ``PairValidity`` (O(V^2) memory; kept as the reference the on-demand rows are tested against)."""
    V = bpe.vocab_size
    rank = np.full(V, NO_MERGE, dtype=np.int64)
    children: dict[int, tuple[int, int]] = {}
    for r, (a, b, c) in enumerate(bpe.merges):
        if rank[c] == NO_MERGE and c not in children:  # first (lowest-rank) merge producing c wins
            rank[c] = r
            children[c] = (a, b)
    by_left: dict[int, list[tuple[int, int]]] = {}
    for r, (a, b, _) in enumerate(bpe.merges):
        by_left.setdefault(a, []).append((r, b))
    left_windows: dict[int, list[int]] = {}   # merge rank -> left tokens whose right spine admits it
    right_spans: dict[int, list[tuple[int, int, int]]] = {}  # symbol -> (lo, hi, token) on left spines
    byte_tokens = [i for i, b in enumerate(bpe.token_bytes) if b is not None]
    for t in byte_tokens:
        node, upper = t, NEVER
        while True:  # right spine of t
            for r, y in by_left.get(node, ()):
                if rank[node] < r < upper:
                    left_windows.setdefault(r, []).append(t)
            if node not in children:
                break
            upper, node = rank[node], children[node][1]
        node, upper = t, NEVER
        while True:  # left spine of t
            right_spans.setdefault(node, []).append((int(rank[node]), int(upper), t))
            if node not in children:
                break
            upper, node = rank[node], children[node][0]
    invalid = np.zeros((V, V), dtype=bool)
    for r, lefts in left_windows.items():
        y = bpe.merges[r][1]
        rights = [t for lo, hi, t in right_spans.get(y, ()) if lo < r <= hi]
        if rights:
            invalid[np.ix_(lefts, rights)] = True
    reachable = np.zeros(V, dtype=bool)
    for t in byte_tokens:
        reachable[t] = bpe.encode(bpe.token_bytes[t]) == [t]
    valid = np.zeros((V + 1, V), dtype=bool)
    valid[:V] = ~invalid & reachable[:, None] & reachable[None, :]
    valid[V] = reachable
    return valid


# plain functions (the definitions, by encoding)

def is_valid_pair(tokenizer, a: int, b: int) -> bool:
    """valid(a, b) <=> encode(decode(a) || decode(b)) = [a, b]  (the definition; [B11])."""
    bpe = tokenizer if isinstance(tokenizer, ByteBPE) else ByteBPE(tokenizer)
    for i in (a, b):
        if not isinstance(i, (int, np.integer)) or not 0 <= i < bpe.vocab_size or bpe.token_bytes[i] is None:
            raise ValueError(f"token id {i!r} is not a byte token of this tokenizer")
    if bpe.pretok is not None:  # with a pre-tokenizer only UTF-8 text is encodable; other pairs are not canonical
        return bpe.is_canonical([int(a), int(b)])
    return bpe.encode(bpe.token_bytes[a] + bpe.token_bytes[b]) == [a, b]


def is_canonical(tokenizer, ids: Sequence[int]) -> bool:
    """t is canonical <=> encode(decode(t)) = t  (the definition; [B11])."""
    from icml26.harness import validate as v

    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a sequence of token ids, got {v.describe(ids)}")
    ids = [v.non_negative_int("ids[i]", i) for i in ids]
    bpe = tokenizer if isinstance(tokenizer, ByteBPE) else ByteBPE(tokenizer)
    if any(not 0 <= i < bpe.vocab_size or bpe.token_bytes[i] is None for i in ids):
        return False
    return bpe.encode(bpe.decode(ids)) == ids


def validity_table(tokenizer, method: str = "merges") -> np.ndarray:
    """[V, V] boolean table of valid pairs, from the merge list (the on-demand rows of ``ByteBPE.valid``,
    stacked) or by encoding every pair (reference). O(V^2) memory: for small vocabularies."""
    if method not in ("merges", "encode"):
        raise ValueError(f"method must be 'merges' or 'encode', got {method!r}")
    bpe = tokenizer if isinstance(tokenizer, ByteBPE) else ByteBPE(tokenizer)
    V = bpe.vocab_size
    if bpe.pretok is not None:
        raise ValueError("with a regex pre-tokenizer canonicity is not pairwise; use is_canonical / "
                         "ByteBPE.pretok.prefix_canonical")
    if method == "merges":
        return np.stack([bpe.valid.row(a) for a in range(V)])
    if method != "encode":
        raise ValueError(f"unknown method {method!r}; use 'merges' or 'encode'")
    backend = getattr(bpe.tokenizer, "backend_tokenizer", bpe.tokenizer)
    ids = [i for i in range(V) if bpe.token_bytes[i] is not None]
    b2u = bytes_to_unicode()
    strs = ["".join(b2u[c] for c in bpe.token_bytes[i]) for i in ids]
    out = np.zeros((V, V), dtype=bool)
    model = backend.model  # the pre-tokenizer only maps bytes to this alphabet, so call the BPE model directly
    for ia, a in enumerate(ids):
        for ib, b in enumerate(ids):
            toks = model.tokenize(strs[ia] + strs[ib])
            out[a, b] = len(toks) == 2 and toks[0].id == a and toks[1].id == b
    return out
