"""The minimum-norm point on next-token laws of a real language model where α* = 1."""

import numpy as np
import pytest

from mdtheory import optimal_acceptance
from mdtheory.language import drafters
from mdtheory.models.mixture import check_mixture
from mdtheory.models.registry import make_draft_model
from mdtheory.routes.mnp import MNP_TOL, min_norm_base

from .tolerances import ROUNDING


@pytest.mark.char_lstm
def test_mnp_closes_a_char_lstm_row_where_alpha_star_is_one():
    """The char-LSTM at temperature 0.7 against itself at 1.0, two drafts without replacement: α*
    = 1 up to 1e-15, and 300 of the 465 target masses under 1e-12. The two norms weighted by
    1 / (p + q̄) and plain ran to their caps (2 x 9,600 iterations) and stopped at a gap of
    2.6e-11; the norm weighted by 1 / (p + c) closes to the tolerance in about 1,400 iterations
    in all."""
    target = drafters.load_model("char-lstm", 0.7)
    drafter = drafters.make_drafter("tempered", target, np.random.default_rng(0), temperature=1.0)
    P, Q = drafters.lm_pairs(4, target, drafter, np.random.default_rng(0))
    p, q = P[3], Q[3]
    assert (p < 1e-12).sum() > 250  # the row measured
    model = make_draft_model(q, 2, "without-replacement")
    base = min_norm_base(p, model, max_iter=3000)
    assert base.upper - base.lower <= MNP_TOL and base.iterations <= 3000
    lower, _ = check_mixture(p, model, base.orders, base.weights, "mnp")  # recomputed independently
    bound = optimal_acceptance(p, model, method="prefix")  # an independent upper bound
    assert base.upper - lower <= ROUNDING and lower <= bound.value + ROUNDING
    assert base.upper == pytest.approx(1.0, abs=ROUNDING)
