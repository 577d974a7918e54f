"""CTCLoss's executor (prototype: graph_ir/opset/ctc.py), as TF's CPU kernel computes it
(tensorflow/core/kernels/ctc_loss_op.cc, tensorflow/core/util/ctc/ctc_loss_calculator.h; Graves, "Supervised Sequence
Labelling with Recurrent Neural Networks", ch. 7), in the inputs' dtype:

    y[t, b]            = softmax(inputs[t, b])                       (exp(x - max) / sum, over the classes)
    l'                 = blank, l1, blank, l2, ..., lL, blank        (U = 2L + 1; blank = num_classes - 1)
    alpha[t, u]        = log y[t, l'u] + LSE(alpha[t-1, u], alpha[t-1, u-1], alpha[t-1, u-2])   (Eq. 7.9)
    beta[t, u]         = LSE(beta[t+1, u + k] + log y[t+1, l'(u+k)] for k = 0, 1, 2)             (Eq. 7.15)
    loss[b]            = -LSE_u(alpha[0, u] + beta[0, u])                                        (Eq. 7.26)
    gradient[t, b, c]  = y[t, b, c] - exp(LSE_{u: l'u = c}(alpha[t, u] + beta[t, u]) + loss[b])  (Eq. 7.28)

The u-2 term is taken when l'u is a label other than l'(u-2) (any label when ctc_merge_repeated is false), the u
term only for blanks when ctc_merge_repeated is false. TF prunes the states that cannot reach the end in time or
were not reachable from the start (they stay log 0), and so does this. LSE is TF's LogSumExp (ctc_loss_util.h):
max + log1pf(expf(min - max)), in float32 whatever the dtype, folded in TF's order. The loops run over time;
each step is vectorized over the batch and the label-extended dimension u.

Rounding: float32 softmax takes Eigen's exp and sum and LSE glibc's log1pf, each as TF's build rounds it
(graph_ir/executors/tf_float32.py); logf and expf are correctly rounded (float64, rounded once), which glibc's
are but for an ulp now and then. So the loss is TF's bit for bit on the tested inputs, and a gradient entry, a
difference of y and an exp of log values of the loss's size, is within 2 ulps of the loss (plus 2 ulps of 1) of
TF's where a logf or expf rounds the other way (tests/graph_ir/test_ctc.py). A batch entry whose sequence_length is 0,
or (with ignore_longer_outputs_than_inputs) whose labels are longer than it, gets loss 0 and gradient 0; one without
a valid path gets loss inf and gradient y (TF's "No valid path found")."""

from __future__ import annotations

import numpy as np

from graph_ir.executors.tf_float32 import eigen_exp, eigen_sum, libm_log1pf
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node

_F32 = np.float32


def _f32(fn, x: np.ndarray) -> np.ndarray:
    """A float32 libm function (expf, logf) correctly rounded: in float64, rounded once to float32."""
    return fn(x.astype(np.float64)).astype(_F32)


def _unary(fn, x: np.ndarray) -> np.ndarray:
    """exp / log in x's dtype (float32 through _f32, float64 as is)."""
    return _f32(fn, x) if x.dtype == _F32 else fn(x)


def _lse(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TF's LogSumExp(a, b): a log 0 (-inf) passes the other through; else max + log1pf(expf(min - max))."""
    first = a > b
    big, small = np.where(first, a, b), np.where(first, b, a)
    summed = big + libm_log1pf(_f32(np.exp, (small - big).astype(_F32))).astype(big.dtype)
    return np.where(a == -np.inf, b, np.where(b == -np.inf, a, summed))


def _fail(node: Node, field: str, why: str) -> GraphError:
    return GraphError(f"{node.type} {node.name!r}: input {field!r} {why}")


def _sparse_rows(node: Node, indices: np.ndarray, values: np.ndarray, batch: int) -> list[np.ndarray]:
    """Each batch entry's labels, after the kernel's checks of the SparseTensor (shape [batch, max position + 1],
    indices in bounds and in strictly increasing row-major order: SparseTensor::IndicesValid)."""
    if indices.ndim != 2 or indices.shape[1] != 2:
        raise _fail(node, "labels_indices", f"must have shape [n, 2], got {list(indices.shape)}")
    if values.ndim != 1 or values.shape[0] != indices.shape[0]:
        raise _fail(node, "labels_values", f"must be a vector as long as labels_indices ({indices.shape[0]} rows), "
                                           f"got shape {list(values.shape)}")
    if batch == 0:
        raise _fail(node, "inputs", "must have batch_size > 0 (TF's check), got 0")
    ix = indices.astype(np.int64)
    width = int(ix[:, 1].max()) + 1 if len(ix) else 0
    outside = np.any((ix < 0) | (ix >= np.array([batch, width])), axis=1)
    prev, cur = ix[:-1], ix[1:]
    increasing = (cur[:, 0] > prev[:, 0]) | ((cur[:, 0] == prev[:, 0]) & (cur[:, 1] > prev[:, 1]))
    bad = outside | np.r_[False, ~increasing] if len(ix) else outside
    if bad.any():
        k = int(np.argmax(bad))
        why = (f"is out of bounds [{batch}, {width}] (batch, max position + 1)" if outside[k] else
               "is repeated" if np.array_equal(ix[k], ix[k - 1]) else "is out of order (row-major order needed)")
        raise _fail(node, "labels_indices", f"row {k} = {ix[k].tolist()} {why}: the label SparseTensor is not valid")
    cuts = np.searchsorted(ix[:, 0], np.arange(1, batch))
    return np.split(values.astype(np.int64), cuts)


def _label_sequences(node: Node, rows: list[np.ndarray], seq_len: np.ndarray, num_classes: int,
                     active: np.ndarray) -> list[np.ndarray]:
    """The label sequence l of each batch entry after TF's checks (PopulateLPrimes): not empty, repeats collapsed with
    preprocess_collapse_repeated, labels >= num_classes - 1 (blanks) only at the end, where they are dropped."""
    collapse = bool(node.attrs.get("preprocess_collapse_repeated", False))
    ignore = bool(node.attrs.get("ignore_longer_outputs_than_inputs", False))
    sequences = []
    for b, label in enumerate(rows):
        if label.size == 0:
            raise _fail(node, "labels_values", f"holds no label for batch entry {b} (TF: labels length is zero)")
        kept = label[np.r_[True, label[1:] != label[:-1]]] if collapse else label
        null = kept >= num_classes - 1
        if null.any() and not null[int(np.argmax(null)):].all():
            raise _fail(node, "labels_values", f"of batch entry {b} has a label < num_classes - 1 = "
                                               f"{num_classes - 1} after a blank (>= num_classes - 1): "
                                               f"{label.tolist()}")
        seq = kept[~null]
        if np.any(seq < 0):
            raise _fail(node, "labels_values", f"of batch entry {b} must be non-negative, got {label.tolist()}")
        if not ignore and label.size > seq_len[b]:
            raise _fail(node, "sequence_length", f"is {seq_len[b]} for batch entry {b}: not enough time for its "
                                                 f"{label.size} labels (set ignore_longer_outputs_than_inputs to "
                                                 "give it loss 0 instead)")
        if active[b] and seq.size == 0:
            raise _fail(node, "labels_values", f"of batch entry {b} are all blanks (>= num_classes - 1): "
                                               f"{label.tolist()}; TF's kernel reads out of bounds on them")
        sequences.append(seq)
    return sequences


def _forward(logy: np.ndarray, lp: np.ndarray, lens: np.ndarray, sizes: np.ndarray, merge: bool) -> np.ndarray:
    """log alpha [T, A, U] (Eq. 7.5, 7.6, 7.9), pruned as TF prunes it."""
    steps, _, width = logy.shape
    u = np.arange(width)
    blank = lp == lp[:, :1]  # l' starts with the blank
    stay = merge | blank
    skip = ~blank & (u >= 2) & ~(merge & (lp == np.roll(lp, 2, axis=1)))
    alpha = np.full(logy.shape, -np.inf, logy.dtype)
    alpha[0, :, :2] = logy[0, :, :2]
    none = np.full((len(lp), 2), -np.inf, logy.dtype)
    for t in range(1, steps):
        prev = alpha[t - 1]
        total = _lse(np.where(stay, prev, -np.inf), np.c_[none[:, :1], prev[:, :-1]])
        total = _lse(total, np.where(skip, np.c_[none, prev[:, :-2]], -np.inf))
        low, high = np.maximum(0, sizes - 2 * (lens - t)), np.minimum(sizes, 2 * (t + 1))
        keep = (u >= low[:, None]) & (u < high[:, None]) & (t < lens)[:, None]
        alpha[t] = np.where(keep, logy[t] + total, -np.inf)
    return alpha


def _backward(logy: np.ndarray, lp: np.ndarray, lens: np.ndarray, sizes: np.ndarray, merge: bool) -> np.ndarray:
    """log beta [T, A, U] (Eq. 7.13, 7.15), pruned as TF prunes it; entry a starts at its own last step."""
    steps, count, width = logy.shape
    u = np.arange(width)
    blank = lp == lp[:, :1]
    stay = merge | blank
    skip = ~blank & (u + 2 < sizes[:, None]) & ~(merge & (lp == np.roll(lp, -2, axis=1)))
    beta = np.full(logy.shape, -np.inf, logy.dtype)
    beta[lens - 1, np.arange(count), sizes - 2] = 0
    beta[lens - 1, np.arange(count), sizes - 1] = 0
    none = np.full((count, 2), -np.inf, logy.dtype)
    for t in range(steps - 2, -1, -1):
        ahead = beta[t + 1] + logy[t + 1]
        total = _lse(np.where(stay, ahead, -np.inf), np.c_[ahead[:, 1:], none[:, :1]])
        total = _lse(total, np.where(skip, np.c_[ahead[:, 2:], none], -np.inf))
        low, high = np.maximum(0, sizes - 2 * (lens - t)), np.minimum(sizes, 2 * (t + 1))
        keep = (u >= low[:, None]) & (u < high[:, None]) & (t < lens - 1)[:, None]
        beta[t] = np.where(keep, total, beta[t])
    return beta


def _ctc_loss(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    x, indices, values, seq_len = args
    if x.ndim != 3:
        raise _fail(node, "inputs", f"must have rank 3 [max_time, batch, num_classes], got {list(x.shape)}")
    steps, batch, num_classes = x.shape
    seq_len = seq_len.astype(np.int64)
    if seq_len.shape != (batch,):
        raise _fail(node, "sequence_length", f"must have shape [batch] = [{batch}], got {list(seq_len.shape)}")
    rows = _sparse_rows(node, indices, values, batch)
    outside = np.flatnonzero((seq_len > steps) | (seq_len < 0))
    if outside.size:
        b = outside[0]
        raise _fail(node, "sequence_length", f"is {seq_len[b]} for batch entry {b}, not in [0, max_time = {steps}]")
    ignore = bool(node.attrs.get("ignore_longer_outputs_than_inputs", False))
    longer = np.array([r.size for r in rows]) > seq_len
    active = (seq_len > 0) & ~(ignore & longer)
    sequences = _label_sequences(node, rows, seq_len, num_classes, active)
    loss, grad = np.zeros(batch, x.dtype), np.zeros(x.shape, x.dtype)
    picked = np.flatnonzero(active)
    if not picked.size:
        return [loss, grad]
    with np.errstate(all="ignore"):
        xs = x[:, picked]
        shifted = xs - xs.max(axis=2, keepdims=True)
        if x.dtype == _F32:  # as Eigen computes them (graph_ir/executors/tf_float32.py)
            e = eigen_exp(shifted)
            y = e / eigen_sum(e)[..., None]
        else:
            e = np.exp(shifted)
            y = e / e.sum(axis=2, keepdims=True)
        lens, sizes = seq_len[picked], np.array([2 * sequences[b].size + 1 for b in picked])
        lp = np.full((picked.size, int(sizes.max())), num_classes - 1, np.int64)
        for a, b in enumerate(picked):
            lp[a, 1:sizes[a]:2] = sequences[b]
        logy = np.take_along_axis(_unary(np.log, y), np.broadcast_to(lp, (steps, *lp.shape)), axis=2)
        merge = bool(node.attrs.get("ctc_merge_repeated", True))
        alpha, beta = _forward(logy, lp, lens, sizes, merge), _backward(logy, lp, lens, sizes, merge)
        paths = alpha + beta
        log_p = np.full(picked.size, -np.inf, x.dtype)
        for u in range(lp.shape[1]):
            log_p = _lse(log_p, paths[0, :, u])
        occupied = np.full(y.shape, -np.inf, x.dtype)
        entries = np.arange(picked.size)
        for u in range(lp.shape[1]):
            occupied[:, entries, lp[:, u]] = _lse(occupied[:, entries, lp[:, u]], paths[:, :, u])
        negative = _f32(np.exp, (occupied - log_p[None, :, None]).astype(_F32)).astype(x.dtype)
        dy = np.where(np.isneginf(log_p)[None, :, None], y, y - negative)
    grad[:, picked] = np.where((np.arange(steps)[:, None] < lens)[:, :, None], dy, 0)
    loss[picked] = -log_p
    return [loss, grad]


def _workspace(node: Node) -> int:
    """Bytes held while it runs, an upper bound: the softmax's arrays, log y and the occupancies with their float64
    roundings (16 [T, B, C] of the dtype), log alpha, log beta, their sum and log y at the extended labels, with
    temporaries (6 [T, B, U]; U = 2L + 1 where an entry that runs has L <= min(n labels, T): longer ones are refused
    or skipped)."""
    steps, batch, classes = node.output_descs[1].shape
    n = node.input_descs()[1].shape[0]
    labels = min(n, steps) if n >= 0 else steps
    return node.output_descs[1].dtype.itemsize * steps * batch * (16 * classes + 6 * (2 * labels + 1))


EXECUTORS = {"CTCLoss": _ctc_loss}
WORKSPACE = {"CTCLoss": _workspace}
