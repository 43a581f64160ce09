"""HALD trainer [A10]: soft epochs replay the stored (crop, soft label) pool, hard epochs use fresh crops of
the same images with CutMix + label smoothing, in the order given by a ``hald_schedule``; one LR schedule spans
all epochs. ``soft_epoch`` / ``hard_epoch`` are public so the phases can be dropped into any loop.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .labels import RandomResizedCrop, SoftLabelPool, StoredSoftLabels, _check_labels, _teacher_probs
from .losses import cutmix, kd_loss, soft_cross_entropy

__all__ = ["HALDTrainer"]


class HALDTrainer:
    """Train ``student`` with the Hard-Label-for-Alleviating-Local-Semantic-Drift schedule [A10].

    Args:
        student, optimizer: the model and its optimizer (e.g. AdamW(lr=1e-3, weight_decay=0.01)).
        schedule: [("soft" | "hard", epochs), ...], e.g. ``hald_schedule("S6", 100, 200)``.
        stored: the stored soft labels (their images are the training images of both phases).
        labels: (N,) hard labels of ``stored.images``.
        crop_fn: crop sampler of the hard phase (default: a RandomResizedCrop of the stored crop size).
        kd_temperature: student temperature in the soft phase (default: the stored labels' temperature).
        cutmix_alpha, label_smoothing: hard-phase CutMix Beta(alpha, alpha) and smoothing (official: 1.0, 0.8).
        batch_size, hard_batch_size: per-phase batch sizes (official hard phase: 16).
        cosine: one cosine LR schedule over all epochs (stepped per epoch).
        online_teacher: if given, soft epochs use fresh crops labelled by this teacher (unlimited storage).
        seed: seeds every draw of the trainer (pool order, hard crops, CutMix).
    """

    def __init__(self, student: nn.Module, optimizer: torch.optim.Optimizer, schedule: list[tuple[str, int]],
                 stored: StoredSoftLabels, labels: torch.Tensor, *, crop_fn: RandomResizedCrop | None = None,
                 kd_temperature: float | None = None, cutmix_alpha: float = 1.0, label_smoothing: float = 0.8,
                 batch_size: int = 16, hard_batch_size: int = 16, cosine: bool = True,
                 online_teacher: nn.Module | None = None, seed: int = 0) -> None:
        if not isinstance(stored, StoredSoftLabels):
            raise TypeError("stored must be a StoredSoftLabels (build it with StoredSoftLabels.build)")
        _check_labels(labels, stored.images.shape[0], stored.num_classes)
        if not schedule or any(ph not in ("soft", "hard") or not isinstance(e, int) or e < 0 for ph, e in schedule):
            raise ValueError(f"schedule must be a non-empty list of ('soft'|'hard', epochs>=0), got {schedule!r}")
        self.kd_temperature = stored.temperature if kd_temperature is None else float(kd_temperature)
        if not (math.isfinite(self.kd_temperature) and self.kd_temperature > 0):
            raise ValueError(f"kd_temperature must be a finite positive number, got {kd_temperature}")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        if not cutmix_alpha > 0:
            raise ValueError(f"cutmix_alpha must be > 0, got {cutmix_alpha}")
        if hard_batch_size < 1:
            raise ValueError(f"hard_batch_size must be >= 1, got {hard_batch_size}")
        self.student, self.optimizer, self.schedule = student, optimizer, list(schedule)
        self.stored, self.labels = stored, labels.long()
        self.crop_fn = crop_fn or RandomResizedCrop(stored.crop_size)
        self.cutmix_alpha, self.label_smoothing = float(cutmix_alpha), float(label_smoothing)
        self.hard_batch_size, self.online_teacher = hard_batch_size, online_teacher
        self.pool = SoftLabelPool(stored, batch_size, seed=seed)
        self.generator = torch.Generator().manual_seed(seed + 1)
        total = sum(e for _, e in self.schedule)
        self.lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(total, 1)) if cosine else None

    def _step(self, loss: torch.Tensor) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def soft_epoch(self) -> float:
        """One soft epoch: |D| pairs from the stored pool (or fresh teacher-labelled crops), KD loss."""
        self.student.train()
        losses = []
        for idx in self.pool.epoch():
            if self.online_teacher is None:
                crops, soft = self.stored.batch(idx)
            else:
                img = self.stored.images[idx % self.stored.images.shape[0]]
                crops = self.crop_fn(img, self.generator)
                soft = _teacher_probs(self.online_teacher, crops, self.stored.temperature)
            losses.append(self._step(kd_loss(self.student(crops), soft, self.kd_temperature)))
        return sum(losses) / len(losses)

    def hard_epoch(self) -> float:
        """One hard epoch: fresh crops of every image, CutMix + smoothed one-hot targets, soft cross-entropy."""
        self.student.train()
        N = self.stored.images.shape[0]
        losses = []
        for idx in torch.randperm(N, generator=self.generator).split(self.hard_batch_size):
            x = self.crop_fn(self.stored.images[idx], self.generator)
            x, t = cutmix(x, self.labels[idx], self.stored.num_classes, self.cutmix_alpha, self.label_smoothing,
                          self.generator)
            losses.append(self._step(soft_cross_entropy(self.student(x), t)))
        return sum(losses) / len(losses)

    def fit(self, callback: Callable[[dict], None] | None = None) -> list[dict]:
        """Run the whole schedule; returns one log row per epoch (phase, loss, lr)."""
        logs = []
        for phase, epochs in self.schedule:
            for _ in range(epochs):
                loss = self.soft_epoch() if phase == "soft" else self.hard_epoch()
                row = {"epoch": len(logs), "phase": phase, "loss": loss, "lr": self.optimizer.param_groups[0]["lr"]}
                if self.lr_scheduler is not None:
                    self.lr_scheduler.step()
                logs.append(row)
                if callback is not None:
                    callback(row)
        return logs
