"""Chain verifiers in the engines' chain contract: standard speculative sampling and block verification.

The contract (FlashInfer's ``chain_speculative_sampling``, ``python/flashinfer/sampling.py`` of
flashinfer-ai/flashinfer, whose layout SGLang's and TensorRT-LLM's chain samplers share)::

    f(draft_token_ids [B, k], draft_probs [B, k, V] or None, target_probs [B, k + 1, V], generator)
        -> (output_token_ids [B, k + 1] padded with -1, emitted_draft_token_num [B])

Row i of ``target_probs`` is the target's law after the first i drafts (row k the bonus row), row i
of ``draft_probs`` the law that drew draft i + 1; ``draft_probs=None`` means deterministic drafts (a
one-hot q at each drafted token). Both verifiers here are exact on any chain drawn from its
``draft_probs`` rows (papers/blocks_verifiers.md, §2) and on deterministic drafts.

Each is a :class:`mdtheory.engines.stops.EngineVerifier` in two steps (:mod:`mdtheory.engines.stops`):
the stop probabilities P(τ = i) for i = 0..k drafts kept and the emitted token's law at a stop, then
one uniform for τ and one for the token. No host synchronisation, fixed shapes; the loop runs over
the k positions only.
"""

from __future__ import annotations

from .stops import (
    EngineVerifier,
    StopLaw,
    _torch,
    at,
    categorical,
    chain_inputs,
    excess_masses,
    residual,
    rows_at,
    uniforms,
)

__all__ = ["StandardChain", "BlockChain", "block_stops", "block_weights"]


def _output(x, tau, token):
    """``output_token_ids``: the first τ drafts, the emitted token, then -1."""
    torch = _torch()
    B, k = x.shape
    col = torch.arange(k + 1, device=x.device)[None, :]
    xs = torch.cat([x, x.new_full((B, 1), -1)], 1)
    return torch.where(col < tau[:, None], xs, torch.where(col == tau[:, None], token[:, None], -1))


def _drafted(p, q, x):
    """p and q at the drafted tokens, (B, k) float64 each (q = 1: deterministic drafts)."""
    torch = _torch()
    k = x.shape[1]
    px = p[:, :k].gather(-1, x[..., None]).squeeze(-1).to(torch.float64)
    if q is None:
        return px, torch.ones_like(px)
    return px, q.gather(-1, x[..., None]).squeeze(-1).to(torch.float64)


class _Chain(EngineVerifier):
    contract = "chain"
    drafts = "any"

    def __call__(self, draft_token_ids, draft_probs, target_probs, generator=None, *,
                 validate: bool = False):
        """``(output_token_ids [B, k + 1], emitted_draft_token_num [B])``, int64.

        Shapes, dtypes and devices are always checked; ``validate`` also checks the token range and
        every law row (on the host: one synchronisation)."""
        x, q, p = chain_inputs(self.name, draft_token_ids, draft_probs, target_probs, generator, validate)
        state = self._prepare(x, q, p)
        u = uniforms(x.shape[0], 2, generator, p.device)
        tau = categorical(state[0], u[:, 0])
        token = categorical(self._correction(x, q, p, state, tau), u[:, 1])
        return _output(x, tau, token), tau

    def stops(self, draft_token_ids, draft_probs, target_probs) -> StopLaw:
        """The exact law of the output given the inputs: stop τ = i (i drafts kept) with its
        probability and the emitted token's law."""
        torch = _torch()
        x, q, p = chain_inputs(self.name, draft_token_ids, draft_probs, target_probs, None, True)
        state = self._prepare(x, q, p)
        B, k = x.shape
        corr = torch.stack([self._correction(x, q, p, state, torch.full((B,), i, device=p.device))
                            for i in range(k + 1)], 1)
        length = torch.arange(k + 1, device=p.device).expand(B, k + 1)
        col = torch.arange(k, device=p.device)
        prefix = torch.where(col[None, None, :] < length[..., None], x[:, None, :], -1)
        return StopLaw(state[0], prefix, length, corr)


class StandardChain(_Chain):
    """Standard speculative sampling along the chain (Leviathan et al. 2023; Chen et al. 2023).

    Draft i is kept while every earlier one was, with probability :math:`\\min(1, p_i(x_i) / q_i(x_i))`
    (1 where q = 0, as :func:`mdtheory.rules.base.speculative_step`); at the first rejection, τ = i,
    the token is drawn from :math:`(p_i - q_i)^+` normalised (from :math:`p_i` where that is empty;
    deterministic drafts: :math:`p_i` without :math:`x_i`); if all k are kept, from the bonus row.
    The engines' coin per draft (accept while :math:`u_i q_i(x_i) < p_i(x_i)`) is here one uniform
    for τ drawn from its law :math:`P(\\tau = i) = \\prod_{j < i} a_j (1 - a_i)`: the same law.
    """

    name = "standard"

    def _prepare(self, x, q, p):
        torch = _torch()
        px, qx = _drafted(p, q, x)
        a = torch.where(px < qx, px / qx.clamp(min=1e-300), torch.ones_like(px))
        kept = torch.cat([torch.ones_like(a[:, :1]), a.cumprod(-1)], 1)  # P(tau >= i)
        stop = kept * torch.cat([1 - a, torch.ones_like(a[:, :1])], 1)
        return (stop,)

    def _correction(self, x, q, p, state, tau):
        return _at_stop(x, q, p, tau, None)


def _at_stop(x, q, p, tau, w):
    """The emitted token's law at stop τ: :math:`(w_\tau p_\tau - q_\tau)^+` (w None: 1; q one-hot
    at the drafted token when None), the target row where that is empty, the bonus row at τ = k."""
    torch = _torch()
    k = x.shape[1]
    pr = rows_at(p, tau)
    i = tau.clamp(max=k - 1)
    if q is None:
        u = torch.zeros_like(pr).scatter_(1, at(x, i)[:, None], 1.0)
    else:
        u = rows_at(q, i)
    return residual(pr, u, w, keep=tau == k)


def block_stops(w, rho):
    """Block verification's stop probabilities (B, L + 1), float64, from the weights ``w`` (B, L + 1)
    of :func:`block_weights` and the residual masses ``rho`` (B, L) of :math:`(w_i p_i - u_i)^+`
    (column 0 unused): :math:`h_0 = 1`, :math:`h_i = \\rho_i / (\\rho_i + 1 - w_i)`,
    :math:`h_L = w_L`, and :math:`P(\\tau = i) = h_i \\prod_{j > i} (1 - h_j)`
    (papers/blocks_verifiers.md, §2)."""
    torch = _torch()
    L = rho.shape[1]
    rho = rho.to(torch.float64)
    den = rho + (1 - w[:, :L])
    h = torch.where(den > 0, rho / den.clamp(min=1e-300), torch.ones_like(den))
    h = torch.cat([torch.ones_like(h[:, :1]), h[:, 1:], w[:, L:]], 1)
    # prod_{j > i} (1 - h_j): reversed running products
    later = torch.cat([(1 - h[:, 1:]).flip(-1).cumprod(-1).flip(-1), torch.ones_like(h[:, :1])], 1)
    return h * later


def block_weights(px, ux):
    """:math:`w_0 = 1`, :math:`w_{i+1} = \\min(1, w_i p_i(x_i) / u_i(x_i))` (0 where u = 0): (B, L + 1)."""
    torch = _torch()
    w = [torch.ones_like(px[:, 0])]
    for i in range(px.shape[1]):
        r = w[-1] * px[:, i] / ux[:, i].clamp(min=1e-300)
        w.append(torch.where(ux[:, i] > 0, r.clamp(max=1.0), torch.zeros_like(r)))
    return torch.stack(w, 1)


class BlockChain(_Chain):
    """Block verification (Sun et al., ICLR 2025, Algorithm 2) of the chain.

    With the weights :math:`w_i` and stopping weights :math:`h_i` of :func:`block_stops` (residual
    masses :math:`\\rho_i = \\sum (w_i p_i - q_i)^+` for 0 < i < k, one pass over those rows), the
    kept length τ is the largest i with :math:`\\eta_i \\le h_i` (no early stop), drawn here from its
    law :math:`h_\\tau \\prod_{j > \\tau}(1 - h_j)`; the token comes from :math:`(w_\\tau p_\\tau -
    q_\\tau)^+` normalised (the bonus row at τ = k). Deterministic drafts (q one-hot) need no pass
    over the rows: :math:`\\rho_i = w_i (1 - p_i(x_i))`. The numpy form is
    :class:`mdtheory.blocks.BlockVerification`.
    """

    name = "block"

    def _prepare(self, x, q, p):
        px, qx = _drafted(p, q, x)
        w = block_weights(px, qx)
        k = x.shape[1]
        rho = w[:, :k] * (1 - px) if q is None else excess_masses(p, q, w)  # (w_i p_i - q_i)^+'s masses
        return block_stops(w, rho), w

    def _correction(self, x, q, p, state, tau):
        return _at_stop(x, q, p, tau, at(state[1], tau))
