"""Kernels that run as plain Python while that is cheaper than loading numba, compiled after.

``from ._jit import njit`` replaces ``from numba import njit`` in the modules the default routes
import: importing numba costs more than importing numpy, and loading its cached machine code another
0.1-0.5 s, which a small problem (the CLI's examples, V = 50) would pay for microseconds of work. A
decorated function stays the same Python function (:attr:`Kernel.py_func`). The choice per call is
the ski-rental rule: interpret while the process's interpreted work (array entries summed over
calls) stays within :data:`INTERPRETED_BUDGET`, about the cost of loading numba once; after that, or
once numba is loaded anyway, every call runs the numba compilation (built on first use with every
kernel it calls compiled too). A process never pays more than about twice the better of the two.
Both run the same code on IEEE doubles; they could differ
only where numba's arithmetic differs from CPython's: ``x ** n`` for an integer n (numba squares
repeatedly, CPython calls ``pow``), which the kernels therefore write as
:func:`mdtheory.routes.subsets._ipow`. tests/test_speed_paths.py checks that both give the same bits.
"""

from __future__ import annotations

import sys
import types

import numpy as np

__all__ = ["njit", "Kernel", "INTERPRETED_BUDGET", "use_compiled"]

#: Array entries the process may run interpreted, summed over calls (interpreted, the kernels of one
#: route take about 10-30 us per entry: 0.1-0.3 s in all, about the time numba takes to load).
INTERPRETED_BUDGET = 10_000
#: Interpreted entries so far in this process.
_spent = 0
#: Tests only: ``"python"`` or ``"numba"`` forces every call's mode.
FORCE: str | None = None


class Kernel:
    """A function run by the interpreter on small inputs and by numba on large ones.

    Parameters
    ----------
    func : function
        A numba-compilable function; kernels it calls by global name must be :class:`Kernel` too.
    options : dict
        Passed to :func:`numba.njit` (e.g. ``cache=True``).
    """

    def __init__(self, func, options: dict):
        self.py_func = func
        self._options = options
        self._compiled = None
        self.__doc__, self.__name__, self.__wrapped__ = func.__doc__, func.__name__, func

    @property
    def compiled(self):
        """The numba dispatcher (imports numba and compiles, or loads from cache, on first use)."""
        if self._compiled is None:
            from numba import njit as numba_njit

            func = self.py_func
            scope = dict(func.__globals__)
            for name in func.__code__.co_names:  # the kernels it calls, compiled
                if isinstance(scope.get(name), Kernel):
                    scope[name] = scope[name].compiled
            clone = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__,
                                       func.__closure__)
            clone.__qualname__, clone.__module__ = func.__qualname__, func.__module__
            self._compiled = numba_njit(**self._options)(clone)
        return self._compiled

    def __call__(self, *args):
        global _spent
        if FORCE is not None:
            return (self.py_func if FORCE == "python" else self.compiled)(*args)
        if self._compiled is None and "numba" not in sys.modules:
            size = max((a.size for a in args if isinstance(a, np.ndarray)), default=0)
            if _spent + size <= INTERPRETED_BUDGET:
                _spent += size
                return self.py_func(*args)
        return self.compiled(*args)


def use_compiled() -> None:
    """From now on every kernel runs compiled (loads numba): for timings meant to be the steady
    state of a long-running process, which a call under the interpreted budget would not show."""
    import numba  # noqa: F401  (its presence in sys.modules switches every Kernel)


def njit(func=None, **options):
    """Decorator, as :func:`numba.njit` (bare or with options), returning a :class:`Kernel`."""
    if func is None:
        return lambda f: Kernel(f, options)
    return Kernel(func, options)


@njit(cache=True)
def _two_sum(a, b):
    """a + b and its rounding error (Knuth): a + b = s + e exactly (the compensated sums of the
    prefix scan, the base certificate and the containment kernels)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)
