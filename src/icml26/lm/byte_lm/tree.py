"""The streaming valid covering tree of a byte prefix [B11].

Covering set of a byte prefix s (canonical sequences whose last token straddles or ends at the end of s):

    C(s) = { t canonical : decode(t_{<m}) is a proper prefix of s, s is a prefix of decode(t) }.

Every t in C(s) is t_{<m} || v with t_{<m} canonical and decode(t_{<m}) = s[:j]; canonical encodings are unique,
so t_{<m} = encode(s[:j]) and the tree has at most one node per byte offset j. A node is kept while some valid
next token v (valid(last(node), v)) starts with s[j:] and is longer than it; a token equal to s[j:] makes the node
at offset |s|. Pushing a byte therefore adds at most one node; the longest common prefix of all live nodes is the
*trunk*, whose tokens are fixed and never change again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bpe import ByteBPE

__all__ = ["PretokNode", "PretokTree", "StreamingBPETree", "TreeNode"]


@dataclass(eq=False)
class TreeNode:
    """A token boundary at byte ``offset``: the canonical encoding of s[:offset] is ``fixed + suffix``.

    ``lo, hi`` delimit (in ``ByteBPE.order``) the tokens whose bytes start with s[offset:]. ``data`` holds what a
    language model attaches to the node (its prefix log-probability, next-token log-probabilities, KV cache).
    """

    offset: int
    suffix: tuple
    last: int            # row of the validity table for the next token (last token, or the start row)
    lo: int
    hi: int
    data: Any = None
    spec: Any = None     # children computed ahead by a batched model call: {token: model data} (see lm.py)


@dataclass(eq=False)
class StreamingBPETree:
    """Valid covering tree of a growing byte string (tokenizer only; no model).

    >>> tree = StreamingBPETree(tokenizer)          # doctest: +SKIP
    >>> fixed = tree.push(ord("d"))                 # tokens that became certain with this byte
    """

    bpe: ByteBPE | Any
    text: bytearray = field(default_factory=bytearray)
    fixed: list = field(default_factory=list)
    nodes: list = field(default_factory=list)      # live nodes, by increasing offset

    def __post_init__(self) -> None:
        if not isinstance(self.bpe, ByteBPE):
            self.bpe = ByteBPE(self.bpe)
        if not self.nodes:
            self.nodes = [TreeNode(0, (), self.bpe.start_row, 0, len(self.bpe.order))]

    # hooks a language model overrides

    def _make_node(self, parent: TreeNode, token: int, node: TreeNode) -> None:
        """Attach model data to ``node`` = ``parent`` extended by ``token`` (nothing here)."""

    # main

    def push(self, byte: int) -> list[int]:
        """Append one byte; return the tokens that became fixed (committed to the trunk) by it."""
        if not isinstance(byte, (int, np.integer)) or not 0 <= byte < 256:
            raise ValueError(f"byte must be an int in 0..255, got {byte!r}")
        bpe, n = self.bpe, len(self.text) + 1
        self.text.append(byte)
        live, new = [], None
        for u in self.nodes:
            d = n - 1 - u.offset  # bytes of s[u.offset:] before this one
            col = bpe.byte_at[u.lo:u.hi, d]
            lo = u.lo + int(np.searchsorted(col, byte, "left"))
            hi = u.lo + int(np.searchsorted(col, byte, "right"))
            if lo == hi:
                continue
            u.lo, u.hi = lo, hi
            row = bpe.valid[u.last]
            exact = bpe.byte_at[lo, d + 1] == -1  # a token equal to s[u.offset:] ends exactly here
            if exact and new is None and row[bpe.order[lo]]:
                new = (u, int(bpe.order[lo]))
            if row[bpe.order[lo + int(exact):hi]].any():
                live.append(u)
        if new is not None:
            parent, tok = new
            node = TreeNode(n, parent.suffix + (tok,), tok, 0, len(bpe.order))
            self._make_node(parent, tok, node)
            live.append(node)
        if not live:
            self.text.pop()
            raise ValueError(f"byte {byte} after {bytes(self.text[-20:])!r} has no canonical covering: the "
                             "tokenizer cannot produce this string")
        self.nodes = live
        # trunk: longest common prefix of the live nodes' suffixes
        k = min(len(u.suffix) for u in live)
        first = live[0].suffix
        for u in live[1:]:
            while k and u.suffix[:k] != first[:k]:
                k -= 1
        newly = list(first[:k])
        if k:
            self.fixed.extend(newly)
            for u in live:
                u.suffix = u.suffix[k:]
        return newly

    def tree(self) -> list[dict]:
        """The live nodes: byte offset, token suffix after the trunk, and the number of covering tokens."""
        bpe = self.bpe
        return [{"offset": u.offset, "tokens": list(u.suffix),
                 "bytes": [bpe.token_bytes[t] for t in u.suffix],
                 "n_covering": int(bpe.valid[u.last][bpe.order[u.lo:u.hi]].sum())} for u in self.nodes]

    @property
    def node_at_end(self) -> TreeNode | None:
        """The node whose canonical encoding decodes to exactly the pushed bytes (None if it was pruned)."""
        u = self.nodes[-1]
        return u if u.offset == len(self.text) else None


@dataclass(eq=False)
class PretokNode(TreeNode):
    """A node of the pre-token-aware tree. ``key`` = its token ids after the stable cut of its own text (the
    key of its lazily filled prefix-canonicity state, shared through ``ByteBPE.pretok_state``); ``can_end`` = the
    sequence itself is canonical (EOS may follow)."""

    depth: int = 0                      # tokens from the start of the text
    key: tuple = ()
    can_end: bool = False
    parent: Any = None

    @property
    def allowed(self):
        """bool [V]: ``allowed[v]`` = the sequence extended by v is prefix-canonical."""
        return self._state.full()


@dataclass(eq=False)
class PretokTree:
    """Valid covering tree of a growing byte string for a tokenizer with a regex pre-tokenizer [B11].

    Canonical encodings of a prefix are no longer unique per byte offset (a pre-token boundary may still move), so
    a node is any prefix-canonical token sequence (see ``pretok.py``) decoding to s[:offset] that still has a
    prefix-canonical covering token; several nodes may share an offset. Tokens before the *stable cut* (the start
    of the second-to-last pre-token of s, a pre-token boundary of every extension of s) are the canonical encoding
    of that text and are committed to ``fixed``; every check runs on the text after the cut.
    """

    bpe: ByteBPE | Any
    text: bytearray = field(default_factory=bytearray)
    fixed: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    cut: int = 0                                   # byte offset of the stable cut (start of the text after ``fixed``)
    fixed_masks: list = field(default_factory=list)  # the node before each fixed token

    def __post_init__(self) -> None:
        if not isinstance(self.bpe, ByteBPE):
            self.bpe = ByteBPE(self.bpe)
        if self.bpe.pretok is None:
            raise ValueError("PretokTree needs a tokenizer with a regex pre-tokenizer; use StreamingBPETree")
        if not self.nodes:
            root = PretokNode(0, (), self.bpe.start_row, 0, len(self.bpe.order))
            self._fill(root)
            self.nodes = [root]

    def _make_node(self, parent, token: int, node) -> None:
        """Attach model data to ``node`` = ``parent`` extended by ``token`` (nothing here)."""

    def _fill(self, node: PretokNode) -> None:
        """Attach the prefix-canonicity state of ``node`` (keyed by its tokens after the current stable cut)."""
        node.key = tuple(node.suffix)
        node._state = self.bpe.pretok_state(node.key)
        node.can_end = node._state.can_end

    def allowed(self, node: PretokNode, tokens, stop_at_first: bool = False) -> np.ndarray:
        """bool per token id in ``tokens``: node's sequence + (v,) is prefix-canonical."""
        return node._state.full()[np.asarray(tokens, dtype=np.int64)]

    def allowed_range(self, node: PretokNode, lo: int, hi: int) -> np.ndarray:
        """The same for the tokens ``order[lo:hi]`` of the byte-sorted vocabulary (only that range is decided)."""
        return node._state.range(lo, hi)

    def full_mask(self, node: PretokNode) -> np.ndarray:
        return node._state.full()

    def push(self, byte: int) -> list[int]:
        if not isinstance(byte, (int, np.integer)) or not 0 <= byte < 256:
            raise ValueError(f"byte must be an int in 0..255, got {byte!r}")
        bpe, n = self.bpe, len(self.text) + 1
        self.text.append(byte)
        live, new = [], []
        for u in self.nodes:
            d = n - 1 - u.offset
            col = bpe.byte_at[u.lo:u.hi, d]
            lo = u.lo + int(np.searchsorted(col, byte, "left"))
            hi = u.lo + int(np.searchsorted(col, byte, "right"))
            if lo == hi:
                continue
            u.lo, u.hi = lo, hi
            exact = bpe.byte_at[lo, d + 1] == -1
            if exact and self.allowed_range(u, lo, lo + 1)[0]:
                new.append((u, int(bpe.order[lo])))
            if hi > lo + int(exact) and self.allowed_range(u, lo + int(exact), hi).any():
                live.append(u)
        for parent, tok in new:
            node = PretokNode(n, parent.suffix + (tok,), tok, 0, len(bpe.order), depth=parent.depth + 1,
                              parent=parent)
            self._fill(node)
            self._make_node(parent, tok, node)
            live.append(node)
        if not live:
            self.text.pop()
            raise ValueError(f"byte {byte} after {bytes(self.text[-20:])!r} has no canonical covering: the "
                             "tokenizer cannot produce this string")
        self.nodes = live
        return self._advance_cut()

    def _advance_cut(self) -> list[int]:
        """Commit the canonical tokens of the text before the new stable cut; drop nodes that disagree."""
        pt = self.bpe.pretok
        tail = bytes(self.text[self.cut:])
        comp = len(tail.decode("utf-8", errors="ignore").encode()) if pt is not None else len(tail)
        try:
            ends = pt.boundaries(tail[:comp].decode("utf-8"), tail[:comp]) if comp else []
        except UnicodeDecodeError:
            return []
        if len(ends) < 3:
            return []
        new_cut = ends[-3]
        starts = [0] + ends
        committed: list[int] = []
        for a, b in zip(starts, ends):
            if b > new_cut:
                break
            committed.extend(pt.bpe(tail[a:b]))
        k = len(committed)
        keep = [u for u in self.nodes if u.offset >= self.cut + new_cut and tuple(u.suffix[:k]) == tuple(committed)]
        if not keep:  # cannot happen for prefix-canonical nodes; keep the tree rather than lose the text
            return []
        # masks before each committed token, from any surviving node's ancestors
        chain, u = {}, keep[0]
        while u is not None and u.depth >= len(self.fixed):
            chain[u.depth] = u
            u = u.parent
        for i in range(len(self.fixed), len(self.fixed) + k):
            self.fixed_masks.append((chain[i].key, chain[i].can_end))
        for u in keep:
            u.suffix = u.suffix[k:]
        self.fixed.extend(committed)
        for u in keep:  # ancestors before the cut are no longer needed (they hold KV caches)
            a = u
            while a.parent is not None and a.parent.depth >= len(self.fixed):
                a = a.parent
            a.parent = None
        self.cut += new_cut
        self.nodes = keep
        return committed

    def tree(self) -> list[dict]:
        bpe = self.bpe
        return [{"offset": u.offset, "tokens": list(u.suffix), "bytes": [bpe.token_bytes[t] for t in u.suffix],
                 "n_covering": int(self.allowed_range(u, u.lo, u.hi).sum()), "can_end": u.can_end}
                for u in self.nodes]

    def keys_along(self, u: PretokNode, trunk: bool = True) -> list[tuple]:
        """(state key, can_end) of the nodes before each token of fixed + u.suffix and of u itself
        (len(fixed) + len(suffix) + 1 of them; without ``trunk``, only from the node at the cut on)."""
        chain, a = [], u
        while a is not None and a.depth >= len(self.fixed):
            chain.append((a.key, a.can_end))
            a = a.parent
        return (self.fixed_masks if trunk else []) + chain[::-1]

    def masks_along(self, u: PretokNode, trunk: bool = True) -> list[tuple]:
        """(allowed [V], can_end) before each token of fixed + u.suffix and after it, all tokens decided."""
        return [(self.bpe.pretok_mask(k)[0], e) for k, e in self.keys_along(u, trunk)]

    @property
    def node_at_end(self):
        ends = [u for u in self.nodes if u.offset == len(self.text) and u.can_end]
        return ends[0] if ends else None
