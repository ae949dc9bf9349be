"""Random expression trees in C syntax for element-wise families.

`expr_tree` builds an expression over named variables with bounded magnitude: every unary
function is applied on a domain where it is defined and smooth (sqrt of |x| + c, log of
1 + |x|, exp of -|x|), and divisions are by (c + x*x), so inputs in [0.5, 1.5) or
normal(0, 1) never give NaN or inf. The same string is valid C (with <math.h>) and CUDA
device code; `float` expressions use the f-suffixed functions (expf) and literals (1.5f).
"""

from __future__ import annotations

import random

from cudaperf.datagen.base import lit

__all__ = ["expr_tree", "horner"]


def _unary(rng: random.Random, x: str, t: str) -> str:
    s = "f" if t == "float" else ""
    c = lit(rng.choice([0.25, 0.5, 1.0, 1.5, 2.0]), t)
    forms = [
        f"sqrt{s}(fabs{s}({x}) + {c})",
        f"exp{s}(-fabs{s}({x}))",
        f"tanh{s}({x})",
        f"sin{s}({x})",
        f"cos{s}({x})",
        f"log{s}({c} + fabs{s}({x}))",
        f"({x}) * ({x})",
        f"({x}) / ({c} + ({x}) * ({x}))",
        f"fmax{s}({x}, {lit(rng.uniform(-0.5, 0.5), t)})",
        f"atan{s}({x})",
    ]
    return rng.choice(forms)


def _binary(rng: random.Random, a: str, b: str, t: str) -> str:
    s = "f" if t == "float" else ""
    c = lit(rng.uniform(0.25, 2.0), t)
    forms = [
        f"({a}) + ({b})",
        f"({a}) - {c} * ({b})",
        f"({a}) * ({b})",
        f"{c} * ({a}) + ({b})",
        f"fmax{s}({a}, {b})",
        f"fmin{s}({a}, {b})",
        f"({a}) / ({c} + ({b}) * ({b}))",
    ]
    return rng.choice(forms)


def expr_tree(rng: random.Random, names: list[str], depth: int, t: str) -> str:
    """An expression of type `t` that uses the variables `names` (each at least once when
    depth allows)."""
    pool = list(names)
    rng.shuffle(pool)

    def leaf() -> str:
        if pool:
            return pool.pop()
        if rng.random() < 0.8:
            return rng.choice(names)
        return lit(rng.uniform(0.1, 2.0), t)

    def build(d: int) -> str:
        if d == 0:
            return leaf()
        r = rng.random()
        if r < 0.35:
            return _unary(rng, build(d - 1), t)
        return _binary(rng, build(d - 1), build(d - 1 if rng.random() < 0.7 else 0), t)

    e = build(depth)
    for extra in pool:  # variables the tree had no room for are added in
        e = f"({e}) + {lit(rng.uniform(0.1, 1.0), t)} * {extra}"
    return e


def horner(coeffs: list[float], x: str, t: str) -> str:
    """Horner form of sum(coeffs[k] * x**k) as one C expression."""
    e = lit(coeffs[-1], t)
    for c in reversed(coeffs[:-1]):
        e = f"({e}) * {x} + {lit(c, t)}"
    return e
