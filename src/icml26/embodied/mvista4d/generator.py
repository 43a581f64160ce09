"""[B15] Multi-view RGBD generator: camera embedding, geometric warping prior, cross-modality (RGB <-> depth) fusion.

G_psi(o_src, c_src, c_tgt) predicts the RGBD image of the target view from one source RGBD image.

- Camera embedding: sinusoidal features of (azimuth, elevation, radius) of both cameras, gamma(x) =
  [sin(2^k x), cos(2^k x)]_{k<3}, mapped by an MLP to a FiLM scale/shift of the bottleneck features.
- Geometric cross-view prior (stands in for the paper's epipolar deformable attention): back-project the source,
  X = R_s^T (d K^-1 [u, v, 1]^T - t_s), z-buffer X into the target view; the warped RGBD and its validity mask
  are inputs of the network.
- Cross-modality fusion: an RGB branch and a depth branch (each a small U-Net) with a gated exchange at every
  level, h_rgb <- h_rgb + sigmoid(W_g h_d) * W_v h_d and symmetrically (1x1 convs). Without it the branches
  never see each other's modality.
- Loss: L1(rgb) + L1(depth) + 0.1 * reprojection consistency, the L1 between the predicted target depth and the
  warped source depth where the warp is valid.
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.harness import validate as v

from .geometry import Camera, camera_angles, warp_rgbd

DEPTH_OFFSET = 0.9   # network depth = metric depth - DEPTH_OFFSET (cameras sit ~0.9 m from the table)

# helper functions


def camera_embedding(cam: Camera, n_freq: int = 3) -> torch.Tensor:
    """Sinusoidal embedding of the camera's spherical coordinates (azimuth, elevation, radius): (6 * n_freq,)."""
    if not isinstance(cam, Camera):
        raise TypeError(f"cam must be a Camera, got {v.describe(cam)}")
    n_freq = v.positive_int("n_freq", n_freq)
    ang = torch.tensor(camera_angles(cam), dtype=torch.float32)
    f = 2.0 ** torch.arange(n_freq, dtype=torch.float32)
    x = ang[:, None] * f
    return torch.cat([torch.sin(x), torch.cos(x)], -1).reshape(-1)


def to_net(rgbd: torch.Tensor) -> torch.Tensor:
    """Metric RGBD -> network scale (depth shifted by DEPTH_OFFSET)."""
    return torch.cat([rgbd[:, :3], rgbd[:, 3:] - DEPTH_OFFSET], 1)


def from_net(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[:, :3], (x[:, 3:] + DEPTH_OFFSET).clamp_min(0.0)], 1)


class _Branch(nn.Module):
    """One modality's U-Net: 3 levels (H, H/2, H/4), FiLM from the camera embedding at the bottleneck."""

    def __init__(self, c_in: int, c_out: int, width: int, emb: int):
        super().__init__()
        w = width
        self.e0 = nn.Sequential(nn.Conv2d(c_in, w, 3, padding=1), nn.GELU())
        self.e1 = nn.Sequential(nn.Conv2d(w, 2 * w, 3, stride=2, padding=1), nn.GELU())
        self.e2 = nn.Sequential(nn.Conv2d(2 * w, 2 * w, 3, stride=2, padding=1), nn.GELU(),
                                nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.GELU())
        self.film = nn.Linear(emb, 4 * w)
        self.d1 = nn.Sequential(nn.Conv2d(4 * w, w, 3, padding=1), nn.GELU())
        self.d0 = nn.Sequential(nn.Conv2d(2 * w, w, 3, padding=1), nn.GELU())
        self.out = nn.Conv2d(w, c_out, 1)


class _Exchange(nn.Module):
    """Gated exchange between two feature maps: a <- a + sigmoid(g(b)) * v(b), b <- b + sigmoid(g'(a)) * v'(a)."""

    def __init__(self, c: int):
        super().__init__()
        self.ga, self.va, self.gb, self.vb = (nn.Conv2d(c, c, 1) for _ in range(4))
        for m in (self.va, self.vb):
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a + torch.sigmoid(self.ga(b)) * self.va(b), b + torch.sigmoid(self.gb(a)) * self.vb(a)


# main class


class MultiViewRGBDGenerator(nn.Module):
    """Predict a target view's RGBD from a single source RGBD view [B15].

    Args:
        width: channels of the first level of each branch.
        use_geometry: feed the z-buffered warp of the source into the target view (and its mask).
        cross_modal: gated RGB <-> depth exchange at every level.
    """

    def __init__(self, width: int = 16, *, use_geometry: bool = True, cross_modal: bool = True, n_freq: int = 3):
        super().__init__()
        width, n_freq = v.positive_int("width", width), v.positive_int("n_freq", n_freq)
        self.use_geometry, self.cross_modal, self.n_freq = bool(use_geometry), bool(cross_modal), n_freq
        emb = 2 * 6 * n_freq
        self.cam_mlp = nn.Sequential(nn.Linear(emb, 64), nn.GELU(), nn.Linear(64, 64))
        extra = 1 if use_geometry else 0
        self.rgb = _Branch(3 + (3 if use_geometry else 0) + extra, 3, width, 64)
        self.dep = _Branch(1 + (1 if use_geometry else 0) + extra, 1, width, 64)
        if cross_modal:
            self.x0, self.x1, self.x2 = _Exchange(width), _Exchange(2 * width), _Exchange(2 * width)

    def inputs(self, rgbd_src: torch.Tensor, cam_src: Camera, cam_tgt: Camera
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(source in network scale, warped source in network scale, warp mask) for one camera pair."""
        if not isinstance(rgbd_src, torch.Tensor) or rgbd_src.dim() != 4 or rgbd_src.shape[1] != 4:
            raise ValueError(f"rgbd_src must be (B, 4, H, W), got "
                             f"{tuple(rgbd_src.shape) if isinstance(rgbd_src, torch.Tensor) else type(rgbd_src)}")
        if not torch.isfinite(rgbd_src).all():
            raise ValueError("rgbd_src contains NaN or inf; mark missing depth with 0")
        warped, mask = warp_rgbd(rgbd_src, cam_src, cam_tgt)
        return to_net(rgbd_src), to_net(warped) * mask, mask

    def forward_prepared(self, src: torch.Tensor, warped: torch.Tensor, mask: torch.Tensor, emb: torch.Tensor
                         ) -> torch.Tensor:
        """Network pass on prepared inputs; emb (B, 12 n_freq) = [gamma(c_src), gamma(c_tgt)]. Returns network-scale RGBD."""
        if self.use_geometry:
            xr = torch.cat([src[:, :3], warped[:, :3], mask], 1)
            xd = torch.cat([src[:, 3:], warped[:, 3:], mask], 1)
        else:
            xr, xd = src[:, :3], src[:, 3:]
        c = self.cam_mlp(emb)
        r0, d0 = self.rgb.e0(xr), self.dep.e0(xd)
        if self.cross_modal:
            r0, d0 = self.x0(r0, d0)
        r1, d1 = self.rgb.e1(r0), self.dep.e1(d0)
        if self.cross_modal:
            r1, d1 = self.x1(r1, d1)
        outs = []
        for br, h0, h1 in ((self.rgb, r0, r1), (self.dep, d0, d1)):
            h2 = br.e2(h1)
            g, b = br.film(c).chunk(2, -1)
            outs.append((h0, h1, h2 * (1 + g[..., None, None]) + b[..., None, None]))
        (r0, r1, r2), (d0, d1, d2) = outs
        if self.cross_modal:
            r2, d2 = self.x2(r2, d2)
        res = []
        for br, h0, h1, h2 in ((self.rgb, r0, r1, r2), (self.dep, d0, d1, d2)):
            u = nn.functional.interpolate(h2, size=h1.shape[-2:], mode="nearest")
            u = br.d1(torch.cat([u, h1], 1))
            u = nn.functional.interpolate(u, size=h0.shape[-2:], mode="nearest")
            res.append(br.out(br.d0(torch.cat([u, h0], 1))))
        return torch.cat(res, 1)

    def embed(self, cam_src: Camera, cam_tgt: Camera, batch: int) -> torch.Tensor:
        e = torch.cat([camera_embedding(cam_src, self.n_freq), camera_embedding(cam_tgt, self.n_freq)])
        return e.expand(batch, -1)

    def forward(self, rgbd_src: torch.Tensor, cam_src: Camera, cam_tgt: Camera) -> torch.Tensor:
        """rgbd_src (B, 4, H, W) metric RGBD of the source view -> (B, 4, H, W) metric RGBD of the target view."""
        src, warped, mask = self.inputs(rgbd_src, cam_src, cam_tgt)
        return from_net(self.forward_prepared(src, warped, mask, self.embed(cam_src, cam_tgt, len(src))))


def generator_loss(pred: torch.Tensor, target: torch.Tensor, warped: torch.Tensor, mask: torch.Tensor,
                   reproj_weight: float = 0.1) -> torch.Tensor:
    """L1(rgb) + L1(depth) + reproj_weight * masked L1(pred depth, warped depth); all in network scale."""
    for name, t in (("pred", pred), ("target", target), ("warped", warped)):
        v.ndim(name, t, 4)
        if t.shape[1] != 4 or tuple(t.shape) != tuple(pred.shape):
            raise ValueError(f"{name} must be (B, 4, H, W) like pred {tuple(pred.shape)}, got {tuple(t.shape)}")
        v.finite(name, t)
    v.shape("mask", mask, (pred.shape[0], 1, pred.shape[2], pred.shape[3]))
    reproj_weight = v.non_negative("reproj_weight", reproj_weight)
    l_rgb = (pred[:, :3] - target[:, :3]).abs().mean()
    l_dep = (pred[:, 3:] - target[:, 3:]).abs().mean()
    l_rep = ((pred[:, 3:] - warped[:, 3:]).abs() * mask).sum() / mask.sum().clamp_min(1.0)
    return l_rgb + l_dep + reproj_weight * l_rep


def psnr(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-image PSNR (dB) of RGB in [0, 1]: -10 log10 MSE. pred/target (B, 3, H, W) -> (B,)."""
    v.ndim("pred", pred, 4)
    v.shape("target", target, tuple(pred.shape))
    v.finite("pred", pred)
    v.finite("target", target)
    mse = ((pred.clamp(0, 1) - target) ** 2).flatten(1).mean(1).clamp_min(1e-10)
    return -10.0 * torch.log10(mse)
