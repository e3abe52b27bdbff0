"""Multi-label node-classification evaluator (paper §4.3, Table PPIResults: micro-averaged F1).

Inputs are 0/1 (or boolean) arrays of shape (nodes × labels): the true labels and the thresholded
predictions (σ(logit) > 0.5, i.e. logit > 0). Micro-averaging pools every (node, label) decision.

Note on the authors' numbers: their evaluation calls `precision_recall_fscore_support(pred, true)` with the
arguments swapped, so the "precision" and "recall" in their result files are our recall and precision;
micro-F1 is symmetric and unaffected.
"""

from __future__ import annotations

import numpy as np


def _ratio(numerator: float, denominator: float) -> float:
    # scikit-learn's zero_division default: an undefined ratio (no positives to divide by) scores 0
    return float(numerator / denominator) if denominator else 0.0


def multilabel_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Micro precision, recall and F1, macro F1 (per-label F1 averaged) and exact-match accuracy.

    y_true, y_pred: (nodes × labels) arrays of 0/1 or booleans, same shape.
    """
    y_true, y_pred = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    if y_true.shape != y_pred.shape or y_true.ndim != 2:
        raise ValueError(f"expected two (nodes × labels) arrays of one shape, got {y_true.shape} and {y_pred.shape}")
    tp_per_label = (y_true & y_pred).sum(axis=0).astype(np.float64)
    fp_per_label = (~y_true & y_pred).sum(axis=0).astype(np.float64)
    fn_per_label = (y_true & ~y_pred).sum(axis=0).astype(np.float64)
    tp, fp, fn = tp_per_label.sum(), fp_per_label.sum(), fn_per_label.sum()
    denominators = 2 * tp_per_label + fp_per_label + fn_per_label
    per_label_f1 = np.divide(2 * tp_per_label, denominators, out=np.zeros_like(denominators), where=denominators > 0)
    return {
        "micro_f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "macro_f1": float(per_label_f1.mean()) if per_label_f1.size else 0.0,
        "accuracy": float((y_true == y_pred).all(axis=1).mean()) if len(y_true) else 0.0,
    }


def micro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Micro-averaged F1 of (nodes × labels) 0/1 arrays: the early-stopping score of the supervised runs."""
    y_true, y_pred = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    tp = np.count_nonzero(y_true & y_pred)
    return _ratio(2 * tp, np.count_nonzero(y_true) + np.count_nonzero(y_pred))
