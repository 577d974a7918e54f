"""The collective engine of tf_plugin's HcomAllReduce, HcomAllGather, HcomBroadcast and HcomReduceScatter CPU kernels
(tf_plugin/cc/op_kernels/hccl_kernels.cc): a ctypes callback, registered in the op library once per process, that runs
graph_ir/distributed's collectives (the MPI engine of graph_ir.Session, graph_ir/distributed/collectives.py) on NumPy
views of the kernel's buffers, in the world group (graph_ir.distributed.world(): every process mpiexec started, with
its bounded waits and deterministic float reductions).

Each call checks, naming the op, its node, the attribute, what it got and what was expected: the dtype against GE's
REG_OP (CANN's hcom_ops.h, graph_ir/opset/hcom.py: the TF op takes more, e.g. bfloat16, which GE refuses), `group`
the world group's name, `rank_size` its size, `root_rank` one of its ranks, `fusion` 0, 1 or 2. Then the ranks compare
the collective's signature (op type, attributes, dtypes and shapes; one 32-byte all-gather), so that ranks issuing
different collectives fail with an HcomError naming the ranks rather than exchange mismatched buffers. One
collective runs at a time in a process (a lock, its wait bounded by the group's timeout).
"""

from __future__ import annotations

import atexit
import ctypes
import json
import threading
from typing import Any

import numpy as np
import tensorflow as tf

from graph_ir.distributed import HcomError, world
from graph_ir.distributed.collectives import ON_ARRAYS, check_group
from graph_ir.distributed.runs import post_agreement
from graph_ir.opset.hcom import FUSIONS, MOVE_DTYPES, REDUCE_DTYPES, REDUCTIONS
from tf_plugin import _loader

OPS = ("HcomAllReduce", "HcomAllGather", "HcomBroadcast", "HcomReduceScatter")
DTYPES = {"HcomAllReduce": REDUCE_DTYPES, "HcomReduceScatter": REDUCE_DTYPES, "HcomAllGather": MOVE_DTYPES,
          "HcomBroadcast": MOVE_DTYPES}
# absl::StatusCode values the kernel turns the error into (TF's InvalidArgumentError, FailedPreconditionError, ...)
INVALID_ARGUMENT, DEADLINE_EXCEEDED, FAILED_PRECONDITION, ABORTED, INTERNAL = 3, 4, 9, 10, 13

_ENGINE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int64)
_LOCK = threading.Lock()


def _view(pointer: int | None, dtype: np.dtype, shape: list[int]) -> np.ndarray:
    """A NumPy array over a kernel's buffer (no copy); empty tensors have no buffer."""
    count = int(np.prod(shape, dtype=np.int64))
    if not count:
        return np.empty(shape, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(pointer)
    return np.frombuffer(raw, dtype).reshape(shape)


def check_request(op: str, what: str, attrs: dict, dtypes: list[str], size: int, name: str) -> None:
    """The checks of one TF collective against GE's REG_OP and the group (`size` ranks named `name`)."""
    for dtype in dtypes:
        if dtype not in DTYPES[op]:
            raise ValueError(f"{what}: attribute 'T' is {dtype}, but GE's {op} (CANN hcom_ops.h) takes "
                             f"{', '.join(DTYPES[op])}")
    if "reduction" in attrs and attrs["reduction"] not in REDUCTIONS:
        raise ValueError(f"{what}: attribute 'reduction' must be one of {', '.join(REDUCTIONS)}, got "
                         f"{attrs['reduction']!r}")
    if attrs["group"] != name:
        raise ValueError(f"{what}: attribute 'group' is {attrs['group']!r}, but the only group is the world group "
                         f"{name!r} (every process of the job)")
    if attrs["fusion"] not in FUSIONS:
        raise ValueError(f"{what}: attribute 'fusion' must be 0 (not fused), 1 (split strategy) or 2 (by "
                         f"fusion_id), got {attrs['fusion']}")
    if "rank_size" in attrs and attrs["rank_size"] != size:
        raise ValueError(f"{what}: attribute 'rank_size' is {attrs['rank_size']}, but group {name!r} has {size} "
                         "ranks (mpiexec -n)")
    if "root_rank" in attrs and not 0 <= attrs["root_rank"] < size:
        raise ValueError(f"{what}: attribute 'root_rank' is {attrs['root_rank']}, but group {name!r} has ranks 0 "
                         f"to {size - 1}")


def _post_agreement(group: Any, what: str, request: dict, dtypes: list[str]) -> None:
    """Every rank issues this collective now: the digests of their signatures compared, waited for just before the
    collective's own wait (graph_ir/distributed/runs.py post_agreement)."""
    signed = json.dumps([request["op"], request["attrs"], dtypes, [i["shape"] for i in request["inputs"]]],
                        sort_keys=True)
    post_agreement(group, signed.encode(), f"{what} (checking the ranks' collectives agree)",
                   lambda differ: f"rank {group.rank}: {what} ({signed}): ranks {differ} issue another collective "
                                  "(another op, attributes, dtype or shape) at this place of the sequence; every rank "
                                  "must issue the same collectives in the same order")


def run(request: dict, inputs: list[int | None], outputs: list[int | None]) -> None:
    """Runs one kernel's collective: checks, the engine, the results copied into the kernel's output buffers."""
    op, attrs = request["op"], request["attrs"]
    what = f"{op} {request['node']!r}"
    dtypes = [tf.dtypes.as_dtype(i["dtype"]) for i in request["inputs"]]
    try:
        group = world()
    except ImportError as e:
        raise RuntimeError(f"{what}: the TF collective needs an MPI group and there is none: {e}") from None
    check_request(op, what, attrs, [d.name for d in dtypes], group.size, group.name)
    arrays = [_view(p, np.dtype(d.as_numpy_dtype), i["shape"]) for p, d, i in zip(inputs, dtypes, request["inputs"])]
    if not _LOCK.acquire(timeout=group.timeout):
        raise HcomError(f"rank {group.rank}: {what}: another collective of this process held the engine for "
                        f"{group.timeout:g} s")
    try:
        check_group(group, what, attrs)
        _post_agreement(group, what, request, [d.name for d in dtypes])
        results = ON_ARRAYS[op](group, what, arrays, attrs)
    finally:
        if group.before_wait is not None:  # the collective failed before its wait: the ranks are out of step now
            group.before_wait = None
            group.fail(f"rank {group.rank}: {what} failed after posting its agreement check")
        _LOCK.release()
    for pointer, result, shape in zip(outputs, results, request["outputs"]):
        if list(result.shape) != shape:
            raise RuntimeError(f"{what}: the engine gave shape {list(result.shape)}, the kernel allocated {shape}")
        np.copyto(_view(pointer, result.dtype, shape), result)


def _code(error: BaseException) -> int:
    if isinstance(error, HcomError):
        return DEADLINE_EXCEEDED if "did not complete within" in str(error) else ABORTED
    if isinstance(error, (ValueError, TypeError)):
        return INVALID_ARGUMENT
    return FAILED_PRECONDITION if isinstance(error, RuntimeError) else INTERNAL


@_ENGINE
def _serve(request: bytes, inputs, outputs, error: int, size: int) -> int:
    """The callback the kernels call (ctypes takes the GIL): 0, or a status code with the message in `error`."""
    try:
        decoded = json.loads(request)
        count = len(decoded["inputs"])
        run(decoded, [inputs[k] for k in range(count)], [outputs[k] for k in range(count)])
        return 0
    except BaseException as e:  # noqa: BLE001 - nothing may unwind through the C++ kernel
        message = str(e).encode()[:max(0, size - 1)]
        ctypes.memmove(error, message, len(message))
        return _code(e)


def register() -> None:
    """Sets _serve as the op library's collective engine (idempotent); unset at exit."""
    _loader.load()
    library = ctypes.CDLL(_loader.library_path())  # the handle tf.load_op_library made: the same kernels' state
    library.TfPluginHcomSetEngine.argtypes = [_ENGINE]
    library.TfPluginHcomSetEngine.restype = None
    library.TfPluginHcomSetEngine(_serve)
    atexit.register(library.TfPluginHcomSetEngine, _ENGINE())
