"""The shape of a batch of draft trees given as linked lists, derived on the device.

The tree contract (SGLang's ``tree_speculative_sampling_target_only``,
``sgl-kernel/python/sgl_kernel/speculative.py`` of sgl-project/sglang) gives each row's tree as
``next_token[b, j]`` (node j's first child, -1: none) and ``next_sibling[b, j]`` (its next sibling),
node 0 being the root. :class:`TreeLinks` derives, for the whole batch at once and without host
synchronisation, every node's parent, depth and position among its siblings, the ancestor relation
and the pre- and post-order of a depth-first walk: pointer jumping (``ceil(log2 N)`` rounds of
gathers) and a few (B, N, N) products, so the cost does not depend on the trees' shapes, only on N.

Malformed links (a cycle, a dangling index, two links into one node) are not detected here (the
contract's validation does that, on the host); they give some tree, never an error or a hang:
every loop has a fixed number of rounds.
"""

from __future__ import annotations

from .stops import _torch

__all__ = ["TreeLinks"]


def _jump(ptr, dist, rounds: int):
    """Pointer jumping: follow ``ptr`` to its end (a node pointing to itself), adding ``dist``
    along the way. Returns (end, total distance) for every node."""
    for _ in range(rounds):
        dist = dist + dist.gather(1, ptr)
        ptr = ptr.gather(1, ptr)
    return ptr, dist


class TreeLinks:
    """Parents, depths, sibling ranks, ancestors and depth-first orders of a batch of trees.

    Parameters
    ----------
    next_token, next_sibling : (B, N) int64 tensors

    Attributes
    ----------
    parent : (B, N) int64
        -1 for the root and for nodes not reached from it.
    depth : (B, N) int64
        Tokens on the path from the root (0 at the root).
    rank : (B, N) int64
        Position among its siblings (0: the first child).
    in_tree : (B, N) bool
        Reached from node 0.
    anc : (B, N, N) bool
        ``anc[b, i, j]``: i is j or an ancestor of j (nodes in the tree only).
    earlier : (B, N, N) bool
        ``earlier[b, i, j]``: i is an earlier sibling of j.
    pre, post : (B, N) int64
        Each node's index in the depth-first pre-order and post-order (children in sibling order);
        nodes outside the tree come after all others.
    next_token : (B, N) int64
        The first-child links (-1: none, or a dangling index).
    """

    def __init__(self, next_token, next_sibling):
        torch = _torch()
        B, N = next_token.shape
        dev = next_token.device
        ar = torch.arange(N, device=dev).expand(B, N)
        rounds = max(1, (N - 1).bit_length())

        def target(links):
            return torch.where((links >= 0) & (links < N), links, N)  # column N: no link

        to_child, to_sib = target(next_token), target(next_sibling)
        pred = torch.full((B, N + 1), -1, dtype=torch.long, device=dev)
        pred.scatter_(1, to_child, ar).scatter_(1, to_sib, ar)
        pred = pred[:, :N]
        flag = torch.zeros(B, N + 1, dtype=torch.bool, device=dev)
        by_child = flag.scatter(1, to_child, True)[:, :N]
        by_sib = flag.scatter(1, to_sib, True)[:, :N]
        # the sibling chains: each node's first sibling (head) and its position after it
        head, rank = _jump(torch.where(by_sib, pred, ar), by_sib.long(), rounds)
        parent = torch.where(by_child.gather(1, head), pred.gather(1, head), -1)
        top, depth = _jump(torch.where(parent >= 0, parent, ar), (parent >= 0).long(), rounds)
        in_tree = top == 0
        parent = torch.where(in_tree, parent, -1)
        # ancestor-or-self relation by squaring the parent relation
        eye = torch.eye(N, device=dev).expand(B, N, N)
        step = eye.clone().scatter_(1, parent.clamp(min=0)[:, None, :],
                                    (parent >= 0).to(eye.dtype)[:, None, :]).maximum(eye)
        for _ in range(rounds):
            step = torch.bmm(step, step).clamp_(max=1.0)
        both = in_tree[:, :, None] & in_tree[:, None, :]
        anc = (step > 0) & both
        same = (parent[:, :, None] == parent[:, None, :]) & (parent[:, None, :] >= 0)
        earlier = same & (rank[:, :, None] < rank[:, None, :]) & both
        # depth-first numbering: the subtrees of earlier siblings of every ancestor-or-self come first
        size = anc.sum(2).to(eye.dtype)
        before = torch.bmm(size[:, None, :], torch.bmm(earlier.to(eye.dtype), anc.to(eye.dtype)))
        before = before.squeeze(1).round().long()
        outside = N + ar
        self.pre = torch.where(in_tree, depth + before, outside)
        self.post = torch.where(in_tree, size.long() - 1 + before, outside)
        self.parent, self.rank, self.in_tree = parent, rank, in_tree
        self.depth = torch.where(in_tree, depth, 0)
        self.anc, self.earlier = anc, earlier
        self.next_token = torch.where((next_token >= 0) & (next_token < N), next_token, -1)

    def max_depth(self) -> int:
        """The deepest node's depth (reads it on the host: one synchronisation)."""
        return int(self.depth.max())

    def prefixes(self, candidates, width: int):
        """Each node's path tokens (B, N, width), padded with -1: ``[b, j, d]`` is the token of j's
        ancestor-or-self at depth d + 1."""
        torch = _torch()
        B, N = candidates.shape
        nonroot = (self.parent >= 0)[:, :, None]
        pos = torch.where(self.anc & nonroot, (self.depth - 1)[:, :, None], width)  # [b, i, j]
        out = torch.full((B, N, width + 1), -1, dtype=torch.long, device=candidates.device)
        out.scatter_(2, pos.transpose(1, 2), candidates[:, None, :].expand(B, N, N))
        return out[:, :, :width]

    def path(self, candidates, node, width: int):
        """The path tokens of one node per row (``node`` (B,)): (B, width), padded with -1."""
        torch = _torch()
        B, N = candidates.shape
        on = self.anc.gather(2, node[:, None, None].expand(B, N, 1)).squeeze(2) & (self.parent >= 0)
        pos = torch.where(on, self.depth - 1, width)
        out = torch.full((B, width + 1), -1, dtype=torch.long, device=candidates.device)
        out.scatter_(1, pos, candidates)
        return out[:, :width]
