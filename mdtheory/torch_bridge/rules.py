"""Batched selection rules on the device, each written as the sequential algorithm itself."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import ClassVar

from ..errors import InvalidInputError
from ..rules import RULES
from ..rules.base import SelectionRule
from ..rules.baselines import KSeq, RecursiveRejection
from ..rules.gls import GumbelListSampling
from ..rules.khisti import KhistiLP
from ..rules.optimal import Optimal
from .tensors import _check_pair, _torch

__all__ = ["TorchRule", "TorchRRS", "TorchKSeq", "TorchKhisti", "TorchOptimal", "TorchGLS", "TORCH_RULES",
           "register_torch_rule"]


def _residual(target, proposal):
    """norm((target - proposal)^+) row by row; the target itself where that is zero."""
    d = (target - proposal).clamp(min=0.0)
    s = d.sum(-1, keepdim=True)
    return _torch().where(s > 0, d / s.clamp(min=1e-300), target)


def _is_rows(value, B: int) -> bool:
    return hasattr(value, "repeat_interleave") and value.ndim >= 1 and value.shape[0] == B


def _pick(values, index):
    return values.gather(-1, index.unsqueeze(-1)).squeeze(-1)


class TorchRule(ABC):
    """A batched selection rule prepared for rows (p, q) of shape (B, V), n iid drafts.

    :meth:`step` takes drafts (B, n) and returns (tokens (B,), accepted (B,) bool); every rule's step
    begins with :meth:`check_drafts` (a subclass's should too).

    Raises
    ------
    InvalidInputError
        n is not an integer >= 1.
    InvalidDistributionError
        p or q is not a (B, V) tensor of probability rows (as :func:`alpha_star` checks them), or
        their shapes or devices differ. Of different float dtypes, both are taken in the wider one.
    """

    #: Class attribute: the numpy selection rule this batched form computes, a class registered in
    #: :data:`mdtheory.rules.RULES` (:func:`register_torch_rule` checks it); the cross-validation
    #: audits the one against the other, and the torch rule's name is the numpy rule's.
    rule: ClassVar[type[SelectionRule] | None] = None
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.rule is not None:
            cls.name = cls.rule.name

    def __init__(self, p, q, n: int):
        self.p, self.q, self.n = _check_pair(_torch(), p, q, n, rows_only=True)
        self.prepare()

    @classmethod
    def numpy_keywords(cls, V: int, device) -> dict:
        """Keywords of :attr:`rule` (``make_rule(name, p, q, n, **keywords)``) under which the numpy
        rule runs this batched form's program at V tokens on ``device``: its exact reference (the
        cross-validation's exact acceptance). No keywords by default (``{}``)."""
        return {}

    def prepare(self) -> None:  # noqa: B027 - a rule with nothing to prepare keeps this default
        """Per-position preparation (none by default)."""

    def repeat_rows(self, k: int) -> TorchRule:
        """The same prepared rule with every row repeated k times (k steps per position in one batch),
        without preparing again."""
        B = self.p.shape[0]
        new = copy.copy(self)
        for name, value in vars(self).items():
            if _is_rows(value, B):
                setattr(new, name, value.repeat_interleave(k, dim=0))
            elif isinstance(value, list) and value and all(_is_rows(v, B) for v in value):
                setattr(new, name, [v.repeat_interleave(k, dim=0) for v in value])
        return new

    @abstractmethod
    def step(self, drafts, generator=None):
        """One verification step per row: (tokens (B,), accepted (B,) bool).

        Raises
        ------
        InvalidInputError
            Drafts that :meth:`check_drafts` refuses.
        """

    def check_drafts(self, drafts):
        """The drafts as an int64 tensor, checked: a torch tensor of an integer dtype, of shape
        (B, n) for this rule's B rows and n drafts, on the rows' device, every id in ``0 .. V-1``.
        The range check synchronises with the host once per call (one ``bool`` of a reduction);
        the others read metadata only.

        Raises
        ------
        InvalidInputError
            Naming the first thing wrong (for an id out of range, its position and value).
        """
        torch = _torch()
        B, V = self.p.shape
        if not isinstance(drafts, torch.Tensor) or drafts.dtype == torch.bool \
                or drafts.is_floating_point() or drafts.is_complex():
            kind = f"a tensor of dtype {drafts.dtype}" if isinstance(drafts, torch.Tensor) \
                else type(drafts).__name__
            raise InvalidInputError(f"drafts must be an integer torch tensor of token ids, got {kind}")
        if tuple(drafts.shape) != (B, self.n):
            raise InvalidInputError(f"{self.name or type(self).__name__} takes drafts of shape (B, n) = "
                                    f"({B}, {self.n}); got shape {tuple(drafts.shape)}")
        if drafts.device != self.p.device:
            raise InvalidInputError(f"drafts are on {drafts.device} but the rows are on {self.p.device}")
        drafts = drafts.long()
        outside = (drafts < 0) | (drafts >= V)
        if bool(outside.any()):  # the one host synchronisation
            row, k = (int(i) for i in outside.nonzero()[0])
            raise InvalidInputError(f"drafts[{row}, {k}] = {int(drafts[row, k])} is not a token id in "
                                    f"0 .. {V - 1}")
        return drafts

    def _sequential(self, drafts, ratios_at, final_law, generator):
        """Accept draft i with probability ratios_at(i, x_i) in turn; else sample final_law."""
        torch = _torch()
        B = drafts.shape[0]
        u = torch.rand(B, drafts.shape[1], generator=generator, device=drafts.device,
                       dtype=self.p.dtype)
        token = torch.full((B,), -1, dtype=torch.long, device=drafts.device)
        done = torch.zeros(B, dtype=torch.bool, device=drafts.device)
        for i in range(drafts.shape[1]):
            x = drafts[:, i]
            take = ~done & (u[:, i] < ratios_at(i, x))
            token = torch.where(take, x, token)
            done |= take
        fallback = torch.multinomial(final_law, 1, generator=generator).squeeze(-1)
        return torch.where(done, token, fallback), done


class TorchRRS(TorchRule):
    """Recursive rejection sampling (SpecInfer), batched."""

    rule = RecursiveRejection

    def prepare(self):
        self.r = [self.p]
        for _ in range(self.n):
            self.r.append(_residual(self.r[-1], self.q))

    def step(self, drafts, generator=None):
        drafts = self.check_drafts(drafts)
        def ratio(i, x):
            return (_pick(self.r[i], x) / _pick(self.q, x)).clamp(max=1.0)
        return self._sequential(drafts, ratio, self.r[self.n], generator)


class TorchKSeq(TorchRule):
    """SpecTr's K-SEQ, batched. ρ* solves :math:`1 - (1 - \\beta(\\rho))^n = \\rho \\beta(\\rho)`,
    :math:`\\beta(\\rho) = \\sum \\min(p/\\rho, q)`: one sort of p/q finds the two knots of β around
    ρ* (β is :math:`A/\\rho + C` between knots), then a bisection of that closed form on (B,)
    scalars, keeping the residual a distribution (ρ from above)."""

    rule = KSeq

    def _beta(self, rho):
        return _torch().minimum(self.p / rho[:, None], self.q).sum(-1)

    def prepare(self):
        torch = _torch()
        n = float(self.n)
        c, order = torch.sort(self.p / self.q, dim=-1)  # q = 0: inf or NaN, last; never a knot below n
        ps, qs = self.p.gather(-1, order), self.q.gather(-1, order)
        A = ps.cumsum(-1)  # p of the tokens with ratio <= the knot
        C = (qs.sum(-1, keepdim=True) - qs.cumsum(-1)).clamp(min=0.0)  # q of those above it

        def excess(rho, a, cq):
            b = a / rho + cq
            return 1 - (1 - b).clamp(min=0.0) ** self.n - rho * b

        knot = (c > 1) & (c < n)
        positive = knot & (excess(c.clamp(min=1e-300), A, C) > 0)
        # lo: the last knot where the excess is positive (else 1); hi: the next knot (else n)
        j = torch.where(positive, torch.arange(c.shape[-1], device=c.device), -1).amax(-1)
        one = torch.ones_like(c[:, 0])
        lo = torch.where(j >= 0, c.gather(-1, j.clamp(min=0)[:, None]).squeeze(-1), one)
        nxt = torch.where(knot & (c > lo[:, None]), c, torch.full_like(c, n)).amin(-1)
        hi = nxt
        k = (c <= lo[:, None]).sum(-1) - 1  # tokens at or below lo: the closed form's constants
        a = torch.where(k >= 0, A.gather(-1, k.clamp(min=0)[:, None]).squeeze(-1), torch.zeros_like(one))
        total_q = qs.sum(-1)
        cq = torch.where(k >= 0, C.gather(-1, k.clamp(min=0)[:, None]).squeeze(-1), total_q)
        at_one = excess(one, a, cq) <= 0
        for _ in range(64 if self.p.dtype == torch.float64 else 32):
            mid = 0.5 * (lo + hi)
            pos = excess(mid, a, cq) > 0
            lo, hi = torch.where(pos, mid, lo), torch.where(pos, hi, mid)
        self.rho = torch.where(at_one & (j < 0), one, hi)
        beta = self._beta(self.rho)
        scale = torch.where(beta > 0, (1 - (1 - beta) ** self.n) / beta.clamp(min=1e-300),
                            torch.zeros_like(beta))
        accepted = scale[:, None] * torch.minimum(self.q, self.p / self.rho[:, None])
        self.res = _residual(self.p, accepted)

    def step(self, drafts, generator=None):
        drafts = self.check_drafts(drafts)
        def ratio(i, x):
            return (_pick(self.p, x) / (self.rho * _pick(self.q, x))).clamp(max=1.0)
        return self._sequential(drafts, ratio, self.res, generator)


class TorchKhisti(TorchRule):
    """Khisti et al.'s tournament, solved on the device (:mod:`mdtheory.torch_bridge.khisti`).

    Class attributes ``s`` (None: the default truncation and guard, :func:`.khisti.default_size`: the
    numpy rule's on the CPU, at most :data:`.khisti.DEVICE_S` on a GPU) and ``rest`` (``"bucket"``,
    sort-free; or ``"rank"``) choose the program, as the numpy rule's keywords.
    Every stage keeps the top s tokens (``torch.topk``), a block of keep-probabilities from the batched
    flow, and the scores of the rest; nothing of size V x V. ``unsolved`` counts the stage solves that
    stopped short of their optimum (none expected: the simplex ends by Bland's rule).
    """

    rule = KhistiLP
    s = None  # the numpy rule's default truncation
    rest = "bucket"

    @classmethod
    def numpy_keywords(cls, V, device):
        """The truncation this form uses on ``device``, its way of settling the rest, and the guard
        where ``s`` is the default (on a GPU the truncation is at most DEVICE_S, not the numpy
        rule's default)."""
        from .khisti import default_size

        s = default_size(V, device) if cls.s is None else min(int(cls.s), V)
        return {"s": s, "rest": cls.rest, "guard": cls.s is None}

    def prepare(self):
        from .khisti import default_size, truncated_stage

        torch = _torch()
        B, V = self.p.shape
        dev = self.p.device
        S = default_size(V, dev) if self.s is None else min(int(self.s), V)
        s = torch.full((B,), S, dtype=torch.long, device=dev)
        self.stages = []
        law, self.unsolved = self.q, 0
        for _ in range(self.n - 1):
            stage, law = truncated_stage(self.p, law, self.q, s, S, self.rest)
            self.unsolved += int((~stage.pop("done")).sum())
            self.stages.append(stage)
        if self.s is None:  # the guard: below single-draft, keep the first draft
            self.first = (torch.minimum(self.p, law).sum(-1)
                          < torch.minimum(self.p, self.q).sum(-1))
            law = torch.where(self.first[:, None], self.q, law)
        else:
            self.first = torch.zeros(B, dtype=torch.bool, device=dev)
        self.mu = law
        self.res = _residual(self.p, self.mu)
        self._flat = [t for st in self.stages for t in (st["top"], st["active"], st["block"],
                                                         st["score"])]

    def repeat_rows(self, k):
        new = super().repeat_rows(k)
        new.stages = [dict(zip(("top", "active", "block", "score"), new._flat[4 * i:4 * i + 4],
                               strict=True)) for i in range(len(self.stages))]
        return new

    def step(self, drafts, generator=None):
        drafts = self.check_drafts(drafts)
        torch = _torch()
        B = drafts.shape[0]
        rows = torch.arange(B, device=drafts.device)
        u = torch.rand(B, self.n, generator=generator, device=drafts.device, dtype=self.p.dtype)
        winner = drafts[:, 0]
        for t, st in enumerate(self.stages):
            x = drafts[:, t + 1]
            hit_w = (st["top"] == winner[:, None]) & st["active"]
            hit_x = (st["top"] == x[:, None]) & st["active"]
            in_w, in_x = hit_w.any(1), hit_x.any(1)
            inside = st["block"][rows, hit_w.int().argmax(1), hit_x.int().argmax(1)]
            score = st["score"]
            rest = (_pick(score, winner) >= _pick(score, x)).to(self.p.dtype)
            keep = torch.where(in_w & in_x, inside,
                               torch.where(in_w, 1.0, torch.where(in_x, 0.0, rest)))
            keep = torch.where(self.first, 1.0, keep)
            winner = torch.where(u[:, t] < keep, winner, x)
        accept = u[:, -1] < (_pick(self.p, winner) / _pick(self.mu, winner)).clamp(max=1.0)
        fallback = torch.multinomial(self.res, 1, generator=generator).squeeze(-1)
        return torch.where(accept, winner, fallback), accept


class TorchOptimal(TorchRule):
    """The optimal rule, built for the whole batch on the device (:mod:`mdtheory.torch_bridge.optimal`):
    cells of time in the order of q/p, swapped between cells so that the earliest draft's law μ
    attains α*; every draft draws a time from its token's cells, the earliest is the candidate, then
    one speculative step against μ, the candidate's exact law. Its μ is an optimal marginal, not
    necessarily the numpy rule's (the lexicographically optimal base): the same acceptance α*, the
    same output law p.
    """

    rule = Optimal

    def prepare(self):
        from .optimal import optimal_plan

        torch = _torch()
        self.plan = optimal_plan(self.p, self.q, self.n)
        p = self.p.to(torch.float64)
        p = p / p.sum(-1, keepdim=True)
        mu = self.plan.mu
        self.ratio = torch.where(mu > 0, p / mu.clamp(min=1e-300), torch.ones_like(mu)).clamp(max=1.0)
        self.res = _residual(p, mu)

    def repeat_rows(self, k):
        new = super().repeat_rows(k)
        new.plan = self.plan.repeat_rows(k)
        return new

    def step(self, drafts, generator=None):
        drafts = self.check_drafts(drafts)
        torch = _torch()
        B = drafts.shape[0]
        late = self.plan.times(drafts, generator)  # 1 - time: the largest is the earliest draft
        cand = drafts.gather(1, late.argmax(dim=1, keepdim=True)).squeeze(-1)
        u = torch.rand(B, generator=generator, device=drafts.device, dtype=torch.float64)
        accept = u < _pick(self.ratio, cand)
        fallback = torch.multinomial(self.res, 1, generator=generator).squeeze(-1)
        return torch.where(accept, cand, fallback), accept


class TorchGLS(TorchRule):
    """Gumbel-max list sampling (:class:`~mdtheory.rules.gls.GumbelListSampling`), batched: each
    row's n races are redrawn from their law given the drafts (race k: :math:`M_k \\sim
    \\mathrm{Exp}(1)`, :math:`S_{k,x_k} = q_{x_k} M_k`, :math:`S_{k,i} = q_i M_k + E_{k,i}`), the
    output is :math:`\\arg\\min_i \\min_k S_{k,i}/p_i`, accepted when it is a draft. One race of
    (B, V) at a time; the drafted entries :math:`M_k q_{x_k}/p_{x_k}` are compared in float64 logs
    (p/q may overflow the dtype), as in the numpy rule. A draft of q = 0 (an impossible draft, which
    the numpy rule refuses) leaves its race unconditioned."""

    rule = GumbelListSampling

    def step(self, drafts, generator=None):
        drafts = self.check_drafts(drafts)
        torch = _torch()
        B, n = drafts.shape
        like = {"device": self.p.device, "dtype": self.p.dtype}
        minimum = torch.empty(B, n, **like).exponential_(generator=generator)
        best = torch.full_like(self.p, float("inf"))
        first = torch.full((B, 1), float("inf"), device=self.p.device, dtype=torch.float64)
        chosen = drafts[:, :1]
        for k in range(n):
            x = drafts[:, k:k + 1]
            qx = self.q.gather(1, x)
            held = qx > 0  # the draft conditions its race
            m = torch.where(held, minimum[:, k:k + 1], torch.zeros_like(qx))
            race = torch.empty_like(self.p).exponential_(generator=generator) + self.q * m
            race.scatter_(1, x, torch.where(held, torch.full_like(qx, float("inf")), race.gather(1, x)))
            best = torch.minimum(best, race)
            # ln(M_k q_x / p_x): +inf where p_x = 0 (never the winner), or unconditioned
            here = (m.double().log() + qx.double().log() - self.p.gather(1, x).double().log())
            here = torch.where(held, here, torch.full_like(here, float("inf")))
            chosen = torch.where(here < first, x, chosen)
            first = torch.minimum(first, here)
        times = torch.where(self.p > 0, best / self.p, torch.full_like(best, float("inf")))
        late, token = times.min(1)
        token = torch.where(first[:, 0] < late.double().log(), chosen[:, 0], token)
        return token, (drafts == token[:, None]).any(1)


#: The batched rules by the name of the numpy rule each computes (:func:`register_torch_rule` adds one).
TORCH_RULES: dict[str, type[TorchRule]] = {}


def register_torch_rule(cls: type[TorchRule]) -> type[TorchRule]:
    """Add a batched rule to :data:`TORCH_RULES` under its numpy rule's name, so that
    ``cross-validate`` and the audit's torch form find it. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    InvalidInputError
        ``cls`` is not a :class:`TorchRule` subclass whose ``rule`` is a class registered in
        :data:`mdtheory.rules.RULES`, or its name is taken by another torch rule.
    """
    if not (isinstance(cls, type) and issubclass(cls, TorchRule)) or cls.rule is None \
            or RULES.get(cls.rule.name) is not cls.rule:
        raise InvalidInputError("register_torch_rule takes a TorchRule subclass whose rule is a "
                                "registered numpy rule (mdtheory.rules.RULES)")
    if TORCH_RULES.get(cls.name, cls) is not cls:
        raise InvalidInputError(f"torch rule {cls.name!r} is already {TORCH_RULES[cls.name].__name__}")
    TORCH_RULES[cls.name] = cls
    return cls


for _cls in (TorchRRS, TorchKSeq, TorchKhisti, TorchOptimal, TorchGLS):
    register_torch_rule(_cls)
