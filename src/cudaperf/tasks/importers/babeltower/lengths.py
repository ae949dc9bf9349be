"""Array lengths of a BabelTower function, inferred from its wrapper and its given tests.

BabelTower rows give no array lengths. For each pointer parameter the candidates are:

1. the element count the row's `cuda_wrapper` allocates or copies for it (`cudaMalloc` /
   `cudaMemcpy` byte counts with `sizeof` removed and the wrapper's locals substituted);
2. products of one to three integer scalar parameters (`n`, `rows*cols`, `n*n`, ...),
   optionally times 2, 3 or 4, and `s+1` / `s-1` for each scalar `s`.

A candidate is scored on every given test (the array's declared length there, and the
test's scalar values). It must equal the declared length on at least one test or be at least
as long on all of them. The winner equals the declared length on the most tests (tests often
declare arrays longer than they use, e.g. `n = 0` with ten elements), then is shorter on the
fewest, then is the wrapper's expression, then has the smallest excess, then names most of
the identifiers in the C code's subscripts of that array, then is the simplest. When nothing
fits but every test declares the same length, that constant is the length. Otherwise the row
is skipped.

With `prefer_wrapper` the wrapper's expression wins whenever it fits at all (exact on one
test or at least as long on all). The importer asks for this when the C reference overruns
the lengths chosen from the tests: tests sometimes declare an array shorter than the C code
uses (`float buf[1]` for a loop to `n = 3`), and then another scalar that happens to equal
the declared length (`m = 1`) beats the wrapper's `n`.

Guaranteed: the chosen expression only names scalar parameters and matches at least one
parsed test or is at least the declared length on all of them. Not guaranteed: that it is
large enough for other sizes.
"""

from __future__ import annotations

from itertools import combinations_with_replacement

from cudaperf.tasks.importers.babeltower.inputs import ArrayArg
from cudaperf.tasks.model import eval_length, length_names

__all__ = ["candidates", "choose_length"]


def candidates(int_scalars: list[str]) -> list[str]:
    """Generated length expressions over the integer scalar parameters, simplest first."""
    out: list[str] = []
    for k in (1, 2, 3):
        for combo in combinations_with_replacement(int_scalars, k):
            out.append("*".join(combo))
    for k in (1, 2):
        for combo in combinations_with_replacement(int_scalars, k):
            out += [f"{m}*{'*'.join(combo)}" for m in (2, 3, 4)]
    for s in int_scalars:
        out += [f"{s}+1", f"{s}-1"]
    return out


def _fit(expr: str, lengths: list[int], sizes: list[dict[str, float]]) -> tuple[int, int, int]:
    """(tests matched exactly, tests where it is shorter, total excess); raises if invalid."""
    exact = short = excess = 0
    for want, sz in zip(lengths, sizes, strict=True):
        got = eval_length(expr, sz)
        if got < 0:
            raise ValueError("negative length")
        exact += got == want
        short += got < want
        excess += max(0, got - want)
    return exact, short, excess


def choose_length(
    index: int,
    tests: list[list[float | ArrayArg]],
    scalar_names: dict[int, str],
    int_scalars: list[str],
    wrapper_expr: str,
    subscript_names: set[str],
    prefer_wrapper: bool = False,
) -> str | None:
    """The length expression for the array at parameter position `index`, or None."""
    lengths = [t[index].length for t in tests]  # type: ignore[union-attr]
    sizes = [{n: t[i] for i, n in scalar_names.items()} for t in tests]
    scalars = set(scalar_names.values())
    best: tuple | None = None
    pool = ([wrapper_expr] if wrapper_expr else []) + candidates(int_scalars)
    for rank, expr in enumerate(pool):
        try:
            if not length_names(expr) <= scalars:
                continue
        except ValueError:
            continue
        try:
            exact, short, excess = _fit(expr, lengths, sizes)
        except (ValueError, ZeroDivisionError, OverflowError):
            continue
        if not exact and short:
            continue
        from_wrapper = bool(wrapper_expr) and rank == 0
        overlap = len(length_names(expr) & subscript_names)
        key = (-exact, short, not from_wrapper, excess, -overlap, rank)
        if prefer_wrapper:
            key = (not from_wrapper, *key)
        if best is None or key < best[0]:
            best = (key, expr)
    if best is not None:
        return best[1]
    if len(set(lengths)) == 1:
        return str(lengths[0])
    return None
