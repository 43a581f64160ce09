"""Character-level data for the [B19] reproduction: standard-library code to pretrain on, and two post-training
domains drawn from held-out files: docstring/comment prose, and "line-reversed code" (each line read backwards).

Vocabulary: printable ASCII (32..126) and newline, plus one out-of-vocabulary id (97 symbols).
"""

from __future__ import annotations

import ast
import io
import tokenize
from functools import lru_cache

import numpy as np
import torch

from icml26.testbeds.code_corpus import corpus_texts

CHARS = "\n" + "".join(chr(c) for c in range(32, 127))
VOCAB = len(CHARS) + 1
OOV = len(CHARS)
_LUT = np.full(256, OOV, dtype=np.int64)
_LUT[[ord(c) for c in CHARS]] = np.arange(len(CHARS))


def encode(text: str) -> torch.Tensor:
    """Char ids (bytes outside the vocabulary, incl. each byte of non-ASCII characters, map to OOV)."""
    return torch.from_numpy(_LUT[np.frombuffer(text.encode("utf-8", errors="replace"), dtype=np.uint8)])


def prose_of(source: str) -> str:
    """Docstrings (via ``ast``) and comments (via ``tokenize``) of one Python file, one per paragraph."""
    parts: list[str] = []
    try:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    parts.append(doc)
        parts += [tok.string.lstrip("#").strip() for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                  if tok.type == tokenize.COMMENT]
    except (SyntaxError, tokenize.TokenError, ValueError):  # pragma: no cover - stdlib parses
        pass
    return "\n".join(p for p in parts if p)


def reverse_lines(source: str) -> str:
    return "\n".join(line[::-1] for line in source.splitlines())


DOMAINS = {"prose": prose_of, "reversed": reverse_lines}


@lru_cache(maxsize=4)
def char_corpora(pretrain_bytes: int, targets: tuple[str, ...] = ("prose", "reversed")) -> dict[str, torch.Tensor]:
    """Encoded streams: ``pretrain`` (train split, first ``pretrain_bytes``), ``pretrain_val`` (val split), and
    each fine-tuning domain in ``targets`` built from the held-out split (``asyncio/``, ``email/``), cut 90/10
    into ``<name>`` / ``<name>_val``."""
    heldout = corpus_texts("heldout")
    out = {"pretrain": encode("\n".join(corpus_texts("train", max_bytes=pretrain_bytes))),
           "pretrain_val": encode("\n".join(corpus_texts("val")))}
    for name in targets:
        ids = encode("\n".join(map(DOMAINS[name], heldout)))
        cut = int(0.9 * len(ids))
        out[name], out[name + "_val"] = ids[:cut], ids[cut:]
    return out


def windows(stream: torch.Tensor, starts: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Contexts ``stream[s : s + context]`` and next-char targets ``stream[s + context]`` for each start s."""
    idx = starts[:, None] + torch.arange(context + 1)
    chunk = stream[idx]
    return chunk[:, :-1], chunk[:, -1]


def random_starts(stream: torch.Tensor, n: int, context: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(0, len(stream) - context - 1, (n,), generator=generator)
