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

__all__ = ["StreamingBPETree", "TreeNode"]


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
