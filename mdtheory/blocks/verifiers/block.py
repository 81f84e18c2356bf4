"""Block verification (Sun et al., ICLR 2025, Algorithm 2) of the first draft, and the stopping weights
and residuals that the multi-path verifiers reuse along a selected path."""

from __future__ import annotations

import numpy as np

from .base import BlockVerifier, _draw, _pos, _total

__all__ = ["BlockVerification"]


class BlockVerification(BlockVerifier):
    """Block verification (Sun et al., ICLR 2025, Algorithm 2) of the first draft.

    Along the draft x_1..x_L: weights :math:`w_0 = 1`, :math:`w_i = \\min(1, w_{i-1}\\, p(x_i \\mid
    x_{<i}) / q(x_i \\mid x_{<i}))`; at each prefix i < L the residual :math:`r_i = (w_i\\, p(\\cdot
    \\mid x_{\\le i}) - q(\\cdot \\mid x_{\\le i}))^+` of mass :math:`\\rho_i`, and
    :math:`h_i = \\rho_i / (\\rho_i + 1 - w_i)` (:math:`h_0 = 1`), :math:`h_L = w_L`. With
    :math:`\\eta_i \\sim U(0, 1)` the accepted length is the largest i with :math:`\\eta_i \\le h_i`;
    the correction is drawn from :math:`r_\\tau / \\rho_\\tau` (from :math:`p(\\cdot \\mid x)` at
    τ = L). With K > 1 drafts it verifies the first (single-draft block verification).

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> BlockVerification().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "block"
    first_draft_only = True

    def _law(self, laws, x, out):
        row = [int(v) for v in x[0]]
        _bv_law(laws, [laws.q(tuple(row[:i])) for i in range(len(row))], row, 1, out)

    def _sample(self, laws, x, rng):
        row = [int(v) for v in x[0]]
        return _bv_sample(laws, [laws.q(tuple(row[:i])) for i in range(len(row))], row, rng)


def _bv_weights(laws, proposals, row):
    """Block verification's stopping weights h_0..h_L, residuals r_0..r_{L-1} and their masses
    along ``row``, whose i-th token was proposed from ``proposals[i]`` (the draft's law there, or
    the law of the token a selection picked) and whose target law at a prefix is ``laws.p``.

    The weights w_i are kept as weights (never renormalised); a denominator rho_i + 1 - w_i below
    :data:`FLOAT_FLOOR` sends float mode to exact arithmetic."""
    p = laws.p
    L = len(row)
    w = [1]
    for i in range(L):
        u = proposals[i][row[i]]
        w.append(min(1, w[-1] * p(tuple(row[:i]))[row[i]] / u) if u > 0 else 0 * u)
    h, res, mass = [1], [], []
    for i in range(L):
        r = _pos(w[i] * p(tuple(row[:i])) - proposals[i])
        rho = _total(r)
        res.append(r)
        mass.append(rho)
        if i:
            den = rho + (1 - w[i])  # 1 - w first: exact when w is 1
            laws.guard(den)
            h.append(rho / den if den > 0 else 1)
    h.append(w[L])
    return h, res, mass


def _bv_law(laws, proposals, row, weight, out: dict) -> None:
    """Add ``weight`` times block verification's law along ``row`` to ``out``."""
    h, res, mass = _bv_weights(laws, proposals, row)
    L = len(row)
    later = 1  # prod_{j > i} (1 - h_j)
    for i in range(L, -1, -1):
        stop = h[i] * later
        later *= 1 - h[i]
        if stop == 0:
            continue
        head = tuple(row[:i])
        if i == L:
            corr, total = laws.p(head), 1
        else:
            laws.guard(mass[i])
            # an empty residual with a stop (exact arithmetic: a path of draft probability 0)
            # corrects from the target, as the sampler does
            corr, total = (res[i], mass[i]) if mass[i] != 0 else (laws.p(head), 1)
        for y in np.flatnonzero(corr != 0):
            key = head + (int(y),)
            out[key] = out.get(key, 0) + weight * stop * corr[y] / total


def _bv_sample(laws, proposals, row, rng) -> list[int]:
    h, res, mass = _bv_weights(laws, proposals, row)
    L = len(row)
    tau = max(i for i in range(L + 1) if rng.random() <= float(h[i]) or i == 0)
    if tau == L:
        return row + [_draw(laws.p(tuple(row)), rng)]
    laws.guard(mass[tau])
    corr = res[tau] if mass[tau] != 0 else laws.p(tuple(row[:tau]))  # the latter: probability 0
    return row[:tau] + [_draw(corr, rng)]
