"""Composed world embeddings: mean pool (v1), attention pool (v2), the compose dispatcher."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite.models.compose import KINDS, attention_pool, attention_weights, compose, default_scale, mean_pool

D = 64


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def world(rng, *, children=10, noisy=3, d=D):
    """Theme, content (noisy view of the theme) and children, the first ``noisy`` dominated by a noise direction."""
    theme = unit(rng.standard_normal(d))
    noise_dir = unit(rng.standard_normal(d))
    content = unit(theme + 0.5 * rng.standard_normal(d) / math.sqrt(d))
    kids = unit(theme + rng.standard_normal((children, d)) / math.sqrt(d))
    kids[:noisy] = unit(0.3 * theme + noise_dir + 0.3 * rng.standard_normal((noisy, d)) / math.sqrt(d))
    return theme, content, kids


@pytest.mark.parametrize("kind", KINDS)
def test_outputs_are_unit_float32_rows(kind):
    rng = np.random.default_rng(1)
    _, content, kids = world(rng)
    out = compose(kind, content, 3.0 * kids)  # lengths of the inputs do not matter
    assert out.shape == (D,) and out.dtype == np.float32
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-6


def test_mean_and_attention_pool_are_unit_length():
    rng = np.random.default_rng(2)
    _, content, kids = world(rng)
    assert abs(float(np.linalg.norm(mean_pool(kids))) - 1.0) < 1e-6
    assert abs(float(np.linalg.norm(attention_pool(content, kids))) - 1.0) < 1e-6


def test_attention_beats_mean_on_a_small_synthetic_case():
    """20 worlds x 10 children, 3 per world dominated by a world-specific noise direction."""
    rng = np.random.default_rng(0)
    worlds = [world(rng) for _ in range(20)]
    themes = np.stack([t for t, _, _ in worlds])
    v1 = np.stack([mean_pool(k) for _, _, k in worlds])
    v2 = np.stack([attention_pool(c, k) for _, c, k in worlds])
    cos_v1 = float(np.mean(np.sum(v1 * themes, axis=1)))
    cos_v2 = float(np.mean(np.sum(v2 * themes, axis=1)))
    # mean pooling lands at 0.85 here, attention at 0.93; equal values would mean attention degenerated
    assert cos_v2 - cos_v1 > 0.05, (cos_v1, cos_v2)
    # and the off-theme children get almost no weight (a mean gives them 3/10)
    noisy_weight = np.mean([attention_weights(c, k)[:3].sum() for _, c, k in worlds])
    assert noisy_weight < 0.05
    # retrieval with vague theme queries: attention finds strictly more worlds
    owner = rng.integers(0, len(worlds), 200)
    queries = unit(themes[owner] + 3.0 * rng.standard_normal((200, D)) / math.sqrt(D))
    top1_v1 = float(np.mean(np.argmax(queries @ v1.T, axis=1) == owner))
    top1_v2 = float(np.mean(np.argmax(queries @ v2.T, axis=1) == owner))
    assert top1_v2 >= top1_v1 + 0.03, (top1_v1, top1_v2)


def test_attention_with_identical_children_is_that_child():
    rng = np.random.default_rng(3)
    child = unit(rng.standard_normal(D))
    query = unit(rng.standard_normal(D))
    kids = np.tile(child, (5, 1))
    np.testing.assert_allclose(attention_pool(query, kids), child, atol=1e-6)
    np.testing.assert_allclose(mean_pool(kids), child, atol=1e-6)
    np.testing.assert_allclose(attention_weights(query, kids), np.full(5, 0.2))


def test_scale_is_sqrt_d_because_plain_scaling_is_uniform_for_unit_vectors():
    """With unit vectors q.k/sqrt(d) is within ±1/sqrt(d): softmax is a mean pool. sqrt(d) is not."""
    rng = np.random.default_rng(4)
    d = 256
    _, content, kids = world(rng, children=20, noisy=5, d=d)
    assert default_scale(d) == 16.0

    plain = attention_weights(content, kids, scale=1.0 / math.sqrt(d))
    # logits lie in [-1/16, 1/16], so no weight can be more than e^(1/8) = 1.13 times another
    assert plain.max() / plain.min() <= math.exp(2.0 / math.sqrt(d)) + 1e-12
    assert plain[:5].sum() > 0.24  # the noise-dominated children keep their uniform share (0.25)
    np.testing.assert_allclose(attention_pool(content, kids, scale=1.0 / math.sqrt(d)), mean_pool(kids), atol=0.01)

    default = attention_weights(content, kids)
    np.testing.assert_allclose(default, attention_weights(content, kids, scale=math.sqrt(d)))
    assert default.max() / default.min() > 100  # far from uniform
    assert default[:5].sum() < 0.01  # the noise-dominated children are switched off
    assert float(np.linalg.norm(attention_pool(content, kids) - mean_pool(kids))) > 0.1


def test_softmax_is_stable_for_huge_scales():
    rng = np.random.default_rng(5)
    query = unit(rng.standard_normal(D))
    kids = unit(rng.standard_normal((4, D)))
    kids[2] = query
    weights = attention_weights(query, kids, scale=1e6)
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights, [0, 0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(attention_pool(query, kids, scale=1e6), query, atol=1e-6)


def test_no_children_means_the_content_vector():
    content = np.array([3.0, 4.0, 0.0])
    for kind in KINDS:
        for empty in (np.empty((0, 3)), np.empty(0), []):
            np.testing.assert_allclose(compose(kind, content, empty), [0.6, 0.8, 0.0])
    np.testing.assert_allclose(attention_pool(content, np.empty((0, 3))), [0.6, 0.8, 0.0])
    assert attention_weights(content, np.empty((0, 3))).shape == (0,)
    with pytest.raises(ValueError, match="at least one child"):
        mean_pool(np.empty((0, 3)))


def test_mean_ignores_the_content_vector():
    rng = np.random.default_rng(6)
    _, content, kids = world(rng)
    np.testing.assert_array_equal(compose("mean", content, kids), compose("mean", -content, kids))
    np.testing.assert_array_equal(compose("mean", content, kids), mean_pool(kids))
    np.testing.assert_array_equal(compose("attention", content, kids), attention_pool(content, kids))


def test_zero_vectors():
    a = np.array([1.0, 0.0, 0.0])
    b = np.array([0.0, 1.0, 0.0])
    kids = np.stack([a, np.zeros(3)])
    np.testing.assert_allclose(mean_pool(kids), a)  # a zero child has no direction and adds nothing
    np.testing.assert_allclose(attention_pool(b, kids), a)
    # a zero query attends uniformly: exactly the mean pool
    two = np.stack([a, b])
    np.testing.assert_allclose(attention_pool(np.zeros(3), two), mean_pool(two))
    with pytest.raises(ValueError, match="zero vector"):
        mean_pool(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="zero vector"):
        mean_pool(np.stack([a, -a]))  # children that cancel out
    with pytest.raises(ValueError, match="zero vector"):
        compose("attention", np.zeros(3), np.empty((0, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_infinity_are_refused(bad):
    good = np.ones((3, 4))
    kids = good.copy()
    kids[1, 2] = bad
    query = np.ones(4)
    query[0] = bad
    with pytest.raises(ValueError, match=r"rows \[1\] hold NaN or infinity"):
        mean_pool(kids)
    for kind in KINDS:
        with pytest.raises(ValueError, match="NaN or infinity"):
            compose(kind, np.ones(4), kids)
        with pytest.raises(ValueError, match="NaN or infinity"):
            compose(kind, query, good)
    with pytest.raises(ValueError, match="NaN or infinity"):
        attention_pool(query, good)


def test_shape_and_dimension_errors():
    with pytest.raises(ValueError, match="children have 3 dimensions but the query has 4"):
        attention_pool(np.ones(4), np.ones((2, 3)))
    with pytest.raises(ValueError, match="children have 3 dimensions but the query has 4"):
        compose("mean", np.ones(4), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        mean_pool(np.ones(4))  # one child must be a (1, d) row, not a bare vector
    with pytest.raises(ValueError, match="1-D and non-empty"):
        attention_pool(np.ones((1, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="1-D and non-empty"):
        compose("attention", np.empty(0), np.ones((2, 4)))
    with pytest.raises(ValueError, match="sequence of numbers"):
        compose("attention", ["a", "b"], np.ones((2, 2)))
    with pytest.raises(ValueError, match="scale"):
        attention_pool(np.ones(4), np.ones((2, 4)), scale=-1.0)


def test_unknown_kind_names_the_valid_kinds():
    with pytest.raises(ValueError, match=r"unknown composition kind 'max'; valid kinds are 'mean', 'attention'"):
        compose("max", np.ones(3), np.ones((2, 3)))


def test_bench_compose_runs(tmp_path):
    """bench/compose.py end to end on its headline seed only, so it never rots."""
    script = Path(__file__).resolve().parent.parent / "bench" / "compose.py"
    out = tmp_path / "compose.json"
    done = subprocess.run(
        [sys.executable, str(script), "--seeds", "", "--json", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["params"]["worlds"] == 50 and result["params"]["children"] == 20
    assert 0.0 <= result["result"]["v1_mean"]["top1"] <= 1.0
    assert result["result"]["weight_on_noisy_children"]["v2_scale_sqrt_d"] < 0.05
