"""HO-SFL: hybrid-order split federated learning [A12].

Paper: "HO-SFL: Hybrid-Order Split Federated Learning with Backprop-Free Clients and Dimension-Free
Aggregation" (Chen, Wu, Wang, Chen; arXiv 2603.14773). Code is not public; this is a reconstruction.

Lifted problem (client net c(.; w_c), server net s(.; w_s), clients k = 1..K with n_k samples):

    min  sum_k (n_k/n) l(s(z_k; w_s), y_k)   s.t.   z_k = c(x_k; w_c)
    L = sum_k [ l + lambda_k^T (c_k - z_k) + (rho/2) ||c_k - z_k||^2 ]

Round t:
  1. client k: no-grad forward h_k = c(x_k; w_c); uplink h_k, y_k.
  2. server: z_k = h_k, backprop, update w_s, downlink lambda_k = grad_{z_k} l_k (first order).
  3. client k: psi_k(w) = <lambda_k, c(x_k; w)> + (rho/2) ||c(x_k; w) - h_k||^2   (grad at w_c = J^T lambda_k)
     u_p ~ N(0, I_{d_c}) from the shared seed hash(seed, t, p);
     delta_{k,p} = [psi_k(w + eps u_p) - psi_k(w - eps u_p)] / (2 eps)      (or the exact jvp)
     uplink the P scalars delta_{k,p}.
  4. dimension-free aggregation: delta_bar_p = sum_k (n_k/n) delta_{k,p}; downlink P scalars; every replica
     applies g_c = (1/P) sum_p delta_bar_p u_p (regenerating u_p from the seed) through the client optimizer.

The clients' replicas stay identical, so one client module simulates all of them. Baselines in the same
protocol: :class:`FOSFL` (client backprop + FedAvg of gradients), :class:`FrozenClientSFL`, :class:`ZOFL`
(whole-model zeroth order with seed/scalar aggregation, MeZO / DeComFL style).
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, jvp
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from icml26.harness import validate as v

Batch = tuple[Tensor, Tensor]
Params = dict[str, Tensor]

# helper functions


def nbytes(t: Tensor) -> int:
    """Bytes of a tensor as sent over the wire: numel * element size."""
    return t.numel() * t.element_size()


def perturbation_seed(seed: int, t: int, p: int) -> int:
    """The shared seed hash(seed, t, p) every party derives u_p from [A12]."""
    seed, t, p = v.non_negative_int("seed", seed), v.non_negative_int("t", t), v.non_negative_int("p", p)
    return int(np.random.SeedSequence([seed, t, p]).generate_state(1, dtype=np.uint64)[0] % (2**63 - 1))


def sample_directions(params: Mapping[str, Tensor], seed: int) -> Params:
    """u ~ N(0, I) with the shape of ``params``, drawn from ``seed`` on CPU (same on every party)."""
    _check_params(params)
    g = torch.Generator().manual_seed(v.non_negative_int("seed", seed))
    return {n: torch.randn(p.shape, generator=g, dtype=p.dtype).to(p.device) for n, p in params.items()}


def _check_params(params: object, name: str = "params") -> None:
    if not isinstance(params, Mapping) or not all(isinstance(t, Tensor) for t in params.values()):
        raise TypeError(f"{name} must be a mapping name -> tensor (e.g. dict(model.named_parameters())), "
                        f"got {v.describe(params)}")
    if not params:
        raise ValueError(f"{name} is empty; pass at least one parameter tensor")


def _check_like(u: object, params: Mapping[str, Tensor], name: str) -> None:
    """``u`` has the keys and shapes of ``params`` (a direction in parameter space)."""
    _check_params(u, name)
    if set(u) != set(params):
        raise ValueError(f"{name} has keys {sorted(u)[:5]} but the parameters have {sorted(params)[:5]}")
    bad = [n for n in params if tuple(u[n].shape) != tuple(params[n].shape)]
    if bad:
        raise ValueError(f"{name}[{bad[0]!r}] has shape {tuple(u[bad[0]].shape)}, the parameter has "
                         f"{tuple(params[bad[0]].shape)}")


def _check_scalars(scalars: object, n: int | None = None) -> Tensor:
    if not isinstance(scalars, Tensor) or scalars.dim() != 1:
        raise ValueError(f"scalars must be a 1-D tensor of P directional derivatives, got {v.describe(scalars)}")
    if not all(math.isfinite(x) for x in scalars.tolist()):     # no tensor allocated (memory is metered)
        raise ValueError("scalars has NaN or infinite entries; the directional derivatives must be finite")
    if n is not None and len(scalars) != n:
        raise ValueError(f"need one scalar per direction, got {len(scalars)} scalars and {n} directions")
    return scalars


def _check_seeds(seeds: object) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence):
        raise TypeError(f"seeds must be a sequence of ints (one per direction), got {v.describe(seeds)}")
    v.non_empty("seeds", seeds)
    return [v.non_negative_int(f"seeds[{i}]", s) for i, s in enumerate(seeds)]


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"perturbation scale eps (mu) must be finite and > 0, got {eps!r}; the paper's default "
                         "is 1e-3")


def directional_derivatives(fn: Callable[[Params], Tensor], params: Params, directions: Iterable[Params],
                            eps: float = 1e-3, estimator: str = "spsa") -> Tensor:
    """delta_p ~ <grad fn(params), u_p> for each direction, Tensor[P] [A12].

    ``spsa``: [fn(w + eps u) - fn(w - eps u)] / (2 eps) (two forward passes, exact for quadratics);
    ``jvp``: the exact directional derivative by forward-mode AD (still backprop-free).
    ``directions`` may be a lazy iterable: only one direction is alive at a time.
    """
    _check_eps(eps)
    if estimator not in ("spsa", "jvp"):
        raise ValueError(f"unknown estimator {estimator!r}; use 'spsa' or 'jvp'")
    if not callable(fn):
        raise TypeError(f"fn must be callable params -> scalar loss, got {v.describe(fn)}")
    _check_params(params)
    out = []
    for p, u in enumerate(directions):
        _check_like(u, params, f"directions[{p}]")
        if estimator == "spsa":
            plus = fn({n: w + eps * u[n] for n, w in params.items()})
            minus = fn({n: w - eps * u[n] for n, w in params.items()})
            out.append((plus - minus) / (2 * eps))
        else:
            out.append(jvp(fn, (params,), (u,))[1])
        if out[-1].numel() != 1:
            raise ValueError(f"fn must return a scalar loss, got a tensor of shape {tuple(out[-1].shape)}")
        if not math.isfinite(float(out[-1].reshape(()))):         # no tensor allocated (memory is metered)
            raise ValueError(f"the directional derivative along direction {p} is NaN or inf: fn returned a "
                             "non-finite value near params (check the loss, or use a smaller eps)")
    if not out:
        raise ValueError("directions is empty; pass at least one direction")
    return torch.stack([o.reshape(()) for o in out]).detach()


def zo_directional_scalars(fn: Callable[[Params], Tensor], params: Params, seeds: Sequence[int],
                           eps: float = 1e-3, estimator: str = "spsa") -> Tensor:
    """The P scalars a zeroth-order party uploads: directional derivatives along u_p = N(0, I)[seed_p].

    Each u_p is drawn from its seed when it is needed and dropped after use (MeZO-style), so the client holds
    one direction at a time, not P.
    """
    seeds = _check_seeds(seeds)
    return directional_derivatives(fn, params, (sample_directions(params, s) for s in seeds), eps, estimator)


def zo_combine(scalars: Tensor, directions: Sequence[Params]) -> Params:
    """g = (1/P) sum_p delta_p u_p, an unbiased estimate of the gradient since E[u u^T] = I."""
    if not isinstance(directions, Sequence) or not directions:
        raise ValueError(f"directions must be a non-empty sequence of parameter dicts, got {v.describe(directions)}")
    _check_params(directions[0], "directions[0]")
    for p, u in enumerate(directions[1:], 1):
        _check_like(u, directions[0], f"directions[{p}]")
    scalars = _check_scalars(scalars, len(directions))
    P = len(directions)
    return {n: sum(scalars[p] * directions[p][n] for p in range(P)) / P for n in directions[0]}


def zo_combine_seeded(scalars: Tensor, params: Mapping[str, Tensor], seeds: Sequence[int]) -> Params:
    """:func:`zo_combine` with u_p regenerated from ``seeds`` one at a time (same result, one direction alive)."""
    scalars = _check_scalars(scalars)
    _check_params(params)
    seeds = _check_seeds(seeds)
    if len(seeds) != len(scalars):
        raise ValueError(f"need one seed per scalar, got {len(seeds)} seeds and {len(scalars)} scalars")
    acc: Params = {}
    for p, s in enumerate(seeds):
        u = sample_directions(params, s)
        for n in u:
            term = scalars[p] * u[n]
            acc[n] = term if p == 0 else acc[n].add_(term)
    return {n: a / len(seeds) for n, a in acc.items()}


def _check_callable(fn: object, name: str = "fn") -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {v.describe(fn)}")


class SavedActivationCounter:
    """Context manager counting bytes autograd saves for backward (``saved_tensors_hooks``) [A12].

    Tensors sharing storage with ``exclude`` (the module's own parameters) are not counted: they are weights,
    not activation memory.
    """

    def __init__(self, exclude: nn.Module | None = None) -> None:
        if exclude is not None and not isinstance(exclude, nn.Module):
            raise TypeError(f"exclude must be an nn.Module (whose parameters are not activations) or None, "
                            f"got {v.describe(exclude)}")
        self._skip = {p.untyped_storage().data_ptr() for p in exclude.parameters()} if exclude is not None else set()
        self.bytes = 0

    def _pack(self, t: Tensor) -> Tensor:
        if t.untyped_storage().data_ptr() not in self._skip:
            self.bytes += nbytes(t)
        return t

    def __enter__(self) -> "SavedActivationCounter":
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)


def count_saved_activation_bytes(fn: Callable[[], object], exclude: nn.Module | None = None) -> int:
    """Bytes of activations autograd saves while running ``fn()`` (0 for a backprop-free client)."""
    _check_callable(fn)
    with SavedActivationCounter(exclude) as c:
        fn()
    return c.bytes


class PeakMemoryMeter(TorchDispatchMode):
    """Peak bytes of tensor storage created while the meter is active and still alive [A12].

    Every op run inside ``with meter:`` (forward, backward, random draws) is seen at the dispatch level; each new
    output storage is counted until it is freed (wherever that happens), so ``peak_bytes`` is the high-water
    mark of the memory this computation allocated on top of what existed before (weights and inputs are not
    counted; in-place ops and views add nothing). The meter can be entered several times (e.g. the client's
    phases of one round); tensors created in one phase and kept (a first-order client's saved activations)
    stay counted across the phases in between.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live_bytes = 0
        self.peak_bytes = 0
        self._live: set[int] = set()

    def _free(self, key: int, nb: int) -> None:
        self._live.discard(key)
        self.live_bytes -= nb

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, Tensor) and t.layout == torch.strided and t.device.type != "meta":
                st = t.untyped_storage()
                key = st._cdata
                if key not in self._live and st.nbytes() > 0:
                    nb = st.nbytes()
                    self._live.add(key)
                    self.live_bytes += nb
                    self.peak_bytes = max(self.peak_bytes, self.live_bytes)
                    weakref.finalize(st, self._free, key, nb)
        return out


def peak_memory_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes of tensor memory ``fn()`` allocates on top of what already exists (see :class:`PeakMemoryMeter`)."""
    _check_callable(fn)
    meter = PeakMemoryMeter()
    with meter:
        fn()
    return meter.peak_bytes


class SplitModel(nn.Module):
    """server(client(x)): the client net runs on the device, the server net on the server [A12]."""

    def __init__(self, client: nn.Module, server: nn.Module) -> None:
        for name, m in (("client", client), ("server", server)):
            if not isinstance(m, nn.Module):
                raise TypeError(f"{name} must be an nn.Module, got {v.describe(m)}")
        super().__init__()
        self.client, self.server = client, server

    def forward(self, x: Tensor) -> Tensor:
        return self.server(self.client(x))


@dataclass(frozen=True)
class RoundStats:
    """What one round cost: mean training loss, bytes per direction (summed over clients), the bytes autograd
    saved on the client side (activation memory that backprop would need) and the client side's peak memory
    (every tensor the clients' computation allocated and still held, all clients of the round together; see
    :class:`PeakMemoryMeter`)."""

    loss: float
    uplink_bytes: int
    downlink_bytes: int
    aggregation_uplink_bytes: int
    client_saved_bytes: int
    bytes_by_kind: dict[str, int]
    client_peak_bytes: int = 0


class _Channel:
    """Counts every tensor that crosses the client/server boundary (and returns it unchanged)."""

    def __init__(self) -> None:
        self.up: dict[str, int] = defaultdict(int)
        self.down: dict[str, int] = defaultdict(int)

    def send_up(self, t: Tensor, kind: str) -> Tensor:
        self.up[kind] += nbytes(t)
        return t

    def send_down(self, t: Tensor, kind: str) -> Tensor:
        self.down[kind] += nbytes(t)
        return t

    def stats(self, loss: float, saved: int, peak: int = 0) -> RoundStats:
        kinds = {f"up/{k}": v for k, v in self.up.items()} | {f"down/{k}": v for k, v in self.down.items()}
        return RoundStats(loss, sum(self.up.values()), sum(self.down.values()), self.up.get("aggregation", 0),
                          saved, kinds, peak)


def _check_batches(batches: Sequence[Batch]) -> list[Batch]:
    if not isinstance(batches, (list, tuple)) or len(batches) == 0:
        raise ValueError("batches must be a non-empty list with one (x, y) batch per client")
    for k, b in enumerate(batches):
        if not (isinstance(b, (list, tuple)) and len(b) == 2 and all(isinstance(t, Tensor) for t in b)):
            raise TypeError(f"client {k}: expected an (x, y) pair of tensors")
        x, y = b
        if x.dim() == 0 or x.shape[0] == 0:
            raise ValueError(f"client {k}: empty batch (x has shape {tuple(x.shape)}); drop clients with no data")
        if y.dim() == 0 or y.shape[0] != x.shape[0]:
            raise ValueError(f"client {k}: x {tuple(x.shape)} and y {tuple(y.shape)} differ in batch size")
        if x.is_floating_point() and not torch.isfinite(x).all():
            raise ValueError(f"client {k}: x contains NaN or inf")
        x0, y0 = batches[0]
        if x.shape[1:] != x0.shape[1:] or y.shape[1:] != y0.shape[1:] or y.dtype != y0.dtype:
            raise ValueError(f"client {k}: x {tuple(x.shape)}, y {tuple(y.shape)} {y.dtype} do not match client 0's "
                             f"x {tuple(x0.shape)}, y {tuple(y0.shape)} {y0.dtype} beyond the batch size")
    return list(batches)


def _check_targets(loss_fn: Callable[..., Tensor], out: Tensor, y: Tensor) -> None:
    """Class labels for the default cross-entropy loss: 1-D integers in [0, n_classes) of the model's output."""
    if loss_fn is not F.cross_entropy:
        return
    if not y.is_floating_point():
        if y.dim() != 1:
            raise ValueError(f"y must be a 1-D tensor of class labels, got shape {tuple(y.shape)}")
        labels = y.tolist()                                           # no tensor allocated (memory is metered)
        if labels and (min(labels) < 0 or max(labels) >= out.shape[-1]):
            raise ValueError(f"y must hold class labels in [0, {out.shape[-1]}) (the model's output width), got "
                             f"values from {min(labels)} to {max(labels)}")
    elif y.shape != out.shape:
        raise ValueError(f"y must hold class labels (an integer tensor) or class probabilities of the output's "
                         f"shape {tuple(out.shape)}, got a {y.dtype} tensor of shape {tuple(y.shape)}")


def _forward(module: nn.Module, x: Tensor, k: int | None, what: str = "client model") -> Tensor:
    try:
        return module(x)
    except RuntimeError as err:
        who = "" if k is None else f"client {k}: "
        raise ValueError(f"{who}the {what} cannot take an input of shape {tuple(x.shape)} ({err})") from None


def _trainable(module: nn.Module, what: str) -> list[nn.Parameter]:
    ps = [p for p in module.parameters() if p.requires_grad]
    if not ps:
        raise ValueError(f"the {what} has no trainable parameters; nothing to train there "
                         "(use FrozenClientSFL for a fixed client)")
    return ps


def _check_owns(optimizer: object, module: nn.Module, what: str, arg: str) -> None:
    """``optimizer`` must be a torch Optimizer over ``module``'s trainable parameters and nothing outside it: a
    missing parameter would never be updated, and a foreign one (e.g. the server's) would be stepped twice."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"{arg} must be a torch.optim.Optimizer over the {what}'s parameters, "
                        f"got {type(optimizer).__name__}")
    owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
    names = {id(p): n for n, p in module.named_parameters() if p.requires_grad}
    missing = [n for i, n in names.items() if i not in owned]
    extra = len(owned - {id(p) for p in module.parameters()})   # frozen parameters of the module are fine
    if missing or extra:
        raise ValueError(f"{arg} must own exactly the {what}'s trainable parameters: "
                         + (f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}" if missing else "")
                         + ("; " if missing and extra else "")
                         + (f"it also holds {extra} tensor(s) that are not the {what}'s" if extra else "")
                         + f"; build it as torch.optim.SGD({what.split()[0]}.parameters(), lr=...)")


def _check_rho(rho: object) -> float:
    if isinstance(rho, bool) or not isinstance(rho, (int, float)):
        raise TypeError(f"rho must be a real number >= 0, got {type(rho).__name__}")
    if not (math.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho (the augmented-Lagrangian penalty) must be finite and >= 0, got {rho}; "
                         "the default 0 uses the plain Lagrangian")
    return float(rho)


# main classes


class _SplitFed:
    """Shared server side of the split-learning protocols: one shared server model (SplitFed-V2 style)."""

    def __init__(self, split: SplitModel, server_optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[..., Tensor] = F.cross_entropy) -> None:
        if not isinstance(split, SplitModel):
            raise TypeError(f"split must be a SplitModel(client, server), got {type(split).__name__}")
        _trainable(split.server, "server model")
        _check_owns(server_optimizer, split.server, "server model", "server_optimizer")
        _check_callable(loss_fn, "loss_fn")
        self.split, self.server_optimizer, self.loss_fn = split, server_optimizer, loss_fn
        self.t = 0

    def _server_step(self, hs: list[Tensor], ys: list[Tensor]) -> tuple[list[Tensor], float]:
        """Backprop on the server from z = h; update w_s; return lambda_k = grad_{z_k} of client k's mean loss."""
        sizes = [len(y) for y in ys]
        z = torch.cat(hs).detach().requires_grad_(True)
        out, y = _forward(self.split.server, z, None, "server model"), torch.cat(ys)
        _check_targets(self.loss_fn, out, y)
        loss = self.loss_fn(out, y)  # = sum_k (n_k/n) * mean loss of client k
        self.server_optimizer.zero_grad()
        loss.backward()
        self.server_optimizer.step()
        n = z.shape[0]
        lams = [g * (n / nk) for g, nk in zip(z.grad.split(sizes), sizes)]
        return lams, float(loss.detach())


class HOSFL(_SplitFed):
    """Hybrid-order split FL: first-order server, zeroth-order (backprop-free) clients [A12].

        ho = HOSFL(SplitModel(client, server), torch.optim.SGD(client.parameters(), lr=0.05),
                   torch.optim.Adam(server.parameters(), lr=1e-3))
        stats = ho.round([(x_1, y_1), ..., (x_K, y_K)])     # one (x, y) batch per client

    ``eps`` is the perturbation scale mu; ``rho`` the augmented-Lagrangian penalty (0 by default; the gradient
    of psi at w_c is J^T lambda for any rho); ``estimator`` ``"spsa"`` or ``"jvp"``.
    """

    def __init__(self, split: SplitModel, client_optimizer: torch.optim.Optimizer,
                 server_optimizer: torch.optim.Optimizer, *, num_perturbations: int = 8, eps: float = 1e-3,
                 rho: float = 0.0, estimator: str = "spsa", seed: int = 0,
                 loss_fn: Callable[..., Tensor] = F.cross_entropy) -> None:
        super().__init__(split, server_optimizer, loss_fn)
        _trainable(split.client, "client model")
        _check_owns(client_optimizer, split.client, "client model", "client_optimizer")
        _check_eps(eps)
        v.positive_int("num_perturbations", num_perturbations)
        v.non_negative_int("seed", seed)
        rho = _check_rho(rho)
        if estimator not in ("spsa", "jvp"):
            raise ValueError(f"unknown estimator {estimator!r}; use 'spsa' or 'jvp'")
        self.client_optimizer = client_optimizer
        self.P, self.eps, self.rho, self.estimator, self.seed = num_perturbations, eps, rho, estimator, seed

    def psi(self, w: Params, x: Tensor, lam: Tensor, h: Tensor) -> Tensor:
        """psi_k(w) = <lambda_k, c(x_k; w)> + (rho/2) ||c(x_k; w) - h_k||^2."""
        c = functional_call(self.split.client, w, (x,))
        if self.rho == 0.0:  # plain Lagrangian: h is not needed, and skipping the penalty saves two buffers
            return (lam * c).sum()
        return (lam * c).sum() + 0.5 * self.rho * ((c - h) ** 2).sum()

    def round(self, batches: Sequence[Batch]) -> RoundStats:
        batches = _check_batches(batches)
        client, ch = self.split.client, _Channel()
        seeds = [perturbation_seed(self.seed, self.t, p) for p in range(self.P)]
        w = {n: p.detach() for n, p in client.named_parameters()}
        mem = SavedActivationCounter(exclude=client)  # wraps every client-side computation, nothing else
        peak = PeakMemoryMeter()
        with mem, peak, torch.no_grad():
            hs = [ch.send_up(_forward(client, x, k), "activations") for k, (x, _) in enumerate(batches)]
        ys = [ch.send_up(y, "labels") for _, y in batches]
        lams, loss = self._server_step(hs, ys)
        lams = [ch.send_down(lam, "gradients") for lam in lams]
        if self.rho == 0.0:  # psi does not use h_k: a client drops its activations once they are sent
            hs = [None] * len(hs)
        n = sum(len(y) for y in ys)
        with mem, peak, torch.no_grad():
            deltas = [ch.send_up(zo_directional_scalars(lambda v, x=x, lam=lam, h=h: self.psi(v, x, lam, h), w, seeds,
                                                        self.eps, self.estimator), "aggregation")
                      for (x, _), lam, h in zip(batches, lams, hs)]
        delta_bar = sum((len(y) / n) * d for (_, y), d in zip(batches, deltas))
        for _ in batches:
            ch.send_down(delta_bar, "aggregation")
        with mem, peak, torch.no_grad():
            g = zo_combine_seeded(delta_bar, w, seeds)
        for name, p in client.named_parameters():
            p.grad = g[name]
        self.client_optimizer.step()
        self.t += 1
        return ch.stats(loss, mem.bytes, peak.peak_bytes)


class FOSFL(_SplitFed):
    """First-order split FL baseline: client backprop of J^T lambda_k and FedAvg of the d_c-dim gradients."""

    def __init__(self, split: SplitModel, client_optimizer: torch.optim.Optimizer,
                 server_optimizer: torch.optim.Optimizer, *, loss_fn: Callable[..., Tensor] = F.cross_entropy) -> None:
        super().__init__(split, server_optimizer, loss_fn)
        self.client_params = _trainable(split.client, "client model")
        _check_owns(client_optimizer, split.client, "client model", "client_optimizer")
        self.client_optimizer = client_optimizer

    def round(self, batches: Sequence[Batch]) -> RoundStats:
        batches = _check_batches(batches)
        client, ch = self.split.client, _Channel()
        peak = PeakMemoryMeter()
        with SavedActivationCounter(exclude=client) as mem, peak:
            hs = [_forward(client, x, k) for k, (x, _) in enumerate(batches)]
        ys = [ch.send_up(y, "labels") for _, y in batches]
        lams, loss = self._server_step([ch.send_up(h.detach(), "activations") for h in hs], ys)
        n = sum(len(y) for y in ys)
        with peak:
            avg = [torch.zeros_like(p) for p in self.client_params]
            for k, (lam, y) in enumerate(zip(lams, ys)):  # each client: J^T lambda_k by backprop, then FedAvg
                gk = torch.autograd.grad(hs[k], self.client_params, ch.send_down(lam, "gradients"))
                hs[k] = None                              # client k's graph is freed after its backward
                for a, gi in zip(avg, gk):
                    a += (len(y) / n) * ch.send_up(gi, "aggregation")
                del gk
        for p, a in zip(self.client_params, avg):
            for _ in batches:
                ch.send_down(a, "aggregation")
            p.grad = a
        self.client_optimizer.step()
        self.t += 1
        return ch.stats(loss, mem.bytes, peak.peak_bytes)


class FrozenClientSFL(_SplitFed):
    """Split FL with a fixed client net: only the server learns (lower bound on what client learning adds)."""

    def round(self, batches: Sequence[Batch]) -> RoundStats:
        batches = _check_batches(batches)
        ch = _Channel()
        peak = PeakMemoryMeter()
        with SavedActivationCounter(exclude=self.split.client) as mem, peak, torch.no_grad():
            hs = [ch.send_up(_forward(self.split.client, x, k), "activations") for k, (x, _) in enumerate(batches)]
        _, loss = self._server_step(hs, [ch.send_up(y, "labels") for _, y in batches])
        self.t += 1
        return ch.stats(loss, mem.bytes, peak.peak_bytes)


class ZOFL:
    """Whole-model zeroth-order FL with seed/scalar aggregation (MeZO / DeComFL style) [A12 baseline].

    Each client uploads P directional derivatives of its own mean loss; every replica applies
    (1/P) sum_p delta_bar_p u_p through ``optimizer``. No activations cross the network.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, num_perturbations: int = 8,
                 eps: float = 1e-3, seed: int = 0, loss_fn: Callable[..., Tensor] = F.cross_entropy) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {v.describe(model)}")
        _trainable(model, "model")
        _check_owns(optimizer, model, "model", "optimizer")
        _check_eps(eps)
        v.positive_int("num_perturbations", num_perturbations)
        v.non_negative_int("seed", seed)
        _check_callable(loss_fn, "loss_fn")
        self.model, self.optimizer, self.P, self.eps, self.seed, self.loss_fn = (
            model, optimizer, num_perturbations, eps, seed, loss_fn)
        self.t = 0

    def _client_loss(self, k: int, x: Tensor, y: Tensor) -> float:
        out = _forward(self.model, x, k, "model")
        _check_targets(self.loss_fn, out, y)
        return float(self.loss_fn(out, y))

    def round(self, batches: Sequence[Batch]) -> RoundStats:
        batches = _check_batches(batches)
        ch = _Channel()
        seeds = [perturbation_seed(self.seed, self.t, p) for p in range(self.P)]
        w = {n: p.detach() for n, p in self.model.named_parameters()}
        n = sum(len(y) for _, y in batches)
        peak = PeakMemoryMeter()
        with SavedActivationCounter(exclude=self.model) as mem, peak, torch.no_grad():
            loss = sum(len(y) / n * self._client_loss(k, x, y) for k, (x, y) in enumerate(batches))
            deltas = [ch.send_up(zo_directional_scalars(
                lambda v, x=x, y=y: self.loss_fn(functional_call(self.model, v, (x,)), y), w, seeds, self.eps),
                "aggregation") for x, y in batches]
            delta_bar = sum((len(y) / n) * d for (_, y), d in zip(batches, deltas))
            for _ in batches:
                ch.send_down(delta_bar, "aggregation")
            g = zo_combine_seeded(delta_bar, w, seeds)
        for name, p in self.model.named_parameters():
            p.grad = g[name]
        self.optimizer.step()
        self.t += 1
        return ch.stats(loss, mem.bytes, peak.peak_bytes)
