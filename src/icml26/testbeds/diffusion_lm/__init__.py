"""Masked diffusion LM testbed (shared by [A15] Swordsman and [B01] Explore-Then-Exploit).

Tasks with exact ground truth (T1 phrase grammar, T1c translation, T2 4x4 Sudoku), exact oracle models that
return true posterior log-marginals, a tiny LLaDA/MDLM-style masked diffusion Transformer trained on a task and
cached on disk, and a decoder framework (``decode``) with the LLaDA and Fast-dLLM baselines.

    >>> from icml26.testbeds.diffusion_lm import TranslationTask, TranslationOracleMLM, ConfidenceThresholdDecoder, decode
    >>> task = TranslationTask(); prompts, _ = task.sample(8, seed=0)
    >>> res = decode(TranslationOracleMLM(task), prompts, task.response_length, ConfidenceThresholdDecoder(4, 0.9))
    >>> bool(task.is_valid(prompts, res.tokens).all())
    True
"""

from .decoding import (
    COMMIT_CROSS,
    COMMIT_EXPLORE,
    COMMIT_FALLBACK,
    COMMIT_SCHEDULE,
    COMMIT_THRESHOLD,
    ConfidenceThresholdDecoder,
    DecodeResult,
    FixedBlockDecoder,
    LowConfidenceRemasking,
    MaskedDiffusionDecoder,
    RoundView,
    Selection,
    check_invariants,
    check_tau,
    decode,
    generate,
    resolve_mask_token_id,
    threshold_commit,
    token_entropy,
)
from .model import (
    DLM_T1C_STRONG,
    DLMTrainConfig,
    MaskedLMOutput,
    TinyMaskedDiffusionLM,
    dlm_training_log,
    load_masked_diffusion_lm,
    make_task,
    mdlm_loss,
    one_token_validity,
    train_masked_diffusion_lm,
)
from .oracles import PFSAOracleMLM, SudokuOracleMLM, TranslationOracleMLM
from .tasks import (
    BOS,
    EOS,
    PAD,
    PhraseGrammar,
    PhraseGrammarConfig,
    SudokuConfig,
    SudokuTask,
    TranslationConfig,
    TranslationTask,
    sudoku_grids,
)

__all__ = [
    "PhraseGrammar", "PhraseGrammarConfig", "TranslationTask", "TranslationConfig", "SudokuTask", "SudokuConfig",
    "sudoku_grids", "PAD", "EOS", "BOS",
    "PFSAOracleMLM", "TranslationOracleMLM", "SudokuOracleMLM",
    "TinyMaskedDiffusionLM", "MaskedLMOutput", "DLMTrainConfig", "train_masked_diffusion_lm",
    "load_masked_diffusion_lm", "make_task", "mdlm_loss", "DLM_T1C_STRONG", "one_token_validity", "dlm_training_log",
    "decode", "generate", "DecodeResult", "RoundView", "Selection", "MaskedDiffusionDecoder", "FixedBlockDecoder",
    "ConfidenceThresholdDecoder", "LowConfidenceRemasking", "threshold_commit", "token_entropy", "check_tau",
    "check_invariants", "resolve_mask_token_id",
    "COMMIT_THRESHOLD", "COMMIT_FALLBACK", "COMMIT_SCHEDULE", "COMMIT_EXPLORE", "COMMIT_CROSS",
]
