"""Prefix-canonicity masks over the whole vocabulary in a few array operations [B11].

A tree node of the pre-token-aware tree (``tree.PretokTree``) needs, for its token ids K after the stable cut
(decoding to the bytes D), the mask ``allowed[v] = PC(K + (v,))`` over every token v (``pretok.py`` defines PC: some
witness continuation c + z, c the UTF-8 completion and z = "" or one probe character, keeps K + (v,) a prefix of
encode(D + bytes(v) + c + z)). The reference decides it token by token in Python (V regex runs and BPE calls per
node). This module decides all V tokens at once from arrays precomputed per tokenizer, exactly.

Write B = bytes(v), Y = D + B + c + z. Tokens never cross pre-token boundaries, so PC(K + v) for a witness
holds iff v's bytes lie inside one pre-token P = Y[p:r] of Y (p <= |D| <= |D| + |B| <= r) and

- (A, p = |D|) the pre-tokens of Y before |D| encode to K, and bpe(P) starts with v;
- (C, p < |D|) p is a token boundary of K, the pre-tokens before p encode to K[:k], and bpe(P) starts with K[k:] + v.

Segmentation (which of these holds, p, and whether P ends at |D| + |B| or runs on through c [+ z]) depends only
on character classes (``pretok._ClassMap``, as the reference's segmentation cache already assumes). We further
map the contraction letters to plain letters where no apostrophe precedes them within two characters, and shorten
runs of three or more equal classes to two (letters, other symbols, whitespace, and digits for GPT-2; Llama-3's
``\\p{N}{1,3}`` counts digits, so they are kept); both are tested against the regex on random strings
(``test_byte_lm.py``). So the outcome is a function of (classes of D, the token's class *shape*, the class of z):
computed once per distinct class string of D and cached (the shapes of a 64k vocabulary number a few hundred).

BPE inside P (pure merges): by the pairwise theorem of [B11], a token sequence is the merge-BPE of its bytes iff
every adjacent pair is valid, so "bpe(P) starts with K[k:] + v" is: K[k:] valid pairwise (once per node), valid(K[-1],
v) (a row of the validity table, computed from the merge list for the one token K[-1] and cached), and, when P
runs on through a tail t = c [+ z], valid(v, first(bpe(t))) (precomputed columns, one bit per witness). With
``ignore_merges`` (Llama-3) a pre-token that is itself a vocabulary entry encodes as that token: such P are
excluded (only entries that merges do not reach can disagree). Nodes whose text ends inside a UTF-8 character use
the reference for the few tokens that can follow (those starting with a continuation byte).
"""

from __future__ import annotations

import bisect

import numpy as np

from .pretok import utf8_completions

__all__ = ["MergeValidity", "PrefixCanonicalMasks", "reduce_classes", "compress_runs", "KEEP_LETTERS"]

KEEP_LETTERS = frozenset("sStTrReEvVmMlLdD")   # letters the contractions ('s, 're, 've, 'll, ...) spell
_SECOND = frozenset("rRvVlL")   # contractions of two letters start with these ('re, 've, 'll)
NO_MERGE = -1
NEVER = np.iinfo(np.int64).max


def reduce_classes(cls: str, head: int = 0) -> str:
    """Contraction letters -> ``a`` except where a contraction could use them: right after an apostrophe, or two
    after it following r / v / l ('re, 've, 'll). The first ``head`` characters follow another string: the first
    is kept, the second if the first is r / v / l."""
    if not any(ch in KEEP_LETTERS for ch in cls):
        return cls
    out = list(cls)
    for i, ch in enumerate(cls):
        if ch not in KEEP_LETTERS:
            continue
        prev = cls[i - 1] if i >= 1 else None
        if prev == "'" or (i >= 2 and cls[i - 2] == "'" and prev in _SECOND) or i < min(head, 1) \
                or (i == 1 and head >= 2 and prev in _SECOND):
            continue
        out[i] = "a"
    return "".join(out)


def compress_runs(cls: str, compressible: frozenset) -> tuple[str, list[int]]:
    """Runs of >= 3 equal ``compressible`` classes shortened to 2. Returns (short string, pos) with pos[i] the
    offset in ``cls`` of position i of the short string (i = 0 .. len): a kept run of k maps its two characters to
    the run's first and last character."""
    out, pos = [], []
    i, n = 0, len(cls)
    while i < n:
        ch, j = cls[i], i + 1
        while j < n and cls[j] == ch:
            j += 1
        if j - i >= 3 and ch in compressible:
            out.append(ch + ch)
            pos += [i, j - 1]
        else:
            out.append(cls[i:j])
            pos += range(i, j)
        i = j
    pos.append(n)
    return "".join(out), pos


def _is_text(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _gather(ptr: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the CSR slices ptr[k]:ptr[k+1] for each k in ``keys``, and the position in ``keys`` each came
    from."""
    starts, lens = ptr[keys], ptr[keys + 1] - ptr[keys]
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    owner = np.repeat(np.arange(len(keys)), lens)
    offs = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    return starts[owner] + offs, owner


class MergeValidity:
    """Rows and columns of the merge-BPE pair-validity table, valid(a, b) <=> bpe(bytes(a) || bytes(b)) = [a, b],
    computed on demand from the merge list with array operations (no V x V table; see ``bpe.py`` for the spine
    windows). ``plain_encode(bytes) -> tuple of ids`` is the merge BPE (reachability: bpe(bytes(t)) = [t]).
    ``row_cap``: rows kept in the row cache (cleared when full); the pure-BPE path (``bpe.PairValidity``) bounds it
    by memory, about 128 MB of rows."""

    def __init__(self, token_bytes: list, merges: list, plain_encode, byte_ids: list, row_cap: int = 4096) -> None:
        V = len(token_bytes)
        self.V = V
        self.row_cap = int(row_cap)
        rank = np.full(V, NO_MERGE, dtype=np.int64)
        left = np.full(V, -1, dtype=np.int64)
        right = np.full(V, -1, dtype=np.int64)
        for r, (a, b, c) in enumerate(merges):
            if rank[c] == NO_MERGE and left[c] < 0:   # the first (lowest-rank) merge producing c
                rank[c], left[c], right[c] = r, a, b
        self.rank, self.left, self.right = rank, left, right
        m = np.array(merges, dtype=np.int64).reshape(-1, 3)
        self.m_left, self.m_right = m[:, 0], m[:, 1]
        ranks = np.arange(len(m), dtype=np.int64)
        self.bl_ptr, self.bl_rank = self._csr(self.m_left, ranks, V)     # merges by left symbol, ascending rank
        self.br_ptr, self.br_rank = self._csr(self.m_right, ranks, V)    # merges by right symbol
        ids = np.array(byte_ids, dtype=np.int64)
        self.reach = np.zeros(V, dtype=bool)
        for t in byte_ids:
            self.reach[t] = tuple(plain_encode(token_bytes[t])) == (t,)
        # spine entries (symbol, window lo, window hi, token), level by level
        self.ls = self._spines(ids, left)     # left spines: merge r admitted iff lo < r <= hi
        self.rs = self._spines(ids, right)    # right spines: iff lo < r < hi
        self._rows: dict[int, np.ndarray] = {}
        self._cols: dict[int, np.ndarray] = {}

    @staticmethod
    def _csr(keys: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        order = np.lexsort((vals, keys))
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(ptr, keys + 1, 1)
        return np.cumsum(ptr), vals[order]

    def _spines(self, ids: np.ndarray, child: np.ndarray) -> tuple:
        syms, los, his, toks = [], [], [], []
        node, upper, tok = ids.copy(), np.full(len(ids), NEVER, dtype=np.int64), ids.copy()
        while len(node):
            syms.append(node)
            los.append(self.rank[node])
            his.append(upper)
            toks.append(tok)
            more = child[node] >= 0
            upper, node, tok = self.rank[node[more]], child[node[more]], tok[more]
        sym, lo, hi, tk = (np.concatenate(x) for x in (syms, los, his, toks))
        order = np.argsort(sym, kind="stable")
        ptr = np.zeros(self.V + 1, dtype=np.int64)
        np.add.at(ptr, sym + 1, 1)
        return np.cumsum(ptr), lo[order], hi[order], tk[order]

    def _spine_of(self, t: int, child: np.ndarray) -> list[tuple[int, int, int]]:
        out, node, upper = [], t, NEVER
        while True:
            out.append((node, int(self.rank[node]), upper))
            if child[node] < 0:
                return out
            upper, node = int(self.rank[node]), int(child[node])

    def row(self, a: int) -> np.ndarray:
        """bool [V]: valid(a, b) for every b (read-only, cached)."""
        out = self._rows.get(a)
        if out is not None:
            return out
        out = self.reach.copy()
        if not self.reach[a]:
            out[:] = False
        else:
            R = []
            for node, lo, hi in self._spine_of(a, self.right):   # right spine of a: merges (node, y), lo < r < hi
                rs = self.bl_rank[self.bl_ptr[node]:self.bl_ptr[node + 1]]
                R.append(rs[np.searchsorted(rs, lo, "right"):np.searchsorted(rs, hi, "left")])
            R = np.concatenate(R)
            ptr, elo, ehi, etok = self.ls
            idx, own = _gather(ptr, self.m_right[R])
            r = R[own]
            out[etok[idx[(elo[idx] < r) & (r <= ehi[idx])]]] = False
        out.flags.writeable = False
        if len(self._rows) > self.row_cap:
            self._rows.clear()
        self._rows[a] = out
        return out

    def col(self, b: int) -> np.ndarray:
        """bool [V]: valid(a, b) for every a (read-only, cached)."""
        out = self._cols.get(b)
        if out is not None:
            return out
        out = self.reach.copy()
        if not self.reach[b]:
            out[:] = False
        else:
            R = []
            for node, lo, hi in self._spine_of(b, self.left):    # left spine of b: merges (x, node), lo < r <= hi
                rs = self.br_rank[self.br_ptr[node]:self.br_ptr[node + 1]]
                R.append(rs[np.searchsorted(rs, lo, "right"):np.searchsorted(rs, hi, "right")])
            R = np.concatenate(R)
            ptr, elo, ehi, etok = self.rs
            idx, own = _gather(ptr, self.m_left[R])
            r = R[own]
            out[etok[idx[(elo[idx] < r) & (r < ehi[idx])]]] = False
        out.flags.writeable = False
        self._cols[b] = out
        return out

    def pair(self, a: int, b: int) -> bool:
        return bool(self.row(a)[b])


class PrefixCanonicalMasks:
    """All-vocabulary prefix-canonicity masks for a ``pretok.Pretokenizer`` with the GPT-2 or Llama-3 pattern (see
    the module docstring). ``prepare(key, data)`` does the per-node work (a few regex runs and BPE calls on the
    node's own text); ``evaluate(state, lo, hi)`` decides the tokens ``order[lo:hi]`` (positions in the byte-sorted
    vocabulary) with array operations; ``mask(key, data)`` is the whole bool [V] mask."""

    def __init__(self, pretok, token_bytes: list, token_id: dict, merges: list, order: np.ndarray,
                 vocab_size: int, probes: tuple) -> None:
        self.pt = pretok
        self.V = vocab_size
        self.token_bytes, self.token_id = token_bytes, token_id
        self.order = np.asarray(order, dtype=np.int64)
        byte_ids = sorted(int(t) for t in self.order)
        self.plain = pretok._plain_bpe if pretok._ignore_merges else pretok.bpe
        self.ignore_merges = pretok._ignore_merges
        self.valid = MergeValidity(token_bytes, merges, self.plain, byte_ids)
        llama_digits = "\\p{N}{1,3}" in pretok.pattern_str
        self.compressible = frozenset("a. \t\n\r" + ("" if llama_digits else "0"))
        cmap = pretok._classes
        # witnesses: bit 0 = no probe character, bit j = PROBES[j - 1]
        self.z_bytes = [b""] + [p.encode() for p in probes]
        if len(self.z_bytes) > 64:
            raise ValueError("at most 63 probe characters (witness bits are a uint64)")
        groups: dict[str, int] = {}
        for j, zb in enumerate(self.z_bytes):
            zc = zb.decode().translate(cmap)
            groups[zc] = groups.get(zc, 0) | (1 << j)
        self.zgroups = list(groups.items())
        red: dict[str, int] = {}
        for zc, bits in groups.items():       # no apostrophe just before z: contraction letters are plain letters
            red[reduce_classes(zc)] = red.get(reduce_classes(zc), 0) | bits
        self.zgroups_red = list(red.items())
        # variants (token v, completion c): slot k is token order[k] with c = b"" (inert unless its bytes are UTF-8
        # text); then one variant per completion of each token that ends inside a character, by order position
        n = len(self.order)
        irregular = [(k, int(t), c) for k, t in enumerate(self.order)
                     if not _is_text(token_bytes[t]) and token_bytes[t][0] & 0xC0 != 0x80
                     for c in utf8_completions(token_bytes[t]) or ()]
        self.n_slots = n
        self.irr_pos = np.array([k for k, _, _ in irregular], dtype=np.int64)
        self.var_tok = np.concatenate([self.order, np.array([t for _, t, _ in irregular], dtype=np.int64)])
        self.var_c = [b""] * n + [c for _, _, c in irregular]
        texts = [token_bytes[t] if _is_text(token_bytes[t]) else None for t in self.order] + \
            [token_bytes[t] + c for _, t, c in irregular]
        self.shapes, self.gid = {}, {}
        for name, head in (("keep", 2), ("red", 0)):
            index: dict = {}
            gid = []
            for i, b in enumerate(texts):
                if b is None:
                    gid.append(-1)
                    continue
                cls = b.decode("utf-8").translate(cmap)
                shape = (compress_runs(reduce_classes(cls, head=head), self.compressible)[0], i >= n)
                gid.append(index.setdefault(shape, len(index)))
            g = np.array(gid, dtype=np.int64)
            g[g < 0] = len(index)                   # inert slots: the extra, empty group
            self.gid[name] = g
            self.shapes[name] = list(index)
        nv = len(self.var_tok)
        # A, P = B: bpe(B) = [v]
        self.reach_a = np.zeros(nv, dtype=bool)
        for k, t in enumerate(self.order.tolist()):
            self.reach_a[k] = texts[k] is not None and self.pt.bpe(token_bytes[t]) == (t,)
        # bit j: valid(v, first(bpe(c + z_j)))  (P runs on through the tail c + z_j after B)
        self.open_bits = np.zeros(nv, dtype=np.uint64)
        first_cache: dict[bytes, int] = {}

        def first(tail: bytes) -> int:
            f = first_cache.get(tail)
            if f is None:
                f = first_cache[tail] = int(self.plain(tail)[0])
            return f
        slots = np.array([b is not None for b in texts[:n]])
        for j, zb in enumerate(self.z_bytes):
            if zb:
                col = self.valid.col(first(zb))[self.order]
                self.open_bits[:n] |= (col & slots).astype(np.uint64) << np.uint64(j)
        for i in range(n, nv):
            v, c = int(self.var_tok[i]), self.var_c[i]
            bits = 0
            for j, zb in enumerate(self.z_bytes):
                if self.valid.col(first(c + zb))[v]:
                    bits |= 1 << j
            self.open_bits[i] = np.uint64(bits)
        # ignore_merges: a pre-token that is a vocabulary entry encodes as that entry; only entries the merges do
        # not reach can be such a P while the pairs are valid (excluded per node prefix q, ``_exclusions``)
        self.unreached_bytes = sorted(token_bytes[t] for t in byte_ids if not self.valid.reach[t]) \
            if self.ignore_merges else []
        self.var_of: dict[int, list[tuple[bytes, int]]] = {}
        for i in range(nv):
            self.var_of.setdefault(int(self.var_tok[i]), []).append((self.var_c[i], i))
        self.z_index = {zb: j for j, zb in enumerate(self.z_bytes)}
        self.excl_a = self._exclusions(b"")[1] if self.unreached_bytes else None
        # tokens that may follow text ending inside a UTF-8 character (they start with a continuation byte)
        self.cont_tokens = np.array([t for t in byte_ids if token_bytes[t][0] & 0xC0 == 0x80], dtype=np.int64)
        self.cont_open = np.zeros(vocab_size, dtype=np.uint64)     # open bits of those (their bytes then text)
        for j, zb in enumerate(self.z_bytes):
            if zb:
                col = self.valid.col(first(zb))
                self.cont_open[self.cont_tokens] |= col[self.cont_tokens].astype(np.uint64) << np.uint64(j)
        self._lc_cache: dict = {}
        self._entry_cache: dict = {}
        self.stats = {"lc_built": 0, "fallback_nodes": 0, "fallback_reference_tokens": 0}

    # pre-tokenisation outcomes per class string of D

    def _outcomes(self, lc: str, keep: bool):
        """For the class string ``lc`` of D (after D's own stable cut): per token shape, the (hypothesis, P ends
        right after B, witness bits) entries where B lies inside one pre-token P, as arrays [groups + 1, width]
        (hypothesis -1: none; the last row is the empty group of inert slots), and the hypotheses
        (p, boundaries before p) in the coordinates of ``lc``."""
        key = (lc, keep)
        hit = self._lc_cache.get(key)
        if hit is not None:
            return hit
        self.stats["lc_built"] += 1
        shapes = self.shapes["keep" if keep else "red"]
        hyps: dict = {}
        rows = []
        for bc, irr in shapes:
            rows.append({(hyps.setdefault(h, len(hyps)), cl): bits
                         for (h, cl), bits in self._shape_entries(lc, bc, irr).items()})
        rows.append({})
        width = max([len(e) for e in rows] + [1])
        hyp = np.full((len(rows), width), -1, dtype=np.int64)
        tail_bits = np.zeros(hyp.shape, dtype=np.uint64)
        closed = np.zeros(hyp.shape, dtype=bool)
        for g, entries in enumerate(rows):
            for i, ((h, cl), bits) in enumerate(entries.items()):
                hyp[g, i], closed[g, i], tail_bits[g, i] = h, cl, bits
        if len(self._lc_cache) > 50_000:
            self._lc_cache.clear()
        out = (hyp, tail_bits, closed, list(hyps))
        self._lc_cache[key] = out
        return out

    def _shape_entries(self, lc: str, bc: str, irr: bool) -> dict:
        """{((p, boundaries before p), P ends right after B): witness bits} for a token of class shape ``bc``
        (``irr``: it ends inside a character, completed by c) after the classes ``lc`` (cached)."""
        hit = self._entry_cache.get((lc, bc, irr))
        if hit is not None:
            return hit
        a = len(lc)
        b = a + len(bc)
        seg = self.pt._segment
        apos = "'" in (lc + bc)[-2:]
        entries: dict = {}
        for zc, bits in (self.zgroups if apos else self.zgroups_red):
            ends = seg(lc + bc + zc)
            p, endb, bad = 0, False, False
            for e in ends:
                if a < e < b:
                    bad = True
                    break
                if e <= a:
                    p = e
                elif e == b:
                    endb = True
            if bad:
                continue
            h = (p, tuple(e for e in ends if 0 < e < p))
            if endb and not irr:
                entries[(h, True)] = 0                                   # P = ... + B exactly
            elif endb:
                entries[(h, False)] = entries.get((h, False), 0) | 1    # P runs on through c only
            else:
                entries[(h, False)] = entries.get((h, False), 0) | bits  # P runs on through c + z
        if len(self._entry_cache) > 200_000:
            self._entry_cache.clear()
        self._entry_cache[(lc, bc, irr)] = entries
        return entries

    # per node

    def _context(self, text: str, data: bytes):
        """Classes of D after its own stable cut s (the start of its second-to-last pre-token, a pre-token
        boundary of every extension; the pattern has no look-behind, so only the classes after s decide the
        outcomes): (short class string, contraction head kept, byte offsets of the pre-token ends before s, byte
        offset of each position of the short string)."""
        full = text.translate(self.pt._classes)
        ends = self.pt._segment(full)
        s = ends[-3] if len(ends) >= 3 else 0
        before = [e for e in ends if e < s]
        tail = reduce_classes(full[s:])
        lc, pos = compress_runs(tail, self.compressible)
        if len(text) == len(data):
            return lc, "'" in tail[-2:], before, [s + q for q in pos]
        offs = np.concatenate([[0], np.cumsum([len(ch.encode()) for ch in text])])
        return lc, "'" in tail[-2:], [int(offs[e]) for e in before], [int(offs[s + q]) for q in pos]

    def _c_ok(self, key: tuple, data: bytes, cum: np.ndarray, cuts: list[int], pb: int) -> bool:
        """A pre-token P starting at byte pb < len(data) holds the next token: pb is a token boundary of key, the
        pre-tokens before it encode to key[:k], and key[k:] is pairwise valid (merge BPE inside P)."""
        k = int(np.searchsorted(cum, pb))
        if k >= len(cum) or cum[k] != pb or self._pieces(data, cuts, pb) != key[:k]:
            return False
        rest = key[k:]
        return all(self.valid.pair(x, y) for x, y in zip(rest, rest[1:]))

    def prepare(self, key: tuple, data: bytes):
        """The per-node state ``evaluate`` needs (``key``: token ids after the stable cut, ``data`` their bytes)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._fallback(key, data)
        lc, keep, before, c2b = self._context(text, data)
        hyp, tail_bits, closed, hyps = self._outcomes(lc, keep)
        cum = np.concatenate([[0], np.cumsum([len(self.token_bytes[t]) for t in key])]).astype(np.int64)
        key = tuple(key)
        a = len(lc)
        ok_a = np.zeros(len(hyps) + 1, dtype=bool)      # index -1 (no hypothesis) stays False
        c_hyps = []
        for h, (p, inner) in enumerate(hyps):
            cuts = before + ([c2b[0]] if p > 0 and c2b[0] > 0 else []) + [c2b[e] for e in inner]
            if p == a:
                ok_a[h] = self._pieces(data, cuts, len(data)) == key
            elif self._c_ok(key, data, cum, cuts, c2b[p]):
                c_hyps.append((h, data[c2b[p]:]))
        zero = np.uint64(0)
        parts_a = None
        if ok_a.any():
            sel = ok_a[hyp]
            parts_a = ((sel & closed).any(1), np.bitwise_or.reduce(np.where(sel, tail_bits, zero), axis=1))
        parts_c = []
        for h, q in c_hyps:
            sel = hyp == h
            ex = self._exclusions(q) if self.unreached_bytes else None
            parts_c.append(((sel & closed).any(1), np.bitwise_or.reduce(np.where(sel, tail_bits, zero), axis=1), ex))
        row = self.valid.row(key[-1]) if parts_c else None
        return ("arrays", self.gid["keep" if keep else "red"], parts_a, parts_c, row)

    def evaluate(self, state, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """bool [hi - lo]: PC(key + (order[k],)) for k in lo..hi-1."""
        hi = self.n_slots if hi is None else hi
        if state[0] == "full":
            return state[1][self.order[lo:hi]]
        _, gid, parts_a, parts_c, row = state
        out = self._eval(slice(lo, hi), gid, parts_a, parts_c, row)
        if len(self.irr_pos):
            i0, i1 = np.searchsorted(self.irr_pos, [lo, hi])
            if i1 > i0:
                vi = np.arange(self.n_slots + i0, self.n_slots + i1)
                got = self._eval(vi, gid, parts_a, parts_c, row)
                np.logical_or.at(out, self.irr_pos[i0:i1] - lo, got)
        return out

    def _eval(self, idx, gid, parts_a, parts_c, row) -> np.ndarray:
        g, ob = gid[idx], self.open_bits[idx]
        out = np.zeros(len(g), dtype=bool)
        if parts_a is not None:
            a_closed, a_tail = parts_a
            bits = a_tail[g] & ob
            if self.excl_a is not None:
                bits &= ~self.excl_a[idx]
            out |= (a_closed[g] & self.reach_a[idx]) | (bits != 0)
        if parts_c:
            r = row[self.var_tok[idx]]
            for c_closed, c_tail, ex in parts_c:
                bits, cl = c_tail[g] & ob, c_closed[g]
                if ex is not None:
                    bits &= ~ex[1][idx]
                    cl = cl & ~ex[0][idx]
                out |= r & (cl | (bits != 0))
        return out

    def mask(self, key: tuple, data: bytes, state=None) -> np.ndarray:
        """bool [V]: PC(key + (v,)) for every token v (special tokens False)."""
        state = self.prepare(key, data) if state is None else state
        if state[0] == "full":
            return state[1]
        out = np.zeros(self.V, dtype=bool)
        out[self.order] = self.evaluate(state)
        return out

    def _pieces(self, data: bytes, cuts: list[int], end: int) -> tuple:
        out, start = [], 0
        for e in cuts + [end]:
            if e > start:
                out.extend(self.pt.bpe(data[start:e]))
            start = e
        return tuple(out)

    def _exclusions(self, q: bytes) -> tuple[np.ndarray, np.ndarray]:
        """ignore_merges: per variant, P = q + B (closed) or q + B + c + z (bit j) is a vocabulary entry that the
        merges do not reach (it encodes as itself, not as ... + v + ...)."""
        nv = len(self.var_tok)
        ex_closed, ex_bits = np.zeros(nv, dtype=bool), np.zeros(nv, dtype=np.uint64)
        i = bisect.bisect_left(self.unreached_bytes, q)
        while i < len(self.unreached_bytes) and self.unreached_bytes[i].startswith(q):
            rest = self.unreached_bytes[i][len(q):]
            i += 1
            for k in range(1, len(rest) + 1):
                v = self.token_id.get(rest[:k])
                if v is None:
                    continue
                tail = rest[k:]
                for c, vi in self.var_of.get(v, ()):
                    if not tail and not c:
                        ex_closed[vi] = True
                    elif tail.startswith(c) and tail[len(c):] in self.z_index:
                        ex_bits[vi] |= np.uint64(1 << self.z_index[tail[len(c):]])
        return ex_closed, ex_bits

    def _fallback(self, key: tuple, data: bytes):
        """D ends inside a UTF-8 character X: only tokens v starting with continuation bytes can follow. For those
        whose bytes finish X and then are text, v lies in the pre-token holding X (which starts at or before X's
        first byte, inside key's last token), so this is case C with the class shape of X + the rest of v; the
        few others (v inside X, or ending inside a character) and tokenizers with unreached vocabulary entries use
        the reference."""
        self.stats["fallback_nodes"] += 1
        out = np.zeros(self.V, dtype=bool)
        i = len(data) - 1
        while i > 0 and data[i] & 0xC0 == 0x80 and len(data) - i < 4:
            i -= 1
        dc, part = data[:i], data[i:]
        lead = part[0]
        total = 4 if lead & 0xF8 == 0xF0 else 3 if lead & 0xF0 == 0xE0 else 2 if lead & 0xE0 == 0xC0 else 0
        key = tuple(key)
        if not key or total <= len(part) or utf8_completions(data) is None or self.unreached_bytes \
                or not _is_text(dc):
            self._reference(key, data, self.cont_tokens.tolist(), out)
            self.stats["fallback_reference_tokens"] += len(self.cont_tokens)
            return ("full", out)
        lc, keep, before, c2b = self._context(dc.decode("utf-8"), dc)
        cmap, groups, others = self.pt._classes, {}, []
        for v in self.cont_tokens.tolist():
            b = self.token_bytes[v]
            try:
                xr = (part + b).decode("utf-8")
            except UnicodeDecodeError:
                if utf8_completions(part + b) is not None:   # else never text, whatever follows: not allowed
                    others.append(v)
                continue
            shape = compress_runs(reduce_classes(xr.translate(cmap)), self.compressible)[0]
            groups.setdefault(shape, []).append(v)
        cum = np.concatenate([[0], np.cumsum([len(self.token_bytes[t]) for t in key])]).astype(np.int64)
        ok: dict = {}
        row = self.valid.row(key[-1])
        for shape, toks in groups.items():
            cl, bits = False, 0
            for ((p, inner), closed), zb in self._shape_entries(lc, shape, False).items():
                h = (p, inner)
                if h not in ok:
                    cuts = before + ([c2b[0]] if p > 0 and c2b[0] > 0 else []) + [c2b[e] for e in inner]
                    ok[h] = self._c_ok(key, data, cum, cuts, c2b[p])
                if ok[h]:
                    cl, bits = cl or closed, bits | zb
            t = np.array(toks, dtype=np.int64)
            out[t] = row[t] & (cl | ((self.cont_open[t] & np.uint64(bits)) != 0))
        self._reference(key, data, others, out)
        self.stats["fallback_reference_tokens"] += len(others)
        return ("full", out)

    def _reference(self, key: tuple, data: bytes, tokens: list, out: np.ndarray) -> None:
        ids = list(key)
        for v in tokens:
            out[v] = self.pt.prefix_canonical(ids + [v], data + self.token_bytes[v])
