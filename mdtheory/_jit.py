"""Kernels that run as plain Python on small inputs and are compiled by numba on large ones.

``from ._jit import njit`` replaces ``from numba import njit`` in the modules the default routes
import: importing numba costs more than importing numpy, and loading its cached machine code another
0.1-0.5 s, which a small problem (the CLI's examples, V = 50) would pay for microseconds of work. A
decorated function stays the same Python function (:attr:`Kernel.py_func`); a call whose largest
array argument has at least :data:`JIT_MIN_SIZE` entries goes to its numba compilation, built on first
use with every kernel it calls compiled too. Both run the same code on IEEE doubles; they could differ
only where numba's arithmetic differs from CPython's: ``x ** n`` for an integer n (numba squares
repeatedly, CPython calls ``pow``), which the kernels therefore write as
:func:`mdtheory.subsets._ipow`. tests/test_speed_paths.py checks that both give the same bits.
"""

from __future__ import annotations

import types

import numpy as np

__all__ = ["njit", "Kernel", "JIT_MIN_SIZE"]

#: Calls whose largest array argument has at least this many entries run compiled (interpreted, the
#: kernels take about 1-3 us per entry: 1-3 ms here, against 0.1-0.5 s to load numba).
JIT_MIN_SIZE = 1024


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
        size = max((a.size for a in args if isinstance(a, np.ndarray)), default=0)
        return (self.compiled if size >= JIT_MIN_SIZE else self.py_func)(*args)


def njit(func=None, **options):
    """Decorator, as :func:`numba.njit` (bare or with options), returning a :class:`Kernel`."""
    if func is None:
        return lambda f: Kernel(f, options)
    return Kernel(func, options)
