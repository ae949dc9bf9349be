"""Metrics over saved results: summaries and plots (speedup distributions)."""

from cudaperf.report.speedups import BASELINES, load_results, plot_speedups, summarise

__all__ = ["BASELINES", "load_results", "plot_speedups", "summarise"]
