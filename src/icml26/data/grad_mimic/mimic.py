"""Mimic scores, online re-weighting and offline filters [A11].

Paper: "Evaluating Sample Utility for Efficient Data Selection by Mimicking Model Weights"
(Huang, Bilkhu, Cooper, Sala, Movellan; arXiv 2501.06708).

    v_t      = theta_ref - theta_t                       (direction to the reference weights)
    g_{i,t}  = grad_theta l(x_i, y_i; theta_t)           (per-sample gradient, torch.func.vmap(grad))
    m_{i,t}  = < -g_{i,t}, v_t > / ||v_t||               (mimic score: does a step on sample i move
                                                          the model towards the reference?)
Stage 1 (online):  w = softmax(standardise(m) / tau)   and   theta <- theta - eta * sum_i w_i g_i
Stage 2 (offline): s_i = mean_t m_{i,t};  votes  s_i > 0,  s_i > q_10/20/30(s),  per-epoch signs;
                   keep-mask = majority vote.   Dataset quality = fraction kept.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from icml26.harness import validate as v

LossFn = Callable[[Tensor, Tensor], Tensor]

# helper functions


def _check_modules(**modules: object) -> None:
    for name, mod in modules.items():
        if not isinstance(mod, nn.Module):
            raise TypeError(f"{name} must be a torch.nn.Module, got {type(mod).__name__}")


def _check_temperature(temperature: object) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a real number > 0 (math.inf for uniform weights), "
                        f"got {v.describe(temperature)}")
    if not (temperature > 0):
        raise ValueError(f"temperature must be > 0 (math.inf for uniform weights), got {temperature}")
    return float(temperature)


def _check_batch(x: Tensor, y: Tensor) -> None:
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        raise TypeError(f"x and y must be torch Tensors, got {type(x).__name__} and {type(y).__name__}")
    if x.dim() == 0 or x.shape[0] == 0:
        raise ValueError(f"empty batch: x has shape {tuple(x.shape)}; pass at least one sample (batch dim first)")
    if y.dim() == 0 or y.shape[0] != x.shape[0]:
        raise ValueError(f"x and y must share the batch dimension, got x {tuple(x.shape)} and y {tuple(y.shape)}")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf; clean the inputs before scoring")


def _output_linear(model: nn.Module) -> str:
    """Name of the model's output ``nn.Linear`` for ``params="last_linear"``, or a ValueError when that cannot be
    told from the module tree. Registration order is not execution order (a head may be registered before the
    body), so the last *registered* Linear is not trusted: the layer is taken only when it is the model's only
    Linear, or the end of an ``nn.Sequential`` chain (whose registration order is its execution order)."""
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("params='last_linear' but the model has no nn.Linear; use params='all', the layer "
                         "itself (params=model.head) or a list of parameter names")
    if len(linears) == 1:
        return linears[0]
    name, mod = "", model
    while isinstance(mod, nn.Sequential) and len(mod) > 0:
        child, mod = list(mod.named_children())[-1]
        name = f"{name}.{child}" if name else child
    if isinstance(mod, nn.Linear):
        return name
    raise ValueError(
        f"params='last_linear' is ambiguous: the model has {len(linears)} nn.Linear layers ({', '.join(linears)}) "
        "and is not an nn.Sequential ending in one, so which of them produces the output cannot be told from "
        "registration order. Pass the output layer explicitly: params=model.<head> (the module) or "
        "params=['<head>.weight', '<head>.bias']")


def _select_params(model: nn.Module, params: str | Sequence[str] | nn.Module) -> list[str]:
    """Names of the trainable parameters the score is computed on."""
    named = [n for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("model has no trainable parameters; mimic scores need a parametric model")
    if isinstance(params, nn.Module):
        prefix = next((n for n, m in model.named_modules() if m is params), None)
        if prefix is None:
            raise ValueError(f"params is a {type(params).__name__} that is not a submodule of the model; pass the "
                             "model's own layer (e.g. params=model.head), not a copy")
        own = [f"{prefix}.{n}" if prefix else n for n, p in params.named_parameters(recurse=False) if p.requires_grad]
        if not own:
            raise ValueError(f"the layer {prefix or '(the model itself)'} has no trainable parameters of its own")
        return own
    if params == "all":
        return named
    if params == "last_linear":
        layer = _output_linear(model)
        prefix = layer + "." if layer else ""
        return [n for n in named if n.startswith(prefix) and "." not in n[len(prefix):]]
    if isinstance(params, str):
        raise ValueError(f"unknown params={params!r}; use 'all', 'last_linear', a layer (nn.Module) of the model "
                         "or a list of parameter names")
    missing = [n for n in params if n not in named]
    if missing or not params:
        raise ValueError(f"parameter names {missing or list(params)} not found among trainable parameters {named}")
    return list(params)


def per_sample_grads(model: nn.Module, x: Tensor, y: Tensor, loss_fn: LossFn = F.cross_entropy,
                     params: str | Sequence[str] | nn.Module = "all") -> dict[str, Tensor]:
    """Per-sample gradients {name: Tensor[B, *param.shape]} of ``loss_fn(model(x_i), y_i)`` [A11].

    Vectorised with ``torch.func.vmap(grad(...))``: one batched call, no Python loop over samples. The model
    must not mix samples in its forward pass (no train-mode BatchNorm).
    """
    _check_modules(model=model)
    _check_batch(x, y)
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable (logits, targets) -> loss, got {v.describe(loss_fn)}")
    names = _select_params(model, params)
    p_all = {n: p.detach() for n, p in model.named_parameters()}
    buffers = {n: b.detach() for n, b in model.named_buffers()}
    p_grad = {n: p_all[n] for n in names}

    def loss_one(pg: dict[str, Tensor], xi: Tensor, yi: Tensor) -> Tensor:
        out = functional_call(model, ({**p_all, **pg}, buffers), (xi.unsqueeze(0),))
        return loss_fn(out, yi.unsqueeze(0))

    try:
        return vmap(grad(loss_one), in_dims=(None, 0, 0))(p_grad, x, y)
    except RuntimeError as err:  # no extra forward pass up front: it would move dropout's RNG and BN statistics
        raise ValueError(
            f"per-sample gradients failed for x of shape {tuple(x.shape)} and y of shape {tuple(y.shape)}: "
            f"{str(err).splitlines()[0]}. Check that x fits the model's input and y fits loss_fn "
            "(class labels in [0, number of outputs) for cross-entropy)") from None


def _direction(model: nn.Module, ref_model: nn.Module, names: list[str]) -> dict[str, Tensor]:
    ref = dict(ref_model.named_parameters())
    cur = dict(model.named_parameters())
    for n in names:
        if n not in ref:
            raise ValueError(f"reference model has no parameter {n!r}; it must share the model's architecture")
        if ref[n].shape != cur[n].shape:
            raise ValueError(f"parameter {n!r}: model shape {tuple(cur[n].shape)} != reference {tuple(ref[n].shape)}")
        v.finite(f"reference parameter {n!r}", ref[n].detach())
        v.finite(f"model parameter {n!r}", cur[n].detach())
    return {n: (ref[n].detach() - cur[n].detach()) for n in names}


def mimic_scores(model: nn.Module, ref_model: nn.Module, x: Tensor, y: Tensor, loss_fn: LossFn = F.cross_entropy,
                 params: str | Sequence[str] | nn.Module = "all") -> Tensor:
    """Mimic scores m_i = <-g_i, v> / ||v|| with v = theta_ref - theta, one per sample (Tensor[B]) [A11].

    ``params``: ``"all"`` trainable parameters; a layer of the model (``params=model.head``: its own
    parameters; the cheap choice for large models); ``"last_linear"`` (the output ``nn.Linear``, resolved only
    when unambiguous: the model's only Linear or the end of an ``nn.Sequential``; otherwise a ValueError asks
    for the layer); or a list of parameter names. When theta = theta_ref (v = 0) the scores are 0, not NaN.
    """
    _check_modules(model=model, ref_model=ref_model)
    names = _select_params(model, params)
    d = _direction(model, ref_model, names)
    g = per_sample_grads(model, x, y, loss_fn, names)
    norm = torch.sqrt(sum((dn.double() ** 2).sum() for dn in d.values()))
    dot = sum(g[n].flatten(1).double() @ d[n].flatten().double() for n in names)
    if norm == 0:
        return torch.zeros(x.shape[0], dtype=x.dtype if x.is_floating_point() else torch.float32)
    return (-dot / norm).to(g[names[0]].dtype)


def last_linear_mimic_scores(h: Tensor, logits: Tensor, y: Tensor, delta_w: Tensor, delta_b: Tensor | None) -> Tensor:
    """Closed form of the last-layer mimic score for z = W h + b with cross-entropy [A11].

        g_i = ((p_i - e_{y_i}) h_i^T, p_i - e_{y_i})   =>   m_i = -(p_i - e_{y_i})^T (dW h_i + db) / ||(dW, db)||

    O(B C H), no backward pass at all. ``h``: [B, H] features, ``logits``: [B, C], ``delta_w``: [C, H] and
    ``delta_b``: [C] (or None) the reference-minus-current weights.
    """
    for name, t in (("h", h), ("logits", logits), ("y", y), ("delta_w", delta_w)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch Tensor, got {type(t).__name__}")
    if delta_b is not None and not isinstance(delta_b, Tensor):
        raise TypeError(f"delta_b must be a torch Tensor or None, got {type(delta_b).__name__}")
    v.ndim("h", h, 2)
    v.ndim("logits", logits, 2)
    v.ndim("y", y, 1)
    v.non_empty("h", h)
    v.same_length(h=h, logits=logits, y=y)
    num_classes, hidden = logits.shape[1], h.shape[1]
    v.shape("delta_w", delta_w, (num_classes, hidden))
    if delta_b is not None:
        v.shape("delta_b", delta_b, (num_classes,))
        v.finite("delta_b", delta_b)
    for name, t in (("h", h), ("logits", logits), ("delta_w", delta_w)):
        v.finite(name, t)
    v.indices("y", y, num_classes)
    r = torch.softmax(logits, dim=-1) - F.one_hot(y, logits.shape[-1]).to(logits.dtype)
    dz = h @ delta_w.T + (0 if delta_b is None else delta_b)
    norm = torch.sqrt((delta_w ** 2).sum() + (0 if delta_b is None else (delta_b ** 2).sum()))
    if norm == 0:
        return torch.zeros(h.shape[0], dtype=h.dtype)
    return -(r * dz).sum(-1) / norm


def gradmimic_weights(scores: Tensor, temperature: float = 1.0, standardize: bool = True) -> Tensor:
    """Batch weights w = softmax(standardise(m) / tau); they sum to 1 [A11].

    tau -> inf gives uniform weights (the ERM step); constant scores (e.g. theta = theta_ref) give uniform
    weights, never NaN.
    """
    if not isinstance(scores, Tensor) or scores.dim() != 1 or scores.numel() == 0:
        raise ValueError("scores must be a non-empty 1-D tensor (one mimic score per sample)")
    if not torch.isfinite(scores).all():
        raise ValueError("scores contain NaN or inf")
    temperature = _check_temperature(temperature)
    s = scores.detach().double()
    if standardize:
        sd = s.std(unbiased=False)
        s = (s - s.mean()) / sd if sd > 0 else torch.zeros_like(s)
    if math.isinf(temperature):
        return torch.full_like(scores, 1.0 / scores.numel())
    return torch.softmax(s / temperature, dim=0).to(scores.dtype)


# offline stage


class MimicScoreLog:
    """Running record of mimic scores per sample and per epoch; builds the offline filter [A11].

    ``record(index, scores)`` accumulates m_{i,t}; ``aggregate()`` gives s_i = mean_t m_{i,t} (NaN for samples
    never seen); ``filter(...)`` votes and returns a boolean keep-mask over the dataset.
    """

    def __init__(self, num_samples: int) -> None:
        num_samples = v.positive_int("num_samples (the dataset size)", num_samples)
        self.num_samples = num_samples
        self.epoch = 0
        self._sum: list[Tensor] = [torch.zeros(num_samples, dtype=torch.float64)]
        self._cnt: list[Tensor] = [torch.zeros(num_samples, dtype=torch.float64)]

    def new_epoch(self) -> None:
        """Start a new epoch bucket (for the per-epoch sign votes); skip it if you do not need them."""
        if self._cnt[-1].sum() > 0:
            self.epoch += 1
            self._sum.append(torch.zeros(self.num_samples, dtype=torch.float64))
            self._cnt.append(torch.zeros(self.num_samples, dtype=torch.float64))

    def record(self, index: Tensor, scores: Tensor) -> None:
        if not isinstance(scores, Tensor) or scores.dim() != 1:
            raise ValueError(f"scores must be a 1-D tensor (one mimic score per sample), got {v.describe(scores)}")
        v.finite("scores", scores)
        index = torch.as_tensor(index)
        if index.is_floating_point() or index.is_complex():
            raise TypeError(f"index must hold integer dataset positions, got a {index.dtype} tensor")
        index = index.to(torch.long).reshape(-1)
        if index.shape[0] != scores.shape[0]:
            raise ValueError(f"index ({index.shape[0]}) and scores ({scores.shape[0]}) must have the same length")
        if index.numel() and (index.min() < 0 or index.max() >= self.num_samples):
            raise ValueError(f"index out of range [0, {self.num_samples}); pass dataset positions of the batch")
        self._sum[-1].index_add_(0, index, scores.detach().double().cpu())
        self._cnt[-1].index_add_(0, index, torch.ones(index.shape[0], dtype=torch.float64))

    def per_epoch(self) -> Tensor:
        """Mean score per (epoch, sample): Tensor[E, N], NaN where unseen."""
        s, c = torch.stack(self._sum), torch.stack(self._cnt)
        return torch.where(c > 0, s / c.clamp_min(1), torch.full_like(s, float("nan")))

    def aggregate(self) -> Tensor:
        """s_i = mean of m_{i,t} over every step where sample i was seen (NaN if never)."""
        s, c = torch.stack(self._sum).sum(0), torch.stack(self._cnt).sum(0)
        return torch.where(c > 0, s / c.clamp_min(1), torch.full_like(s, float("nan")))

    def votes(self, quantiles: Iterable[float] = (0.1, 0.2, 0.3), epoch_signs: bool = True) -> Tensor:
        """Keep-votes Tensor[R, N]: s_i > 0; s_i > q-quantile of s; per-epoch mean score > 0."""
        s = self.aggregate()
        seen = ~torch.isnan(s)
        if not seen.any():
            raise ValueError("no scores recorded; call record(index, scores) during training first")
        rows = [s > 0]
        for q in quantiles:
            if not 0 < q < 1:
                raise ValueError(f"quantiles must lie in (0, 1), got {q}")
            rows.append(s > torch.quantile(s[seen], q))
        if epoch_signs:
            rows += [e > 0 for e in self.per_epoch() if (~torch.isnan(e)).any()]
        return torch.stack(rows) & seen

    def filter(self, quantiles: Iterable[float] = (0.1, 0.2, 0.3), epoch_signs: bool = True,
               combiner: str = "majority") -> Tensor:
        """Boolean keep-mask over the dataset: keep sample i when a strict majority of votes says keep."""
        if combiner != "majority":
            raise ValueError(f"unknown combiner {combiner!r}; 'majority' is implemented (see README for snorkel)")
        v = self.votes(quantiles, epoch_signs)
        return v.sum(0) * 2 > v.shape[0]


# main class


class GradMimic:
    """Online mimic-score re-weighting for any PyTorch training loop [A11].

        gm = GradMimic(model, ref_model, num_samples=len(dataset))
        loss = gm.weighted_loss(x, y, index)     # sum_i w_i l_i, w = softmax(standardise(m)/tau)
        loss.backward(); optimizer.step()

    ``weighted_loss``'s gradient is sum_i w_i g_i, the Grad-Mimic step; the scores are logged in ``self.log``
    (a :class:`MimicScoreLog`) whenever ``index`` is given, for the offline filter. ``ref_model`` is never
    modified; it must share the model's parameter names and shapes (and, for a meaningful direction, its
    basin: same initialisation or a shared frozen backbone).
    """

    def __init__(self, model: nn.Module, ref_model: nn.Module, *, num_samples: int | None = None,
                 temperature: float = 1.0, standardize: bool = True,
                 params: str | Sequence[str] | nn.Module = "all",
                 loss_fn: LossFn = F.cross_entropy) -> None:
        _check_modules(model=model, ref_model=ref_model)
        temperature = _check_temperature(temperature)
        if not isinstance(standardize, bool):
            raise TypeError(f"standardize must be True or False, got {v.describe(standardize)}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable (logits, targets) -> loss, got {v.describe(loss_fn)}")
        self.names = _select_params(model, params)
        _direction(model, ref_model, self.names)  # validate architecture up front
        self.model, self.ref_model = model, ref_model
        self.temperature, self.standardize, self.loss_fn = temperature, standardize, loss_fn
        self.log = MimicScoreLog(num_samples) if num_samples is not None else None

    def scores(self, x: Tensor, y: Tensor) -> Tensor:
        return mimic_scores(self.model, self.ref_model, x, y, self.loss_fn, self.names)

    def weights(self, x: Tensor, y: Tensor, index: Tensor | None = None) -> Tensor:
        """Detached batch weights (sum to 1); logs the scores under ``index`` if a log exists."""
        m = self.scores(x, y)
        if index is not None and self.log is not None:
            self.log.record(index, m)
        return gradmimic_weights(m, self.temperature, self.standardize)

    def weighted_loss(self, x: Tensor, y: Tensor, index: Tensor | None = None) -> Tensor:
        """sum_i w_i * l(model(x_i), y_i) with Grad-Mimic weights (differentiable in the model only)."""
        w = self.weights(x, y, index)
        per_sample = self.loss_fn(self.model(x), y, reduction="none")  # type: ignore[call-arg]
        return (w * per_sample).sum()
