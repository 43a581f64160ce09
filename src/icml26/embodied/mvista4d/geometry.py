"""Pinhole camera geometry for [B15] MVISTA-4D: back-projection, projection, z-buffered warping, fusion, Chamfer.

Convention (OpenCV): a world point X maps to camera coordinates x_c = R X + t (x right, y down, z forward);
pixel (u, v) = (f_x x_c/z_c + c_x, f_y y_c/z_c + c_y), with u the column and v the row index. Depth is the
camera z (not the ray length). Back-projection of pixel (u, v) with depth d is

    X = R^T (d K^-1 [u, v, 1]^T - t)

and depth 0 marks "no surface" (background). All functions are plain torch and batch over leading dimensions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icml26.harness import validate as _val

# helper functions


def _check_depth(depth: torch.Tensor, name: str = "depth") -> None:
    if not isinstance(depth, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(depth).__name__}")
    if depth.dim() < 2:
        raise ValueError(f"{name} must have shape (..., H, W), got {tuple(depth.shape)}")
    if not torch.isfinite(depth).all():
        raise ValueError(f"{name} contains NaN or inf; mark missing depth with 0 (background) instead")
    if (depth < 0).any():
        raise ValueError(f"{name} has negative values; depth is the camera z >= 0 (0 = no surface)")


def _check_points(points: torch.Tensor, name: str = "points") -> None:
    if not isinstance(points, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(points).__name__}")
    if points.dim() < 2 or points.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (..., N, 3), got {tuple(points.shape)}")
    if not torch.isfinite(points).all():
        raise ValueError(f"{name} contains NaN or inf")


# main class


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: intrinsics ``K`` (3, 3), world-to-camera rotation ``R`` (3, 3), translation ``t`` (3,).

    ``R`` must be a proper rotation (R R^T = I to 1e-4, det R = +1); ``K`` must have positive focal lengths.
    """

    K: torch.Tensor
    R: torch.Tensor
    t: torch.Tensor
    hw: tuple[int, int]

    def __post_init__(self) -> None:
        for name in ("K", "R", "t"):
            v = getattr(self, name)
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"Camera.{name} must be a torch.Tensor, got {type(v).__name__}")
            if not torch.isfinite(v).all():
                raise ValueError(f"Camera.{name} contains NaN or inf")
        if self.K.shape != (3, 3) or self.R.shape != (3, 3) or self.t.shape != (3,):
            raise ValueError(f"Camera needs K (3, 3), R (3, 3), t (3,); got {tuple(self.K.shape)}, "
                             f"{tuple(self.R.shape)}, {tuple(self.t.shape)}")
        R = self.R.double()
        err = (R @ R.T - torch.eye(3, dtype=R.dtype)).abs().max().item()
        if err > 1e-4 or torch.linalg.det(R).item() < 0:
            raise ValueError(f"Camera.R is not a proper rotation (max |R R^T - I| = {err:.2g}, det = "
                             f"{torch.linalg.det(R).item():.3g}); orthonormalise it (e.g. with an SVD) and make "
                             "det(R) = +1")
        if not (self.K[0, 0] > 0 and self.K[1, 1] > 0):
            raise ValueError("Camera.K must have positive focal lengths K[0,0], K[1,1]")
        h, w = self.hw
        if int(h) < 1 or int(w) < 1:
            raise ValueError(f"Camera.hw must be positive, got {self.hw}")

    @property
    def center(self) -> torch.Tensor:
        """Camera centre in world coordinates, C = -R^T t."""
        return -self.R.T @ self.t

    def to(self, dtype: torch.dtype) -> "Camera":
        return Camera(self.K.to(dtype), self.R.to(dtype), self.t.to(dtype), self.hw)


def look_at_camera(azimuth_deg: float, elevation_deg: float, radius: float, hw: tuple[int, int] = (32, 32),
                   fov_deg: float = 40.0, target: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Camera:
    """A camera on a sphere of ``radius`` around ``target`` (spherical angles in degrees) looking at ``target``.

    The image y axis points down (world -z projects up in the image). Principal point at the image centre
    ((W-1)/2, (H-1)/2), so with odd sizes the centre pixel lies on the optical axis.
    """
    if not radius > 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    if not 0 < fov_deg < 180:
        raise ValueError(f"fov_deg must be in (0, 180), got {fov_deg}")
    if not -89.0 <= elevation_deg <= 89.0:
        raise ValueError(f"elevation_deg must be in [-89, 89] (the up vector degenerates at the poles), "
                         f"got {elevation_deg}")
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    tgt = torch.tensor(target, dtype=torch.float64)
    C = tgt + radius * torch.tensor([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)],
                                    dtype=torch.float64)
    z = (tgt - C) / torch.linalg.norm(tgt - C)
    x = torch.linalg.cross(z, torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    x = x / torch.linalg.norm(x)
    y = torch.linalg.cross(z, x)
    R = torch.stack([x, y, z])
    t = -R @ C
    h, w = hw
    f = 0.5 * w / math.tan(math.radians(fov_deg) / 2)
    K = torch.tensor([[f, 0.0, (w - 1) / 2], [0.0, f, (h - 1) / 2], [0.0, 0.0, 1.0]], dtype=torch.float64)
    return Camera(K.float(), R.float(), t.float(), (int(h), int(w)))


def camera_angles(cam: Camera, target: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> tuple[float, float, float]:
    """(azimuth rad, elevation rad, radius) of the camera centre around ``target``."""
    d = cam.center.double() - torch.tensor(target, dtype=torch.float64)
    r = float(torch.linalg.norm(d))
    return math.atan2(float(d[1]), float(d[0])), math.asin(float(d[2]) / r), r


def pixel_grid(hw: tuple[int, int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Homogeneous pixel coordinates [u, v, 1], shape (H*W, 3), row-major (v outer, u inner)."""
    h, w = hw
    v, u = torch.meshgrid(torch.arange(h, dtype=dtype), torch.arange(w, dtype=dtype), indexing="ij")
    return torch.stack([u.reshape(-1), v.reshape(-1), torch.ones(h * w, dtype=dtype)], dim=-1)


def backproject(depth: torch.Tensor, cam: Camera) -> torch.Tensor:
    """World points of every pixel, X = R^T (d K^-1 [u, v, 1]^T - t). ``depth`` (..., H, W) -> (..., H*W, 3).

    Pixels with depth 0 (background) map to the camera centre; select them out with ``depth > 0``.
    """
    _check_depth(depth)
    if tuple(depth.shape[-2:]) != cam.hw:
        raise ValueError(f"depth is {tuple(depth.shape[-2:])} but the camera is {cam.hw}")
    rays = pixel_grid(cam.hw, depth.dtype) @ torch.linalg.inv(cam.K.to(depth.dtype)).T      # (HW, 3), z = 1
    xc = depth.reshape(*depth.shape[:-2], -1, 1) * rays                                     # (..., HW, 3)
    R, t = cam.R.to(depth.dtype), cam.t.to(depth.dtype)
    return (xc - t) @ R                                                                      # R^T (x_c - t)


def project(points: torch.Tensor, cam: Camera) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel coordinates (..., N, 2) as (u, v) and camera depth z (..., N) of world points (..., N, 3)."""
    _check_points(points)
    R, t, K = cam.R.to(points.dtype), cam.t.to(points.dtype), cam.K.to(points.dtype)
    xc = points @ R.T + t
    z = xc[..., 2]
    zs = torch.where(z.abs() < 1e-12, torch.full_like(z, 1e-12), z)
    uv = (xc[..., :2] / zs.unsqueeze(-1)) * torch.stack([K[0, 0], K[1, 1]]) + torch.stack([K[0, 2], K[1, 2]])
    return uv, z


def splat_zbuffer(points: torch.Tensor, values: torch.Tensor, valid: torch.Tensor, cam: Camera
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Z-buffered splat of coloured world points into ``cam`` (nearest pixel, nearest surface wins).

    points (B, N, 3), values (B, N, C), valid (B, N) -> (depth (B, H, W), values (B, C, H, W), mask (B, H, W)).
    """
    if not isinstance(cam, Camera):
        raise TypeError(f"cam must be a Camera, got {_val.describe(cam)}")
    _val.ndim("points", points, 3)
    if points.shape[-1] != 3:
        raise ValueError(f"points must be (B, N, 3), got shape {tuple(points.shape)}")
    _val.ndim("values", values, 3)
    if tuple(values.shape[:2]) != tuple(points.shape[:2]):
        raise ValueError(f"values must be (B, N, C) with (B, N) = {tuple(points.shape[:2])}, got {tuple(values.shape)}")
    _val.shape("valid", valid, tuple(points.shape[:2]))
    B, N, _ = points.shape
    h, w = cam.hw
    uv, z = project(points, cam)
    u, v = torch.round(uv[..., 0]).long(), torch.round(uv[..., 1]).long()
    ok = valid & (z > 1e-6) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    flat = torch.arange(B).unsqueeze(1) * (h * w) + v.clamp(0, h - 1) * w + u.clamp(0, w - 1)
    flat, zz = flat[ok], z[ok]
    zbuf = torch.full((B * h * w,), float("inf"), dtype=points.dtype).scatter_reduce(0, flat, zz, "amin")
    win = zz <= zbuf[flat]
    out = torch.zeros(B * h * w, values.shape[-1], dtype=values.dtype)
    out[flat[win]] = values[ok][win]
    mask = torch.isfinite(zbuf)
    depth = torch.where(mask, zbuf, torch.zeros_like(zbuf))
    return (depth.view(B, h, w), out.view(B, h, w, -1).permute(0, 3, 1, 2).contiguous(), mask.view(B, h, w))


def warp_rgbd(rgbd: torch.Tensor, cam_src: Camera, cam_tgt: Camera) -> tuple[torch.Tensor, torch.Tensor]:
    """Geometric cross-view prior: back-project the source RGBD and z-buffer it into the target view.

    rgbd (B, 4, H, W) with channels (r, g, b, depth) -> warped (B, 4, H', W') and validity mask (B, 1, H', W').
    Target depth is the target camera's z of the warped surface; holes (disocclusions) have mask 0.
    """
    if not isinstance(rgbd, torch.Tensor) or rgbd.dim() != 4 or rgbd.shape[1] != 4:
        raise ValueError(f"rgbd must be a tensor of shape (B, 4, H, W) (r, g, b, depth), got "
                         f"{tuple(rgbd.shape) if isinstance(rgbd, torch.Tensor) else type(rgbd).__name__}")
    depth = rgbd[:, 3]
    pts = backproject(depth, cam_src)
    cols = rgbd[:, :3].flatten(2).transpose(1, 2)
    d, c, m = splat_zbuffer(pts, cols, depth.flatten(1) > 0, cam_tgt)
    return torch.cat([c, d.unsqueeze(1)], 1), m.unsqueeze(1).to(rgbd.dtype)


def fuse_views(depths: torch.Tensor, cams: list[Camera], min_z: float | None = None) -> torch.Tensor:
    """Back-project every view's depth (V, H, W) and concatenate the valid points into one cloud (N, 3).

    ``min_z`` keeps only points above that world height (e.g. objects above the table).
    """
    _check_depth(depths, "depths")
    if depths.dim() != 3 or depths.shape[0] != len(cams):
        raise ValueError(f"depths must be (V, H, W) with V = len(cams) = {len(cams)}, got {tuple(depths.shape)}")
    clouds = []
    for d, cam in zip(depths, cams):
        p = backproject(d, cam)
        keep = d.reshape(-1) > 0
        if min_z is not None:
            keep = keep & (p[:, 2] > min_z)
        clouds.append(p[keep])
    return torch.cat(clouds, 0)


def chamfer_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Symmetric Chamfer distance, mean_i min_j |p_i - q_j| + mean_j min_i |p_i - q_j| (Euclidean, not squared).

    p (N, 3), q (M, 3); both must be non-empty.
    """
    _check_points(p, "p")
    _check_points(q, "q")
    if p.dim() != 2 or q.dim() != 2 or len(p) == 0 or len(q) == 0:
        raise ValueError(f"chamfer_distance needs two non-empty (N, 3) clouds, got {tuple(p.shape)}, {tuple(q.shape)}")
    d = torch.cdist(p.double(), q.double())
    return (d.min(1).values.mean() + d.min(0).values.mean()).to(p.dtype)


def completeness(pred: torch.Tensor, gt: torch.Tensor, tau: float = 0.02) -> float:
    """Fraction of ground-truth points within ``tau`` of the predicted cloud (0 when ``pred`` is empty)."""
    tau = _val.positive("tau", tau)
    _check_points(gt, "gt")
    if len(pred) == 0:
        return 0.0
    _check_points(pred, "pred")
    return float((torch.cdist(gt.double(), pred.double()).min(1).values <= tau).double().mean())


def fscore(pred: torch.Tensor, gt: torch.Tensor, tau: float = 0.02) -> tuple[float, float, float]:
    """(F-score, precision, recall) of a predicted cloud at distance threshold ``tau`` (Tatarchenko et al. 2019,
    "What do single-view 3D reconstruction networks learn?"): precision = fraction of predicted points within
    ``tau`` of the ground truth, recall = fraction of ground-truth points within ``tau`` of the prediction
    (:func:`completeness`), F = 2 P R / (P + R). Unlike recall alone, it falls when the prediction adds wrong
    points, so a cloud that merely contains the truth does not score 1. An empty prediction scores (0, 0, 0)."""
    if not (isinstance(tau, (int, float)) and tau > 0):
        raise ValueError(f"tau must be a positive distance, got {tau!r}")
    _check_points(gt, "gt")
    if len(gt) == 0:
        raise ValueError("gt is empty: the F-score needs ground-truth points")
    if len(pred) == 0:
        return 0.0, 0.0, 0.0
    _check_points(pred, "pred")
    d = torch.cdist(pred.double(), gt.double())
    precision = float((d.min(1).values <= tau).double().mean())
    recall = float((d.min(0).values <= tau).double().mean())
    f = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return f, precision, recall

