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
NO_MERGE = -1
NEVER = np.iinfo(np.int64).max


def reduce_classes(cls: str, head: int = 0) -> str:
    """Contraction letters -> ``a`` unless an apostrophe is among the two characters before them (or they are
    among the first ``head`` characters, whose left context is another string)."""
    if not any(ch in KEEP_LETTERS for ch in cls):
        return cls
    out = list(cls)
    for i, ch in enumerate(cls):
        if ch in KEEP_LETTERS and i >= head and "'" not in cls[max(0, i - 2):i]:
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
    windows). ``plain_encode(bytes) -> tuple of ids`` is the merge BPE (reachability: bpe(bytes(t)) = [t])."""

    def __init__(self, token_bytes: list, merges: list, plain_encode, byte_ids: list) -> None:
        V = len(token_bytes)
        self.V = V
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
        if len(self._rows) > 4096:
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
    the module docstring). ``mask(key, data)`` -> bool [V]; ``fallback(key, data, tokens)`` is the per-token
    reference used where the arrays do not apply."""

    def __init__(self, pretok, token_bytes: list, token_id: dict, merges: list, byte_ids: list, vocab_size: int,
                 probes: tuple) -> None:
        self.pt = pretok
        self.V = vocab_size
        self.token_bytes, self.token_id = token_bytes, token_id
        self.byte_ids = byte_ids
        self.plain = pretok._plain_bpe if pretok._ignore_merges else pretok.bpe
        self.ignore_merges = pretok._ignore_merges
        self.valid = MergeValidity(token_bytes, merges, self.plain, byte_ids)
        llama_digits = "\\p{N}{1,3}" in pretok.pattern_str
        self.compressible = frozenset("a. \t\n\r" + ("" if llama_digits else "0"))
        cmap = pretok._classes
        # witnesses: bit 0 = no probe character, bit j = PROBES[j - 1]
        self.z_bytes = [b""] + [p.encode() for p in probes]
        assert len(self.z_bytes) <= 64
        groups: dict[str, int] = {}
        for j, zb in enumerate(self.z_bytes):
            zc = zb.decode().translate(cmap)
            groups[zc] = groups.get(zc, 0) | (1 << j)
        # (class kept, class with contraction letters reduced, member bits)
        self.zgroups = [(zc, reduce_classes(zc), np.uint64(bits)) for zc, bits in groups.items()]
        # token variants: (token, completion c) for every way the token's bytes complete to UTF-8 text
        var_tok, var_c, shapes_keep, shapes_red = [], [], [], []
        regular = [t for t in byte_ids if _is_text(token_bytes[t])]
        irregular = [(t, c) for t in byte_ids if not _is_text(token_bytes[t]) and token_bytes[t][0] & 0xC0 != 0x80
                     for c in utf8_completions(token_bytes[t]) or ()]
        for t, c in [(t, b"") for t in regular] + irregular:
            cls = (token_bytes[t] + c).decode("utf-8").translate(cmap)
            shapes_keep.append((compress_runs(reduce_classes(cls, head=2), self.compressible)[0], bool(c)))
            shapes_red.append((compress_runs(reduce_classes(cls), self.compressible)[0], bool(c)))
            var_tok.append(t)
            var_c.append(c)
        self.var_tok = np.array(var_tok, dtype=np.int64)
        self.var_c = var_c
        self.var_irr = np.array([bool(c) for c in var_c])
        self.n_reg = len(regular)           # variants [0, n_reg): one per token, c = b""
        self.shapes, self.gid = {}, {}
        for name, sh in (("keep", shapes_keep), ("red", shapes_red)):
            index: dict = {}
            self.gid[name] = np.array([index.setdefault(s, len(index)) for s in sh], dtype=np.int64)
            self.shapes[name] = list(index)
        # A-type closed: bpe(B) = [v]
        self.reach_a = np.array([not c and self.pt.bpe(token_bytes[t]) == (t,) for t, c in zip(var_tok, var_c)])
        # open bits: bit j set iff valid(v, first(bpe(c + z_j)))
        n = len(var_tok)
        self.open_bits = np.zeros(n, dtype=np.uint64)
        first_cache: dict[bytes, int] = {}

        def first(tail: bytes) -> int:
            f = first_cache.get(tail)
            if f is None:
                f = first_cache[tail] = int(self.plain(tail)[0])
            return f
        reg = ~self.var_irr
        for j, zb in enumerate(self.z_bytes):
            if zb:
                col = self.valid.col(first(zb))
                self.open_bits[reg] |= col[self.var_tok[reg]].astype(np.uint64) << np.uint64(j)
        for i in np.flatnonzero(self.var_irr):
            v, c = int(self.var_tok[i]), var_c[i]
            bits = 0
            for j, zb in enumerate(self.z_bytes):
                if self.valid.col(first(c + zb))[v]:
                    bits |= 1 << j
            self.open_bits[i] = np.uint64(bits)
        # ignore_merges: vocabulary entries merges do not reach encode as themselves (excluded where P is one)
        self.unreached = [t for t in byte_ids if not self.valid.reach[t]] if self.ignore_merges else []
        self.unreached_bytes = sorted(token_bytes[t] for t in self.unreached)
        self.var_of: dict[int, list[tuple[bytes, int]]] = {}
        for i, (t, c) in enumerate(zip(var_tok, var_c)):
            self.var_of.setdefault(t, []).append((c, i))
        self.z_index = {zb: j for j, zb in enumerate(self.z_bytes)}
        self.excl_a = self._exclusions(b"")[1] if self.unreached else None
        # tokens that may follow text ending inside a UTF-8 character (they start with a continuation byte)
        self.cont_tokens = np.array([t for t in byte_ids if token_bytes[t][0] & 0xC0 == 0x80], dtype=np.int64)
        self._lc_cache: dict = {}
        self.stats = {"lc_built": 0, "fallback_nodes": 0}

    # pre-tokenisation outcomes per class string of D

    def _outcomes(self, lc: str, keep: bool):
        """For the class string ``lc`` of D: hypothesis id [groups, z groups] (-1: v cannot lie in one pre-token),
        the hypotheses (p, boundaries before p, P ends right after B(+c)), and the witness bits they stand for."""
        key = (lc, keep)
        hit = self._lc_cache.get(key)
        if hit is not None:
            return hit
        self.stats["lc_built"] += 1
        shapes = self.shapes["keep" if keep else "red"]
        a = len(lc)
        hyp = np.full((len(shapes), len(self.zgroups)), -1, dtype=np.int64)
        tail_bits = np.zeros(hyp.shape, dtype=np.uint64)
        closed = np.zeros(hyp.shape, dtype=bool)
        hyps: dict = {}
        seg = self.pt._segment
        one = np.uint64(1)
        for g, (bc, irr) in enumerate(shapes):
            b = a + len(bc)
            apos = "'" in (lc + bc)[-2:]
            for zi, (zc, zred, bits) in enumerate(self.zgroups):
                ends = seg(lc + bc + (zc if apos else zred))
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
                hyp[g, zi] = hyps.setdefault(h, len(hyps))
                if endb and not irr:
                    closed[g, zi] = True          # P = ... + B exactly
                elif endb:
                    tail_bits[g, zi] = one        # P runs on through the completion c only
                else:
                    tail_bits[g, zi] = bits       # P runs on through c + z
        if len(self._lc_cache) > 50_000:
            self._lc_cache.clear()
        out = (hyp, tail_bits, closed, list(hyps))
        self._lc_cache[key] = out
        return out

    # the mask

    def mask(self, key: tuple, data: bytes) -> np.ndarray:
        """bool [V]: PC(key + (v,)) for every token v (special tokens False)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._fallback(key, data)
        pt = self.pt
        cls = reduce_classes(text.translate(pt._classes))
        lc, pos = compress_runs(cls, self.compressible)
        keep = "'" in cls[-2:]
        hyp, tail_bits, closed, hyps = self._outcomes(lc, keep)
        gid = self.gid["keep" if keep else "red"]
        if len(text) == len(data):
            c2b = pos
        else:
            offs = np.concatenate([[0], np.cumsum([len(ch.encode()) for ch in text])])
            c2b = [int(offs[q]) for q in pos]
        cum = np.concatenate([[0], np.cumsum([len(self.token_bytes[t]) for t in key])]).astype(np.int64)
        key = tuple(key)
        a = len(lc)
        ok_a = np.zeros(len(hyps) + 1, dtype=bool)      # index -1 (no hypothesis) stays False
        c_hyps = []
        for h, (p, inner) in enumerate(hyps):
            cuts = [c2b[e] for e in inner]
            if p == a:
                ok_a[h] = self._pieces(data, cuts, len(data)) == key
                continue
            pb = c2b[p]
            k = int(np.searchsorted(cum, pb))
            if k >= len(cum) or cum[k] != pb or self._pieces(data, cuts, pb) != key[:k]:
                continue
            rest = key[k:]
            if all(self.valid.pair(x, y) for x, y in zip(rest, rest[1:])):
                c_hyps.append((h, data[pb:]))
        allowed_var = np.zeros(len(self.var_tok), dtype=bool)
        if ok_a.any():
            sel = ok_a[hyp]
            a_closed = (sel & closed).any(1)
            a_tail = np.bitwise_or.reduce(np.where(sel, tail_bits, np.uint64(0)), axis=1)
            bits = a_tail[gid] & self.open_bits
            if self.excl_a is not None:
                bits &= ~self.excl_a
            allowed_var |= (a_closed[gid] & self.reach_a) | (bits != 0)
        if c_hyps:
            row = self.valid.row(key[-1])[self.var_tok]
            for h, q in c_hyps:
                sel = hyp == h
                c_closed = (sel & closed).any(1)
                c_tail = np.bitwise_or.reduce(np.where(sel, tail_bits, np.uint64(0)), axis=1)
                bits = c_tail[gid] & self.open_bits
                cl = c_closed[gid]
                if self.unreached:
                    ex_closed, ex_bits = self._exclusions(q)
                    bits &= ~ex_bits
                    cl = cl & ~ex_closed
                allowed_var |= row & (cl | (bits != 0))
        out = np.zeros(self.V, dtype=bool)
        r = self.n_reg
        out[self.var_tok[:r]] = allowed_var[:r]
        if r < len(allowed_var):
            np.logical_or.at(out, self.var_tok[r:], allowed_var[r:])
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
        n = len(self.var_tok)
        ex_closed, ex_bits = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.uint64)
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

    def _fallback(self, key: tuple, data: bytes) -> np.ndarray:
        """Text ending inside a UTF-8 character: only tokens starting with a continuation byte can follow; the
        reference decides each."""
        self.stats["fallback_nodes"] += 1
        out = np.zeros(self.V, dtype=bool)
        ids = list(key)
        for v in self.cont_tokens.tolist():
            out[v] = self.pt.prefix_canonical(ids + [v], data + self.token_bytes[v])
        return out
