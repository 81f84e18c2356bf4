"""Front door: the optimal acceptance :math:`\\alpha^*` by any of the exact routes."""

from __future__ import annotations

import time

import numpy as np

from ._certify import CERT_TOL, CERTIFY_MODES
from ._certify import certify as _certify
from ._validate import as_distribution
from .drafts import DraftModel, make_draft_model
from .dual import dual_lp
from .errors import InvalidDistributionError, InvalidInputError
from .independent import mnp_route
from .maxflow import maxflow
from .otlp import otlp
from .result import AcceptanceResult
from .subsets import PREFIX_SAMPLINGS, prefix_scan, subsets_exhaustive

__all__ = ["optimal_acceptance", "alpha_star", "METHODS", "CERT_TOL"]

#: ``method="auto"`` enumerates all token sets up to this alphabet size (models without a prefix route).
AUTO_SUBSET_V = 16

METHODS = {
    "prefix": prefix_scan,
    "subsets": subsets_exhaustive,
    "otlp": otlp,
    "otlp-literal": lambda p, model: otlp(p, model, literal=True),
    "dual": dual_lp,
    "maxflow": maxflow,
    "mnp": mnp_route,
}


def _auto(model: DraftModel) -> str:
    if model.sampling in PREFIX_SAMPLINGS:
        return "prefix"
    if model.sampling == "independent" and model.V > AUTO_SUBSET_V:
        return "mnp"
    return "subsets" if model.V <= AUTO_SUBSET_V else "dual"


def optimal_acceptance(p, q, n: int | None = None, sampling: str = "iid", *,
                       method: str = "auto", normalize: bool = False,
                       certify: str = "fast") -> AcceptanceResult:
    """Optimal acceptance of n-draft speculative sampling, with an optimal cut set.

    .. math::

        \\alpha^* = \\max_{\\pi} P(Y \\in \\mathrm{set}(X))
                 = 1 + \\min_{T \\subseteq \\Omega} \\big[ p(T) - Q(T) \\big],

    the maximum over selection rules :math:`\\pi(y \\mid x)` whose output Y has law p, where the drafts
    X = (X_1..X_n) have joint law Q and :math:`Q(T) = P(X_1, \\dots, X_n \\in T)`.

    Parameters
    ----------
    p : array_like, shape (V,)
        Target distribution.
    q : array_like or DraftModel
        Draft distribution: shape (V,) for ``iid``, ``without-replacement`` and
        ``conditional-poisson``; (n, V) for ``independent``; (V,) * n for ``joint``; or a ready
        :class:`~mdtheory.drafts.DraftModel`.
    n : int, optional
        Number of drafts (implied by the shape of q for ``independent`` and ``joint``).
    sampling : str
        Draft model, a key of :data:`mdtheory.drafts.SAMPLINGS`. Default ``"iid"``.
    method : str
        ``"auto"`` (default): ``"prefix"`` for iid and without-replacement drafts, else
        ``"subsets"`` up to V = 16, else ``"mnp"`` for independent drafts and ``"dual"`` for the
        others. ``"prefix"``: sorted-prefix scan, O(V log V).
        ``"subsets"``: all 2^V sets. ``"otlp"``: the OTLP over draft sets (HiGHS), with the optimal
        plan. ``"otlp-literal"``: the OTLP over ordered tuples, V^n x V variables. ``"dual"``: the
        min-cut LP (HiGHS simplex), 0/1 by total unimodularity. ``"maxflow"``: networkx
        preflow-push. ``"mnp"``: Wolfe's minimum-norm point over the coverage polytope, certified
        by an order-mixture base (:mod:`mdtheory.independent`), no enumeration; any model but
        ``joint``.
    normalize : bool
        Rescale p and q to sum one instead of refusing sums off one by more than 1e-6.
    certify : str
        ``"fast"`` (default): each route's own primal object, and for the iid prefix route a base
        pooled along the route's own order (O(V) beyond the route). ``"full"``: for the iid prefix
        route the lexicographically optimal base of
        :func:`~mdtheory.polymatroid.lex_optimal_base_iid` (its own stable sort; several times the route's
        cost), and for the without-replacement prefix route the flow proof at any size (see
        :mod:`mdtheory._certify`).

    Returns
    -------
    AcceptanceResult
        ``value``, ``cut``, ``method``, ``status``, ``certificate``, ``certificate_gap``, and per
        route the plan or flow, base, duals, duality gap and timings.

    Raises
    ------
    InvalidDistributionError
        p or q is not a distribution, or their lengths differ.
    InvalidInputError
        Unknown method, sampling or certify mode, or a bad number of drafts.
    ProblemTooLargeError
        The chosen method would not fit (the message names the size and another route).
    SolverError
        A solver fails, or the result is not proven: its value leaves [0, 1], its cut set does not
        reproduce it, or its primal object is infeasible or misses the cut value by more than
        :data:`~mdtheory._certify.CERT_TOL` (:func:`mdtheory._certify.certify`).

    Notes
    -----
    Every route is exact up to floating-point rounding (the LP and flow routes up to their solver
    tolerances, about 1e-9). Each result is proven by weak duality: the cut T it returns gives
    :math:`\\alpha^* \\le 1 + p(T) - Q(T)` (Q(T) recomputed by the draft model), a primal object
    checked for feasibility (the plan, the flow, or a base μ of the coverage polytope with
    :math:`\\sum_y \\min(p, \\mu)`) gives the lower bound, and both must meet the value within
    :data:`~mdtheory._certify.CERT_TOL`; ``certificate`` names the primal object and
    ``certificate_gap`` is the difference of the two bounds. The value is not clamped. Without-
    replacement drafts with more than :data:`~mdtheory._certify.MAX_CERT_SETS` draft sets get only
    the cut by default: ``status="upper-bound"``.

    References
    ----------
    Hu et al., "Towards Optimal Multi-draft Speculative Decoding", ICLR 2025 (the dual, Theorem 1).
    Khisti et al., ICLR 2025, Theorems 2 and 3 (n = 2 iid). Thomas & Pal, "Global Resolution",
    ICLR 2026 (max-flow form).

    Examples
    --------
    >>> optimal_acceptance([0.5, 0.5], [0.5, 0.5], 3).value
    1.0
    >>> optimal_acceptance([1.0, 0.0], [0.0, 1.0], 2).value
    0.0
    >>> round(optimal_acceptance([0.7, 0.3], [0.4, 0.6], 1).value, 12)  # 1 - TV(p, q)
    0.7
    """
    t0 = time.perf_counter()
    model = make_draft_model(q, n, sampling, normalize=normalize)
    p = as_distribution(p, "p", normalize=normalize)
    if p.size != model.V:
        raise InvalidDistributionError(f"p has length {p.size} but q has length {model.V}")
    name = _auto(model) if method == "auto" else method
    if name not in METHODS:
        raise InvalidInputError(
            f"unknown method {method!r}; valid choices: auto, {', '.join(METHODS)}"
        )
    if certify not in CERTIFY_MODES:
        raise InvalidInputError(
            f"unknown certify mode {certify!r}; valid choices: {', '.join(CERTIFY_MODES)}"
        )
    out = METHODS[name](p, model)
    t1 = time.perf_counter()
    cert = _certify(p, model, out, name, certify)
    cut = np.asarray(out["cut"], dtype=np.int64)
    cut.setflags(write=False)
    t2 = time.perf_counter()
    timings = dict(out.get("timings", {}), certify=t2 - t1, total=t2 - t0)
    return AcceptanceResult(
        value=float(out["value"]), cut=cut, method=name, sampling=model.sampling, drafts=model.n,
        status=cert.status, certificate=cert.name, certificate_gap=cert.gap, base=cert.base,
        plan=out.get("plan"), support=out.get("support"), support_probs=out.get("support_probs"),
        duals=out.get("duals"), duality_gap=out.get("duality_gap"), timings=timings,
    )


def alpha_star(p, q, n: int | None = None, sampling: str = "iid", *, method: str = "auto",
               normalize: bool = False, certify: str = "fast") -> float:
    """The value :math:`\\alpha^*` alone; see :func:`optimal_acceptance` for the parameters.

    Examples
    --------
    >>> alpha_star([0.25, 0.75], [0.75, 0.25], 1)
    0.5
    """
    return optimal_acceptance(p, q, n, sampling, method=method, normalize=normalize,
                              certify=certify).value
