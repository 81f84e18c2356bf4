"""Token-level selection rules: one interface, exact acceptance and output laws, a registry.

=============  ==================================================================  ==============
name           rule                                                                drafts
=============  ==================================================================  ==============
``single``     single-draft speculative sampling on the first draft                iid
``rrs``        recursive rejection sampling (SpecInfer)                            iid
``rrs-wor``    recursive rejection sampling without replacement (Jeon et al.)      successive
``k-seq``      SpecTr's K-SEQ at ρ*                                                iid
``greedy``     Hu et al.'s greedy draft set with its optimal verifier              greedy
``khisti-lp``  Khisti et al.'s importance sampling, truncated LP, tournament       iid
``gr-softmax`` Global Resolution's softmax rule, fitted by L-BFGS-B to tolerance τ  iid
``optimal``    lex-optimal base by a time schedule; greedy: closed form; else LP   iid (any)
``gls``        Gumbel-max list sampling (Rowan et al.): shared exponential races   iid
=============  ==================================================================  ==============
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from numpy.typing import ArrayLike

from .. import _budget
from ..errors import InvalidInputError
from ..models.base import DraftModel
from ..models.registry import make_draft_model
from .base import SelectionRule, residual
from .baselines import (
    GreedyDrafts,
    KSeq,
    RecursiveRejection,
    RecursiveRejectionWithoutReplacement,
    SingleDraft,
)
from .global_resolution import GlobalResolution
from .gls import GumbelListSampling
from .khisti import KhistiLP
from .optimal import Optimal

__all__ = ["RULES", "register_rule", "make_rule", "rule_keywords", "SelectionRule", "residual"]

#: Registry of selection rules by name.
RULES: dict[str, type[SelectionRule]] = {
    cls.name: cls
    for cls in (SingleDraft, RecursiveRejection, RecursiveRejectionWithoutReplacement, KSeq,
                GreedyDrafts, KhistiLP, GlobalResolution, Optimal, GumbelListSampling)
}


def register_rule(cls: type[SelectionRule]) -> type[SelectionRule]:
    """Add a selection rule class to :data:`RULES` under ``cls.name``, so that :func:`make_rule`,
    the block verifiers, ``compare-selectors --rules`` and the audit find it by name. Returns
    ``cls`` (usable as a decorator).

    Raises
    ------
    InvalidInputError
        ``cls`` is not a :class:`SelectionRule` subclass with a name, or the name is taken by
        another class.
    """
    if not (isinstance(cls, type) and issubclass(cls, SelectionRule)) or not cls.name:
        raise InvalidInputError("register_rule takes a SelectionRule subclass with a name")
    if RULES.get(cls.name, cls) is not cls:
        raise InvalidInputError(f"rule {cls.name!r} is already {RULES[cls.name].__name__}")
    RULES[cls.name] = cls
    return cls


def make_rule(name: str, p: ArrayLike, q: ArrayLike | DraftModel, n: int, *, normalize: bool = False,
              max_seconds: float = _budget.MAX_SECONDS, max_bytes: float = _budget.MAX_BYTES,
              **params: Any) -> SelectionRule:
    """Prepare the rule ``name`` for one position.

    Parameters
    ----------
    name : str
        A key of :data:`RULES` (the table above), e.g. ``"rrs"`` or ``"optimal"``.
    p : array_like, shape (V,)
        Target distribution.
    q : array_like, shape (V,)
        Draft distribution.
    n : int
        Number of drafts. The preparation's memory and time are estimated first and refused
        over the limits of :mod:`mdtheory._budget` (``make_rule("rrs", u, u, 10**9)`` is refused).
    normalize : bool
        Rescale p and q to sum one instead of refusing sums off one.
    max_seconds, max_bytes : float
        Limits of the preparation's estimate (the rule class's
        :meth:`~mdtheory.rules.base.SelectionRule.estimate` on the draft model), checked before any
        work; default 60 s and 4 GiB, as the CLI's.
    **params
        The rule's own keywords (``s`` for ``khisti-lp``; :func:`rule_keywords` lists them).

    Returns
    -------
    SelectionRule
        The prepared rule: ``select(drafts, rng)`` runs one step, ``exact_acceptance()``,
        ``exact_output_law()`` and ``monte_carlo(samples, rng)`` evaluate it.

    Raises
    ------
    InvalidInputError
        Unknown rule name (the message lists the valid ones), a keyword the rule does not take
        (the message lists those it takes), or bad parameters.
    ProblemTooLargeError
        The preparation would need more memory or time than allowed.
        ``optimal`` with iid drafts: n over :data:`mdtheory.rules.schedule.MAX_DRAFTS` (2^20).

    Examples
    --------
    >>> rule = make_rule("rrs", [0.5, 0.5], [0.5, 0.5], 2)
    >>> rule.exact_acceptance()
    1.0
    """
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    try:
        cls = RULES[name]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"unknown selection rule {name!r}; valid choices: {', '.join(RULES)}"
        ) from None
    valid = _keywords(cls) if params else ()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise InvalidInputError(
            f"rule {name!r} takes no keyword {', '.join(map(repr, unknown))}; valid keywords: "
            + ", ".join(["normalize", *valid])
        )
    if cls.needs is not None and isinstance(q, DraftModel):  # any name: the rule checks the capability
        model = make_draft_model(q, n)
    else:
        model = make_draft_model(q, n, params.get("sampling", cls.sampling), normalize=normalize)
    _budget.require(cls.estimate(model), max_seconds, max_bytes=max_bytes, flag="max_seconds")
    if "max_seconds" in _keywords(cls):  # a rule that bounds its own preparation's time
        params["max_seconds"] = max_seconds
    return cls(p, model, n, normalize=normalize, **params)


def rule_keywords(cls: type[SelectionRule]) -> list[str]:
    """The keyword parameters a rule class takes besides (p, q, n, normalize)."""
    return list(_keywords(cls))


@functools.cache
def _keywords(cls: type[SelectionRule]) -> tuple[str, ...]:
    """:func:`rule_keywords`, read once per class (inspect.signature costs tens of microseconds)."""
    names = []
    for func in (cls.__init__, cls._prepare):
        for par in inspect.signature(func).parameters.values():
            if par.kind in (par.KEYWORD_ONLY, par.POSITIONAL_OR_KEYWORD) and par.name not in (
                    "self", "p", "q", "n", "normalize") and par.name not in names:
                names.append(par.name)
    return tuple(names)
