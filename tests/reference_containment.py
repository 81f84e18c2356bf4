"""An independent quadrature of the successive-sampling containment, kept as a test reference.

:mod:`mdtheory.models.containment` evaluates

.. math:: Q(T) = \\int_0^\\infty c\\, e^{-ct}\\, P(N_T(t) \\ge n)\\, dt, \\qquad c = 1 - q(T),

by a trapezoidal rule in log-time carried along prefixes; this module evaluates the same integral for
one set by composite 16-node Gauss-Legendre panels and a product tree of the Poisson-binomial
generating polynomials, so the two share no code.
"""

from __future__ import annotations

import math

import numpy as np

#: width, in log-time, of one 16-node Gauss-Legendre panel
PANEL = 0.25
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def successive_containment_gl(q: np.ndarray, mask: np.ndarray, n: int) -> float:
    """Q(T) for successive sampling of n drafts from q, T given by the boolean ``mask``."""
    q = np.asarray(q, dtype=float)
    qT = q[mask & (q > 0)]
    if qT.size < n:
        return 0.0
    c = float(q[~mask].sum())
    if c == 0.0:
        return 1.0
    if n == 1:
        return float(qT.sum())
    # In log-time u = ln t the integrand c t e^{-ct} P(N_T(t) >= n) is a smooth bump. Below
    # t = 1e-9 / max(q(T), c) it is under c q(T) t^2 (< 1e-18); above t = 45 / c under
    # 45 e^{-45}. Composite Gauss-Legendre panels of width PANEL cover the range between.
    u_lo = math.log(1e-9) - math.log(max(qT.sum(), c))
    u_hi = math.log(45.0) - math.log(c)
    panels = max(1, math.ceil((u_hi - u_lo) / PANEL))
    edges = np.linspace(u_lo, u_hi, panels + 1)
    half = (edges[1] - edges[0]) / 2.0
    u = (((edges[:-1] + edges[1:]) / 2.0)[:, None] + half * _GL_NODES[None, :]).ravel()
    # c t and q_i t formed in log space: t itself overflows when c is subnormal
    ct = np.exp(u + math.log(c))
    # 1 - exp(-q_i t); exponents past 700 give exactly 1 either way
    hit = -np.expm1(-np.exp(np.minimum(u[None, :] + np.log(qT)[:, None], 700.0)))
    integrand = ct * np.exp(-ct) * _poisson_binomial_tail(hit, n)
    value = half * float(np.sum(integrand.reshape(panels, -1) @ _GL_WEIGHTS))
    return min(max(value, 0.0), 1.0)



def _poisson_binomial_tail(hit: np.ndarray, n: int) -> np.ndarray:
    """P(at least n successes) among independent trials, for each column of ``hit`` (|T|, K).

    A product tree of the generating polynomials, truncated at degree n with the top coefficient
    absorbing (so it holds P(count >= n)); every operation adds non-negative numbers.
    """
    polys = np.zeros((hit.shape[0], n + 1, hit.shape[1]))
    polys[:, 0] = 1.0 - hit
    polys[:, 1] = hit
    while polys.shape[0] > 1:
        if polys.shape[0] % 2:
            unit = np.zeros((1, n + 1, hit.shape[1]))
            unit[0, 0] = 1.0
            polys = np.concatenate([polys, unit])
        a, b = polys[0::2], polys[1::2]
        prod = np.zeros_like(a)
        for i in range(n + 1):
            for j in range(n + 1):
                prod[:, min(i + j, n)] += a[:, i] * b[:, j]
        polys = prod
    return polys[0, n]
