"""Metrics over saved results: summaries and plots (speedup distributions), and benchmarks.

Benchmarks (`cudaperf bench`): `suites` (what `--suite` names, fixed subsets), `scripted`
(the scripted:best / scripted:naive references), `run` (resumable runs over refine), `rows`
and `metrics` (every metric once, with its formula), `intervals` (cluster t intervals),
`summary` (one run, or several compared), `figures` and `render` (self-contained HTML and
Markdown reports).
"""

from cudaperf.report.speedups import BASELINES, load_results, plot_speedups, summarise

__all__ = ["BASELINES", "load_results", "plot_speedups", "summarise"]
