"""The routes to α*: one module per formulation (:mod:`.otlp`, :mod:`.dual`, :mod:`.maxflow`,
:mod:`.subsets`, :mod:`.mnp`, :mod:`.greedy`), each returning a typed proof (:mod:`.proofs`) that
:mod:`mdtheory.certify` checks. The registry of routes is :data:`mdtheory.solve.METHODS`."""
