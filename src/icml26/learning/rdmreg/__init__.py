"""[B17] RDMReg / Rectified LpJEPA: sliced distribution matching of JEPA features to a Rectified Generalized
Gaussian, giving sparse, non-negative representations with an analytically controlled l0 norm.

    >>> from icml26.learning.rdmreg import RectifiedLpJEPALoss, RectifiedProjector
"""

from .loss import (
                   PROJECTIONS,
                   RDMReg,
                   RectifiedLpJEPALoss,
                   RectifiedProjector,
                   VICRegLoss,
                   l0_sparsity,
                   l1_sparsity,
                   projection_directions,
                   random_directions,
                   sliced_wasserstein2,
)
from .rgg import (
                   default_sigma,
                   rgg_expected_l0,
                   rgg_expected_l1,
                   rgg_moments,
                   sample_generalized_normal,
                   sample_rgg,
                   sigma_for_unit_rectified_variance,
)
from .trainer import JEPAConfig, embed, train_jepa

__all__ = [
    "RDMReg", "RectifiedLpJEPALoss", "RectifiedProjector", "VICRegLoss", "sliced_wasserstein2", "random_directions",
    "projection_directions", "PROJECTIONS", "sigma_for_unit_rectified_variance",
    "l0_sparsity", "l1_sparsity", "default_sigma", "sample_rgg", "sample_generalized_normal",
    "rgg_expected_l0", "rgg_expected_l1", "rgg_moments", "JEPAConfig", "train_jepa", "embed",
]
