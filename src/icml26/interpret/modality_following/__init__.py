"""[B03] Modality following: relative preference uncertainty, the balance point, concept oscillation, and
preference steering by SFT on boundary cases (Zhang et al., "When Modalities Conflict", arXiv 2511.02243)."""

from .following import (
                        BalancePoint,
                        Curve,
                        balance_point,
                        follow_outcomes,
                        modality_following_curve,
                        select_boundary_cases,
)
from .lens import default_readout, find_layers, layerwise_logits, layerwise_oscillation
from .model import ToyConfig, ToyMultimodalClassifier, fit_temperature, load_toy_model, modality_probs, train_toy_model
from .steering import easy_cases, nearest_boundary_cases, sft_steer
from .task import ConflictSet, corrupt_images, make_texts, sample_conflicts
from .uncertainty import INDICES, relative_uncertainty, uncertainty

__all__ = ["INDICES", "uncertainty", "relative_uncertainty", "BalancePoint", "Curve", "follow_outcomes",
           "modality_following_curve", "balance_point", "select_boundary_cases", "find_layers", "default_readout",
           "layerwise_logits", "layerwise_oscillation", "ToyConfig", "ToyMultimodalClassifier", "train_toy_model",
           "load_toy_model", "modality_probs", "fit_temperature", "nearest_boundary_cases", "easy_cases",
           "sft_steer", "ConflictSet", "sample_conflicts", "corrupt_images", "make_texts"]
