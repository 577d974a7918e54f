"""Einsum of two operands as TF's EinsumOp computes it (tensorflow/core/kernels/linalg/einsum_op_impl.h): each
operand's indices sorted into batch (in both operands and the output), free (in one operand and the output) and
contracted (in both operands only), an index in one operand only summed out first, then one batched matrix product
[batch, free1, contracted] x [batch, contracted, free2] on BLAS, reshaped and transposed to the output's order. An
equation this does not cover (a repeated index in one term, more or fewer than two operands) runs in np.einsum."""

from __future__ import annotations

import math

import numpy as np


def _sorted_axes(term: str, order: str) -> list[int]:
    return [term.index(c) for c in order]


def einsum_product(terms: list[str], out: str, x1: np.ndarray, x2: np.ndarray) -> np.ndarray | None:
    """x1, x2 contracted by terms -> out as one batched matmul; None where the equation is not such a product."""
    (t1, t2) = terms
    if len(set(t1)) != len(t1) or len(set(t2)) != len(t2) or len(set(out)) != len(out):
        return None
    # An index in one operand only (and not the output) is summed out of it first.
    for k, (term, other) in enumerate(((t1, t2), (t2, t1))):
        lonely = [c for c in term if c not in other and c not in out]
        if lonely:
            x = (x1, x2)[k].sum(axis=tuple(term.index(c) for c in lonely))
            term = "".join(c for c in term if c not in lonely)
            x1, t1 = (x, term) if k == 0 else (x1, t1)
            x2, t2 = (x, term) if k == 1 else (x2, t2)
    batch = [c for c in t1 if c in t2 and c in out]
    contracted = [c for c in t1 if c in t2 and c not in out]
    free1 = [c for c in t1 if c not in t2]
    free2 = [c for c in t2 if c not in t1]
    if sorted(out) != sorted(batch + free1 + free2):
        return None
    size = dict(zip(t1, x1.shape)) | dict(zip(t2, x2.shape))
    a = np.transpose(x1, _sorted_axes(t1, "".join(batch + free1 + contracted)))
    b = np.transpose(x2, _sorted_axes(t2, "".join(batch + contracted + free2)))
    dims = [math.prod(size[c] for c in group) for group in (batch, free1, contracted, free2)]
    a = a.reshape(dims[0], dims[1], dims[2])
    b = b.reshape(dims[0], dims[2], dims[3])
    y = np.matmul(a, b).reshape([size[c] for c in batch + free1 + free2])
    return np.transpose(y, _sorted_axes("".join(batch + free1 + free2), out))
