"""A small tabletop simulator for [B15]: analytic ray-cast RGBD rendering and pick-and-place dynamics.

Scene (batched over environments): a checkered table z = 0 (|x|, |y| <= TABLE), a red goal disk on it, a blue
cube (axis-aligned box, half size CUBE_H) and a yellow end-effector sphere (radius EE_R). Rendering casts one
ray per pixel through every camera and takes the nearest hit of plane / box (slab test) / sphere (quadratic);
colour = albedo x (0.45 + 0.55 max(0, n.l)). Depth is the camera z; pixels that miss the table have depth 0.

Dynamics (our choice, as in the spec): an action is (dx, dy, dz, g_cmd). Before moving, the grip engages when
g_cmd > 0, the end effector is (almost) still (max |d| < GRIP_STILL) and within GRIP_DIST of the cube centre;
it releases when g_cmd <= 0 (the cube drops onto the table). A gripped cube follows the end effector. **The grip
state is not rendered**, so the frame where the grasp happens looks exactly like a pause: the inverse dynamics of
that frame are ambiguous, and the consequence (the cube lifting) shows only in later frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml26.harness import validate as v

from .geometry import Camera, pixel_grid

TABLE = 0.35           # half extent of the table (m)
CUBE_H = 0.025         # half size of the cube
EE_R = 0.02            # end-effector sphere radius
GOAL_R = 0.03          # goal disk radius (also the success tolerance)
GRIP_DIST = 0.06
GRIP_STILL = 0.02        # "still": every |d| component below 2 cm
GRASP_Z = 0.035        # end-effector height when grasping / placing
SUCCESS_TOL = 0.03
EE_START = (0.0, 0.0, 0.2)
T_STEPS = 12

_LIGHT = np.array([0.3, 0.2, 1.0]) / np.linalg.norm([0.3, 0.2, 1.0])
_CUBE_RGB = (0.2, 0.4, 0.9)
_EE_RGB = (0.95, 0.85, 0.2)
_GOAL_RGB = (0.9, 0.2, 0.2)


@dataclass
class TabletopState:
    """Batched scene state: ee (B, 3), cube (B, 3), goal (B, 2), gripped (B,), offset (B, 3) = ee - cube."""

    ee: np.ndarray
    cube: np.ndarray
    goal: np.ndarray
    gripped: np.ndarray
    offset: np.ndarray

    def __post_init__(self) -> None:
        n = None
        for name, want in (("ee", 3), ("cube", 3), ("goal", 2), ("offset", 3)):
            a = np.asarray(getattr(self, name), dtype=float)
            if a.ndim != 2 or a.shape[1] != want:
                raise ValueError(f"TabletopState.{name} must be (B, {want}), got shape {a.shape}")
            v.finite(f"TabletopState.{name}", a)
            n = len(a) if n is None else n
            if len(a) != n:
                raise ValueError(f"TabletopState fields must share the batch size B = {n}; {name} has {len(a)}")
            setattr(self, name, a)
        g = np.asarray(self.gripped, dtype=bool)
        if g.shape != (n,):
            raise ValueError(f"TabletopState.gripped must be (B,) = ({n},), got shape {g.shape}")
        self.gripped = g

    def copy(self) -> "TabletopState":
        return TabletopState(self.ee.copy(), self.cube.copy(), self.goal.copy(), self.gripped.copy(),
                             self.offset.copy())

    def __len__(self) -> int:
        return len(self.ee)


def random_states(n: int, rng: np.random.Generator, ee_random: bool = False) -> TabletopState:
    """Random cube and goal positions (at least 10 cm apart) inside |x|, |y| <= 0.2; ee at EE_START (or random)."""
    n = v.positive_int("n", n)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {v.describe(rng)}")
    cube = np.concatenate([rng.uniform(-0.2, 0.2, (n, 2)), np.full((n, 1), CUBE_H)], 1)
    goal = rng.uniform(-0.2, 0.2, (n, 2))
    for _ in range(100):                                   # resample the (few) goals too close to the cube
        bad = np.linalg.norm(goal - cube[:, :2], axis=1) < 0.1
        if not bad.any():
            break
        goal[bad] = rng.uniform(-0.2, 0.2, (int(bad.sum()), 2))
    if ee_random:
        ee = np.concatenate([rng.uniform(-0.25, 0.25, (n, 2)), rng.uniform(0.03, 0.25, (n, 1))], 1)
    else:
        ee = np.tile(np.asarray(EE_START, float), (n, 1))
    return TabletopState(ee, cube, goal, np.zeros(n, bool), np.zeros((n, 3)))


def _windows(centre: torch.Tensor, cams: list[Camera], Kf: torch.Tensor, grid_hw: tuple[int, int], ss: int,
             radius: float) -> torch.Tensor:
    """Flat pixel indices (B, V, n) of a square window around each projected object centre (B, 3)."""
    H, W = grid_hw
    Rs = torch.stack([c.R for c in cams])
    ts = torch.stack([c.t for c in cams])
    xc = torch.einsum("vij,bj->bvi", Rs, centre) + ts                          # (B, V, 3)
    z = xc[..., 2].clamp_min(0.05)
    u = (xc[..., 0] / z * Kf[:, 0, 0] + Kf[:, 0, 2] + 0.5) * ss - 0.5
    v = (xc[..., 1] / z * Kf[:, 1, 1] + Kf[:, 1, 2] + 0.5) * ss - 0.5
    zmin = float((torch.linalg.norm(torch.stack([c.center for c in cams]), dim=-1).min() - 0.55).clamp_min(0.05))
    win = min(int(np.ceil(2 * float(Kf[:, 0, 0].max()) * ss * radius / zmin)) + 3, H, W)
    u0 = (torch.round(u) - win // 2).long().clamp(0, W - win)
    v0 = (torch.round(v) - win // 2).long().clamp(0, H - win)
    r = torch.arange(win)
    return ((v0[..., None, None] + r[:, None]) * W + (u0[..., None, None] + r[None, :])).flatten(2)


def render_rgbd(state: TabletopState, cams: list[Camera], ss: int = 1) -> torch.Tensor:
    """Render every environment from every camera: (B, V, 4, H, W) float32, channels (r, g, b, depth).

    ``ss`` > 1 supersamples (ss x ss rays per pixel, averaged), which makes sub-pixel motion visible. The table is
    ray-cast once per camera; the goal disk, cube and sphere only inside a window around their projection (they
    are small), so the cost is dominated by writing the frames.
    """
    if not cams:
        raise ValueError("render_rgbd needs at least one camera")
    hw = cams[0].hw
    if any(c.hw != hw for c in cams):
        raise ValueError("all cameras must share one image size")
    if int(ss) < 1:
        raise ValueError(f"ss must be >= 1, got {ss}")
    for name in ("ee", "cube", "goal"):
        if not np.isfinite(getattr(state, name)).all():
            raise ValueError(f"state.{name} contains NaN or inf")
    H, W = hw[0] * ss, hw[1] * ss
    f32 = torch.float32
    grid = pixel_grid((H, W), f32)                 # supersampled pixel centres in original pixel units
    grid[:, :2] = (grid[:, :2] + 0.5) / ss - 0.5
    Rs = torch.stack([c.R for c in cams]).to(f32)                            # (V, 3, 3)
    C = torch.stack([c.center for c in cams]).to(f32)                        # (V, 3)
    Kf = torch.stack([c.K for c in cams]).to(f32)
    D = torch.einsum("pk,vjk,vji->vpi", grid, torch.linalg.inv(Kf), Rs)     # world ray dirs, camera z = 1
    ee = torch.as_tensor(state.ee, dtype=f32)
    cube = torch.as_tensor(state.cube, dtype=f32)
    goal = torch.as_tensor(state.goal, dtype=f32)
    B, V, P = len(ee), len(cams), H * W
    inf = torch.tensor(float("inf"))
    light = torch.tensor(_LIGHT, dtype=f32)

    # table plane z = 0, shared by all environments
    sp = -C[:, None, 2] / D[..., 2]
    Xp = C[:, None] + sp[..., None] * D
    on_table = (sp > 0) & (Xp[..., 0].abs() <= TABLE) & (Xp[..., 1].abs() <= TABLE)
    checker = ((torch.floor(Xp[..., 0] / 0.1) + torch.floor(Xp[..., 1] / 0.1)) % 2)
    base = torch.stack([0.55 + 0.1 * checker, 0.5 + 0.1 * checker, 0.42 + 0.1 * checker, sp], -1)
    base = torch.where(on_table[..., None], base, torch.zeros_like(base))   # (V, P, 4)
    img = base.unsqueeze(0).repeat(B, 1, 1, 1).view(B * V * P, 4)
    flat_bv = (torch.arange(B * V) * P).view(B, V, 1)

    def paint(idx: torch.Tensor, s: torch.Tensor, rgb: torch.Tensor) -> None:
        """Write (rgb, depth s) at window pixels idx (B, V, n) where s is nearer than what is there."""
        g = (flat_bv + idx).reshape(-1)
        cur = img[g, 3]
        cur = torch.where(cur > 0, cur, inf)
        s = s.reshape(-1)
        w = s < cur
        img[g[w]] = torch.cat([rgb.reshape(-1, 3), s[:, None]], 1)[w]

    # goal disk on the table
    gc = torch.cat([goal, torch.zeros(B, 1)], 1)
    idx = _windows(gc, cams, Kf, (H, W), ss, GOAL_R)
    g = (flat_bv + idx).reshape(-1)
    Xw = Xp[torch.arange(V)[None, :, None], idx]                             # (B, V, n, 3)
    in_goal = ((Xw[..., :2] - goal[:, None, None]) ** 2).sum(-1) <= GOAL_R ** 2
    in_goal = in_goal & on_table[torch.arange(V)[None, :, None], idx]
    img[g[in_goal.reshape(-1)], :3] = torch.tensor(_GOAL_RGB)

    # cube: slab test inside its window
    idx = _windows(cube, cams, Kf, (H, W), ss, CUBE_H * 1.75)
    Dw = D[torch.arange(V)[None, :, None], idx]                               # (B, V, n, 3)
    inv = 1.0 / torch.where(Dw.abs() < 1e-12, torch.full_like(Dw, 1e-12), Dw)
    t1 = ((cube - CUBE_H)[:, None, None] - C[None, :, None]) * inv
    t2 = ((cube + CUBE_H)[:, None, None] - C[None, :, None]) * inv
    tnear, axis = torch.minimum(t1, t2).max(-1)
    tfar = torch.maximum(t1, t2).min(-1).values
    sb = torch.where((tfar >= tnear) & (tnear > 0), tnear, inf)
    nb = -torch.sign(torch.gather(Dw, -1, axis[..., None]))[..., 0]          # normal = -sign(D) on that axis
    shade = 0.45 + 0.55 * (nb * light[axis]).clamp_min(0)
    paint(idx, sb, torch.tensor(_CUBE_RGB) * shade[..., None])

    # end-effector sphere |C + s D - ee|^2 = r^2 inside its window
    idx = _windows(ee, cams, Kf, (H, W), ss, EE_R * 1.2)
    Dw = D[torch.arange(V)[None, :, None], idx]
    oc = C[None] - ee[:, None]                                                # (B, V, 3)
    a = (Dw * Dw).sum(-1)
    b = 2 * (Dw * oc[:, :, None]).sum(-1)
    c = (oc * oc).sum(-1)[..., None] - EE_R ** 2
    disc = b * b - 4 * a * c
    s_ = (-b - torch.sqrt(disc.clamp_min(0))) / (2 * a)
    s_ = torch.where((disc >= 0) & (s_ > 0), s_, inf)
    n_ = (C[None, :, None] + s_.clamp(max=1e3)[..., None] * Dw - ee[:, None, None]) / EE_R
    shade = 0.45 + 0.55 * (n_ @ light).clamp_min(0)
    paint(idx, s_, torch.tensor(_EE_RGB) * shade[..., None])

    out = img.view(B, V, H, W, 4).permute(0, 1, 4, 2, 3)
    if ss > 1:
        out = torch.nn.functional.avg_pool2d(out.reshape(B * V, 4, H, W), ss).view(B, V, 4, *hw)
    return out.contiguous()


def step(state: TabletopState, actions: np.ndarray) -> TabletopState:
    """One simulator step for every environment; ``actions`` (B, 4) = (dx, dy, dz, g_cmd). Returns a new state."""
    a = np.asarray(actions, dtype=float)
    if a.shape != (len(state), 4):
        raise ValueError(f"actions must have shape ({len(state)}, 4) = (dx, dy, dz, g_cmd), got {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("actions contain NaN or inf")
    s = state.copy()
    d, g = a[:, :3], a[:, 3]
    still = np.abs(d).max(1) < GRIP_STILL
    near = np.linalg.norm(s.ee - s.cube, axis=1) < GRIP_DIST
    grab = ~s.gripped & (g > 0) & still & near
    s.offset[grab] = s.ee[grab] - s.cube[grab]
    release = s.gripped & (g <= 0)
    s.gripped = (s.gripped | grab) & ~release
    s.cube[release, 2] = CUBE_H
    s.ee = s.ee + d
    s.ee[:, 2] = np.maximum(s.ee[:, 2], EE_R)
    s.cube[s.gripped] = s.ee[s.gripped] - s.offset[s.gripped]
    s.cube[:, 2] = np.maximum(s.cube[:, 2], CUBE_H)
    return s


def rollout(state0: TabletopState, actions: np.ndarray) -> tuple[list[TabletopState], np.ndarray]:
    """Execute action sequences (B, T, 4) open loop. Returns the T + 1 states and the grasp step (B,) (-1: never)."""
    a = np.asarray(actions, dtype=float)
    if a.ndim != 3 or a.shape[0] != len(state0) or a.shape[2] != 4:
        raise ValueError(f"actions must have shape ({len(state0)}, T, 4), got {a.shape}")
    states, grasp_t = [state0.copy()], np.full(len(state0), -1)
    for t in range(a.shape[1]):
        nxt = step(states[-1], a[:, t])
        grasp_t[(grasp_t < 0) & nxt.gripped & ~states[-1].gripped] = t
        states.append(nxt)
    return states, grasp_t


def _check_state(state, name: str = "state") -> None:
    if not isinstance(state, TabletopState):
        raise TypeError(f"{name} must be a TabletopState, got {v.describe(state)}")


def success(state: TabletopState) -> np.ndarray:
    """Task success per environment: the cube released on the table within SUCCESS_TOL of the goal."""
    _check_state(state)
    return (~state.gripped) & (np.linalg.norm(state.cube[:, :2] - state.goal, axis=1) < SUCCESS_TOL)


def scripted_demos(state0: TabletopState, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scripted pick-and-place with style variation, T = 12. Returns actions (B, 12, 4) and the settle count (B,).

    Phases: approach in 2 steps (split alpha), descend, settle s in {0, 1, 2} still steps (g = -1), grasp (still,
    g = +1), lift, carry in 2 steps (split beta), descend, release (still, g = -1), retreat. Style: alpha, beta,
    the hover and lift heights, s.
    """
    _check_state(state0, "state0")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {v.describe(rng)}")
    n = len(state0)
    ee0, cube, goal = state0.ee, state0.cube, state0.goal
    alpha, beta = rng.uniform(0.35, 0.65, n), rng.uniform(0.35, 0.65, n)
    hover, lift = rng.uniform(0.08, 0.14, n), rng.uniform(0.10, 0.16, n)
    retreat = rng.uniform(0.12, 0.2, n)
    s = rng.integers(0, 3, n)
    above = np.c_[cube[:, :2], hover]
    grasp = np.c_[cube[:, :2], np.full(n, GRASP_Z)]
    lifted = np.c_[cube[:, :2], lift]
    at_goal = np.c_[goal, lift]
    place = np.c_[goal, np.full(n, GRASP_Z)]
    # waypoints after each phase step, with settle steps inserted by index
    phases = [ee0 + alpha[:, None] * (above - ee0), above, grasp]            # t = 0, 1, 2
    tail = [grasp, lifted, lifted + beta[:, None] * (at_goal - lifted), at_goal, place, place, np.c_[goal, retreat]]
    gtail = [1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0]                              # grasp .. release, retreat
    way = np.zeros((n, T_STEPS + 1, 3))
    grip = -np.ones((n, T_STEPS))
    way[:, 0] = ee0
    for t in range(3):
        way[:, t + 1] = phases[t]
    for t in range(3, T_STEPS):
        k = t - 3 - s                                                          # index into the tail (< 0: settle)
        w = np.where((k < 0)[:, None], grasp, 0.0)
        gt = np.where(k < 0, -1.0, 0.0)
        for j, (p, gj) in enumerate(zip(tail, gtail)):
            sel = k == j
            w = np.where(sel[:, None], p, w)
            gt = np.where(sel, gj, gt)
        last = k >= len(tail)
        w = np.where(last[:, None], tail[-1], w)
        gt = np.where(last, -1.0, gt)
        way[:, t + 1] = w
        grip[:, t] = gt
    actions = np.concatenate([np.diff(way, axis=1), grip[..., None]], -1)
    return actions, s
