"""Closed-form route for Hu et al.'s greedy draft set: alpha* and an optimal cut in O(V).

The greedy set is X = (t_1, ..., t_{n-1}, C): the n - 1 most likely tokens of q (``top``) and one
draw C from q renormalised outside them, :math:`\\tilde q` (:class:`mdtheory.models.greedy.Greedy`). Its draft
sets are :math:`U_c = \\mathrm{top} \\cup \\{c\\}` with probability :math:`\\tilde q(c)`, so

.. math:: \\alpha^* = p(\\mathrm{top}) + \\sum_{c \\notin \\mathrm{top}} \\min(p(c), \\tilde q(c)),

attained by the cut :math:`T^* = \\mathrm{top} \\cup \\{c \\notin \\mathrm{top} : \\tilde q(c) > p(c)\\}`:
:math:`Q(T^*) = \\tilde q(T^* \\setminus \\mathrm{top})`, hence
:math:`1 + p(T^*) - Q(T^*) = 1 + p(\\mathrm{top}) - \\sum_{c \\notin \\mathrm{top}} (\\tilde q(c) - p(c))^+`,
which is the value above because :math:`\\tilde q` sums to one outside the top (Hu et al., ICLR 2025).
The matching lower bound is a flow of the token/draft-set network, checked in factored form by
:func:`mdtheory.certify.check_greedy_flow` (the certificate ``greedy-flow``).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidInputError
from ..models.base import DraftModel
from .proofs import RouteOutput, TopAndDraw

__all__ = ["greedy_closed_form"]


def greedy_closed_form(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """alpha* of the greedy draft set and its optimal cut, without enumerating draft sets.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
        One that drafts fixed tokens and one draw (:attr:`~mdtheory.models.base.DraftModel.fixed_top`,
        e.g. :class:`~mdtheory.models.greedy.Greedy`): its ``top`` and ``tail``.

    Returns
    -------
    RouteOutput
        ``value`` (summed exactly rounded, :func:`math.fsum`), ``cut`` (:math:`T^*`, sorted) and
        ``proof`` (:class:`~mdtheory.routes.proofs.TopAndDraw`: the certifier builds the flow from the
        model).

    Raises
    ------
    InvalidInputError
        The model does not declare ``fixed_top``.
    """
    if not model.fixed_top:
        raise InvalidInputError(f"method 'closed-form' serves the greedy draft set only, not "
                                f"{model.sampling!r} drafts")
    rest = np.ones(model.V, dtype=bool)
    rest[model.top] = False
    value = math.fsum(p[model.top]) + math.fsum(np.minimum(p, model.tail)[rest])
    cut = np.flatnonzero(~rest | (model.tail > p))
    return RouteOutput(value=value, cut=cut, proof=TopAndDraw())
