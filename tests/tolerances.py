"""The test suite's tolerances, named once.

Each says which error it absorbs; a test compares within one of these (or within a tolerance the
package itself exports, e.g. :data:`mdtheory.certify.CERT_TOL`), never an unexplained literal.
"""

#: Two float64 evaluations of the same closed form: rounding of O(V) operations on masses <= 1.
ROUNDING = 1e-12
#: A route through an LP or flow solver against another route: HiGHS works to 1e-10 per constraint,
#: the max-flow rounds capacities to multiples of 2^-48.
SOLVER = 1e-9
#: float32 torch arithmetic against float64 numpy, on V <= 40.
FLOAT32 = 2e-5
#: Feasibility and objective of a float solver's primal or dual object (a plan, a flow, dual
#: weights) checked by hand: HiGHS's feasibility tolerance 1e-10 per constraint, summed over up to
#: V^n support entries.
FEASIBILITY = 1e-8
#: Double-exponential quadrature of containment probabilities against exact rational values
#: (absolute for successive sampling, relative for conditional Poisson); the quadrature's proven
#: bound is 1e-15 Q + 2e-18 before rounding.
QUADRATURE_EXACT = 1e-13
#: The batched containment kernels against WithoutReplacement.containment's per-set quadrature.
QUADRATURE_PER_SET = 1e-12
#: One float32 network on batches of different sizes or paddings (BLAS blocks the products
#: differently), or a law computed by two float32 routes (the package's, transformers' own softmax).
BATCH_FLOAT32 = 1e-6
#: A transformer's KV-cache steps against a full recompute, float32 (the attention sums in
#: another order).
KV_CACHE = 1e-5
