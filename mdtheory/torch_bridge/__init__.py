"""Torch bridge: batched selection rules and alpha* on whatever device the tensors live on.

torch is imported lazily (``import mdtheory`` never imports it) and is an optional extra
(``pip install 'mdtheory[torch]'``). Every function keeps the dtype and device of its inputs. Three
modules, one job each; every name is re-exported here (the device constructions of ``khisti-lp`` and
``optimal`` live in two more, :mod:`~mdtheory.torch_bridge.khisti` and
:mod:`~mdtheory.torch_bridge.optimal`):

* :mod:`~mdtheory.torch_bridge.tensors`: :func:`to_probs` (logits to probabilities with temperature,
  top-k and top-p applied in the order Hugging Face's samplers apply them), :func:`check_device`,
  :func:`sample_drafts`.
* :mod:`~mdtheory.torch_bridge.acceptance`: :func:`alpha_star`, batched optimal acceptance of iid
  drafts by the sorted-prefix route (``mdtheory.routes.subsets.prefix_scan``), differentiable in p and q
  through autograd.
* :mod:`~mdtheory.torch_bridge.rules`: :data:`TORCH_RULES`, batched ``rrs``, ``k-seq``, ``khisti-lp``,
  ``optimal`` and ``gls``, each written as the sequential algorithm itself (coins drawn on the
  device), not from the numpy rules' exact conditional laws, so
  :func:`mdtheory.audit.crossval.cross_validate` checks one implementation against the other.
  ``khisti-lp`` solves its truncated stages for the whole batch on the device
  (:mod:`~mdtheory.torch_bridge.khisti`); ``optimal`` builds its cells and swaps for the whole batch
  on the device (:mod:`~mdtheory.torch_bridge.optimal`).
* :mod:`~mdtheory.torch_bridge.khisti`: the truncated tournament's stages, batched: ``torch.topk``,
  bucketed scores, and the stage's maximum flow by an exact batched simplex.
* :mod:`~mdtheory.torch_bridge.optimal`: the optimal rule's construction, batched: cells of time in
  the order of q/p, a target marginal from running minima, swaps matched along running sums.

Their cross-validation, the audit of each torch rule against its numpy rule, runs the audit and
lives with it (:func:`mdtheory.audit.crossval.cross_validate`).
"""

from .acceptance import alpha_star
from .rules import (
    TORCH_RULES,
    TorchGLS,
    TorchKhisti,
    TorchKSeq,
    TorchOptimal,
    TorchRRS,
    TorchRule,
    register_torch_rule,
)
from .tensors import _torch, check_device, sample_drafts, to_probs  # noqa: F401 - _torch: audit

__all__ = ["to_probs", "alpha_star", "check_device", "sample_drafts", "TorchRule", "TORCH_RULES",
           "TorchRRS", "TorchKSeq", "TorchKhisti", "TorchOptimal", "TorchGLS", "register_torch_rule"]
