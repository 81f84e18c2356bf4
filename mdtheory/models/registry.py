"""The registry of draft models by name: :data:`SAMPLINGS`, :func:`register_sampling` and
:func:`make_draft_model`. A new draft model is one module and one entry here."""

from __future__ import annotations

from numpy.typing import ArrayLike

from .._validate import as_drafts
from ..errors import InvalidInputError
from .base import (
    DraftModel,
)
from .conditional_poisson import ConditionalPoisson
from .greedy import Greedy
from .iid import IID
from .independent import Independent
from .joint import Joint
from .top import Top
from .without_replacement import WithoutReplacement

__all__ = ["SAMPLINGS", "register_sampling", "sampling_names", "file_samplings", "PREFIX_SAMPLINGS",
           "PREFIX_PROVED", "make_draft_model"]


#: Registry of draft models by name, with their aliases (:func:`register_sampling` adds one).
SAMPLINGS: dict[str, type[DraftModel]] = {
    "iid": IID,
    "without-replacement": WithoutReplacement,
    "wor": WithoutReplacement,
    "conditional-poisson": ConditionalPoisson,
    "independent": Independent,
    "joint": Joint,
    "greedy": Greedy,
    "top": Top,
}


def register_sampling(cls: type[DraftModel], *aliases: str) -> type[DraftModel]:
    """Add a draft model class to :data:`SAMPLINGS` under ``cls.sampling`` (and ``aliases``), so
    that :func:`make_draft_model`, the front door's ``sampling=`` and the command line's
    ``--sampling`` find it by name. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    InvalidInputError
        ``cls`` is not a :class:`DraftModel` subclass, has no ``sampling`` name, or a name is taken
        by another class.
    """
    if not (isinstance(cls, type) and issubclass(cls, DraftModel)) or not cls.sampling:
        raise InvalidInputError("register_sampling takes a DraftModel subclass with a sampling name")
    for name in (cls.sampling, *aliases):
        if SAMPLINGS.get(name, cls) is not cls:
            raise InvalidInputError(f"sampling {name!r} is already {SAMPLINGS[name].__name__}")
        SAMPLINGS[name] = cls
    return cls


def file_samplings() -> list[str]:
    """The registered names (aliases included) of the models the command line builds from one
    .npy file: the one-law models (:attr:`DraftModel.single_q`, rows (V,) or a batch (B, V)), then
    those with one law per draft (:attr:`DraftModel.rows_per_draft`, a table (n, V))."""
    return [name for name, cls in SAMPLINGS.items() if cls.single_q] + \
        [name for name, cls in SAMPLINGS.items() if cls.rows_per_draft and not cls.single_q]


def sampling_names(predicate=None) -> tuple[str, ...]:
    """The registered draft models' names (no aliases), in registry order, those whose class
    satisfies ``predicate(cls)`` if given (e.g. ``lambda cls: cls.single_q``)."""
    return tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                               if predicate is None or predicate(cls)))


#: Draft models with a prefix route (:attr:`DraftModel.prefix_property`), by registry name.
PREFIX_SAMPLINGS = tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                                       if cls.prefix_property is not None))
#: Of those, the ones whose prefix property is proved (the rest are checked, not proved).
PREFIX_PROVED = tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                                    if cls.prefix_property == "proved"))


def make_draft_model(q: ArrayLike | DraftModel, n: int | None = None, sampling: str = "iid", *,
                     normalize: bool = False) -> DraftModel:
    """Build a draft model from its registry name.

    Parameters
    ----------
    q : array_like or DraftModel
        ``(V,)`` for iid, without-replacement and conditional-poisson; ``(n, V)`` for independent;
        ``(V,) * n`` for joint. A :class:`DraftModel` is returned unchanged.
    n : int, optional
        Number of drafts; required by the models built from one q, implied by the others.
    sampling : str
        A key of :data:`SAMPLINGS`.
    normalize : bool

    Raises
    ------
    InvalidInputError
        Unknown ``sampling``, a missing n, an n that contradicts the shape of q, or a draft model
        given with a sampling other than its own (or the default ``"iid"``).
    """
    try:
        cls = SAMPLINGS[sampling]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"unknown sampling {sampling!r}; valid choices: {', '.join(SAMPLINGS)}"
        ) from None
    if isinstance(q, DraftModel):
        if n is not None and as_drafts(n) != q.n:
            raise InvalidInputError(f"n = {n} contradicts the draft model's n = {q.n}")
        # "iid" is the default, so it cannot be told from no sampling given: any other must agree
        if sampling not in ("iid", q.sampling):
            raise InvalidInputError(f"sampling {sampling!r} contradicts the draft model, which is "
                                    f"{q.sampling!r}; pass the model alone or its own sampling")
        return q
    if not cls.single_q:
        model = cls(q, normalize=normalize)
        if n is not None and as_drafts(n) != model.n:
            raise InvalidInputError(
                f"n = {n} contradicts the {sampling} draft table, which has n = {model.n} drafts"
            )
        return model
    if n is None:
        raise InvalidInputError(f"sampling {sampling!r} needs the number of drafts n")
    return cls(q, n, normalize=normalize)
