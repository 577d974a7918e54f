"""Our Keras optimizers under tf.distribute, for real on this machine (loopback only, every wait bounded):
MirroredStrategy over 2 logical CPUs (fit and a custom loop) and MultiWorkerMirroredStrategy with 2 worker processes
(a custom loop) give the single-device weights; ParameterServerStrategy with an in-process cluster trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import ROOT
from tests.helpers.distributed import OPTIMIZERS, free_ports, run_workers

TIMEOUT = 300


def _env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT}


def _run(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "tests.helpers.distributed", *args], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


def _weights(folder, tag: str) -> list[np.ndarray]:
    with np.load(os.path.join(folder, f"{tag}.npz")) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def _assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    # The all-reduce sums the replicas' halves of the batch: the same gradient up to float32 rounding.
    for x, y in zip(a, b):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-6)


def test_mirrored_strategy_equals_one_device(tmp_path):
    """fit, a custom loop, and apply_gradients outside strategy.scope() (tf.function(lambda x, y:
    model.train_step((x, y)))), which updates every replica's copy of a mirrored weight as Keras's Adam does (it used
    to move replica 0's copy only): each copy equals the one-device weights, and the copies are equal."""
    _run("mirrored", str(tmp_path))
    for name in OPTIMIZERS:
        _assert_same(_weights(tmp_path, f"fit-single-{name}"), _weights(tmp_path, f"fit-mirrored-{name}"))
        _assert_same(_weights(tmp_path, f"loop-single-{name}"), _weights(tmp_path, f"loop-mirrored-{name}"))
        single, copies = _weights(tmp_path, f"outside-single-{name}"), _weights(tmp_path, f"outside-mirrored-{name}")
        assert len(copies) == 2 * len(single)
        first, second = copies[:len(single)], copies[len(single):]
        _assert_same(single, first)
        for a, b in zip(first, second):
            np.testing.assert_array_equal(b, a, err_msg=f"{name}: replica 1's copy differs from replica 0's")


def test_multi_worker_mirrored_strategy_with_two_processes(tmp_path):
    ports = ",".join(free_ports(2))
    run_workers([[sys.executable, "-m", "tests.helpers.distributed", "worker", str(i), ports, str(tmp_path)]
                 for i in range(2)], _env(), ROOT, TIMEOUT)
    _run("single", str(tmp_path))
    for name in OPTIMIZERS:
        _assert_same(_weights(tmp_path, f"multiworker-reference-{name}"), _weights(tmp_path, f"multiworker-{name}"))
        # apply_gradients outside strategy.scope() (tf.function(lambda x, y: model.train_step((x, y)))), either worker
        reference = _weights(tmp_path, f"multiworker-outside-reference-{name}")
        for index in range(2):
            _assert_same(reference, _weights(tmp_path, f"multiworker-outside-{name}-w{index}"))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_parameter_server_strategy_trains(tmp_path, name, request):
    results_file = tmp_path / "parameter_server.json"
    if not results_file.exists():
        _run("ps", str(tmp_path))
    result = json.loads(results_file.read_text())[name]
    assert result["finite"] and result["last"] < result["first"], result
    assert "/job:ps/" in result["ps_device"], result
