"""Decontamination: n-gram overlap between two task sets (training data vs an eval suite).

Each task's text (its source and, optionally, its implementations' code) is tokenised into
identifiers, numbers and single punctuation characters, with comments removed; a task's
fingerprint is its set of token n-grams. For each task of B we report the task of A that
contains the largest share of B's n-grams (containment = |A ∩ B| / |B|). An inverted index
over A's n-grams keeps this linear in the total size of both sets.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from cudaperf.tasks.model import Task

__all__ = ["ngrams", "task_overlap"]

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\S")
_PY_COMMENT = re.compile(r"(?m)#(?!include|define|pragma)[^\n]*$")


def ngrams(text: str, n: int) -> set[int]:
    """Hashes of the token n-grams of `text` (comments removed)."""
    text = _PY_COMMENT.sub("", text)
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    toks = _TOKEN.findall(text)
    return {hash(tuple(toks[i : i + n])) for i in range(len(toks) - n + 1)}


def _text(t: Task, with_impls: bool) -> str:
    return t.source + ("\n".join(i.code for i in t.implementations) if with_impls else "")


def task_overlap(
    a: list[Task], b: list[Task], n: int = 8, threshold: float = 0.5, with_impls: bool = False
) -> dict:
    """For each task of `b`, its most-overlapping task in `a`; a summary and the top pairs."""
    index: dict[int, list[int]] = defaultdict(list)
    for i, t in enumerate(a):
        for g in ngrams(_text(t, with_impls), n):
            index[g].append(i)
    pairs, too_short = [], []
    for t in b:
        grams = ngrams(_text(t, with_impls), n)
        if not grams:  # fewer than n tokens: nothing to compare, said in the report
            too_short.append(t.id)
            continue
        hits = Counter(i for g in grams for i in index.get(g, ()))
        if hits:
            i, k = hits.most_common(1)[0]
            pairs.append({"b": t.id, "a": a[i].id, "overlap": round(k / len(grams), 4)})
        else:
            pairs.append({"b": t.id, "a": None, "overlap": 0.0})
    pairs.sort(key=lambda p: -p["overlap"])
    over = [p for p in pairs if p["overlap"] >= threshold]
    return {
        "a_tasks": len(a),
        "b_tasks": len(b),
        "ngram": n,
        "threshold": threshold,
        "overlapping": len(over),
        "overlapping_fraction": round(len(over) / len(b), 4) if b else 0.0,
        "max_overlap": pairs[0]["overlap"] if pairs else 0.0,
        "mean_overlap": round(sum(p["overlap"] for p in pairs) / len(pairs), 4) if pairs else 0.0,
        "top_pairs": pairs[:20],
        # tasks of B with fewer than `n` tokens: not compared (a smaller n compares them)
        "too_short": len(too_short),
        "too_short_ids": too_short[:20],
    }
