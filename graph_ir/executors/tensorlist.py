"""The TensorList family's executors (prototypes: graph_ir/opset/tensorlist.py), following TF's list kernels
(tensorflow/core/kernels/list_kernels.h and list_kernels.cc, tensorflow/core/kernels/tensor_list.h): a list is an
immutable value (every op that changes one returns a new list and leaves its input as it was, as TF's
copy-on-write TensorList behaves); an unset element (TensorListReserve) reads as zeros; the same errors as TF's
kernels (index out of range, popping an empty list, pushing into a full one, an element of the wrong dtype or shape),
each a GraphError naming the node.

Storage, memory and cost: graph_ir/executors/list_store.py (one array of elements shared by a list's successive
values, counted at its real size against a per-list and an all-lists bound; a push, SetItem or PopBack costs what it
writes; TensorListFromTensor and TensorListStack are one array copy)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from graph_ir.executors import list_store
from graph_ir.executors.common import Executor
from graph_ir.executors.list_store import Store, Version
from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node


@dataclass(frozen=True)
class TensorList:
    """A TF TensorList value: element dtype, the element shape it was declared with (None: unknown rank; -1: an
    unknown dim), its length, its bound (-1: none) and its elements (a list_store.Version; unset ones read as
    zeros)."""

    element_dtype: np.dtype
    element_shape: tuple[int, ...] | None
    length: int
    max_num_elements: int = -1
    version: Version = field(default_factory=lambda: Version(Store()))

    def changed(self, length: int, version: Version) -> TensorList:
        return TensorList(self.element_dtype, self.element_shape, length, self.max_num_elements, version)

    def __repr__(self) -> str:
        return f"<TensorList {np.dtype(self.element_dtype).name} {self.element_shape}: {self.length} elements>"


def wrap(value: TensorList) -> np.ndarray:
    """A variant tensor: the list in a 0-d object array."""
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def unwrap(node: Node, array: np.ndarray, port: str = "input_handle") -> TensorList:
    value = array[()] if isinstance(array, np.ndarray) and array.dtype == object and array.shape == () else None
    if not isinstance(value, TensorList):
        raise GraphError(f"{node.type} {node.name!r}: input {port!r} is not a TensorList value, got "
                         f"{type(value if value is not None else array).__name__}")
    return value


def _shape_from(array: np.ndarray) -> tuple[int, ...] | None:
    """TF's element_shape input: -1 (a scalar) is an unknown rank, else the dims (-1: unknown)."""
    flat = [int(d) for d in np.asarray(array).reshape(-1)]
    return None if np.asarray(array).ndim == 0 and flat == [-1] else tuple(flat)


def _compatible(shape: tuple[int, ...], partial: tuple[int, ...] | None) -> bool:
    return partial is None or (len(shape) == len(partial) and all(p < 0 or p == d for d, p in zip(shape, partial)))


def _check_dtype(node: Node, lst: TensorList) -> None:
    want = np.dtype(node.attrs["element_dtype"].numpy)
    if np.dtype(lst.element_dtype) != want:
        raise GraphError(f"{node.type} {node.name!r}: invalid data types; op elements {want.name} but list elements "
                         f"{np.dtype(lst.element_dtype).name}")


def _check_element(node: Node, lst: TensorList, item: np.ndarray, what: str) -> None:
    if not _compatible(item.shape, lst.element_shape):
        raise GraphError(f"{node.type} {node.name!r}: {what} has shape {list(item.shape)}, incompatible with the "
                         f"list's element shape {lst.element_shape}")


def _read_shape(node: Node) -> tuple[int, ...]:
    """The static shape an element read by `node` has (its output desc)."""
    return node.output_descs[-1].shape if node.type != "TensorListStack" else node.output_descs[0].shape[1:]


def _zeros(node: Node, lst: TensorList, shape: tuple[int, ...]) -> np.ndarray:
    """What unset elements read as: zeros of the node's element shape, if the list's element shape allows it."""
    if not _compatible(shape, lst.element_shape):
        raise GraphError(f"{node.type} {node.name!r}: element shape {list(shape)} is incompatible with the list's "
                         f"{lst.element_shape}")
    return np.zeros(shape, dtype=lst.element_dtype)


def _item(node: Node, lst: TensorList, k: int, item: np.ndarray | None = None) -> np.ndarray:
    """Element k (zeros when unset), checked against the node's static element shape (`item`: element k as read)."""
    shape = _read_shape(node)
    item = list_store.read(node, lst.version, k) if item is None else item
    if item is None:
        return _zeros(node, lst, shape)
    if item.shape != shape:
        raise GraphError(f"{node.type} {node.name!r}: element {k} has shape {list(item.shape)}, but the node reads "
                         f"elements of shape {list(shape)}")
    return item


def _index(node: Node, lst: TensorList, index: np.ndarray, verb: str) -> int:
    k = int(np.asarray(index).reshape(-1)[0])
    if not 0 <= k < lst.length:
        raise GraphError(f"{node.type} {node.name!r}: trying to {verb} element {k} in a list with {lst.length} "
                         "elements")
    return k


def _empty(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    shape, bound = args
    bound = int(np.asarray(bound).reshape(-1)[0])
    if bound < -1:
        raise GraphError(f"EmptyTensorList {node.name!r}: max_num_elements must be >= -1, got {bound}")
    return [wrap(TensorList(np.dtype(node.attrs["element_dtype"].numpy), _shape_from(shape), 0, bound))]


def _reserve(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    shape, count = args
    count = int(np.asarray(count).reshape(-1)[0])
    if count < 0:
        raise GraphError(f"TensorListReserve {node.name!r}: the num_elements to reserve must be a non negative "
                         f"number, but got {count}")
    dtype, declared = np.dtype(node.attrs["element_dtype"].numpy), _shape_from(shape)
    # Unset elements are counted at the declared element size once set (one element when it is not defined).
    known = declared is not None and min(declared, default=0) >= 0
    list_store.check_unset(node, count, (int(np.prod(declared)) if known else 1) * dtype.itemsize)
    return [wrap(TensorList(dtype, declared, count))]


def _from_tensor(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    tensor, shape = args
    lst = TensorList(tensor.dtype, _shape_from(shape), len(tensor))
    _check_element(node, lst, np.empty(tensor.shape[1:]), "an element of 'tensor'")
    if len(tensor) > list_store.MAX_LIST_LENGTH:
        raise GraphError(f"TensorListFromTensor {node.name!r}: {len(tensor)} elements, above graph_ir's bound of "
                         f"{list_store.MAX_LIST_LENGTH}")
    return [wrap(lst.changed(len(tensor), list_store.from_array(node, tensor)))]


def _get_item(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    return [_item(node, lst, _index(node, lst, args[1], "access"))]


def _set_item(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst, index, item = unwrap(node, args[0]), args[1], args[2]
    _check_dtype(node, lst)
    k = _index(node, lst, index, "modify")
    _check_element(node, lst, item, "input 'item'")
    return [wrap(lst.changed(lst.length, list_store.write(node, lst.version, lst.length, k, item)))]


def _push_back(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst, tensor = unwrap(node, args[0]), args[1]
    _check_dtype(node, lst)
    _check_element(node, lst, tensor, "input 'tensor'")
    if 0 <= lst.max_num_elements <= lst.length:
        raise GraphError(f"TensorListPushBack {node.name!r}: tried to push item into a full list; list size: "
                         f"{lst.length}, max_num_elements: {lst.max_num_elements}")
    if lst.length >= list_store.MAX_LIST_LENGTH:
        raise GraphError(f"TensorListPushBack {node.name!r}: the list would hold {lst.length + 1} elements, above "
                         f"graph_ir's bound of {list_store.MAX_LIST_LENGTH}")
    n = lst.length + 1
    return [wrap(lst.changed(n, list_store.write(node, lst.version, n, n - 1, tensor, appends=True,
                                                         hint=lst.max_num_elements)))]


def _pop_back(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    if not lst.length:
        raise GraphError(f"TensorListPopBack {node.name!r}: trying to pop from an empty list")
    k = lst.length - 1
    stored = list_store.read(node, lst.version, k)  # one copy: the output, and what the older value keeps
    item = _item(node, lst, k, stored)
    return [wrap(lst.changed(k, list_store.write(node, lst.version, k, k, None, saved=stored))), item]


def _stack(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    want = node.output_descs[0].shape[0]  # num_elements, or the list's length where the graph knew it
    if lst.length != want:
        raise GraphError(f"TensorListStack {node.name!r}: operation expected a list with {want} elements but got a "
                         f"list with {lst.length} elements")
    store, shape = list_store.current(node, lst.version), node.output_descs[0].shape
    data = store.data
    if data is None:  # nothing set yet: every element reads as zeros, checked once (TF too returns at once)
        if want:
            _zeros(node, lst, shape[1:])
        return [np.zeros(shape, dtype=lst.element_dtype)]
    if data.dtype == object:  # elements of several shapes: one by one
        out = np.empty(shape, dtype=lst.element_dtype)
        for k in range(want):
            out[k] = _item(node, lst, k)
        return [out]
    held = min(want, len(data))
    is_set = store.is_set[:held]
    if data.shape[1:] != shape[1:] and is_set.any():
        _item(node, lst, int(np.argmax(is_set)))  # the first set element: refused for its shape
    if held < want or not is_set.all():
        _zeros(node, lst, shape[1:])  # unset elements read as zeros of the node's shape, if the list allows it
    out = np.zeros(shape, dtype=lst.element_dtype)
    out[:held] = data[:held]  # unset elements are zeros in the store
    return [out]


def _length(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.array(unwrap(node, args[0]).length, dtype=np.int32)]


EXECUTORS: dict[str, Executor] = {
    "EmptyTensorList": _empty,
    "TensorListReserve": _reserve,
    "TensorListFromTensor": _from_tensor,
    "TensorListGetItem": _get_item,
    "TensorListSetItem": _set_item,
    "TensorListPushBack": _push_back,
    "TensorListPopBack": _pop_back,
    "TensorListStack": _stack,
    "TensorListLength": _length,
}
