"""[B11] ByteSampler: sampling from a BPE language model one byte at a time (Hayase, Liu, Smith, Oh, 2025).

Turns any Hugging Face causal LM with a byte-level BPE tokenizer into an exact byte-level LM (256 bytes + EOS),
which solves the prompt boundary problem and lets models with different tokenizers be ensembled or proxy-tuned.

    >>> from icml26.lm.byte_lm import ByteLevelLM
    >>> lm = ByteLevelLM(model, tokenizer)              # doctest: +SKIP
    >>> lm.next_byte_logprobs(b"import o")              # doctest: +SKIP   (Tensor[257], index 256 = EOS)
"""

from .baselines import naive_next_byte_logprobs, token_healing_next
from .bpe import ByteBPE, is_canonical, is_valid_pair, validity_table
from .combine import ByteEnsemble, ProxyTunedByteLM
from .lm import EOS, ByteLevelLM, ByteModel, ByteStream, GenerationOutput, canonical_token_logprob
from .pretok import GPT2_PATTERN, LLAMA3_PATTERN
from .tokenizers_regex import regex_tokenizer
from .tree import PretokTree, StreamingBPETree

__all__ = [
    "ByteLevelLM", "ByteModel", "ByteStream", "GenerationOutput", "EOS", "canonical_token_logprob",
    "ByteBPE", "is_valid_pair", "is_canonical", "validity_table", "StreamingBPETree", "PretokTree",
    "ByteEnsemble", "ProxyTunedByteLM", "naive_next_byte_logprobs", "token_healing_next",
    "GPT2_PATTERN", "LLAMA3_PATTERN", "regex_tokenizer",
]
