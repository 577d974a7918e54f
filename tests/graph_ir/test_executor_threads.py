"""The executors' threads (graph_ir/executors/threads.py): large convolutions, their gradients,
products, batch norms, bias adds, reductions and max pooling split into parts, one per thread. Each op, sized so that it splits, is run in graph_ir.Session(threads=1) and
Session(threads=2): the results are bitwise equal (each part writes its own outputs, computed as one thread would),
and TF's within the conv family's tolerances (bitwise for max pooling, on NaN, inf and ties)."""

from __future__ import annotations

import threading
import time
import zlib

import numpy as np
import pytest
import tensorflow as tf

import graph_ir
from graph_ir.executors import direct_conv, threads
from tests.graph_ir.test_family_ops import PRODUCT, ROUNDING
from tests.helpers.train_steps import scaled_difference


def _floats(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] = 0
    return x


def _special(rng, *shape):
    """Rounded normals (ties) with NaN, +-inf and the lowest float32 scattered in."""
    x = np.round(rng.standard_normal(shape) * 2).astype(np.float32)
    flat = x.reshape(-1)
    for value, step in ((np.nan, 7), (np.inf, 11), (-np.inf, 5), (np.finfo(np.float32).min, 13)):
        flat[rng.integers(0, flat.size, flat.size // step)] = value
    return x


def _max_pool_grad(k, s, padding):
    return lambda x, dy: tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=tf.nn.max_pool2d(x, k, s, padding), grad=dy,
                                                ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=padding)


CASES = {
    "Conv2D-same-s1": (lambda x, f: tf.nn.conv2d(x, f, 1, "SAME"),
                       lambda r: [_floats(r, 5, 21, 19, 32), _floats(r, 3, 3, 32, 40)], PRODUCT),
    "Conv2D-valid-s2": (lambda x, f: tf.nn.conv2d(x, f, 2, "VALID"),
                        lambda r: [_floats(r, 5, 41, 39, 32), _floats(r, 3, 3, 32, 40)], PRODUCT),
    "Conv2D-pointwise": (lambda x, f: tf.nn.conv2d(x, f, 1, "VALID"),
                         lambda r: [_floats(r, 8, 25, 17, 64), _floats(r, 1, 1, 64, 96)], PRODUCT),
    "Conv2DBackpropFilter-same": (
        lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[3, 3, 33, 40], out_backprop=dy,
                                                      strides=[1, 1, 1, 1], padding="SAME"),
        lambda r: [_floats(r, 8, 21, 19, 33), _floats(r, 8, 21, 19, 40)], PRODUCT),
    "Conv2DBackpropFilter-wide-channels": (
        lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[3, 3, 80, 48], out_backprop=dy,
                                                      strides=[1, 1, 1, 1], padding="SAME"),
        lambda r: [_floats(r, 4, 21, 19, 80), _floats(r, 4, 21, 19, 48)], PRODUCT),
    "Conv2DBackpropFilter-pointwise": (
        lambda x, dy: tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=[1, 1, 64, 96], out_backprop=dy,
                                                      strides=[1, 1, 1, 1], padding="VALID"),
        lambda r: [_floats(r, 8, 25, 17, 64), _floats(r, 8, 25, 17, 96)], PRODUCT),
    "Conv2DBackpropInput-same-s2": (
        lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=[5, 41, 37, 32], filter=f, out_backprop=dy,
                                                     strides=[1, 2, 2, 1], padding="SAME"),
        lambda r: [_floats(r, 3, 3, 32, 40), _floats(r, 5, 21, 19, 40)], PRODUCT),
    "Conv2DBackpropInput-pointwise": (
        lambda f, dy: tf.raw_ops.Conv2DBackpropInput(input_sizes=[8, 25, 17, 64], filter=f, out_backprop=dy,
                                                     strides=[1, 1, 1, 1], padding="VALID"),
        lambda r: [_floats(r, 1, 1, 64, 96), _floats(r, 8, 25, 17, 96)], PRODUCT),
    "FusedBatchNormV3-training": (
        lambda x, scale, offset: tf.raw_ops.FusedBatchNormV3(
            x=x, scale=scale, offset=offset, mean=tf.zeros([0]), variance=tf.zeros([0]), epsilon=1e-3,
            is_training=True)[:3],
        lambda r: [_floats(r, 8, 33, 21, 100) * 3 + 1, _floats(r, 100), _floats(r, 100)], PRODUCT),
    "FusedBatchNormGradV3-training": (
        lambda dy, x, scale, mean, variance: tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=scale, reserve_space_1=mean, reserve_space_2=variance,
            reserve_space_3=tf.zeros([0]), epsilon=1e-3, is_training=True)[:3],
        lambda r: [_floats(r, 8, 33, 21, 100), _floats(r, 8, 33, 21, 100), _floats(r, 100), _floats(r, 100) * 0.1,
                   np.abs(_floats(r, 100)) + 0.5], PRODUCT),
    "BiasAdd": (tf.nn.bias_add, lambda r: [_floats(r, 8, 33, 21, 100), _floats(r, 100)], 0),
    "BiasAddGrad": (lambda dy: tf.raw_ops.BiasAddGrad(out_backprop=dy), lambda r: [_floats(r, 8, 33, 21, 100)],
                    PRODUCT),
    "Mean-spatial": (lambda x: tf.reduce_mean(x, axis=[1, 2]), lambda r: [_floats(r, 8, 33, 21, 100)], PRODUCT),
    "Sum-leading-keepdims": (lambda x: tf.reduce_sum(x, axis=0, keepdims=True), lambda r: [_floats(r, 2100, 2001)],
                             PRODUCT),
    "Max-last": (lambda x: tf.reduce_max(x, axis=-1), lambda r: [_special(r, 8, 33, 21, 100)], 0),
    "AvgPool-overlap": (lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"), lambda r: [_floats(r, 8, 45, 41, 40)], PRODUCT),
    "AvgPoolGrad-overlap": (
        lambda dy: tf.raw_ops.AvgPoolGrad(orig_input_shape=[8, 45, 41, 40], grad=dy, ksize=[1, 3, 3, 1],
                                          strides=[1, 2, 2, 1], padding="SAME"),
        lambda r: [_floats(r, 8, 23, 21, 40)], PRODUCT),
    "MatMul-tall": (tf.matmul, lambda r: [_floats(r, 601, 301), _floats(r, 301, 129)], PRODUCT),
    "MatMul-wide": (lambda a, b: tf.matmul(a, b, transpose_b=True),
                    lambda r: [_floats(r, 9, 1025), _floats(r, 4097, 1025)], PRODUCT),
    "MaxPool-tiles": (lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), lambda r: [_special(r, 8, 45, 41, 40)], 0),
    "MaxPool-overlap": (lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), lambda r: [_special(r, 8, 45, 41, 40)], 0),
    "MaxPoolGrad-tiles": (_max_pool_grad(2, 2, "VALID"),
                          lambda r: [_special(r, 8, 45, 41, 40), np.round(_floats(r, 8, 22, 20, 40))], 0),
    "MaxPoolGrad-overlap": (_max_pool_grad(3, 2, "SAME"),
                            lambda r: [_special(r, 8, 45, 41, 40), np.round(_floats(r, 8, 23, 21, 40))], 0),
}


# Float32 sums over leading axes run in graph_ir._binding (graph_ir/cc/row_sums.h), threaded there above 16 MiB; so
# do convolutions the direct way (graph_ir/cc/direct_conv.h) where the CPU has AVX-512.
THREADED_IN_CPP = {"BiasAddGrad", "Sum-leading-keepdims"} | ({"Conv2D-same-s1", "Conv2D-valid-s2", "Conv2DBackpropFilter-same"} if direct_conv.fits(
    {"strides": [1] * 4, "dilations": [1] * 4, "pads": [0] * 4}, (1, 14, 14, 1), (1, 1, 1, 1), (1, 14, 14, 1)) else set())


@pytest.fixture
def largest_split(monkeypatch):
    """The most parts any executor split into, while the test runs."""
    seen = [1]
    original = threads.run_parts

    def counting(fn, parts):
        seen[0] = max(seen[0], len(parts))
        return original(fn, parts)

    monkeypatch.setattr(threads, "run_parts", counting)
    return seen


@pytest.mark.parametrize("name", list(CASES))
def test_split_executors_match_one_thread_bitwise_and_tensorflow(name, largest_split):
    fn, make_inputs, tolerance = CASES[name]
    inputs = make_inputs(np.random.default_rng(zlib.crc32(name.encode())))
    step = tf.function(fn)
    graph = graph_ir.from_tensorflow(step, *[tf.TensorSpec(x.shape, tf.float32) for x in inputs])
    results = []
    for count in (1, 2):
        session = graph_ir.Session(threads=count)
        session.add_graph(0, graph)
        results.append(session.run_graph(0, inputs))
    assert largest_split[0] >= 2 or name in THREADED_IN_CPP, "the op did not split: make the case larger"
    wants = tf.nest.flatten(step(*inputs))
    assert len(results[1]) == len(wants)
    for one, two, want in zip(*results, wants):
        np.testing.assert_array_equal(two, one)
        if tolerance == 0:
            np.testing.assert_array_equal(two, want.numpy())
        else:
            assert scaled_difference(two, want.numpy()) <= tolerance


def test_slices_cover_the_range_in_contiguous_non_empty_parts():
    for n in (1, 2, 3, 7, 100):
        for pieces in (1, 2, 3, 8, 200):
            parts = threads.slices(n, pieces)
            assert len(parts) == min(n, pieces)
            assert [i for s in parts for i in range(s.start, s.stop)] == list(range(n))


def test_small_work_is_not_split():
    with threads.using(2):
        assert threads.pieces_for(threads.MIN_PASS_BYTES - 1, threads.MIN_PASS_BYTES, 100) == 1
        assert threads.pieces_for(2 * threads.MIN_PASS_BYTES, threads.MIN_PASS_BYTES, 100) == 2
        assert threads.pieces_for(10 * threads.MIN_PASS_BYTES, threads.MIN_PASS_BYTES, 100) == 4  # two a thread
        assert threads.pieces_for(10 * threads.MIN_PASS_BYTES, threads.MIN_PASS_BYTES, 1) == 1
    assert threads.pieces_for(10 * threads.MIN_PASS_BYTES, threads.MIN_PASS_BYTES, 100) == 1  # outside `using`


def test_a_failing_part_raises_after_every_started_part_has_finished():
    started, ended = set(), set()

    def part(k):
        started.add(k)
        time.sleep(0.002)
        if k == 1:
            raise ValueError("part 1 failed")
        ended.add(k)

    with threads.using(2), pytest.raises(ValueError, match="part 1 failed"):
        threads.run_parts(part, list(range(8)))
    assert 1 in started and started - {1} == ended  # nothing still running, and no part started after the failure
    assert len(started) < 8


def test_runs_in_two_threads_at_once_all_complete():
    """One run holds the workers; the other's parts run on its own thread, and both finish with every part done."""
    done: list[int] = []
    gate = threading.Barrier(2, timeout=30)

    def run(offset):
        gate.wait()
        threads.run_parts(lambda k: done.append(k), list(range(offset, offset + 50)))

    workers = [threading.Thread(target=run, args=(k * 50,)) for k in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert not any(w.is_alive() for w in workers)
    assert sorted(done) == list(range(100))


@pytest.mark.parametrize("k, s", [(3, 2), (3, 1), (4, 2), (2, 1)])
def test_overlapping_max_pool_gradients_one_tap_at_a_time_equal_the_separable_way(k, s, monkeypatch):
    """Where windows overlap, one element can be the first maximum of several windows; its gradient is their sum.
    The tap-by-tap way (small windows) adds in the separable way's order (window by window, row-major) bitwise, and
    both are within rounding of TF's (whose order differs)."""
    from graph_ir.executors import pool
    rng = np.random.default_rng(k * 10 + s)
    x = np.round(rng.standard_normal((3, 17, 15, 5))).astype(np.float32)  # ties: shared maxima
    step = tf.function(_max_pool_grad(k, s, "SAME"))
    dy = rng.standard_normal(tf.nn.max_pool2d(x, k, s, "SAME").shape).astype(np.float32)
    graph = graph_ir.from_tensorflow(step, tf.TensorSpec(x.shape, tf.float32), tf.TensorSpec(dy.shape, tf.float32))
    results = []
    for tap_pairs in (pool.MAX_TAP_PAIRS, 0):  # then every window goes the separable way
        monkeypatch.setattr(pool, "MAX_TAP_PAIRS", tap_pairs)
        session = graph_ir.Session()
        session.add_graph(0, graph)
        results.append(session.run_graph(0, [x, dy])[0])
    np.testing.assert_array_equal(results[0], results[1])
    assert scaled_difference(results[0], step(x, dy).numpy()) <= ROUNDING


def test_column_sums_refuse_what_they_cannot_sum():
    from graph_ir import _binding
    x, out = np.ones((4, 9), np.float32), np.zeros(9)
    _binding.column_sums_f64(x, out, 2)
    np.testing.assert_array_equal(out, 4)
    with pytest.raises(TypeError, match="x has buffer format 'd'; expected float32"):
        _binding.column_sums_f64(x.astype(np.float64), out, 1)
    with pytest.raises(ValueError, match="x must be C-contiguous"):
        _binding.column_sums_f64(np.ones((9, 4), np.float32).T, out, 1)
    with pytest.raises(ValueError, match="out has 8 elements; expected x's 9 columns"):
        _binding.column_sums_f64(x, np.zeros(8), 1)
    with pytest.raises(ValueError, match="out overlaps x"):
        buffer = np.zeros(64, np.float32)
        _binding.column_sums_f64(buffer[:36].reshape(4, 9), buffer[30:48].view(np.float64), 1)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        _binding.column_sums_f64(x, out, 0)
