"""Fit the recall confidence's weights (issue 37) on the dev splits; judge them on the test splits.

    python bench/confidence_fit.py [--locomo PATH] [--cases PATH] [--json OUT]

The questions and stores of ``bench/abstention.py`` (LoCoMo: conversations at even positions dev, odd
test; the off-topic questions: even positions dev, odd test, each asked of its split's conversations;
the blind corpus: its own split). Each recall carries its signals (``retrieval/confidence.py``
``SIGNALS``). Two logistic regressions on the dev rows alone (the signals standardised, an L2 penalty of
``L2``, gradient descent): the first of "something stored answers the question" on the signals gives the
direction (which questions are surer than which; each weight kept on the side ``SIGNS`` says); the
second of "the first hit answers the question" on that one score gives its scale and offset (how sure).
Their product is one logistic, printed in the signals' own units as ``WEIGHTS`` and ``BIAS`` to paste
into ``retrieval/confidence.py``.

Why two: whether the first hit is right also depends on which of several stored turns a question's gold
names, which no signal sees; fit on it alone, the weights learn that noise and tell unanswerable
questions apart less well (LoCoMo test AUROC 0.723 against 0.771; docs/decisions.md, 2026-12-06).
The test rows are scored with the fit: AUROC answerable vs not and the reliability table, per set.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import abstention  # noqa: E402
import scenario_cases  # noqa: E402
from common import emit, progress  # noqa: E402
from recall import DEFAULT_PATHS  # noqa: E402

from worlddb_lite.retrieval.confidence import SIGNALS, confidence  # noqa: E402

L2 = 0.01
STEPS = 4000
RATE = 0.1
# Which way each signal may move the confidence: more of the question said by what came back never
# makes it less sure (+1), more said by someone other than the person asked about never more sure (-1);
# whether a person is asked about goes either way (0). Unconstrained, correlated signals took opposite
# weights, and a question sharing nothing with its hits lost nothing for it (gibberish at 0.45-0.5).
SIGNS = {"other_coverage": -1.0, "asked": 0.0}


def fit(x: np.ndarray, y: np.ndarray, signs: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Logistic regression weights (in ``x``'s units) and bias, by gradient descent on standardised columns;
    a weight with a sign in ``signs`` (+1, -1; 0 free) is kept on that side after every step."""
    mean, spread = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / spread
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        w -= RATE * (z.T @ (p - y) / len(y) + L2 * w)
        b -= RATE * float((p - y).mean())
        if signs is not None:
            w = np.where(signs > 0, np.maximum(w, 0.0), np.where(signs < 0, np.minimum(w, 0.0), w))
    return w / spread, b - float(((w / spread) * mean).sum())


def fit_confidence(asked: list[abstention.Asked]) -> tuple[np.ndarray, float]:
    """The direction from answerable vs not, the scale and offset from first hit right: one logistic."""
    x = np.array([[_signals(a)[name] for name in SIGNALS] for a in asked], dtype=float)
    answerable = np.array([1.0 if a.answerable else 0.0 for a in asked])
    correct = np.array([1.0 if a.correct else 0.0 for a in asked])
    direction, offset = fit(x, answerable, np.array([SIGNS.get(name, 1.0) for name in SIGNALS]))
    (scale,), shift = fit((x @ direction + offset)[:, None], correct)
    return scale * direction, float(scale * offset + shift)


def _signals(asked: abstention.Asked) -> dict[str, float]:
    return {name: asked.signals.get(f"signal:{name}", 0.0) for name in SIGNALS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", default=str(DEFAULT_PATHS["locomo"]))
    parser.add_argument("--cases", default=str(scenario_cases.DEFAULT_PATH))
    parser.add_argument("--limit", type=int, help="only the first N conversations / cases of each set (a smoke run)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    locomo = Path(args.locomo)
    if not locomo.is_file():
        print(f"LoCoMo not found at {locomo}; give --locomo PATH", file=sys.stderr)
        return 2
    asked, off = abstention.run_locomo(locomo, args.limit, progress, abstention.offtopic_questions())
    sets = {
        "locomo": asked,
        "offtopic": [a for a in asked if a.answerable] + off,
        "scenarios": abstention.run_scenarios(Path(args.cases), locomo, args.limit, progress),
    }
    dev = [a for a in [*asked, *off, *sets["scenarios"]] if a.split == "dev"]  # each question once
    weights, bias = fit_confidence(dev)
    named = {name: round(float(w), 4) for name, w in zip(SIGNALS, weights, strict=True)}
    result: dict[str, Any] = {"benchmark": "confidence_fit", "dev_rows": len(dev), "WEIGHTS": named}
    result["BIAS"] = round(bias, 4)
    for set_name, asked in sets.items():
        scored = [
            abstention.Asked(
                a.split,
                a.answerable,
                a.correct,
                {**a.signals, "confidence": confidence(_signals(a), named, bias)},
            )
            for a in asked
        ]
        result[set_name] = abstention.summarise(scored)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
