"""Torch bridge: batched selection rules and alpha* on whatever device the tensors live on.

torch is imported lazily (``import mdtheory`` never imports it) and is an optional extra
(``pip install 'mdtheory[torch]'``). Every function keeps the dtype and device of its inputs.

* :func:`to_probs`: logits to probabilities with temperature, top-k and top-p applied in the order
  Hugging Face's samplers apply them.
* :func:`alpha_star`: batched optimal acceptance of iid drafts by the sorted-prefix route
  (``mdtheory.subsets.prefix_scan``), differentiable in p and q through autograd.
* :data:`TORCH_RULES`: batched ``rrs``, ``k-seq``, ``khisti-lp`` and ``optimal``, each written as the
  sequential algorithm itself (coins drawn on the device), not from the numpy rules' exact conditional
  laws, so :func:`cross_validate` checks one implementation against the other. ``khisti-lp`` solves
  its LPs and ``optimal`` builds its time schedules per position on the CPU; both sample on the device.
* :func:`cross_validate`: the audit (:mod:`mdtheory.audit`, torch form) of each torch rule, plus its
  acceptance against the numpy rule's exact value.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import numpy as np

from ._validate import sum_tolerance
from .errors import InvalidDistributionError, InvalidInputError, MdtheoryError

__all__ = ["to_probs", "alpha_star", "check_device", "sample_drafts", "TorchRule", "TORCH_RULES",
           "cross_validate"]


def _torch():
    try:
        import torch
    except ImportError:
        raise MdtheoryError(
            "the torch bridge needs PyTorch; install it with pip install 'mdtheory[torch]'"
        ) from None
    return torch


def to_probs(logits, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None):
    """Softmax of ``logits / temperature`` after top-k, then top-p (nucleus) filtering.

    Parameters
    ----------
    logits : Tensor, shape (..., V)
    temperature : float
        > 0.
    top_k : int, optional
        Keep the k largest logits (ties at the k-th value are kept).
    top_p : float, optional
        In (0, 1]: keep the smallest set of most likely tokens whose probability reaches top_p
        (at least one token).

    Returns
    -------
    Tensor, same shape, dtype and device as ``logits``.
    """
    torch = _torch()
    if not temperature > 0:
        raise InvalidInputError(f"temperature must be > 0, got {temperature}")
    x = logits / temperature
    if top_k is not None:
        if top_k < 1:
            raise InvalidInputError(f"top_k must be >= 1, got {top_k}")
        kth = torch.topk(x, min(top_k, x.shape[-1]), dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise InvalidInputError(f"top_p must be in (0, 1], got {top_p}")
        sorted_x, idx = torch.sort(x, dim=-1)  # ascending
        cum = torch.softmax(sorted_x, dim=-1).cumsum(dim=-1)
        drop = cum <= 1 - top_p
        drop[..., -1] = False  # always keep the most likely token
        x = x.masked_fill(drop.scatter(-1, idx, drop), float("-inf"))
    return torch.softmax(x, dim=-1)


def alpha_star(p, q, n: int):
    """Batched optimal acceptance of n iid drafts: :math:`1 - \\max(0, \\max_j [Q_j^n - P_j])` over
    prefixes in q/p-decreasing order.

    Parameters
    ----------
    p, q : Tensor, shape (V,) or (B, V)
        Probability rows: finite, non-negative, each summing to one within the tolerance of their
        dtype, :func:`mdtheory._validate.sum_tolerance` (:func:`to_probs` gives such rows).
    n : int

    Returns
    -------
    Tensor, shape () or (B,), differentiable in p and q (a subgradient at ties).

    Raises
    ------
    InvalidDistributionError
        p or q is not a tensor of probability rows, or their shapes differ.
    """
    torch = _torch()
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"the number of drafts must be an integer >= 1, got {n!r}")
    for name, t in (("p", p), ("q", q)):
        _check_rows(torch, t, name)
    if p.shape != q.shape:
        raise InvalidDistributionError(f"p has shape {tuple(p.shape)} but q has {tuple(q.shape)}")
    order = torch.argsort(p.detach() / q.detach(), dim=-1)  # NaN (p = q = 0) sorts last
    Q = torch.gather(q, -1, order).cumsum(-1).clamp(max=1.0)
    P = torch.gather(p, -1, order).cumsum(-1)
    gain = (Q**n - P).amax(dim=-1)
    return 1.0 - gain.clamp(min=0.0)


def _check_rows(torch, t, name: str) -> None:
    """Refuse anything but a float tensor of shape (V,) or (B, V) whose rows are distributions."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise InvalidDistributionError(f"{name} must be a floating-point torch tensor, got "
                                       f"{type(t).__name__}")
    if t.ndim not in (1, 2) or t.shape[-1] == 0 or t.numel() == 0:
        raise InvalidDistributionError(
            f"{name} has shape {tuple(t.shape)}; expected non-empty (V,) or (B, V)")
    d = t.detach()
    if not torch.isfinite(d).all():
        raise InvalidDistributionError(f"{name} has a non-finite entry")
    if (d < 0).any():
        raise InvalidDistributionError(f"{name} has a negative entry ({float(d.min()):g})")
    # summed in float64; the tolerance follows the dtype, as everywhere (mdtheory._validate)
    tol = sum_tolerance(torch.finfo(d.dtype).eps)
    off = float((d.double().sum(-1) - 1.0).abs().max())
    if off > tol:
        raise InvalidDistributionError(
            f"a row of {name} sums {off:.3g} away from 1 (tolerance {tol:g})")


def check_device(device: str) -> None:
    """Refuse a device string torch cannot parse or this machine cannot use, in one line.

    Raises
    ------
    InvalidInputError
        Naming the device and why (unknown type, or its backend is not available here).
    """
    torch = _torch()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidInputError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return
    try:
        torch.Generator(device=dev)
        torch.zeros(1, device=dev)
    except (RuntimeError, AssertionError, TypeError) as exc:
        raise InvalidInputError(
            f"device {device!r} is not available here ({str(exc).splitlines()[0].split('. ')[0]})"
        ) from None


def sample_drafts(q, n: int, generator=None):
    """n iid drafts per row of q (B, V): a long tensor (B, n) on q's device."""
    torch = _torch()
    return torch.multinomial(q, n, replacement=True, generator=generator)


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

    :meth:`step` takes drafts (B, n) and returns (tokens (B,), accepted (B,) bool).
    """

    name = ""

    def __init__(self, p, q, n: int):
        self.p, self.q, self.n = p, q, n
        self.prepare()

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
        """One verification step per row: (tokens (B,), accepted (B,) bool)."""

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

    name = "rrs"

    def prepare(self):
        self.r = [self.p]
        for _ in range(self.n):
            self.r.append(_residual(self.r[-1], self.q))

    def step(self, drafts, generator=None):
        def ratio(i, x):
            return (_pick(self.r[i], x) / _pick(self.q, x)).clamp(max=1.0)
        return self._sequential(drafts, ratio, self.r[self.n], generator)


class TorchKSeq(TorchRule):
    """SpecTr's K-SEQ, batched; ρ* by batched bisection keeping the residual a distribution."""

    name = "k-seq"

    def _beta(self, rho):
        return _torch().minimum(self.p / rho[:, None], self.q).sum(-1)

    def prepare(self):
        torch = _torch()
        B = self.p.shape[0]
        lo = torch.ones(B, dtype=self.p.dtype, device=self.p.device)
        hi = torch.full_like(lo, float(self.n))

        def excess(rho):
            b = self._beta(rho)
            return 1 - (1 - b) ** self.n - rho * b

        hi = torch.where(excess(lo) <= 0, lo, hi)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            pos = excess(mid) > 0
            lo, hi = torch.where(pos, mid, lo), torch.where(pos, hi, mid)
        self.rho = hi
        beta = self._beta(hi)
        scale = torch.where(beta > 0, (1 - (1 - beta) ** self.n) / beta.clamp(min=1e-300),
                            torch.zeros_like(beta))
        accepted = scale[:, None] * torch.minimum(self.q, self.p / hi[:, None])
        self.res = _residual(self.p, accepted)

    def step(self, drafts, generator=None):
        def ratio(i, x):
            return (_pick(self.p, x) / (self.rho * _pick(self.q, x))).clamp(max=1.0)
        return self._sequential(drafts, ratio, self.res, generator)


def _rows_numpy(t):
    return t.detach().to("cpu", dtype=_torch().float64).numpy()


class TorchKhisti(TorchRule):
    """Khisti et al.'s tournament: stage LPs per position on the CPU, the tournament on the device."""

    name = "khisti-lp"
    s = 5

    def prepare(self):
        from .rules import make_rule

        torch = _torch()
        rules = [make_rule("khisti-lp", p, q, self.n, s=self.s, normalize=True)
                 for p, q in zip(_rows_numpy(self.p), _rows_numpy(self.q), strict=True)]
        kw = {"dtype": self.p.dtype, "device": self.p.device}
        self.stages = [torch.as_tensor(np.stack([r.stages[t] for r in rules]), **kw)
                       for t in range(self.n - 1)]
        self.mu = torch.as_tensor(np.stack([r.mu for r in rules]), **kw)
        self.res = _residual(self.p, self.mu)

    def step(self, drafts, generator=None):
        torch = _torch()
        B = drafts.shape[0]
        rows = torch.arange(B, device=drafts.device)
        u = torch.rand(B, self.n, generator=generator, device=drafts.device, dtype=self.p.dtype)
        winner = drafts[:, 0]
        for t, v in enumerate(self.stages):
            x = drafts[:, t + 1]
            winner = torch.where(u[:, t] < v[rows, winner, x], winner, x)
        accept = u[:, -1] < (_pick(self.p, winner) / _pick(self.mu, winner)).clamp(max=1.0)
        fallback = torch.multinomial(self.res, 1, generator=generator).squeeze(-1)
        return torch.where(accept, winner, fallback), accept


class TorchOptimal(TorchRule):
    """The optimal rule: a time schedule per position on the CPU (:mod:`mdtheory.schedule`); on the
    device, every draft draws a time from its token's pieces, the earliest is the candidate, then one
    speculative step against the schedule's exact marginal.
    """

    name = "optimal"

    def prepare(self):
        from .rules import make_rule

        torch = _torch()
        rules = [make_rule("optimal", p, q, self.n, normalize=True)
                 for p, q in zip(_rows_numpy(self.p), _rows_numpy(self.q), strict=True)]
        pieces = max(r.schedule.start.size for r in rules)
        start = np.zeros((len(rules), pieces))
        cum = np.full((len(rules), pieces + 1), 2.0)  # padding past the last piece: never selected
        for b, r in enumerate(rules):
            s = r.schedule
            start[b, : s.start.size] = s.start
            cum[b, : s.start.size + 1] = s.cumulative
        kw = {"dtype": self.p.dtype, "device": self.p.device}
        self.start = torch.as_tensor(start, **kw)
        self.cum = torch.as_tensor(cum, **kw)
        self.first = torch.as_tensor(np.stack([r.schedule.first for r in rules]), device=self.p.device)
        self.last = self.first + torch.as_tensor(
            np.stack([np.maximum(r.schedule.count - 1, 0) for r in rules]), device=self.p.device)
        self.length = torch.as_tensor(np.stack([r.schedule.lengths for r in rules]), **kw)
        self.ratio = torch.as_tensor(np.stack([r.accept_ratio for r in rules]), **kw)
        self.res = torch.as_tensor(np.stack([r.res for r in rules]), **kw)

    def step(self, drafts, generator=None):
        torch = _torch()
        B = drafts.shape[0]
        first, last = self.first.gather(1, drafts), self.last.gather(1, drafts)
        u = torch.rand(drafts.shape, generator=generator, device=drafts.device, dtype=self.p.dtype)
        v = self.cum.gather(1, first) + u * self.length.gather(1, drafts)
        k = (torch.searchsorted(self.cum, v, right=True) - 1).clamp(min=first).minimum(last)
        time = self.start.gather(1, k) + (v - self.cum.gather(1, k))
        cand = drafts.gather(1, time.argmin(dim=1, keepdim=True)).squeeze(-1)
        u = torch.rand(B, generator=generator, device=drafts.device, dtype=self.p.dtype)
        accept = u < _pick(self.ratio, cand)
        fallback = torch.multinomial(self.res, 1, generator=generator).squeeze(-1)
        return torch.where(accept, cand, fallback), accept


#: Batched rules by name; each name is also the numpy rule it is validated against.
TORCH_RULES = {cls.name: cls for cls in (TorchRRS, TorchKSeq, TorchKhisti, TorchOptimal)}


def _pairs(rng: np.random.Generator, batch: int, vocab: int):
    """LLM-like rows: Zipf-like target logits, draft = strongly perturbed target at temperature 2."""
    logits = -1.1 * np.log(np.arange(1, vocab + 1))[None, :] + 0.5 * rng.standard_normal((batch, vocab))
    draft = (logits + 1.5 * rng.standard_normal((batch, vocab))) / 2.0
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    q = np.exp(draft - draft.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)


def cross_validate(rules=None, *, device: str = "cpu", batch: int = 8, vocab: int = 6,
                   drafts: int = 2, samples: int = 4000, seed: int = 0, dtype=None,
                   significance: float = 1e-4) -> dict:
    """The audit (:func:`mdtheory.audit.audit`, torch form) of each torch rule on a batch of (p, q)
    pairs, plus a comparison of its acceptance with the numpy rule's exact value.

    For every position b the torch rule takes ``samples`` verification steps. Three tests per rule,
    each Bonferroni-corrected over the positions at level ``significance`` (default 1e-4, so a correct
    rule fails a run with probability about 3e-4 per rule; a biased rule's p-values are near 0):

    * acceptance: two-sided z-test of the empirical acceptance against the rule's exact acceptance
      (:meth:`mdtheory.rules.SelectionRule.exact_acceptance`);
    * optimum: the audit's one-sided z-test that the empirical acceptance is not above α*;
    * output law: the audit's chi-square test of the output tokens against p (sparse cells pooled).

    Parameters
    ----------
    rules : iterable of str or (name, TorchRule subclass), optional
        Default: every rule of :data:`TORCH_RULES`. A pair validates a custom torch rule against the
        numpy rule ``name``.
    device, batch, vocab, drafts, samples, seed, dtype, significance
        As named; ``dtype`` defaults to torch.float64.

    Returns
    -------
    dict
        ``passed`` (bool), ``device``, ``rules``: one dict per rule with ``rule``,
        ``acceptance_empirical``, ``acceptance_exact``, ``alpha_star`` (means over positions),
        ``acceptance_pvalue``, ``optimum_pvalue``, ``law_pvalue`` (Bonferroni-adjusted minima),
        ``tv_upper`` (the audit's simultaneous 95% bound on TV(output law, p)) and ``passed``.
    """
    torch = _torch()
    from .audit import audit, bonferroni, z_pvalues
    from .rules import make_rule

    for label, value, low in (("batch", batch, 1), ("vocab", vocab, 2), ("drafts", drafts, 1),
                              ("samples", samples, 10)):
        if value < low:
            raise InvalidInputError(f"{label} must be at least {low}, got {value}")
    specs = []
    for r in rules if rules is not None else TORCH_RULES:
        if isinstance(r, str) and r not in TORCH_RULES:
            raise InvalidInputError(f"no torch rule {r!r}; valid choices: {', '.join(TORCH_RULES)}")
        specs.append((r, TORCH_RULES[r]) if isinstance(r, str) else r)
    p_np, q_np = _pairs(np.random.default_rng(seed), batch, vocab)
    out = []
    for name, cls in specs:
        exact = np.array([make_rule(name, p, q, drafts).exact_acceptance()
                          for p, q in zip(p_np, q_np, strict=True)])
        res = audit(cls, p_np, q_np, drafts, torch=True, device=device, dtype=dtype,
                    samples=samples, seed=seed, level=significance)
        acc = np.array([row["acceptance"] for row in res.per_position])
        adj = [bonferroni(z_pvalues(acc, exact, samples)), res.optimum_pvalue, res.pvalue]
        out.append({"rule": name, "acceptance_empirical": res.acceptance,
                    "acceptance_exact": float(exact.mean()), "alpha_star": res.alpha_star,
                    "acceptance_pvalue": adj[0], "optimum_pvalue": adj[1], "law_pvalue": adj[2],
                    "tv_upper": res.tv_upper, "passed": all(a >= significance for a in adj)})
    return {"passed": all(r["passed"] for r in out), "device": str(torch.device(device)),
            "rules": out}
