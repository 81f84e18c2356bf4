"""Traversal verification (Weng et al., "Traversal Verification for Speculative Tree Decoding",
NeurIPS 2025), written from the paper's description: leaf-to-root traversal of the draft tree with
sequence-level acceptance.

    mdtheory audit --block examples/verifiers/tree_traversal.py:verify --instance toy -n 2 -L 2
    mdtheory audit --block examples/verifiers/tree_traversal.py:law --exact --instance toy -n 2 -L 2
    mdtheory audit --block examples/verifiers/tree_traversal.py:verify_tree --tree 2,2 \\
        --instance random:3:1

Each node a (token x below its parent b) carries a weight w_a = min(1, w_b P_b(x) / q_b(x)), w = 1 at
the root, and a law P_a of its next token, first the target's law after a; q_b is the draft's law
after b. The traversal starts at the first leaf and visits one node at a time: it accepts the
visited node a with probability w_a and emits the path to a followed by a token from P_a. Otherwise
a is deleted, and its parent b is updated with the residual r = (w_b P_b - q_b)^+ of mass s:
w_b <- s / (s + 1 - w_b), P_b <- r / s. The next visit is the first leaf below b's next remaining
child (weights recomputed from the updated b), or b itself once it has no child left. At the root
(w = 1 after a deletion) the token comes from its residual. On one draft this is block
verification; at depth one with n iid drafts it is recursive rejection sampling with replacement.

``verify`` and ``law`` take the n drafts as n separate branches below the root (iid drafts, as
``mdtheory audit --block`` draws them by default); ``verify_tree`` and ``law_tree`` read a tree of
branching BRANCHING from the audit's layout (``--tree 2,2``: paths k and k' share their node at
depth d when k // (n / (b_1 ... b_d)) agree). The siblings must be iid: on a tree drawn without
replacement the next sibling's law is q renormalised off the tokens tried, and these formulas lose
(``mdtheory audit --block ... --sampling without-replacement`` finds it).
"""

import numpy as np

BRANCHING = (2, 2)


def visits(target, draft, drafts, branching):
    """The nodes the traversal visits while every visit rejects: [(path, w, next-token law)]."""
    K, L = drafts.shape
    sizes = [1]
    for b in branching:
        sizes.append(sizes[-1] * b)

    def path(node):
        d, j = node
        return tuple(int(t) for t in drafts[j * (K // sizes[d]), :d])

    alive = {}
    for d in range(L):
        for j in range(sizes[d]):
            alive[(d, j)] = [(d + 1, j * branching[d] + c) for c in range(branching[d])]
    for j in range(sizes[L]):
        alive[(L, j)] = []
    root = (0, 0)
    w, law = {root: 1.0}, {root: target(())}

    def descend(node):
        while alive[node]:
            child = alive[node][0]
            x = drafts[child[1] * (K // sizes[child[0]]), child[0] - 1]
            q = draft(path(node))
            w[child] = min(1.0, w[node] * law[node][x] / q[x])
            law[child] = target(path(child))
            node = child
        return node

    out, node = [], descend(root)
    while node != root:
        out.append((path(node), w[node], law[node]))
        d, j = node
        parent = (d - 1, j // branching[d - 1])
        alive[parent].remove(node)
        r = np.clip(w[parent] * law[parent] - draft(path(parent)), 0.0, None)
        s = r.sum()
        w[parent] = s / (s + 1.0 - w[parent]) if s + 1.0 - w[parent] > 0 else 0.0
        if s > 0:
            law[parent] = r / s
        node = descend(parent)
    out.append(((), 1.0, law[root]))
    return out


def _sample(target, draft, drafts, branching, rng):
    for prefix, w, last in visits(target, draft, drafts, branching):
        if rng.random() < w:
            return np.array([*prefix, rng.choice(len(last), p=last)], dtype=np.int64)
    raise AssertionError("the root is always accepted")


def _law(target, draft, drafts, branching):
    out, reach = {}, 1.0
    for prefix, w, last in visits(target, draft, drafts, branching):
        for y, py in enumerate(last):
            if py > 0:
                out[(*prefix, y)] = out.get((*prefix, y), 0.0) + reach * w * float(py)
        reach *= 1.0 - w
    return out


def _chains(drafts):
    return (drafts.shape[0],) + (1,) * (drafts.shape[1] - 1)


def verify(target, draft, drafts, rng):
    return _sample(target, draft, drafts, _chains(drafts), rng)


def law(target, draft, drafts):
    return _law(target, draft, drafts, _chains(drafts))


def verify_tree(target, draft, drafts, rng):
    return _sample(target, draft, drafts, BRANCHING, rng)


def law_tree(target, draft, drafts):
    return _law(target, draft, drafts, BRANCHING)
