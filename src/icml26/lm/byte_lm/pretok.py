"""Regex pre-tokenizers (GPT-2, Llama-3 style): pre-token segmentation and prefix-canonicity [B11].

A production byte-level BPE tokenizer first splits the text with a regex into *pre-tokens* and runs BPE on each
one, so a token sequence t is canonical iff

    t = bpe(p_1) || bpe(p_2) || ... || bpe(p_k),     p_1 ... p_k = regex_split(decode(t)),

i.e. every pre-token boundary is a token boundary and the tokens inside each pre-token are its BPE encoding.
Pairwise validity alone no longer decides canonicity: look-ahead patterns such as GPT-2's ``\\s+(?!\\S)`` and
Llama-3's ``\\s*[\\r\\n]+`` move pre-token boundaries when more text arrives (``"a  "`` is ``a|··`` but
``"a  b"`` is ``a|·|·b``), contractions (``'re``) and Llama-3's ``[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`` join a
pre-token with the next characters, and ``\\p{N}{1,3}`` cuts digit runs.

Prefix-canonicity (the set the byte-level LM sums over). A token sequence u is *prefix-canonical* when some
continuation keeps it a prefix of a canonical encoding:

    PC(u)  <=>  exists z in W(decode(u)):  encode(decode(u) || z)[: |u|] = u,

with W the witness continuations (our choice, reconstructed): the empty string (the text ends; this is plain
canonicity) and one probe character out of ``PROBES`` (whitespace, newline, the apostrophe and the contraction
letters, letters, digits, punctuation, and inert characters that no merge touches), each after the UTF-8
completion of an unfinished trailing character. W is closed under suffixes (a suffix of a witness is a
witness of the longer sequence), so every prefix-canonical sequence can be continued to a canonical one: masking
next tokens with PC leaves no dead ends, and EOS is allowed exactly after canonical sequences.

Stable cut. For these patterns every pre-token boundary of a text s except its last one stays a boundary in every
extension of s (tested by brute force on random strings for both patterns), so the start of s's second-to-last
pre-token is a *stable cut*: tokens before it are fixed, and canonicity after it only depends on the text after
it (the regexes have no look-behind). All checks run on that short tail.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["GPT2_PATTERN", "LLAMA3_PATTERN", "PROBES", "Pretokenizer", "utf8_completions"]

# the published pre-tokenizer patterns
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
                  r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
# one-character witnesses (our choice): every character class the patterns branch on, the letters that complete a
# contraction, and inert characters (a rare letter, digit and symbol) that BPE merges rarely touch
PROBES = tuple(" \t\n\r'" + "sSdDmMtTlLrReEvV" + "aAxZ09._(#-=" + "\x7f\u07c0\ua66e\u00e9")


def utf8_completions(data: bytes) -> list[bytes] | None:
    """Continuation bytes that finish an unfinished trailing UTF-8 character of ``data``: ``[b""]`` if ``data``
    is complete, ``None`` if it is not valid UTF-8 whatever follows. Two choices per missing byte (low and high
    end of the allowed range), kept if the completed character is valid."""
    try:
        data.decode("utf-8")
        return [b""]
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data" or e.start < len(data) - 3:
            return None
        head = data[e.start:]
    lead = head[0]
    total = 4 if lead & 0xF8 == 0xF0 else 3 if lead & 0xF0 == 0xE0 else 2 if lead & 0xE0 == 0xC0 else None
    if total is None:
        return None
    missing = total - len(head)
    outs = [b""]
    for _ in range(missing):
        outs = [o + bytes([c]) for o in outs for c in (0x80, 0xBF)]
    good = []
    for o in outs:
        try:
            (head + o).decode("utf-8")
            good.append(o)
        except UnicodeDecodeError:
            pass
    if not good:  # the narrow second-byte ranges (E0, ED, F0, F4): search the range
        for c in range(0x80, 0xC0):
            try:
                good.append(bytes([c]) + b"\x80" * (missing - 1))
                (head + good[-1]).decode("utf-8")
                break
            except UnicodeDecodeError:
                good.pop()
    return good or None


class _ClassMap(dict):
    """str.translate table: a character -> a representative of its class for the GPT-2 / Llama-3 patterns."""

    KEEP = set(" \r\n'" + "sStTrReEvVmMlLdD")

    def __missing__(self, code: int) -> str:
        import regex

        ch = chr(code)
        if ch in self.KEEP:
            rep = ch
        else:  # the regex engine's own classes (str.isspace differs from \s, e.g. on \x1c)
            rep = next((r for pat, r in ((r"\s", "\t"), (r"\p{L}", "a"), (r"\p{N}", "0")) if regex.match(pat, ch)), ".")
        self[code] = rep
        return rep


class Pretokenizer:
    """Regex pre-tokenization over bytes (``Split(pattern, behavior="Isolated")`` as in Hugging Face
    ``tokenizers``: matches and the gaps between them are pre-tokens), plus BPE per pre-token through the
    tokenizer's own BPE model (so ``ignore_merges`` and merge ties behave exactly as in ``tokenizers``)."""

    def __init__(self, pattern: str, bpe_model, byte_map: dict[int, str], token_bytes: list,
                 plain_model=None) -> None:
        import regex

        self.pattern_str = pattern
        self.pattern = regex.compile(pattern)
        self._model = bpe_model
        self._map = byte_map
        self._token_bytes = token_bytes
        self._ignore_merges = plain_model is not None
        self._plain = plain_model
        self._piece_cache: dict[bytes, tuple[int, ...]] = {}
        self._seg_cache: dict[str, list[int]] = {}
        self._hyp_cache: dict[str, list[tuple]] = {}
        # For the GPT-2 and Llama-3 patterns segmentation only depends on character classes (the apostrophe,
        # contraction letters, space, CR, LF, other whitespace, letters, numbers, the rest): segment a class string
        # (cached), e.g. "def fx" and "abc ab" share one regex run.
        self._known = pattern in (GPT2_PATTERN, LLAMA3_PATTERN)
        self._classes = _ClassMap()
        groups: dict[str, list[str]] = {}
        for p in PROBES + ("",):
            groups.setdefault(p.translate(self._classes) if self._known else p, []).append(p)
        self._groups = list(groups.items())   # (segmentation key of the witness, witnesses)

    def boundaries(self, text: str, data: bytes) -> list[int]:
        """Byte offsets where pre-tokens end (the last is len(data))."""
        ends = self._segment(text.translate(self._classes) if self._known else text)
        if len(text) == len(data):
            return ends
        return [len(text[:e].encode()) for e in ends]

    def bpe(self, piece: bytes) -> tuple[int, ...]:
        out = self._piece_cache.get(piece)
        if out is None:
            out = tuple(t.id for t in self._model.tokenize("".join(self._map[b] for b in piece)))
            self._piece_cache[piece] = out
        return out

    def encode(self, data: bytes) -> tuple[list[int], list[int]]:
        """(token ids, pre-token end offsets) of complete UTF-8 ``data``; raises UnicodeDecodeError otherwise."""
        text = data.decode("utf-8")
        ends = self.boundaries(text, data)
        ids, start = [], 0
        for e in ends:
            ids.extend(self.bpe(data[start:e]))
            start = e
        return ids, ends

    def stable_cut(self, data: bytes) -> int:
        """Start of the second-to-last pre-token of the complete-character part of ``data`` (0 if fewer than three
        pre-tokens): a boundary of every extension of ``data``."""
        comp = utf8_completions(data)
        if comp is None:
            return 0
        k = len(data)
        if comp != [b""]:
            k = len(data.decode("utf-8", errors="ignore").encode())
        ends = self.boundaries(data[:k].decode("utf-8"), data[:k]) if k else []
        return ends[-3] if len(ends) >= 3 else 0

    def prefix_canonical(self, ids: Sequence[int], data: bytes) -> bool:
        """PC(ids) for ``data`` = decode(ids) (both relative to a stable cut): some witness continuation z keeps
        ``ids`` a prefix of encode(data || z).

        Fast path (exact): a witness z fixes the pre-token boundaries inside data and whether len(data) is one.
        If it is, encode(data || z) starts with the BPE of those pre-tokens. If not, the last pre-token goes on
        into z, and an encoding of it with a token boundary at len(data) has, left of the boundary, the BPE (by
        merges) of its part inside data: merges are never undone, and the left part's merges run in the same rank
        order as on their own. So only a witness whose boundaries give exactly ``ids`` is encoded in full (to see
        whether a merge crosses len(data)); each boundary hypothesis is tried once.
        """
        ids = list(ids)
        comps = utf8_completions(data)
        if comps is None:
            return False
        if comps == [b""]:
            enc, ends = self.encode(data)
            if enc == ids:
                return True
            # first mismatch inside the stable part (before the second-to-last pre-token) -> no continuation helps
            pos = 0
            for a, b in zip(enc, ids):
                if a != b:
                    break
                pos += len(self._token_bytes[a])
            if len(ends) >= 3 and pos < ends[-3]:
                return False
        n, nd = len(ids), len(data)
        failed: set = set()
        for c in comps:
            try:
                text = (data + c).decode("utf-8")
            except UnicodeDecodeError:
                continue
            key0 = text.translate(self._classes) if self._known else text
            ascii_ = len(text) == nd + len(c)
            for inner_c, end_is_boundary, members in self._hypotheses(key0):
                # boundaries before the last character of data || c lie inside data (the completed character
                # straddles len(data)); len(data) itself is a boundary only for complete data
                inner = inner_c if ascii_ else tuple(len(text[:e].encode()) for e in inner_c)
                closed = not c and end_is_boundary
                if (inner, closed) in failed:
                    continue
                expected, start = [], 0
                for e in inner:
                    expected.extend(self.bpe(data[start:e]))
                    start = e
                last = data[start:]
                expected.extend(self.bpe(last) if closed or not self._ignore_merges else self._plain_bpe(last))
                if expected != ids:
                    failed.add((inner, closed))
                    continue
                if closed:
                    return True
                for m in members:  # the pre-token goes on: does a merge cross len(data)?
                    if self.encode(data + c + m.encode())[0][:n] == ids:
                        return True
        return False

    def _hypotheses(self, key0: str) -> list[tuple]:
        """The distinct pre-token splits of ``key0`` that the witnesses induce: (boundaries inside key0 in
        characters, whether len(key0) is a boundary, the witnesses that give them); cached per (class) string."""
        hyps = self._hyp_cache.get(key0)
        if hyps is None:
            groups: dict = {}
            for rep, members in self._groups:
                ends = self._segment(key0 + rep)
                key = (tuple(e for e in ends if e < len(key0)), len(key0) in ends)
                groups.setdefault(key, []).extend(members)
            hyps = [(inner, end, members) for (inner, end), members in groups.items()]
            if len(self._hyp_cache) > 100_000:
                self._hyp_cache.clear()
            self._hyp_cache[key0] = hyps
        return hyps

    def _segment(self, key: str) -> list[int]:
        """Character offsets where pre-tokens of ``key`` end (cached)."""
        ends = self._seg_cache.get(key)
        if ends is None:
            ends, last = [], 0
            for m in self.pattern.finditer(key):
                a, b = m.span()
                if a > last:
                    ends.append(a)
                if b > a:
                    ends.append(b)
                last = b
            if last < len(key):
                ends.append(len(key))
            if len(self._seg_cache) > 200_000:
                self._seg_cache.clear()
            self._seg_cache[key] = ends
        return ends

    def _plain_bpe(self, piece: bytes) -> tuple[int, ...]:
        """BPE by merges only (what ``ignore_merges`` bypasses for whole-vocabulary pre-tokens)."""
        return tuple(t.id for t in self._plain.tokenize("".join(self._map[b] for b in piece)))

    def canonical(self, ids: Sequence[int], data: bytes) -> bool:
        try:
            return self.encode(data)[0] == list(ids)
        except UnicodeDecodeError:
            return False
