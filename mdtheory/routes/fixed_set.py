"""Closed-form route for a fixed draft set (the top set): alpha* = p(U) and its proof in O(V).

A :attr:`~mdtheory.models.base.DraftModel.deterministic` model drafts one tuple with probability
one, whose token set U (the n most likely tokens of q for :class:`mdtheory.models.top.Top`) is its
set law. In :math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]` (papers/theory.md §1), Q(T) = 1 when T
holds U and 0 otherwise, so a set T holding U gives :math:`p(T) - 1 \\ge p(U) - 1` and any other
:math:`p(T) \\ge 0 \\ge p(U) - 1`:

.. math:: \\alpha^* = p(U), \\qquad T^* = U.

The matching lower bound is the flow S(U, y) = p(y) for y in U of the token/draft-set network: it
sends p(y) out of each token of U (its capacity), and p(U) <= 1 = w_U into the one set; its value is
p(U). The route hands it over as a :class:`~mdtheory.routes.proofs.SetFlow`, which the certifier
checks against the model's own set law (the certificate ``flow``, :func:`mdtheory.certify.check_flow`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidInputError
from ..models.base import DraftModel
from .proofs import RouteOutput, SetFlow

__all__ = ["fixed_set"]


def fixed_set(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """alpha* of a fixed draft set and its optimal cut, from the model's one draft set.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
        One that declares :attr:`~mdtheory.models.base.DraftModel.deterministic` (its set law is one
        set of probability one).

    Returns
    -------
    RouteOutput
        ``value`` p(U) (exactly rounded, :func:`math.fsum`), ``cut`` U (sorted) and ``proof`` the
        flow of p along U (:class:`~mdtheory.routes.proofs.SetFlow`).

    Raises
    ------
    InvalidInputError
        The model does not declare ``deterministic``, or its set law is not one set of
        probability one.

    Examples
    --------
    >>> from mdtheory.models.top import Top
    >>> out = fixed_set(np.array([0.5, 0.3, 0.2]), Top([0.1, 0.6, 0.3], 2))
    >>> round(out.value, 12), out.cut.tolist()
    (0.5, [1, 2])
    """
    if not model.deterministic:
        raise InvalidInputError(f"method 'fixed-set' serves a fixed draft set only (the top set), not "
                                f"{model.sampling!r} drafts")
    law = model.set_law()
    if law.members.shape[0] != 1 or law.probs[0] != 1.0:
        raise InvalidInputError(f"method 'fixed-set': the {model.sampling!r} model's set law is not one "
                                "set of probability one")
    members = law.members[0]
    flow = np.where(members, p, 0.0)[None, :]
    return RouteOutput(value=math.fsum(p[members]), cut=np.flatnonzero(members),
                       proof=SetFlow(flow=flow, support=law.members, support_probs=law.probs))
