"""Integer tensors of a graph as linear forms over the values computed in the step: what lets a slice, a slice's
gradient or a Pad at computed positions keep a static shape. Each component of an integer tensor is a form
{leaf: coefficient, CONSTANT: constant}, the leaves being (node name, output, component) of values known only at run
time. Followed through Const, Pack, Reshape, ConcatV2 (row-major), Identity, integer Casts, Add/AddV2, Sub and Mul
by a constant; any other node is a leaf. Two forms whose leaves cancel differ by a constant (`difference`): the size
`end - begin` of a slice at a computed begin, the sum `before + after` of the paddings TF's SliceGrad computes
(tensorflow/python/ops/array_grad.py, _SliceGrad: begin and shape(x) - size - begin)."""

from __future__ import annotations

import math

import numpy as np

from graph_ir.ir.nodes import Handle
from graph_ir.ir.verify import known_or_none

Form = dict  # {leaf key or CONSTANT: coefficient}: one component of an integer tensor
CONSTANT = 1
_DEPTH = 32  # how deep a form is followed before its node counts as a leaf
_INTEGERS = ("int32", "int64")


def _length(h: Handle) -> int:
    return 1 if h.shape in ((), (1,)) else math.prod(h.shape)


def _leaf(h: Handle) -> list[Form]:
    return [{(h.node.name, h.index, k): 1} for k in range(_length(h))]


def linear(h: Handle, depth: int = 0, probed: bool = False) -> list[Form]:
    """Each component of the integer tensor `h` (row-major) as a linear form over the values computed in the step
    (leaves: (node name, output, component)) and the constant 1. `probed`: a value known at this probe size
    (graph_ir/dynamic: a Shape of an argument with unknown dims) counts as a constant too, for a shape that holds at
    each size (Pad's); a slice's offsets must not take it (they would be baked into Consts)."""
    node, known = h.node, known_or_none(h) if probed else None
    if node.type == "Const":
        known = np.asarray(node.attrs["value"])
    if known is not None:
        return [{CONSTANT: int(v)} for v in np.asarray(known).reshape(-1)]
    ins = [i for i in node.inputs if i is not None]
    if depth >= _DEPTH or h.dtype.name not in _INTEGERS:
        return _leaf(h)
    if node.type in ("Identity", "Reshape") or (node.type == "Cast" and ins[0].dtype.name in _INTEGERS):
        return linear(ins[0], depth + 1, probed)
    if node.type == "Pack" and len({i.shape for i in ins}) == 1:
        axis = node.attrs["axis"] % len(h.shape)
        return list(np.stack([_array(i, depth, probed) for i in ins], axis=axis).reshape(-1))
    if node.type == "ConcatV2" and ins[-1].node.type == "Const" and all(i.shape for i in ins[:-1]):
        axis = int(np.asarray(ins[-1].node.attrs["value"]).reshape(-1)[0]) % len(h.shape)
        return list(np.concatenate([_array(i, depth, probed) for i in ins[:-1]], axis=axis).reshape(-1))
    if node.type in ("Add", "AddV2", "Sub", "Mul") and len(ins) == 2:
        a, b = linear(ins[0], depth + 1, probed), linear(ins[1], depth + 1, probed)
        if len(a) != len(b) and 1 not in (len(a), len(b)):
            return _leaf(h)
        n = max(len(a), len(b))
        a, b = (a * n if len(a) == 1 else a), (b * n if len(b) == 1 else b)
        if node.type == "Mul":
            if all(set(f) <= {CONSTANT} for f in b):
                return [{k: v * g.get(CONSTANT, 0) for k, v in f.items()} for f, g in zip(a, b)]
            if all(set(f) <= {CONSTANT} for f in a):
                return [{k: v * f.get(CONSTANT, 0) for k, v in g.items()} for f, g in zip(a, b)]
            return _leaf(h)
        sign = -1 if node.type == "Sub" else 1
        return [{k: f.get(k, 0) + sign * g.get(k, 0) for k in {*f, *g}} for f, g in zip(a, b)]
    return _leaf(h)


def _array(h: Handle, depth: int, probed: bool) -> np.ndarray:
    """The forms of `h` as an object array of its shape (for Pack and ConcatV2)."""
    forms = np.empty(math.prod(h.shape), object)
    forms[:] = linear(h, depth + 1, probed)
    return forms.reshape(h.shape)


def difference(end: Form, begin: Form) -> int | None:
    """end - begin when it is a constant, else None."""
    keys = {*end, *begin} - {CONSTANT}
    if any(end.get(k, 0) != begin.get(k, 0) for k in keys):
        return None
    return end.get(CONSTANT, 0) - begin.get(CONSTANT, 0)


def negated(form: Form) -> Form:
    """-form."""
    return {k: -v for k, v in form.items()}
