"""Paper §4.4: how runtime grows with the graph — seed averages and log-log slopes of the scalability runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from igel_exp.errors import DataError


def loglog_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares fit of log y = slope · log x + intercept (natural logs); returns (slope, intercept).

    x, y: positive, same length, at least two distinct x. A slope of 1 is linear growth, 2 quadratic.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D and of the same length, got shapes {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("a log-log fit needs positive x and y")
    if len(np.unique(x)) < 2:
        raise ValueError("a log-log fit needs at least two distinct x")
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(intercept)


def seed_means(runs: pd.DataFrame, x: str, series: str, value: str) -> pd.DataFrame:
    """Mean, std and number of runs of `value` per (`series`, `x`), sorted; the paper's curves average seeds.

    Returns columns series, x, mean, std (0 for a single run), n.
    """
    for column in (x, series, value):
        if column not in runs:
            raise DataError(f"the runs have no {column!r} column")
    points = runs[[series, x, value]].set_axis(["series", "x", "value"], axis=1)
    table = points.groupby(["series", "x"])["value"].agg(mean="mean", std="std", n="count").reset_index()
    table["std"] = table["std"].fillna(0.0)
    return table.sort_values(["series", "x"], ignore_index=True)


def slopes(table: pd.DataFrame, x_min: float | None = None, x_max: float | None = None) -> dict[object, float]:
    """Log-log slope of the mean against x for every series of a `seed_means` table, over x in [x_min, x_max]
    (NaN for a series with fewer than two points in that range)."""
    result = {}
    for name, points in table.groupby("series"):
        inside = points[(points.x >= (x_min or 0)) & (points.x <= (x_max or np.inf))]
        result[name] = loglog_slope(inside.x, inside["mean"])[0] if inside.x.nunique() >= 2 else float("nan")
    return result
