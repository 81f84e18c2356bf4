"""Cross-validation of the batched torch rules: the audit of each against its numpy rule (the class
it names, :attr:`mdtheory.torch_bridge.TorchRule.rule`), on LLM-like pairs."""

from __future__ import annotations

import numpy as np

from .. import _budget
from .._synthetic import llm_pairs
from ..errors import InvalidInputError
from ..torch_bridge.rules import TORCH_RULES
from ..torch_bridge.tensors import _torch

__all__ = ["cross_validate"]


def cross_validate(rules=None, *, device: str = "cpu", batch: int = 8, vocab: int = 6,
                   drafts: int = 2, samples: int = 4000, seed: int = 0, dtype=None,
                   significance: float = 1e-4, max_seconds: float | None = _budget.MAX_SECONDS,
                   max_bytes: float | None = _budget.MAX_BYTES) -> dict:
    """The audit (:func:`mdtheory.audit.verifier.audit`, torch form) of each torch rule on a batch of (p, q)
    pairs, plus a comparison of its acceptance with the numpy rule's exact value.

    For every position b the torch rule takes ``samples`` verification steps. Three tests per rule,
    each Bonferroni-corrected over the positions at level ``significance`` (default 1e-4, so a correct
    rule fails a run with probability about 3e-4 per rule; a biased rule's p-values are near 0):

    * acceptance: two-sided z-test of the empirical acceptance against the rule's exact acceptance
      (:meth:`mdtheory.rules.SelectionRule.exact_acceptance` of the numpy rule running the torch
      form's program on the device, :meth:`~mdtheory.torch_bridge.rules.TorchRule.numpy_keywords`);
    * optimum: the audit's one-sided z-test that the empirical acceptance is not above α*;
    * output law: the audit's chi-square test of the output tokens against p (sparse cells pooled).

    Parameters
    ----------
    rules : iterable of str or (name, TorchRule subclass), optional
        Default: every rule of :data:`TORCH_RULES`. A pair validates a custom torch rule against the
        numpy rule ``name``.
    device, batch, vocab, drafts, samples, seed, dtype, significance
        As named; ``dtype`` defaults to torch.float64.
    max_seconds, max_bytes : float or None
        Limits of the whole run's estimate, checked before any work (default 60 s and 4 GiB; None:
        no limit): the batched steps of every rule and the audit's statistics
        (:func:`mdtheory._budget.batched_steps`), and each numpy rule's preparation at every
        position (its estimate on uniform laws, the most draft sets and tuples).

    Returns
    -------
    dict
        ``passed`` (bool), ``device``, ``rules``: one dict per rule with ``rule``,
        ``acceptance_empirical``, ``acceptance_exact``, ``alpha_star`` (means over positions),
        ``acceptance_pvalue``, ``optimum_pvalue``, ``law_pvalue`` (Bonferroni-adjusted minima),
        ``tv_upper`` (the audit's simultaneous 95% bound on TV(output law, p)) and ``passed``.
    """
    torch = _torch()
    from ..models.registry import make_draft_model
    from ..rules import RULES, make_rule
    from .statistics import bonferroni, z_pvalues
    from .verifier import audit

    for label, value, low in (("batch", batch, 1), ("vocab", vocab, 2), ("drafts", drafts, 1),
                              ("samples", samples, 10)):
        if value < low:
            raise InvalidInputError(f"{label} must be at least {low}, got {value}")
    specs = []
    for r in rules if rules is not None else TORCH_RULES:
        if isinstance(r, str) and r not in TORCH_RULES:
            raise InvalidInputError(f"no torch rule {r!r}; valid choices: {', '.join(TORCH_RULES)}")
        specs.append((r, TORCH_RULES[r]) if isinstance(r, str) else r)
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    estimates = [_budget.batched_steps(batch, samples, vocab, drafts, len(specs))]
    uniform = np.full(vocab, 1.0 / vocab)
    for name, _ in specs:  # each numpy rule is prepared at every position for its exact acceptance
        estimates.append(_budget.repeated(RULES[name].estimate(
            make_draft_model(uniform, drafts, RULES[name].sampling)), batch))
    _budget.require(_budget.combine(*estimates, what=estimates[0].what), max_seconds,
                    max_bytes=max_bytes, flag="max_seconds")
    p_np, q_np = llm_pairs(np.random.default_rng(seed), batch, vocab)
    out = []
    limits = {"max_seconds": max_seconds, "max_bytes": max_bytes}
    for name, cls in specs:
        keywords = cls.numpy_keywords(vocab, device)  # the same program as the torch form's
        exact = np.array([make_rule(name, p, q, drafts, **keywords, **limits).exact_acceptance()
                          for p, q in zip(p_np, q_np, strict=True)])
        res = audit(cls, p_np, q_np, drafts, torch=True, device=device, dtype=dtype,
                    samples=samples, seed=seed, level=significance, max_bytes=max_bytes)
        acc = np.array([row["acceptance"] for row in res.per_position])
        adj = [bonferroni(z_pvalues(acc, exact, samples)), res.optimum_pvalue, res.pvalue]
        out.append({"rule": name, "acceptance_empirical": res.acceptance,
                    "acceptance_exact": float(exact.mean()), "alpha_star": res.alpha_star,
                    "acceptance_pvalue": adj[0], "optimum_pvalue": adj[1], "law_pvalue": adj[2],
                    "tv_upper": res.tv_upper, "passed": all(a >= significance for a in adj)})
    return {"passed": all(r["passed"] for r in out), "device": str(torch.device(device)),
            "rules": out}
