"""[B15] From imagined futures to actions: trajectory VAE, action-conditioned world model, test-time latent
optimisation, residual inverse dynamics, and the per-step inverse-dynamics baseline.

- TrajectoryVAE (TCN): q(z | a_{1:T}) and a = Dec(z), z in R^8, loss = L1/MSE recon + beta_KL KL, beta = 1e-3.
- ActionConditionedWorldModel F(o_0, p_0, a_{1:T}) -> (O_{1:T}, p_{1:T}): future RGBD frames and end-effector
  positions given actions. Composed with the decoder, G(o_0, z) = F(o_0, p_0, Dec(z)).
- Test-time inference: z* = argmin_z |G_O(o_0, z) - O_hat|_1 + |G_p(o_0, z) - p_hat|_1 / 0.1 + lambda ||z||^2
  (Adam, lr 0.05, 100 steps, 4 restarts; the restart with the lowest objective wins); a_bar = Dec(z*).
- Residual IDM: a_t = a_bar_t + R_phi(O_t, O_{t+1}, p_t, p_{t+1}, a_bar_t) with R_phi's last layer
  zero-initialised, trained to regress a - a_bar on training episodes whose priors come from the same optimisation.
- Per-step IDM (baseline): a_t = I(O_t, O_{t+1}, p_t, p_{t+1}).

Actions are (dx, dy, dz, g_cmd); networks see dx, dy, dz divided by ACTION_SCALE.
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.harness import validate as v

ACTION_SCALE = 0.1
A_DIM = 4


def _check_obs(x: torch.Tensor, name: str, ndim: int) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim or x.shape[-3] != 4:
        raise ValueError(f"{name} must have {ndim} dims with 4 channels (r, g, b, depth) at dim -3, got "
                         f"{tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf; mark missing depth with 0")


def normalise_actions(a: torch.Tensor) -> torch.Tensor:
    return torch.cat([a[..., :3] / ACTION_SCALE, a[..., 3:]], -1)


def denormalise_actions(a: torch.Tensor) -> torch.Tensor:
    return torch.cat([a[..., :3] * ACTION_SCALE, a[..., 3:]], -1)


def _check_hw(hw) -> tuple[int, int]:
    """An image size (h, w) of two positive integers."""
    if not isinstance(hw, (tuple, list)) or len(hw) != 2:
        raise TypeError(f"hw must be an (h, w) pair of positive integers, got {v.describe(hw)}")
    return v.positive_int("hw[0]", hw[0]), v.positive_int("hw[1]", hw[1])


class _FrameEncoder(nn.Module):
    """Small CNN: (N, c_in, h, w) -> (N, dim)."""

    def __init__(self, c_in: int, hw: tuple[int, int], dim: int, width: int = 16):
        super().__init__()
        hw = _check_hw(hw)
        dim, width = v.positive_int("dim", dim), v.positive_int("width", width)
        self.net = nn.Sequential(
            nn.Conv2d(c_in, width, 3, padding=1), nn.GELU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1), nn.GELU(), nn.Flatten(),
            nn.Linear(width * ((hw[0] + 3) // 4) * ((hw[1] + 3) // 4), dim), nn.GELU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# trajectory VAE


class TrajectoryVAE(nn.Module):
    """TCN-VAE over normalised action trajectories (B, T, 4) with latent z (B, z_dim) [B15]."""

    def __init__(self, horizon: int, z_dim: int = 8, width: int = 64, beta: float = 1e-3):
        super().__init__()
        horizon, z_dim, width = (v.positive_int(k, x) for k, x in (("horizon", horizon), ("z_dim", z_dim),
                                                                   ("width", width)))
        beta = v.non_negative("beta", beta)
        self.T, self.z_dim, self.beta = horizon, z_dim, beta
        self.enc = nn.Sequential(nn.Conv1d(A_DIM, width, 3, padding=1), nn.GELU(),
                                 nn.Conv1d(width, width, 3, padding=2, dilation=2), nn.GELU(),
                                 nn.Conv1d(width, width, 3, padding=4, dilation=4), nn.GELU(), nn.Flatten(),
                                 nn.Linear(width * horizon, 2 * z_dim))
        self.dec_in = nn.Linear(z_dim, width * horizon)
        self.dec = nn.Sequential(nn.GELU(), nn.Conv1d(width, width, 3, padding=1), nn.GELU(),
                                 nn.Conv1d(width, width, 3, padding=2, dilation=2), nn.GELU(),
                                 nn.Conv1d(width, A_DIM, 3, padding=1))
        self.width = width

    def encode(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, logvar = self.enc(normalise_actions(a).transpose(1, 2)).chunk(2, -1)
        return mu, logvar.clamp(-10, 5)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """z (B, z_dim) -> metric actions (B, T, 4); g_cmd squashed to (-1, 1) by tanh."""
        h = self.dec_in(z).view(-1, self.width, self.T)
        out = self.dec(h).transpose(1, 2)
        out = torch.cat([out[..., :3], torch.tanh(out[..., 3:])], -1)
        return denormalise_actions(out)

    def loss(self, a: torch.Tensor) -> torch.Tensor:
        mu, logvar = self.encode(a)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        rec = ((normalise_actions(self.decode(z)) - normalise_actions(a)) ** 2).mean()
        kl = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(-1).mean()
        return rec + self.beta * kl


# world model


class ActionConditionedWorldModel(nn.Module):
    """F(o_0, p_0, a_{1:T}) -> (O_{1:T}, p_{1:T}): T future RGBD frames (residual on o_0) and end-effector
    positions (proprioception) [B15].

    o_0 (B, 4, h, w) network-scale RGBD, p_0 (B, 3) metric; actions (B, T, 4) metric. A GRU summarises the
    actions so far; each step's frame is decoded (MLP -> transposed convs) from [enc(o_0), GRU state], and its
    position as p_0 + a linear read-out of the GRU state.
    """

    def __init__(self, hw: tuple[int, int], width: int = 16, dim: int = 64):
        super().__init__()
        hw = _check_hw(hw)
        width, dim = v.positive_int("width", width), v.positive_int("dim", dim)
        if hw[0] % 4 or hw[1] % 4:
            raise ValueError(f"hw must be divisible by 4, got {hw}")
        self.hw, self.width = hw, width
        self.enc = _FrameEncoder(4, hw, dim, width)
        self.gru = nn.GRU(A_DIM, dim, batch_first=True)
        self.fc = nn.Sequential(nn.Linear(2 * dim, dim), nn.GELU(),
                                nn.Linear(dim, width * (hw[0] // 4) * (hw[1] // 4)))
        self.up = nn.Sequential(nn.GELU(), nn.ConvTranspose2d(width, width, 4, stride=2, padding=1), nn.GELU(),
                                nn.ConvTranspose2d(width, 8, 4, stride=2, padding=1), nn.GELU())
        self.out = nn.Conv2d(8 + 4, 4, 3, padding=1)
        self.pos = nn.Linear(dim, 3)

    def forward(self, obs0: torch.Tensor, prop0: torch.Tensor, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        B, T = actions.shape[:2]
        e = self.enc(obs0)
        h, _ = self.gru(normalise_actions(actions))
        f = self.fc(torch.cat([e[:, None].expand(B, T, -1), h], -1))
        f = self.up(f.view(B * T, self.width, self.hw[0] // 4, self.hw[1] // 4))
        o0 = obs0[:, None].expand(B, T, *obs0.shape[1:]).reshape(B * T, *obs0.shape[1:])
        frames = (o0 + self.out(torch.cat([f, o0], 1))).view(B, T, *obs0.shape[1:])
        return frames, prop0[:, None] + ACTION_SCALE * self.pos(h)


# test-time action inference


def infer_actions(world_model: ActionConditionedWorldModel, vae: TrajectoryVAE, obs0: torch.Tensor,
                  prop0: torch.Tensor, target_future: torch.Tensor, target_prop: torch.Tensor, *, steps: int = 100,
                  restarts: int = 4, lr: float = 0.05, lam: float = 1e-3, generator: torch.Generator | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Test-time latent optimisation through the world model [B15].

    z* = argmin_z mean|F_O(o_0, Dec(z)) - O_hat| + mean|F_p(o_0, Dec(z)) - p_hat| / ACTION_SCALE + lam |z|^2,
    Adam(lr), ``restarts`` initialisations per episode (the first at z = 0, the others ~ N(0, I)), all optimised
    in one batch; the best restart per episode wins.

    Args:
        obs0: (B, 4, h, w) network-scale first frames; prop0: (B, 3) end-effector positions.
        target_future: (B, T, 4, h, w) the frames to explain; target_prop: (B, T, 3) their positions.
    Returns:
        (actions a_bar = Dec(z*) (B, T, 4), z* (B, z_dim), final objective (B,)).
    """
    _check_obs(obs0, "obs0", 4)
    _check_obs(target_future, "target_future", 5)
    B = obs0.shape[0]
    if target_future.shape[0] != B or target_future.shape[1] != vae.T:
        raise ValueError(f"target_future must be (B={B}, T={vae.T}, 4, h, w), got {tuple(target_future.shape)}")
    if prop0.shape != (B, 3) or target_prop.shape != (B, vae.T, 3):
        raise ValueError(f"prop0 must be ({B}, 3) and target_prop ({B}, {vae.T}, 3); got {tuple(prop0.shape)}, "
                         f"{tuple(target_prop.shape)}")
    if steps < 1 or restarts < 1 or not lr > 0:
        raise ValueError(f"need steps >= 1, restarts >= 1, lr > 0; got {steps}, {restarts}, {lr}")
    R = restarts
    z0 = torch.randn(R, B, vae.z_dim, generator=generator)
    z0[0] = 0.0
    z = z0.reshape(R * B, -1).clone().requires_grad_(True)
    args = (obs0.repeat(R, 1, 1, 1), prop0.repeat(R, 1), target_future.repeat(R, 1, 1, 1, 1),
            target_prop.repeat(R, 1, 1))
    opt = torch.optim.Adam([z], lr=lr)
    params = list(world_model.parameters()) + list(vae.parameters())
    req = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            per = _objective(world_model, vae, *args, z, lam)
            opt.zero_grad()
            per.sum().backward()
            opt.step()
        with torch.no_grad():
            per = _objective(world_model, vae, *args, z, lam).view(R, B)
            best = per.argmin(0)
            zb = z.detach().view(R, B, -1)[best, torch.arange(B)]
            return vae.decode(zb), zb, per[best, torch.arange(B)]
    finally:
        for p, r in zip(params, req):
            p.requires_grad_(r)


def _objective(wm: ActionConditionedWorldModel, vae: TrajectoryVAE, o0: torch.Tensor, p0: torch.Tensor,
               tgt: torch.Tensor, tgt_p: torch.Tensor, z: torch.Tensor, lam: float) -> torch.Tensor:
    """Per-sample objective: frame L1 + position L1 / ACTION_SCALE + lam |z|^2."""
    frames, prop = wm(o0, p0, vae.decode(z))
    return ((frames - tgt).abs().flatten(1).mean(1) + (prop - tgt_p).abs().flatten(1).mean(1) / ACTION_SCALE
            + lam * (z ** 2).sum(-1))


# inverse dynamics


class InverseDynamics(nn.Module):
    """Per-step IDM baseline: a_t = I(O_t, O_{t+1}, p_t, p_{t+1}); frames (N, 4, h, w), positions (N, 3) ->
    metric actions (N, 4)."""

    def __init__(self, hw: tuple[int, int], width: int = 16, dim: int = 64):
        super().__init__()
        self.enc = _FrameEncoder(8, hw, dim, width)
        self.head = nn.Sequential(nn.Linear(dim + 6, dim), nn.GELU(), nn.Linear(dim, A_DIM))

    def forward(self, o_t: torch.Tensor, o_next: torch.Tensor, p_t: torch.Tensor, p_next: torch.Tensor
                ) -> torch.Tensor:
        f = torch.cat([self.enc(torch.cat([o_t, o_next], 1)), p_t / ACTION_SCALE, (p_next - p_t) / ACTION_SCALE], -1)
        return denormalise_actions(self.head(f))


class WindowInverseDynamics(nn.Module):
    """Windowed per-step IDM baseline: a_t = I(O_{t-past}, ..., O_{t+1+future}, p_{t-past}, ..., p_{t+1+future}).

    The per-step IDM on (O_t, O_{t+1}) cannot tell the grasp step from the still settle steps before it (the grip
    state is not rendered); a window of frames around the step can: a grasp at t is followed by the cube lifting
    with the end effector at t+1 -> t+2. The IDM is given the whole target future, so future frames in the window
    are available at test time. ``window(o, p)`` builds the inputs from episodes (B, T+1, ...) with edge padding.
    """

    def __init__(self, hw: tuple[int, int], past: int = 2, future: int = 2, width: int = 16, dim: int = 64):
        super().__init__()
        if past < 0 or future < 0:
            raise ValueError(f"past and future must be >= 0, got {past}, {future}")
        self.past, self.future = int(past), int(future)
        self.n = self.past + 2 + self.future                     # frames in the window
        self.enc = _FrameEncoder(4 * self.n, hw, dim, width)
        self.head = nn.Sequential(nn.Linear(dim + 3 * self.n + 3, dim), nn.GELU(), nn.Linear(dim, dim), nn.GELU(),
                                  nn.Linear(dim, A_DIM))

    def window(self, o: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Episodes ``o`` (B, T+1, 4, h, w), ``p`` (B, T+1, 3) -> per-step windows (B*T, n*4, h, w), (B*T, n, 3)."""
        _check_obs(o, "o", 5)
        if p.shape != (*o.shape[:2], 3):
            raise ValueError(f"p must be (B, T+1, 3) = {(*o.shape[:2], 3)}, got {tuple(p.shape)}")
        b, t1 = o.shape[:2]
        steps = torch.arange(t1 - 1)
        idx = (steps[:, None] + torch.arange(-self.past, 2 + self.future)[None]).clamp(0, t1 - 1)   # (T, n)
        frames = o[:, idx].reshape(b * (t1 - 1), self.n * 4, *o.shape[-2:])
        return frames, p[:, idx].reshape(b * (t1 - 1), self.n, 3)

    def forward(self, frames: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        centre = pos[:, self.past: self.past + 1]                # p_t
        if frames.ndim != 4 or frames.shape[1] != 4 * self.n or pos.shape != (frames.shape[0], self.n, 3):
            raise ValueError(f"expected frames (N, {4 * self.n}, h, w) and positions (N, {self.n}, 3) from "
                             f"window(), got {tuple(frames.shape)} and {tuple(pos.shape)}")
        f = torch.cat([self.enc(frames), ((pos - centre) / ACTION_SCALE).flatten(1), centre[:, 0] / ACTION_SCALE], -1)
        return denormalise_actions(self.head(f))


class ResidualIDM(nn.Module):
    """Residual inverse dynamics: a_t = a_bar_t + R_phi(O_t, O_{t+1}, p_t, p_{t+1}, a_bar_t); R_phi's last layer is
    zero, so at initialisation the output is exactly the prior a_bar [B15]."""

    def __init__(self, hw: tuple[int, int], width: int = 16, dim: int = 64):
        super().__init__()
        self.enc = _FrameEncoder(8, hw, dim, width)
        self.head = nn.Sequential(nn.Linear(dim + 6 + A_DIM, dim), nn.GELU(), nn.Linear(dim, A_DIM))
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)

    def forward(self, o_t: torch.Tensor, o_next: torch.Tensor, p_t: torch.Tensor, p_next: torch.Tensor,
                a_bar: torch.Tensor) -> torch.Tensor:
        if a_bar.shape != (o_t.shape[0], A_DIM):
            raise ValueError(f"a_bar must be (N, {A_DIM}), got {tuple(a_bar.shape)}")
        f = torch.cat([self.enc(torch.cat([o_t, o_next], 1)), p_t / ACTION_SCALE, (p_next - p_t) / ACTION_SCALE,
                       normalise_actions(a_bar)], -1)
        return a_bar + denormalise_actions(self.head(f))
