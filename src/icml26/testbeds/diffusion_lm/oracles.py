"""Exact oracle "models": true posterior log-marginals for any partially masked input.

Each oracle is an ``nn.Module`` with no parameters and the interface of a masked diffusion LM:
``forward(input_ids) -> MaskedLMOutput(logits)``, where ``logits[b, i, v] = log p(x_i = v | unmasked tokens of
input_ids[b])`` for response positions (the prompt positions echo their token; the ``[MASK]`` column is -inf).
If the unmasked response tokens are already inconsistent with every valid output (probability 0), that row
falls back to the prior given the prompt alone (it cannot be conditioned), so decoders never see NaN.

- :class:`PFSAOracleMLM` (T1): forward-backward over the grammar's (head, tail-offset) HMM states.
- :class:`TranslationOracleMLM` (T1c): the marker choices are independent per phrase, so per-phrase posteriors.
- :class:`SudokuOracleMLM` (T2): uniform over the grids (of the 288) consistent with all known cells.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .model import MaskedLMOutput
from .tasks import PhraseGrammar, SudokuTask, TranslationTask, sudoku_grids


class _Oracle(nn.Module):
    def __init__(self, task) -> None:
        super().__init__()
        self.task = task
        self.mask_token_id = task.mask_token_id
        self.vocab_size = task.vocab_size + 1  # logits columns, [MASK] included
        self.max_len = task.prompt_length + task.response_length

    def _split(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("input_ids must be an integer torch.Tensor of shape (batch, prompt+response)")
        if input_ids.dim() != 2 or input_ids.shape[1] != self.max_len:
            raise ValueError(f"{type(self).__name__} expects input_ids of shape (batch, {self.max_len}) "
                             f"(prompt {self.task.prompt_length} + response {self.task.response_length}), "
                             f"got {tuple(input_ids.shape)}")
        P = self.task.prompt_length
        return input_ids[:, :P].long(), input_ids[:, P:].long()

    def _output(self, prompt: torch.Tensor, marg: torch.Tensor) -> MaskedLMOutput:
        """Assemble log-marginals ``marg`` (B, R, V) of the response with an echo of the prompt."""
        B, P = prompt.shape
        echo = torch.zeros(B, P, self.vocab_size, dtype=marg.dtype).scatter_(2, prompt[:, :, None], 1.0)
        probs = torch.cat([echo, marg], 1)
        probs[..., self.mask_token_id] = 0.0
        return MaskedLMOutput(logits=torch.log(probs.float()))


class PFSAOracleMLM(_Oracle):
    """[T1] Exact marginals p(x_t | observed) of the phrase grammar by forward-backward (scaled, float64).

    alpha_t = (alpha_{t-1} A) * O_t,  beta_t = A (O_{t+1} * beta_{t+1}),  gamma_t ∝ alpha_t * beta_t,
    p(x_t = v | obs) = sum_{z: emit(z) = v} gamma_t(z),  where O_t(z) = 1 if x_t is masked or emit(z) = x_t.
    """

    def __init__(self, grammar: PhraseGrammar) -> None:
        if not isinstance(grammar, PhraseGrammar):
            raise TypeError(f"PFSAOracleMLM needs a PhraseGrammar, got {type(grammar).__name__}")
        super().__init__(grammar)
        g = grammar
        self.register_buffer("A", torch.tensor(g.hmm_A))
        self.register_buffer("pi", torch.tensor(g.hmm_pi))
        self.register_buffer("final", torch.tensor(g.hmm_final))
        self.register_buffer("emit", torch.tensor(g.hmm_emit))
        self.register_buffer("E", nn.functional.one_hot(self.emit, self.vocab_size).double())

    def _posterior(self, x: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        match = (masked[:, :, None] | (self.emit[None, None] == x[:, :, None])).double()  # (B, R, S)
        B, R, S = match.shape
        alpha = torch.empty(B, R, S, dtype=torch.float64)
        a = self.pi[None] * match[:, 0]
        for t in range(R):
            if t:
                a = (a @ self.A) * match[:, t]
            alpha[:, t] = a = a / a.sum(1, keepdim=True).clamp_min(1e-300)
        beta = torch.empty_like(alpha)
        b = self.final[None].expand(B, S)
        for t in range(R - 1, -1, -1):
            if t < R - 1:
                b = (match[:, t + 1] * b) @ self.A.T
            beta[:, t] = b = b / b.amax(1, keepdim=True).clamp_min(1e-300)
        gamma = alpha * beta
        return gamma / gamma.sum(2, keepdim=True).clamp_min(1e-300)

    def forward(self, input_ids: torch.Tensor, **_: object) -> MaskedLMOutput:
        prompt, x = self._split(input_ids)
        masked = x == self.mask_token_id
        gamma = self._posterior(x, masked)
        dead = gamma.sum((1, 2)) < 0.5  # the observed tokens have probability 0: use the prior
        if dead.any():
            gamma[dead] = self._posterior(x[dead], torch.ones_like(masked[dead]))
        return self._output(prompt, gamma @ self.E)


class TranslationOracleMLM(_Oracle):
    """[T1c] Exact marginals of the translation given the source prompt and the unmasked response tokens.

    The target is a product over phrases j of two options o_j with prior p(o), so
    w_j(o) ∝ p(o) * prod_{t in phrase j} [x_t masked or x_t = cand_o(t)],  p(x_t = v) = sum_o w_j(o) [cand_o(t) = v].
    """

    def __init__(self, task: TranslationTask) -> None:
        if not isinstance(task, TranslationTask):
            raise TypeError(f"TranslationOracleMLM needs a TranslationTask, got {type(task).__name__}")
        super().__init__(task)

    def forward(self, input_ids: torch.Tensor, **_: object) -> MaskedLMOutput:
        prompt, x = self._split(input_ids)
        st = self.task.structure(prompt)
        cand = torch.from_numpy(st["candidates"])  # (B, R, 2)
        seg = torch.from_numpy(st["segment"])  # (B, R), -1 for EOS/PAD positions
        B, R = x.shape
        S = max(int(st["n_segments"].max()), 1)
        ok = (x == self.mask_token_id)[:, :, None] | (x[:, :, None] == cand)  # (B, R, 2)
        onehot = nn.functional.one_hot(seg.clamp_min(0), S).double() * (seg >= 0)[:, :, None]  # (B, R, S)
        bad = torch.einsum("brs,bro->bso", onehot, (~ok).double())  # mismatches per phrase and option
        prior = torch.tensor(np.exp(self.task.option_logp))[None, None]
        w = prior * (bad == 0)
        w = torch.where(w.sum(2, keepdim=True) > 0, w, prior.expand_as(w))  # inconsistent phrase: prior
        w = w / w.sum(2, keepdim=True)
        w_t = torch.einsum("brs,bso->bro", onehot, w)
        w_t[seg < 0] = torch.tensor([1.0, 0.0], dtype=torch.float64)  # deterministic positions
        marg = torch.zeros(B, R, self.vocab_size, dtype=torch.float64).scatter_add_(2, cand, w_t)
        return self._output(prompt, marg)


class SudokuOracleMLM(_Oracle):
    """[T2] Exact marginals of a 4x4 Sudoku: p(cell = d) = #{consistent grids with cell = d} / #{consistent}."""

    def __init__(self, task: SudokuTask | None = None) -> None:
        task = SudokuTask() if task is None else task
        if not isinstance(task, SudokuTask):
            raise TypeError(f"SudokuOracleMLM needs a SudokuTask, got {type(task).__name__}")
        super().__init__(task)
        grids = torch.from_numpy(sudoku_grids())
        self.register_buffer("grids", grids)
        self.register_buffer("G1", nn.functional.one_hot(grids, self.vocab_size).double())  # (288, 16, V)

    def forward(self, input_ids: torch.Tensor, **_: object) -> MaskedLMOutput:
        prompt, x = self._split(input_ids)
        fit_prior = ((prompt[:, None] == SudokuTask.BLANK) | (prompt[:, None] == self.grids[None])).all(2).double()
        fit_resp = ((x[:, None] == self.mask_token_id) | (x[:, None] == self.grids[None])).all(2).double()
        fit = fit_prior * fit_resp  # (B, 288)
        fit = torch.where(fit.sum(1, keepdim=True) > 0, fit, fit_prior)
        fit = torch.where(fit.sum(1, keepdim=True) > 0, fit, torch.ones_like(fit))
        marg = torch.einsum("bg,gcv->bcv", fit / fit.sum(1, keepdim=True), self.G1)
        return self._output(prompt, marg)
