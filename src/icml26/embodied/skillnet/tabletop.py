"""Vectorised 2-D tabletop with scripted verb-object experts for [B05] (our choice, CPU scale).

State per environment: point effector p (2), K objects with pose (x_k, y_k, theta_k), and their start poses.
Action a = (dx, dy, dtheta), clipped to |dx|,|dy| <= STEP, |dtheta| <= ROT. Dynamics: the object nearest to p
within CONTACT moves with the effector and turns by dtheta; the others stay put. A task (verb, object k) asks
to move object k by the verb's offset (Dx, Dy, Dtheta) from its start pose; success (judged by the simulator
only) = target within POS_TOL / ANG_TOL of its goal and every other object within POS_TOL of its start.
The expert goes to the object, then moves it along the straight line to its goal while turning it.
Observation (egocentric, our choice): effector p, each object's offset from p (x_k - p), its displacement from its
start pose (x_k - x_k^0, theta_k - theta_k^0), and (sin theta_k, cos theta_k): 2 + 7K numbers.

Two verb tables (our choice): ``VERBS`` (6 verbs; verbs that share a motion cluster and VerbNet class move
differently: the held-out-composition experiment) and ``SYNONYM_VERBS`` (12 verbs in 4 groups of 3; verbs that
share a motion cluster and VerbNet class share their offset, "synonyms by hierarchy": the held-out-verb experiment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml26.harness import validate as check

STEP, ROT, CONTACT, POS_TOL, ANG_TOL = 0.1, 0.3, 0.08, 0.05, 0.15
OBJECTS = ("block", "ball", "cup")
# verb -> (offset (dx, dy, dtheta), motion code, VerbNet class); codes and classes are our choice
VERBS: dict[str, tuple[tuple[float, float, float], str, str]] = {
    "push": ((0.3, 0.0, 0.0), "100200", "push-12"),
    "shove": ((0.3, 0.2, 0.0), "100200", "push-12"),
    "drag": ((-0.3, 0.0, 0.0), "200200", "carry-11.4"),
    "carry": ((-0.2, -0.3, 0.0), "200200", "carry-11.4"),
    "rotate": ((0.0, 0.0, 1.2), "200010", "turn-26.6"),
    "twist": ((0.0, 0.0, -1.2), "200010", "turn-26.6"),
}
# held-out-verb experiment: 4 groups; within a group the motion code, the VerbNet class and the offset are shared,
# so a verb never seen in training is told apart only by its cluster and class tokens (our choice of verbs, codes,
# classes and offsets; the 4 codes are 4 released centres, hence 4 distinct motion clusters)
SYNONYM_VERBS: dict[str, tuple[tuple[float, float, float], str, str]] = {
    **{v: ((0.3, 0.0, 0.0), "100200", "push-12") for v in ("push", "shove", "nudge")},
    **{v: ((-0.3, 0.0, 0.0), "200200", "carry-11.4") for v in ("drag", "carry", "haul")},
    **{v: ((0.0, 0.0, 1.2), "200010", "turn-26.6") for v in ("rotate", "twist", "spin")},
    **{v: ((0.0, 0.3, 0.0), "200100", "slide-11.2") for v in ("slide", "glide", "skid")},
}


def obs_dim(n_objects: int = len(OBJECTS)) -> int:
    return 2 + 7 * n_objects


@dataclass
class TableTop:
    """Batched environments. ``reset(verbs, objects, rng)`` with per-env verb names and object indices.

    ``verb_table``: verb -> (offset (dx, dy, dtheta), motion code, VerbNet class); ``VERBS`` or ``SYNONYM_VERBS``."""

    n_objects: int = len(OBJECTS)
    verb_table: dict | None = None

    def __post_init__(self) -> None:
        self.n_objects = check.positive_int("n_objects", self.n_objects)
        self.verb_table = VERBS if self.verb_table is None else _verb_table(self.verb_table)
        if self.n_objects > 4:
            raise ValueError(f"n_objects must be in 1..4 (the table has 4 start places), got {self.n_objects}")

    def _require_reset(self) -> None:
        if not hasattr(self, "eff"):
            raise ValueError("this TableTop has no episode yet: call .reset(verbs, objects, rng) first")

    def reset(self, verbs: list[str], objects: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if isinstance(verbs, str) or not isinstance(verbs, (list, tuple)):
            raise TypeError(f"verbs must be a list of verb names (one per environment), got {check.describe(verbs)}")
        check.non_empty("verbs", verbs)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
        unknown = sorted(set(verbs) - set(self.verb_table))
        if unknown:
            raise ValueError(f"unknown verbs {unknown}; known verbs: {', '.join(self.verb_table)}")
        objects = np.asarray(objects, dtype=int)
        if objects.shape != (len(verbs),) or (objects < 0).any() or (objects >= self.n_objects).any():
            raise ValueError(f"objects must be {len(verbs)} indices in [0, {self.n_objects})")
        n, K = len(verbs), self.n_objects
        # objects on jittered, shuffled corners of a triangle 0.6 apart (carried paths rarely touch the others)
        base = np.array([[0.2, 0.2], [0.8, 0.2], [0.5, 0.8], [0.5, 0.5]])[:K]
        perm = np.argsort(rng.random((n, K)), 1)
        pos = base[perm] + rng.uniform(-0.05, 0.05, (n, K, 2))
        self.obj = np.concatenate([pos, rng.uniform(-0.5, 0.5, (n, K, 1))], -1)    # (n, K, 3)
        self.start = self.obj.copy()
        self.eff = np.array([0.5, 0.42]) + rng.uniform(-0.05, 0.05, (n, 2))   # home pose
        self.target = objects
        off = np.array([self.verb_table[v][0] for v in verbs], dtype=float)
        self.goal = self.start[np.arange(n), objects] + off
        return self.observe()

    def observe(self) -> np.ndarray:
        self._require_reset()
        n = len(self.eff)
        rel = self.obj[..., :2] - self.eff[:, None]                 # object relative to the effector
        disp = self.obj - self.start                                 # displacement from the start pose
        th = self.obj[..., 2]
        return np.concatenate([self.eff, rel.reshape(n, -1), disp.reshape(n, -1), np.sin(th), np.cos(th)],
                              -1).astype(np.float32)

    def step(self, action: np.ndarray) -> np.ndarray:
        self._require_reset()
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (len(self.eff), 3) or not np.isfinite(a).all():
            raise ValueError(f"action must be finite with shape ({len(self.eff)}, 3)")
        a = np.clip(a, [-STEP, -STEP, -ROT], [STEP, STEP, ROT])
        d = np.linalg.norm(self.obj[..., :2] - self.eff[:, None], axis=-1)
        k = d.argmin(1)
        held = d[np.arange(len(k)), k] < CONTACT
        self.eff = self.eff + a[:, :2]
        idx = np.arange(len(k))[held]
        self.obj[idx, k[held], :2] += a[held, :2]
        self.obj[idx, k[held], 2] += a[held, 2]
        return self.observe()

    def success(self) -> np.ndarray:
        self._require_reset()
        n = np.arange(len(self.eff))
        tgt = self.obj[n, self.target]
        ok = (np.linalg.norm(tgt[:, :2] - self.goal[:, :2], axis=-1) < POS_TOL) & \
             (np.abs(tgt[:, 2] - self.goal[:, 2]) < ANG_TOL)
        moved = np.linalg.norm(self.obj[..., :2] - self.start[..., :2], axis=-1) >= POS_TOL
        moved[n, self.target] = False
        return ok & ~moved.any(1)

    def expert(self) -> np.ndarray:
        """Scripted expert action (n, 3): reach the target object, then carry and turn it to its goal."""
        self._require_reset()
        n = np.arange(len(self.eff))
        tgt = self.obj[n, self.target]
        reach = tgt[:, :2] - self.eff
        contact = np.linalg.norm(reach, axis=-1) < CONTACT
        move = np.where(contact[:, None], self.goal[:, :2] - tgt[:, :2], reach)
        turn = np.where(contact, self.goal[:, 2] - tgt[:, 2], 0.0)
        return np.concatenate([np.clip(move, -STEP, STEP), np.clip(turn, -ROT, ROT)[:, None]], -1)


def _verb_table(table) -> dict:
    if not isinstance(table, dict) or not table:
        raise TypeError(f"verb_table must be a non-empty dict {{verb: (offset (dx, dy, dtheta), motion code, VerbNet "
                        f"class)}}, got {check.describe(table)}")
    for verb, value in table.items():
        ok = isinstance(verb, str) and isinstance(value, (tuple, list)) and len(value) == 3
        try:
            ok = ok and np.shape(value[0]) == (3,) and bool(np.isfinite(np.asarray(value[0], dtype=float)).all())
        except (TypeError, ValueError):          # an offset that is not three numbers
            ok = False
        if not ok:
            raise ValueError(f"verb_table[{verb!r}] must be (offset (dx, dy, dtheta): 3 finite numbers, motion code, "
                             f"VerbNet class), got {check.describe(value)}")
    return table


def rollout_expert(verbs: list[str], objects: np.ndarray, horizon: int, rng: np.random.Generator,
                   verb_table: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Expert demonstrations: observations (n, horizon, obs), actions (n, horizon, 3), success (n,)."""
    horizon = check.positive_int("horizon", horizon)
    env = TableTop(verb_table=verb_table)
    o = env.reset(verbs, objects, rng)
    obs, act = [], []
    for _ in range(horizon):
        a = env.expert()
        obs.append(o)
        act.append(a.astype(np.float32))
        o = env.step(a)
    return np.stack(obs, 1), np.stack(act, 1), env.success()
