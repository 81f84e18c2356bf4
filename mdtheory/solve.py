"""Front door: the optimal acceptance :math:`\\alpha^*` by any of the exact routes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import _budget
from . import certify as _certificates
from ._validate import as_distribution
from .certify import CERT_TOL, CERTIFY_MODES
from .certify import certify as _certify
from .errors import (
    InvalidDistributionError,
    InvalidInputError,
    MdtheoryError,
    OptimalityGapError,
)
from .models.base import DraftModel
from .models.registry import SAMPLINGS, make_draft_model
from .result import AcceptanceResult
from .routes.proofs import Route
from .routes.select import SELECT_MIN_V, select_scan
from .routes.subsets import prefix_scan, subsets_exhaustive

__all__ = ["optimal_acceptance", "alpha_star", "acceptance_rows", "Row", "route_estimate", "METHODS",
           "register_route", "CERT_TOL"]

#: ``method="auto"`` enumerates all token sets up to this alphabet size (models without a prefix route).
AUTO_SUBSET_V = 16


# The LP and flow routes import scipy, HiGHS or networkx: loaded when first run, not with the package.
def _otlp(p, model, literal=False):
    from .routes.otlp import otlp

    return otlp(p, model, literal=literal)


def _dual(p, model):
    from .routes.dual import dual_lp

    return dual_lp(p, model)


def _mnp(p, model, deadline=None):
    from .routes.mnp import mnp_route

    return mnp_route(p, model, deadline)


def _closed_form(p, model):
    from .routes.greedy import greedy_closed_form

    return greedy_closed_form(p, model)


def _fixed_set(p, model):
    from .routes.fixed_set import fixed_set

    return fixed_set(p, model)


def _maxflow(p, model):
    from .routes.maxflow import maxflow

    return maxflow(p, model)


#: The exact routes by name, each a :class:`~mdtheory.routes.proofs.Route`: called as ``route(p, model)``
#: it returns a :class:`~mdtheory.routes.proofs.RouteOutput` whose proof the certifier checks by its type;
#: ``route.estimate(model)`` is its size estimate; ``route.admits(model)`` whether it serves the model
#: at all; ``method="auto"`` picks, among the routes whose ``auto`` admits the model (from its
#: declared capabilities), the one of lowest ``rank``.
METHODS: dict[str, Route] = {r.name: r for r in (
    Route("prefix", prefix_scan, _budget.prefix_route,
          auto=lambda model: model.prefix_property is not None, rank=0,
          serves=lambda model: model.prefix_property is not None),
    Route("select", select_scan, _budget.select_route,
          auto=lambda model: model.lex_base_closed_form and model.V >= SELECT_MIN_V, rank=-1,
          serves=lambda model: model.lex_base_closed_form,
          cutless=lambda p, model: select_scan(p, model, cut=False)),
    Route("subsets", subsets_exhaustive, _budget.subsets_route,
          auto=lambda model: model.V <= AUTO_SUBSET_V, rank=2),
    Route("otlp", _otlp, lambda model: _budget.law_route(model, "otlp")),
    Route("otlp-literal", lambda p, model: _otlp(p, model, literal=True),
          lambda model: _budget.law_route(model, "otlp-literal")),
    Route("dual", _dual, lambda model: _budget.law_route(model, "dual"),
          auto=lambda model: True, rank=4),
    Route("maxflow", _maxflow, lambda model: _budget.law_route(model, "maxflow")),
    Route("mnp", _mnp, _budget.min_norm_point, auto=lambda model: model.order_vertices, rank=3,
          serves=lambda model: model.order_vertices),
    Route("closed-form", _closed_form, _budget.closed_form_route,
          auto=lambda model: model.fixed_top, rank=1, serves=lambda model: model.fixed_top),
    Route("fixed-set", _fixed_set, _budget.fixed_set_route,
          auto=lambda model: model.deterministic, rank=1, serves=lambda model: model.deterministic),
)}


def register_route(route: Route) -> Route:
    """Add a route to :data:`METHODS` under ``route.name``, so that ``optimal_acceptance(...,
    method=name)``, ``method="auto"`` (where ``route.auto`` admits the model) and the command
    line's ``--method`` find it. Returns ``route``.

    Raises
    ------
    InvalidInputError
        ``route`` is not a :class:`~mdtheory.routes.proofs.Route`, or its name is ``"auto"`` or
        taken by another route.
    """
    if not isinstance(route, Route) or not route.name or route.name == "auto":
        raise InvalidInputError("register_route takes a Route with a name other than 'auto'")
    if METHODS.get(route.name, route) is not route:
        raise InvalidInputError(f"route {route.name!r} is already registered")
    METHODS[route.name] = route
    return route


def _auto(model: DraftModel) -> str:
    """The route ``method="auto"`` runs on ``model``: the lowest-ranked route that admits it."""
    picks = [route for route in METHODS.values() if route.picks(model)]
    if not picks:
        raise InvalidInputError(f"no route is picked automatically for {model.sampling} drafts; "
                                f"name one: {', '.join(METHODS)}")
    return min(picks, key=lambda route: route.rank).name


def route_estimate(model: DraftModel, method: str = "auto", certify: str | None = None
                   ) -> _budget.Estimate:
    """The size estimate of the route ``method`` (``"auto"``: the one ``method="auto"`` picks) on
    ``model``: :meth:`mdtheory.routes.proofs.Route.estimate`, from sizes alone; nothing is run.

    Parameters
    ----------
    model : DraftModel
    method : str
        A key of :data:`METHODS`, or ``"auto"``.
    certify : {None, "fast", "full"}
        None (default): the route alone. A certify mode: the route and the certificate the front
        door checks in that mode (the flow proof of the without-replacement prefix route, where it
        runs), the estimate :func:`optimal_acceptance` refuses over its limits.

    Raises
    ------
    InvalidInputError
        ``method`` is no registered route, or ``certify`` no certify mode.
    """
    name = _route_name(model, method)
    if certify is not None and certify not in CERTIFY_MODES:
        raise InvalidInputError(
            f"unknown certify mode {certify!r}; valid choices: {', '.join(CERTIFY_MODES)}"
        )
    est = METHODS[name].estimate(model)
    if certify is not None and name == "prefix" and model.prefix_property == "checked" and \
            (certify == "full" or model.set_law_size() <= _certificates.MAX_CERT_SETS):
        est = _budget.combine(est, METHODS["dual"].estimate(model), what=est.what)
    return est


def _route_name(model: DraftModel, method: str) -> str:
    """The registered route ``method`` names on ``model`` (``"auto"``: the one it picks)."""
    name = _auto(model) if method == "auto" else method
    if not isinstance(name, str) or name not in METHODS:
        raise InvalidInputError(f"unknown method {method!r}; valid choices: auto, {', '.join(METHODS)}")
    return name


def _ndim(x) -> int:
    try:
        return np.ndim(x)
    except ValueError:  # ragged nested lists: the single problem's validation names the problem
        return -1


def _batch(p, q, sampling: str):
    """(P rows, q rows or [q], B) when p has shape (B, V) or q is a batch of one-law drafts (B, V);
    None for a single problem. One row of either side is broadcast against the other's B rows."""
    one_law = getattr(SAMPLINGS.get(sampling) if isinstance(sampling, str) else None, "single_q", False)
    q_batch = not isinstance(q, DraftModel) and one_law and _ndim(q) == 2
    if _ndim(p) != 2 and not q_batch:
        return None
    # rows as given (a torch row stays a tensor of its dtype), so each is validated as a single p
    P = p if _ndim(p) == 2 else [p]
    Qs = list(q) if q_batch else [q]
    if len(P) == 0 or len(Qs) == 0:
        raise InvalidDistributionError("an empty batch: p and q need at least one row")
    if len(P) != len(Qs) and 1 not in (len(P), len(Qs)):
        raise InvalidDistributionError(
            f"p has {len(P)} rows but q has {len(Qs)}; give equal batches or one row to broadcast"
        )
    return P, Qs, max(len(P), len(Qs))


class Row(NamedTuple):
    """One row of :func:`acceptance_rows`.

    Attributes
    ----------
    index : int
        The row's place in the batch (0 for a single problem).
    result : AcceptanceResult or None
        The row's result; None when its solver proved only bounds that did not meet (``error``
        holds them).
    error : MdtheoryError or None
        With no result: the :class:`~mdtheory.errors.OptimalityGapError` whose ``lower`` and
        ``upper`` are the proven bounds on :math:`\\alpha^*`. With an ``"upper-bound"`` result of
        ``method="auto"``: why the minimum-norm point did not prove it, its estimate over the
        time left or ``max_bytes`` (:class:`~mdtheory.errors.ProblemTooLargeError`), its gap
        (an :class:`~mdtheory.errors.OptimalityGapError`, whose ``lower`` is a proven lower bound)
        or its failure (a :class:`~mdtheory.errors.SolverError`, say): the checked upper bound
        stands. None otherwise.
    """

    index: int
    result: AcceptanceResult | None
    error: MdtheoryError | None = None


def acceptance_rows(p: ArrayLike, q: ArrayLike | DraftModel, n: int | None = None,
                    sampling: str = "iid", *, method: str = "auto", normalize: bool = False,
                    certify: str = "fast", max_seconds: float = _budget.MAX_SECONDS,
                    max_bytes: float = _budget.MAX_BYTES) -> Iterator[Row]:
    """The front door row by row: :func:`optimal_acceptance` on a (B, V) batch (or a single problem,
    one row) that reports a row's gap instead of raising it.

    Every row's draft model and size estimate come first: the batch is refused as a whole (its
    rows' estimates summed against ``max_seconds`` and ``max_bytes``) before any row runs. The
    rows then run in turn under one deadline, ``max_seconds`` after the call: a route whose work
    is not known up front (Wolfe's minimum-norm point) stops there with its proven bounds.

    Parameters
    ----------
    p, q, n, sampling, method, normalize, certify, max_seconds, max_bytes
        As for :func:`optimal_acceptance`.

    Yields
    ------
    Row
        In row order: its index, its result, and (:class:`Row`'s ``error``) the
        :class:`~mdtheory.errors.OptimalityGapError` carrying the bounds where its solver proved
        only those (no result; the message names the row in a batch of several), or why an
        ``"upper-bound"`` result was not proven.

    Raises
    ------
    InvalidDistributionError, InvalidInputError, ProblemTooLargeError, SolverError
        As :func:`optimal_acceptance`, before any row runs (a bad row or the batch's estimate) or
        when a row's solver fails; the message names the row.

    Examples
    --------
    >>> [row.result.value for row in acceptance_rows([[1.0, 0.0], [0.5, 0.5]], [0.5, 0.5], 2)]
    [0.75, 1.0]
    """
    t0 = time.perf_counter()
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    batch = _batch(p, q, sampling) or ([p], [q], 1)
    return _rows(*batch, n, sampling, method, normalize, certify, max_seconds, max_bytes, t0)


def _rows(P, Qs, rows: int, n, sampling, method, normalize, certify, max_seconds, max_bytes,
          t0: float, value_only: bool = False) -> Iterator[Row]:
    """:func:`acceptance_rows` once the limits are checked: every row's model and the batch's
    estimate now, then the rows as a generator (a row's arrays stay in cache, and a caller that
    keeps only values lets each result go); a broadcast q row's draft model is built once, and a p
    row validated when its row runs. ``value_only``: each row's result is its proven value alone,
    a float (:func:`alpha_star`; see :func:`_solve`)."""
    models = []
    for i in range(len(Qs)):
        try:
            models.append(make_draft_model(Qs[i], n, sampling, normalize=normalize))
        except MdtheoryError as exc:
            raise _in_row(exc, i, rows) from None
    shared = _target(P[0], models, normalize, rows) if len(P) == 1 else None
    names = [_route_name(model, method) for model in models]
    if certify not in CERTIFY_MODES:
        raise InvalidInputError(
            f"unknown certify mode {certify!r}; valid choices: {', '.join(CERTIFY_MODES)}"
        )
    estimates = [route_estimate(m, name, certify) for m, name in zip(models, names, strict=True)]
    what = estimates[0].what + (f" (and {rows - 1} more rows)" if rows > 1 else "")
    _budget.require(_budget.combine(*(estimates[i % len(models)] for i in range(rows)), what=what),
                    max_seconds, max_bytes=max_bytes, flag="max_seconds")
    deadline = t0 + max_seconds

    def run() -> Iterator[Row]:
        for i in range(rows):
            model, name = models[i % len(models)], names[i % len(models)]
            try:
                p = shared if shared is not None else _target(P[i], [model], normalize, rows)
                res, why = _solve(p, model, name, certify, deadline, max_bytes,
                                  escalate=method == "auto", t0=t0 if rows == 1 else None,
                                  value_only=value_only)
            except OptimalityGapError as exc:
                yield Row(i, None, _in_row(exc, i, rows))
                continue
            except MdtheoryError as exc:
                raise _in_row(exc, i, rows) from None
            yield Row(i, res, why)
    return run()


def _target(p, models: list[DraftModel], normalize: bool, rows: int) -> np.ndarray:
    """p validated, of the length of every model in ``models``."""
    p = as_distribution(p, "p", normalize=normalize)
    for j, model in enumerate(models):
        if p.size != model.V:
            raise _in_row(InvalidDistributionError(f"p has length {p.size} but q has length {model.V}"),
                          j, len(models))
    return p


def _in_row(exc: MdtheoryError, i: int, rows: int) -> MdtheoryError:
    """``exc`` with its row named when there are several rows (an OptimalityGapError keeps its
    bounds)."""
    if rows == 1:
        return exc
    if isinstance(exc, OptimalityGapError):
        return OptimalityGapError(f"row {i}: {exc}", exc.lower, exc.upper)
    return type(exc)(f"row {i}: {exc}")


def _solve(p: np.ndarray, model: DraftModel, name: str, certify: str, deadline: float,
           max_bytes: float, escalate: bool, t0: float | None = None, value_only: bool = False
           ) -> tuple[AcceptanceResult | float, MdtheoryError | None]:
    """Run the route ``name`` (its estimate already admitted) and certify it: the result and, for
    an ``"upper-bound"`` one that ``escalate`` lets the minimum-norm point try to prove, why that
    did not prove it (:class:`Row`'s ``error``). ``deadline``: the :func:`time.perf_counter`
    reading at which Wolfe's iterations stop; ``t0``: when the call started (the ``total``
    timing), default now. ``value_only``: the proven value alone, as a float, in place of the
    result (the route's cut left to its proof where it can, ``Route.cutless``, in the fast certify
    mode; no single-draft baseline)."""
    t0 = time.perf_counter() if t0 is None else t0
    # Wolfe's iterations are not known up front: the run stops at the deadline, with its bounds
    route = METHODS[name]
    if route.run is _mnp:
        out = route.run(p, model, deadline)
    elif value_only and certify == "fast" and route.cutless is not None:
        out = route.cutless(p, model)
    else:
        out = route(p, model)
    t1 = time.perf_counter()
    cert = _certify(p, model, out, name, certify)
    why = None
    if cert.status != "optimal" and escalate and model.order_vertices:
        # the default route only bounds alpha* (successive sampling beyond the flow certificate's
        # size): Wolfe's minimum-norm point proves it, where its estimate fits what is left
        try:
            _budget.require(route_estimate(model, "mnp"), max(deadline - time.perf_counter(), 0.0),
                            max_bytes=max_bytes, flag="max_seconds")
            return _solve(p, model, "mnp", certify, deadline, max_bytes, escalate=False, t0=t0,
                          value_only=value_only)
        except MdtheoryError as exc:  # over the time left, a gap, or a failed run of Wolfe's method
            why = exc  # the checked upper bound stands, with its status
    if value_only:
        return float(out.value), why
    cut = np.asarray(out.cut, dtype=np.int64)
    cut.setflags(write=False)
    t2 = time.perf_counter()
    timings = dict(out.timings, certify=t2 - t1, total=t2 - t0)
    return AcceptanceResult(
        value=float(out.value), cut=cut, method=name, sampling=model.sampling, drafts=model.n,
        status=cert.status, certificate=cert.name, certificate_gap=cert.gap, base=cert.base,
        cut_p=cert.cut_p, cut_q=cert.cut_q,
        single_draft=float(np.minimum(p, model.first_draft_law()).sum()),
        **out.proof.result_fields(), duals=out.duals, duality_gap=out.duality_gap, timings=timings,
    ), why


def _results(rows: Iterator[Row]) -> Iterator[AcceptanceResult]:
    """The rows' results, a row's gap raised (with its bounds)."""
    for row in rows:
        if row.result is None:
            raise row.error
        yield row.result


def optimal_acceptance(p: ArrayLike, q: ArrayLike | DraftModel, n: int | None = None,
                       sampling: str = "iid", *, method: str = "auto", normalize: bool = False,
                       certify: str = "fast", max_seconds: float = _budget.MAX_SECONDS,
                       max_bytes: float = _budget.MAX_BYTES
                       ) -> AcceptanceResult | list[AcceptanceResult]:
    """Optimal acceptance of n-draft speculative sampling, with an optimal cut set.

    .. math::

        \\alpha^* = \\max_{\\pi} P(Y \\in \\mathrm{set}(X))
                 = 1 + \\min_{T \\subseteq \\Omega} \\big[ p(T) - Q(T) \\big],

    the maximum over selection rules :math:`\\pi(y \\mid x)` whose output Y has law p, where the drafts
    X = (X_1..X_n) have joint law Q and :math:`Q(T) = P(X_1, \\dots, X_n \\in T)`.

    Parameters
    ----------
    p : array_like, shape (V,) or (B, V)
        Target distribution, or a batch of B of them (one result per row).
    q : array_like or DraftModel
        Draft distribution: shape (V,) for ``iid``, ``without-replacement`` and
        ``conditional-poisson``; (n, V) for ``independent``; (V,) * n for ``joint``; or a ready
        :class:`~mdtheory.models.base.DraftModel`. For the models built from one law (``iid``,
        ``without-replacement``, ``conditional-poisson``, ``greedy``) a q of shape (B, V) is a batch.
        A batch of one side is matched row by row with an equal batch of the other, or shares the
        other's single row (broadcast).
    n : int, optional
        Number of drafts (implied by the shape of q for ``independent`` and ``joint``).
    sampling : str
        Draft model, a key of :data:`mdtheory.models.registry.SAMPLINGS`. Default ``"iid"``.
    method : str
        ``"auto"`` (default): ``"select"`` for iid drafts from
        :data:`~mdtheory.routes.select.SELECT_MIN_V` tokens on (buckets of the ratio, no sort,
        :mod:`mdtheory.routes.select`), ``"prefix"`` for iid (below that), without-replacement and
        conditional-Poisson drafts, ``"closed-form"`` for the greedy set, ``"fixed-set"`` for the top
        set, else ``"subsets"`` up to V = 16, else ``"mnp"`` for independent drafts and ``"dual"`` for
        the others. ``"closed-form"``: Hu et al.'s O(V) formula for the greedy draft set
        (:mod:`mdtheory.routes.greedy`), certified by a factored flow. ``"fixed-set"``: alpha* = p(U)
        for drafts of one fixed set U (the top set, :mod:`mdtheory.routes.fixed_set`), certified by
        the flow of p along U, O(V). ``"prefix"``: sorted-prefix scan, O(V log V) (a linear radix
        sort for large V). ``"subsets"``: all 2^V sets. ``"otlp"``: the OTLP over draft sets
        (HiGHS), with the optimal plan. ``"otlp-literal"``: the OTLP over ordered tuples, V^n x V
        variables. ``"dual"``: the min-cut LP (HiGHS simplex), 0/1 by total unimodularity.
        ``"maxflow"``: networkx preflow-push. ``"mnp"``: Wolfe's minimum-norm point over the
        coverage polytope, certified by an order-mixture base (:mod:`mdtheory.routes.mnp`), no
        enumeration; any model but ``joint``.
    normalize : bool
        Rescale p and q to sum one instead of refusing sums off one by more than 1e-6.
    certify : str
        ``"fast"`` (default): each route's own primal object, and for the iid prefix route a base
        pooled along the route's own order (O(V) beyond the route). ``"full"``: for the iid prefix
        route the lexicographically optimal base of
        :func:`~mdtheory.models.polymatroid.lex_optimal_base_iid` (its own stable sort; several times the
        route's
        cost), and for the without-replacement prefix route the flow proof at any size (see
        :mod:`mdtheory.certify`).
    max_seconds, max_bytes : float
        Limits checked before any work starts (as the CLI's ``--max-seconds``, default 60 s, and
        4 GiB): the route's estimate with its certificate (:func:`route_estimate`, a batch's rows
        summed) over either is refused. ``float("inf")`` or None lifts a limit. A route whose
        work is not known up front (Wolfe's minimum-norm point) stops ``max_seconds`` after the
        call (for a batch, after the call for all its rows) and raises its proven bounds.

    Returns
    -------
    AcceptanceResult or list of AcceptanceResult
        ``value``, ``cut``, ``method``, ``status``, ``certificate``, ``certificate_gap``, and per
        route the plan or flow, base, duals, duality gap and timings. For a batch, a list of B
        results in row order, each proven as a single problem's.

    Raises
    ------
    InvalidDistributionError
        p or q is not a distribution, or their lengths differ, or batches of different sizes (a
        batch row's error names the row).
    InvalidInputError
        Unknown method, sampling or certify mode, or a bad number of drafts.
    ProblemTooLargeError
        The chosen method would not fit (the message names the size and another route), or its
        estimate is over ``max_seconds`` or ``max_bytes`` (the message states the estimate).
    SolverError
        A solver fails, or the result is not proven: its value leaves [0, 1], its cut set does not
        reproduce it, or its primal object is infeasible or misses the cut value by more than
        :data:`~mdtheory.certify.CERT_TOL` (:func:`mdtheory.certify.certify`).
    OptimalityGapError
        A route proved only a lower and an upper bound that did not meet (its ``lower`` and
        ``upper``; a batch row's names the row). :func:`acceptance_rows` reports it per row instead.

    Notes
    -----
    Every route is exact up to floating-point rounding (the LP and flow routes up to their solver
    tolerances, about 1e-9). Each result is proven by weak duality: the cut T it returns gives
    :math:`\\alpha^* \\le 1 + p(T) - Q(T)` (Q(T) recomputed by the draft model), a primal object
    checked for feasibility (the plan, the flow, or a base μ of the coverage polytope with
    :math:`\\sum_y \\min(p, \\mu)`) gives the lower bound, and both must meet the value within
    :data:`~mdtheory.certify.CERT_TOL`; ``certificate`` names the primal object and
    ``certificate_gap`` is the difference of the two bounds. The value is not clamped. Without-
    replacement drafts with more than :data:`~mdtheory.certify.MAX_CERT_SETS` draft sets get only
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
    >>> [r.value for r in optimal_acceptance([[1.0, 0.0], [0.5, 0.5]], [0.5, 0.5], 2)]  # batch
    [0.75, 1.0]
    """
    t0 = time.perf_counter()
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    batch = _batch(p, q, sampling)
    rows = _rows(*(batch or ([p], [q], 1)), n, sampling, method, normalize, certify, max_seconds,
                 max_bytes, t0)
    results = list(_results(rows))
    return results if batch is not None else results[0]


def alpha_star(p: ArrayLike, q: ArrayLike | DraftModel, n: int | None = None, sampling: str = "iid",
               *, method: str = "auto", normalize: bool = False, certify: str = "fast",
               max_seconds: float = _budget.MAX_SECONDS, max_bytes: float = _budget.MAX_BYTES
               ) -> float | np.ndarray:
    """The optimal acceptance :math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]` alone, as a float.

    The best probability, over all lossless verifiers, that the output token is one of the n drafts;
    :func:`optimal_acceptance` returns it with its cut set and certificate.

    Parameters
    ----------
    p : array_like or torch.Tensor, shape (V,) or (B, V)
        Target distribution (a batch of B rows gives B values); any float dtype (its sum
        tolerance follows its precision, see :mod:`mdtheory._validate`).
    q : array_like, torch.Tensor or DraftModel
        Draft distribution, shape (V,) (other shapes for ``independent`` and ``joint``, see
        :func:`optimal_acceptance`).
    n : int, optional
        Number of drafts.
    sampling : str
        Draft model (default ``"iid"``; ``"without-replacement"`` or ``"wor"``,
        ``"conditional-poisson"``, ``"independent"``, ``"joint"``, ``"greedy"``).
    method, normalize, certify, max_seconds, max_bytes
        As for :func:`optimal_acceptance`.

    Returns
    -------
    float, or ndarray of shape (B,) for a batch
        :math:`\\alpha^*` in [0, 1].

    Raises
    ------
    InvalidDistributionError, InvalidInputError, ProblemTooLargeError, SolverError
        As :func:`optimal_acceptance`.

    Examples
    --------
    >>> alpha_star([0.25, 0.75], [0.75, 0.25], 1)
    0.5
    >>> alpha_star([0.25, 0.75], [[0.75, 0.25], [0.25, 0.75]], 1).tolist()
    [0.5, 1.0]
    """
    t0 = time.perf_counter()
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    batch = _batch(p, q, sampling)
    rows = _rows(*(batch or ([p], [q], 1)), n, sampling, method, normalize, certify, max_seconds,
                 max_bytes, t0, value_only=True)
    if batch is None:
        return next(_results(rows))
    return np.fromiter(_results(rows), dtype=float, count=batch[2])
