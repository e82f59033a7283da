"""Composed world embeddings, synthetic study (WorldDB paper §5): mean pool (v1) vs attention pool (v2).

    python bench/compose.py [--seed 0] [--seeds 0,1,2,3,4] [--json bench/out/compose.json]

Generator (all vectors unit length, as the store keeps them; d = 256). ``eps`` is a standard
Gaussian vector divided by sqrt(d), so it has norm ~1 and every sigma below is a noise-to-signal
norm ratio:

* world w (50 of them): a theme t_w and a world-specific noise direction n_w, both random unit vectors;
* its content embedding: unit(t_w + sigma_content * eps), a noisy view of the theme;
* its 20 children, in one of two readings of "one dominant noise direction per world":
  ``--generator shared`` (the headline): every child carries the world's noise direction, with a
  strength that varies by child, unit(t_w + a * n_w + sigma_child * eps), a = noise_strength * |z|,
  z standard normal (on average the noise outweighs the theme, so the mean drifts off-theme, while
  attention, querying with the content, leans on the children the noise touched least);
  ``--generator few``: most children are unit(t_w + sigma_child * eps) and ``--noisy-children``
  of them are dominated by the noise, unit(noisy_theme_weight * t_w + n_w + sigma_noisy * eps);
* 100 held-out queries: unit(t_w + sigma_query * eps) for uniformly random worlds w.

A query is correct when the world whose composed embedding has the highest cosine with it is its
own world (top-1 over all 50 worlds). v1 = ``mean_pool(children)``; v2 =
``attention_pool(content, children)`` with the default scale sqrt(d). The result also holds v2 at
the scales 1/sqrt(d) (textbook attention applied to unit vectors) and 1, to show the scale is what
makes v2 differ from v1; the cosine of each composed embedding with its theme; the attention
weight on the noise-dominated children; and a sweep over the number of noisy children and the
query noise, because the gap between v1 and v2 depends on both.

Parameter choices, shared: noise_strength 3 and sigma_query 2 (the sweep prints the neighbours of
that point; the gap grows with the noise and with vaguer queries). Few: "a few" noisy children = 5 of 20; a child is
on theme but has its own details (sigma_child = 1, cosine ~0.71 with the theme); the content is a
cleaner view (sigma_content = 0.5, cosine ~0.89). With queries as clean as children (sigma_query = 1)
both pools score 100% and nothing can be compared, so queries are vague (sigma_query = 3, cosine
~0.32 with the theme); the sweep shows the other settings.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, progress  # noqa: E402

from worlddb_lite.models.compose import attention_pool, attention_weights, mean_pool  # noqa: E402


@dataclass(frozen=True)
class Params:
    """Generator parameters (printed in the result)."""

    generator: str = "shared"
    dim: int = 256
    worlds: int = 50
    children: int = 20
    noisy_children: int = 5
    queries: int = 100
    sigma_content: float = 0.5
    sigma_child: float = 1.0
    sigma_noisy: float = 0.3
    noisy_theme_weight: float = 0.3
    sigma_query: float = 3.0
    noise_strength: float = 3.0  # shared: mean noise amplitude is noise_strength * sqrt(2 / pi)
    sigma_child_shared: float = 0.8


SHARED = Params(generator="shared", sigma_query=2.0)
FEW = Params(generator="few")


@dataclass
class Corpus:
    """One draw of the synthetic study."""

    themes: np.ndarray  # (W, d)
    content: np.ndarray  # (W, d)
    children: np.ndarray  # (W, C, d); the first noisy_children rows of each world are the noisiest
    query_world: np.ndarray  # (Q,)
    queries: np.ndarray  # (Q, d)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def generate(p: Params, seed: int) -> Corpus:
    """Draw themes, noise directions, content, children and held-out queries from one seed."""
    rng = np.random.default_rng(seed)

    def eps(*shape: int) -> np.ndarray:
        return rng.standard_normal((*shape, p.dim)) / math.sqrt(p.dim)

    themes = unit(rng.standard_normal((p.worlds, p.dim)))
    noise_dirs = unit(rng.standard_normal((p.worlds, p.dim)))
    content = unit(themes + p.sigma_content * eps(p.worlds))
    if p.generator == "shared":
        strength = p.noise_strength * np.abs(rng.standard_normal((p.worlds, p.children)))
        strength = -np.sort(-strength, axis=1)  # noisiest first, so "the first k" are the noisiest
        children = unit(
            themes[:, None, :]
            + strength[..., None] * noise_dirs[:, None, :]
            + p.sigma_child_shared * eps(p.worlds, p.children)
        )
    else:
        children = unit(themes[:, None, :] + p.sigma_child * eps(p.worlds, p.children))
        k = p.noisy_children
        children[:, :k] = unit(
            p.noisy_theme_weight * themes[:, None, :] + noise_dirs[:, None, :] + p.sigma_noisy * eps(p.worlds, k)
        )
    query_world = rng.integers(0, p.worlds, p.queries)
    queries = unit(themes[query_world] + p.sigma_query * eps(p.queries))
    return Corpus(themes, content, children, query_world, queries)


def evaluate(corpus: Corpus, composed: np.ndarray) -> dict[str, float]:
    """Top-1 accuracy, mean cosine of composed embedding and theme, mean margin of the right world."""
    scores = corpus.queries @ composed.T
    right = scores[np.arange(len(scores)), corpus.query_world]
    scores[np.arange(len(scores)), corpus.query_world] = -np.inf
    return {
        "top1": round(float((right > scores.max(axis=1)).mean()), 4),
        "cos_theme": round(float(np.mean(np.sum(composed * corpus.themes, axis=1))), 4),
        "margin": round(float(np.mean(right - scores.max(axis=1))), 4),
    }


def run(p: Params, seed: int, *, details: bool = False) -> dict[str, Any]:
    """v1 and v2 on one draw; with ``details``, v2 at other scales and the weight on noisy children."""
    corpus = generate(p, seed)
    v1 = np.stack([mean_pool(ch) for ch in corpus.children])
    v2 = np.stack([attention_pool(c, ch) for c, ch in zip(corpus.content, corpus.children, strict=True)])
    out: dict[str, Any] = {"seed": seed, "v1_mean": evaluate(corpus, v1), "v2_attention": evaluate(corpus, v2)}
    if details:
        # the uniform share is what the mean pool gives the noisy children
        out["weight_on_noisy_children"] = {"v1_mean": round(p.noisy_children / p.children, 4)}
        scales = {"sqrt_d": math.sqrt(p.dim), "1": 1.0, "1/sqrt_d": 1.0 / math.sqrt(p.dim)}
        out["v2_by_scale"] = {}
        for name, scale in scales.items():
            pooled = np.stack(
                [attention_pool(c, ch, scale=scale) for c, ch in zip(corpus.content, corpus.children, strict=True)]
            )
            weights = np.stack(
                [attention_weights(c, ch, scale=scale) for c, ch in zip(corpus.content, corpus.children, strict=True)]
            )
            out["v2_by_scale"][name] = {
                "scale": round(scale, 4),
                **evaluate(corpus, pooled),
                "max_weight": round(float(weights.max(axis=1).mean()), 4),
            }
            out["weight_on_noisy_children"][f"v2_scale_{name}"] = round(
                float(weights[:, : p.noisy_children].sum(axis=1).mean()), 4
            )
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-seed top-1 for v1 and v2, and their mean and standard deviation over seeds."""
    v1 = np.array([r["v1_mean"]["top1"] for r in rows])
    v2 = np.array([r["v2_attention"]["top1"] for r in rows])
    return {
        "per_seed": {
            str(r["seed"]): {"v1_mean": r["v1_mean"]["top1"], "v2_attention": r["v2_attention"]["top1"]} for r in rows
        },
        "v1_mean": {"mean": round(float(v1.mean()), 4), "std": round(float(v1.std()), 4)},
        "v2_attention": {"mean": round(float(v2.mean()), 4), "std": round(float(v2.std()), 4)},
        "v2_wins": int((v2 > v1).sum()),
        "ties": int((v2 == v1).sum()),
        "v1_wins": int((v1 > v2).sum()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the headline run (default 0)")
    parser.add_argument(
        "--seeds",
        default="0,1,2,3,4",
        help="comma-separated seeds for the per-seed comparison and the sweep ('' to skip)",
    )
    parser.add_argument(
        "--generator",
        choices=("shared", "few"),
        default="shared",
        help="which reading of the paper's setup is the headline (the other is reported too)",
    )
    parser.add_argument("--noisy-children", type=int, default=None)
    parser.add_argument("--sigma-query", type=float, default=None)
    parser.add_argument("--no-sweep", action="store_true", help="skip the noisy-children x query-noise sweep")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    params = SHARED if args.generator == "shared" else FEW
    other = FEW if args.generator == "shared" else SHARED
    if args.noisy_children is not None:
        params = replace(params, noisy_children=args.noisy_children)
    if args.sigma_query is not None:
        params = replace(params, sigma_query=args.sigma_query)
    if not 0 <= params.noisy_children <= params.children:
        parser.error(f"--noisy-children must be between 0 and {params.children}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    started = time.perf_counter()
    headline = run(params, args.seed, details=True)
    result: dict[str, Any] = {
        "params": {**asdict(params), "seed": args.seed, "top1_over": "all worlds, cosine"},
        "paper_reports": {"v1_mean_top1": 0.88, "v2_attention_top1": 1.0},
        "result": headline,
    }
    if seeds:
        progress(f"seeds {seeds}")
        result["seeds"] = summary([run(params, s) for s in seeds])
        result["other_generator"] = {"params": asdict(other), "seeds": summary([run(other, s) for s in seeds])}
        if not args.no_sweep:
            progress("sweep")
            sweep = {}
            grid = (
                [("noise_strength", v) for v in (1.5, 3.0)]
                if params.generator == "shared"
                else [("noisy_children", v) for v in (2, 5, 8)]
            )
            for name, value in grid:
                for sq in (1.0, 2.0, 3.0, 4.0):
                    varied = replace(params, **{name: value}, sigma_query=sq)
                    s = summary([run(varied, seed) for seed in seeds])
                    sweep[f"{name}={value},sigma_query={sq}"] = {
                        "v1_mean": s["v1_mean"]["mean"],
                        "v2_attention": s["v2_attention"]["mean"],
                    }
            result["sweep_mean_top1_over_seeds"] = sweep
    result["seconds"] = round(time.perf_counter() - started, 2)
    result["env"] = environment()
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
