"""[B11] The official byte-sampler (SewoongLab/byte-sampler), run side by side when it is installed.

The official code is not a dependency and none of it is copied here: this module only *calls* its public API
(``ByteConditioning`` and ``ByteConditioning.BytewiseBatchSampler``) on the same model and tokenizer as ours, so
that Exp IV can time both on identical inputs (issue 34). It is found in one of two ways:

- ``ICML26_BYTE_SAMPLER_SRC=<checkout>/src``: the ``src`` folder of a checkout of
  https://github.com/SewoongLab/byte-sampler (its own dependencies ``ahocorasick-rs``, ``pysimdjson`` and ``pyicu``
  importable, e.g. installed with ``pip install --target DIR`` and added to ``PYTHONPATH``);
- or ``byte_sampling`` already importable.

How it is driven (as its ``generate_batched`` does, batch size 1): ``add_context([prompt])``, then per byte the argmax
of ``get_dists()`` (256 bytes and a stop entry) and ``add_context([byte])``, under ``torch.inference_mode()``.
Its KV-cache garbage collection (``do_gc``) uses a ``DynamicCache`` API that transformers 5 removed, so it runs
with ``do_gc=False``; its stop set is the tokenizer's end-of-text token, as ours.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ENV = "ICML26_BYTE_SAMPLER_SRC"


def load_official() -> tuple[ModuleType | None, str]:
    """``(byte_sampling.byte_conditioning, "")`` when the official sampler imports, else ``(None, why not)``."""
    src = os.environ.get(ENV)
    if src:
        if not (Path(src) / "byte_sampling").is_dir():
            return None, (f"{ENV}={src} has no byte_sampling/ folder: point it at the src/ folder of a checkout of "
                          "SewoongLab/byte-sampler")
        if src not in sys.path:
            sys.path.insert(0, src)
    try:
        return importlib.import_module("byte_sampling.byte_conditioning"), ""
    except Exception as e:  # ImportError of the package or of its own dependencies (ahocorasick_rs, simdjson, icu),
        # or anything its import raises: the arm is optional, so Exp IV goes on without it and says why
        return None, (f"the official byte-sampler is not importable ({type(e).__name__}: {e}); set {ENV} to the src/ "
                      "folder of a checkout of SewoongLab/byte-sampler with ahocorasick-rs, pysimdjson and pyicu "
                      "importable")


class OfficialGreedy:
    """Greedy byte-by-byte generation with the official sampler on ``model`` and a ``tokenizers.Tokenizer``.

    The tokenizer is saved to a temporary ``tokenizer.json`` and loaded as ``PreTrainedTokenizerFast`` with
    ``eos_token``, which is also the official sampler's start token and its only stop token.
    ``setup_s``: CPU seconds of its one-time ``ByteConditioning`` set-up (merge preprocessing).
    """

    def __init__(self, model, tokenizer, eos_token: str = "<|endoftext|>"):
        mod, why = load_official()
        if mod is None:
            raise ImportError(why)
        import torch
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast

        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a tokenizers.Tokenizer (e.g. production_tokenizer(...)), got "
                            f"{type(tokenizer).__name__}")
        if tokenizer.token_to_id(eos_token) is None:
            raise ValueError(f"the tokenizer has no {eos_token!r} token; pass eos_token= one it has")
        n_vocab = getattr(getattr(model, "config", None), "vocab_size", None)
        if n_vocab is None:
            raise TypeError(f"model must be a Hugging Face causal LM with config.vocab_size, got {type(model).__name__}")
        if n_vocab < tokenizer.get_vocab_size():
            raise ValueError(f"the model's vocabulary ({n_vocab}) is smaller than the tokenizer's "
                             f"({tokenizer.get_vocab_size()}): they do not belong together")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "tokenizer.json"
            tokenizer.save(str(path))
            self.tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=eos_token)
        t0 = time.process_time()
        self.bc = mod.ByteConditioning(model, self.tokenizer)
        self.setup_s = time.process_time() - t0
        self._stop = torch.tensor([self.tokenizer.eos_token_id])

    def generate(self, prompt: bytes, n: int) -> bytes:
        """Up to ``n`` greedy bytes after ``prompt`` (fewer when the stop entry wins); a fresh sampler (and KV
        cache) per call, the per-tokenizer caches of ``ByteConditioning`` kept warm."""
        import torch

        if not isinstance(prompt, (bytes, bytearray)):
            raise TypeError(f"prompt must be bytes, got {type(prompt).__name__}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be a non-negative int, got {n!r}")
        sampler = self.bc.BytewiseBatchSampler(self.bc, batch_size=1, do_gc=False, stop_override=self._stop)
        out = bytearray()
        with torch.inference_mode():
            sampler.add_context([bytes(prompt)])
            for _ in range(n):
                b = int(sampler.get_dists()[0].argmax())
                if b >= 256:  # the stop entry
                    break
                out.append(b)
                sampler.add_context([bytes([b])])
        return bytes(out)


__all__ = ["ENV", "load_official", "OfficialGreedy"]
