"""The result objects: one base (:class:`Result`: a status, whether it is a success, the status in
words, every field as JSON-ready objects) shared by every result class of the package, and the
result every route to the optimal acceptance returns (:class:`AcceptanceResult`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from ._validate import ONE_TOL
from .errors import InvalidInputError

__all__ = ["Result", "AcceptanceResult", "Duals", "to_jsonable"]


class Duals(dict):
    """The dual LP's optimal potentials: ``"token"`` (a_y, shape (V,)) and ``"set"`` (b_U, shape (M,)).

    ``token[y] = 1`` exactly for the tokens of the cut T; ``set[k] = 1`` exactly for the draft sets
    ``support[k]`` not inside T (Hu et al. 2025, §3; :mod:`mdtheory.routes.dual`). The keys ``"a"`` and
    ``"b"`` are aliases of the same arrays.
    """

    ALIASES = {"a": "token", "b": "set"}

    def __missing__(self, key):
        if key in self.ALIASES:
            return self[self.ALIASES[key]]
        raise KeyError(key)

    def __contains__(self, key) -> bool:
        return super().__contains__(self.ALIASES.get(key, key))

    def get(self, key, default=None):
        return self[key] if key in self else default


def to_jsonable(value):
    """``value`` with arrays as lists and numpy scalars as Python numbers, ready for :func:`json.dumps`.

    Examples
    --------
    >>> to_jsonable({"x": np.arange(2), "y": np.float64(0.5), "z": (np.int64(1), None)})
    {'x': [0, 1], 'y': 0.5, 'z': [1, None]}
    """
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


class Result(ABC):
    """The base of the package's result classes (each a dataclass that keeps its own name):
    :attr:`status`, :attr:`success`, :attr:`message` and :meth:`to_dict`, so that every ``--json``
    has one shape, as scipy's ``OptimizeResult`` gives every solver one.

    A subclass has a ``status`` (a field or a property: a word such as ``"optimal"``,
    ``"upper-bound"``, an audit's verdict, ``"estimate"``), defines :attr:`success` and
    :attr:`message` from it, and lists in :attr:`derived` the properties :meth:`to_dict` adds to
    its fields; :meth:`_items` is the hook for fields that need another form in JSON.
    """

    #: Class attribute: the properties :meth:`to_dict` adds after the fields, in order (``status``
    #: where it is not a field).
    derived: ClassVar[tuple[str, ...]] = ("status", "success", "message")

    @property
    @abstractmethod
    def success(self) -> bool:
        """Whether the result is what was asked for (a proven value, a passed audit)."""

    @property
    @abstractmethod
    def message(self) -> str:
        """The status in words."""

    def _items(self) -> dict[str, Any]:
        """Every field by name (in a JSON-friendly form where it needs one), then :attr:`derived`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update((name, getattr(self, name)) for name in self.derived if name not in out)
        return out

    def to_dict(self, keys: Sequence[str] | None = None) -> dict:
        """Every field and every property of :attr:`derived` as JSON-ready Python objects (arrays
        become lists, numpy scalars Python numbers); with ``keys``, those alone, in that order.

        Raises
        ------
        InvalidInputError
            A key that is neither a field nor one of :attr:`derived`.
        """
        items = self._items()
        if keys is None:
            return to_jsonable(items)
        unknown = [k for k in keys if k not in items]
        if unknown:
            raise InvalidInputError(f"{type(self).__name__} has no field {', '.join(map(repr, unknown))}; "
                                    f"valid: {', '.join(items)}")
        return to_jsonable({k: items[k] for k in keys})


@dataclass
class AcceptanceResult(Result):
    """Optimal acceptance :math:`\\alpha^*` of one (p, draft model) pair, with its certificates.

    Attributes
    ----------
    value : float
        :math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]`.
    cut : ndarray of int
        An optimal cut set :math:`T^*` (sorted token indices, read-only) attaining the minimum. The minimisers
        of the submodular p(T) - Q(T) form a lattice; every route but ``prefix`` reports its
        inclusion-minimal element (empty when acceptance is one), ``prefix`` the shortest optimal
        prefix. Tokens of :math:`T^*` are over-drafted: they receive exactly their target
        mass, and only draft sets inside :math:`T^*` can be rejected.
    method : str
        The route that produced the result.
    sampling : str
        The draft model's registry name.
    drafts : int
        Number of drafts n.
    status : str
        ``"optimal"``: the value is proven, its cut and a feasible primal object (``certificate``)
        meet within :data:`~mdtheory.certify.CERT_TOL`, or the route evaluated every cut, or (conditional
        Poisson beyond :data:`~mdtheory.certify.MAX_CERT_SETS` sets) the prefix property is proved
        for the model and the best prefix's value is checked against its cut.
        ``"upper-bound"``: only the cut is checked, so the value is a proven upper bound on
        :math:`\\alpha^*` (the without-replacement prefix route beyond
        :data:`~mdtheory.certify.MAX_CERT_SETS` draft sets). A route that cannot be proven raises
        :class:`~mdtheory.errors.SolverError` instead.
    certificate : str
        The primal object that proved the value (:mod:`mdtheory.certify`): ``"plan"`` (OTLP
        routes), ``"flow"`` (``dual``, ``maxflow``, and ``prefix`` for without-replacement drafts
        up to :data:`~mdtheory.certify.MAX_CERT_SETS` sets), ``"base"`` / ``"lex-base"``
        (``prefix``, iid: a base μ of the coverage polytope, see ``base``), ``"exhaustive"``
        (``subsets``: all :math:`2^V` cuts evaluated), ``"prefix-theorem"`` (``prefix``, conditional
        Poisson: the proved prefix property; no primal object) or ``"cut"`` (none; status
        ``"upper-bound"``).
    certificate_gap : float or None
        Cut value :math:`1 + p(T) - Q(T)` minus the primal object's lower bound on
        :math:`\\alpha^*` (its objective less its infeasibility): the width of the proven interval,
        at most :data:`~mdtheory.certify.CERT_TOL` in absolute value (``"exhaustive"``: the cut value
        minus the minimum the certifier recomputed over all sets). None for ``"prefix-theorem"`` and
        ``"cut"``.
    base : ndarray or None
        For ``prefix`` with iid drafts, the base μ of the coverage polytope B(g) that proved the
        value, :math:`\\sum_y \\min(p(y), \\mu(y)) = \\alpha^*`: the marginal of an optimal rule
        (Khisti et al., Theorem 1).
    plan : ndarray or None
        OTLP routes only: the optimal selection rule :math:`\\pi(y \\mid x)`, shape (M, V), row k the
        conditional law of the output given the drafts ``support[k]`` (rows sum to one). None
        elsewhere.
    flow : ndarray or None
        ``dual`` and ``maxflow`` only: a maximum flow S(U, y), shape (M, V), the probability mass
        carried from token y to the draft set ``support[k]`` (non-negative, only along y in U, at
        most p(y) per token and :math:`w_U` per set; its total is :math:`\\alpha^*`). None
        elsewhere.
    support : ndarray or None
        What the rows of ``plan`` or ``flow`` are indexed by: draft tuples (int, shape (M, n)) for
        ``otlp-literal``, draft sets (bool, shape (M, V)) for the other routes.
    support_probs : ndarray or None
        Their probabilities, Q(x) for tuples, :math:`w_U = P(\\mathrm{set}(X) = U)` for sets.
    duals : Duals or None
        ``dual`` only: the min-cut LP's 0/1 potentials, ``{"token": a (V,), "set": b (M,)}``
        (:class:`Duals`; ``"a"``, ``"b"`` are aliases).
    duality_gap : float or None
        Primal objective minus dual objective of the solve that produced the value, where the route
        has both.
    timings : dict
        Seconds spent, by phase (``"total"`` always).
    cut_p, cut_q : float
        :math:`p(T^*)` and :math:`Q(T^*)`, recomputed from the inputs by the certificate.
    margin : float
        :math:`Q(T^*) - p(T^*)` (property): the witness's excess, :math:`1 - \\alpha^*`.
    single_draft : float
        The single-draft baseline :math:`\\sum_y \\min(p(y), q_1(y)) = 1 - \\mathrm{TV}(p, q_1)`, q_1 the
        law of the first draft.
    success : bool
        Whether the value is proven exact (``status == "optimal"``), as in scipy's
        ``OptimizeResult``. A route that cannot prove anything raises instead of returning.
    message : str
        The status in words.

    Examples
    --------
    >>> import mdtheory as md
    >>> res = md.optimal_acceptance([0.7, 0.3], [0.4, 0.6], 2)
    >>> res.success, res.message.startswith("optimal: alpha* proven by its base certificate")
    (True, True)
    >>> import json; json.loads(json.dumps(res.to_dict()))["cut"]
    [1]
    """

    value: float
    cut: np.ndarray
    method: str
    sampling: str
    drafts: int
    status: str = "optimal"
    certificate: str = ""
    certificate_gap: float | None = None
    base: np.ndarray | None = None
    plan: np.ndarray | None = None
    support: np.ndarray | None = None
    support_probs: np.ndarray | None = None
    duals: Duals | None = None
    duality_gap: float | None = None
    timings: dict = field(default_factory=dict)
    flow: np.ndarray | None = None
    cut_p: float = float("nan")
    cut_q: float = float("nan")
    single_draft: float = float("nan")

    derived: ClassVar[tuple[str, ...]] = ("acceptance_one", "witness", "margin", "success", "message")

    def __post_init__(self):
        if self.duals is not None and not isinstance(self.duals, Duals):
            d = Duals(self.duals)  # a route's {"a", "b"} under the documented names
            self.duals = Duals(token=d["token" if "token" in d.keys() else "a"],
                               set=d["set" if "set" in d.keys() else "b"])

    @property
    def success(self) -> bool:
        """Whether the value is proven exact (``status == "optimal"``)."""
        return self.status == "optimal"

    @property
    def message(self) -> str:
        """The status in words."""
        if not self.success:
            return (f"{self.status}: the cut is checked, so alpha* <= value; optimality is not proven "
                    f"for {self.sampling} drafts at this size")
        gap = "" if self.certificate_gap is None else f" (gap {abs(self.certificate_gap):.1g})"
        return f"optimal: alpha* proven by its {self.certificate} certificate{gap}"

    @property
    def margin(self) -> float:
        """:math:`Q(T^*) - p(T^*) = 1 - \\alpha^*` from the cut's own masses: how much more often all
        drafts land in the cut than the target goes there (positive below acceptance one)."""
        return self.cut_q - self.cut_p

    @property
    def acceptance_one(self) -> bool:
        """Whether :math:`\\alpha^* = 1` (Hall's condition), within ``ONE_TOL``."""
        return self.value >= 1.0 - ONE_TOL

    @property
    def witness(self) -> np.ndarray | None:
        """A set T with p(T) < Q(T) when acceptance is below one (the optimal cut), else None."""
        return None if self.acceptance_one else self.cut

    def __float__(self) -> float:
        return float(self.value)

    def __repr__(self) -> str:
        return (f"AcceptanceResult(value={self.value:.12g}, cut={self.cut.tolist()}, method={self.method!r}, "
                f"sampling={self.sampling!r}, drafts={self.drafts}, status={self.status!r}, "
                f"certificate={self.certificate!r})")
