"""The TensorList family's executors (prototypes: graph_ir/opset/tensorlist.py), following TF's list kernels
(tensorflow/core/kernels/list_kernels.h and list_kernels.cc, tensorflow/core/kernels/tensor_list.h): a list is an
immutable value (every op that changes one returns a new list and leaves its input as it was, as TF's
copy-on-write TensorList behaves); an unset element (TensorListReserve) reads as zeros; the same errors as TF's
kernels (index out of range, popping an empty list, pushing into a full one, an element of the wrong dtype or shape),
each a GraphError naming the node.

Memory: a list's elements are its own read-only arrays; a list may hold at most MAX_LIST_BYTES of elements (set
ones, and unset ones counted at the element size they read as) and MAX_LIST_LENGTH elements, else a GraphError
naming the node, so a run's memory stays in proportion to what the graph asks for."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graph_ir.errors import GraphError
from graph_ir.executors.common import Executor
from graph_ir.nodes import Node

MAX_LIST_BYTES = 256 * 2**20
MAX_LIST_LENGTH = 2**24


@dataclass(frozen=True)
class TensorList:
    """A TF TensorList value: element dtype, the element shape it was declared with (None: unknown rank; -1: an
    unknown dim), its elements (None: unset, reads as zeros) and its bound (-1: none); set_bytes and unset count its
    set elements' bytes and its unset elements (kept as it changes, so that bounding a list costs O(1))."""

    element_dtype: np.dtype
    element_shape: tuple[int, ...] | None
    items: tuple[np.ndarray | None, ...]
    max_num_elements: int = -1
    set_bytes: int = 0
    unset: int = 0

    def changed(self, items: tuple[np.ndarray | None, ...], added=(), removed=()) -> TensorList:
        """The list holding `items`: `added` and `removed` are the elements (None: unset) that came and went."""
        set_bytes = self.set_bytes + sum(x.nbytes for x in added if x is not None) - \
            sum(x.nbytes for x in removed if x is not None)
        unset = self.unset + sum(x is None for x in added) - sum(x is None for x in removed)
        return TensorList(self.element_dtype, self.element_shape, items, self.max_num_elements, set_bytes, unset)

    def __repr__(self) -> str:
        return f"<TensorList {np.dtype(self.element_dtype).name} {self.element_shape}: {len(self.items)} elements>"


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


def _frozen(x: np.ndarray) -> np.ndarray:
    out = np.array(x, copy=True)
    out.flags.writeable = False
    return out


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


def _bounded(node: Node, lst: TensorList, item_bytes: int | None = None) -> TensorList:
    """The list, after checking its length and bytes against the module's bounds (an unset element counted at the
    size of the elements, `item_bytes` when known, else of the declared element shape, else of one element)."""
    if len(lst.items) > MAX_LIST_LENGTH:
        raise GraphError(f"{node.type} {node.name!r}: the list would hold {len(lst.items)} elements, above graph_ir's "
                         f"bound of {MAX_LIST_LENGTH}")
    itemsize = np.dtype(lst.element_dtype).itemsize
    if item_bytes is None:
        declared = lst.element_shape
        item_bytes = int(np.prod(declared)) * itemsize if declared is not None and min(declared, default=0) >= 0 \
            else itemsize
    total = lst.set_bytes + lst.unset * item_bytes
    if total > MAX_LIST_BYTES:
        raise GraphError(f"{node.type} {node.name!r}: the list would hold {total} bytes of elements, above "
                         f"graph_ir's bound of {MAX_LIST_BYTES} bytes")
    return lst


def _read_shape(node: Node) -> tuple[int, ...]:
    """The static shape an element read by `node` has (its output desc)."""
    return node.output_descs[-1].shape if node.type != "TensorListStack" else node.output_descs[0].shape[1:]


def _item(node: Node, lst: TensorList, k: int) -> np.ndarray:
    """Element k (zeros when unset), checked against the node's static element shape."""
    shape = _read_shape(node)
    item = lst.items[k]
    if item is None:
        if not _compatible(shape, lst.element_shape):
            raise GraphError(f"{node.type} {node.name!r}: element shape {list(shape)} is incompatible with the list's "
                             f"{lst.element_shape}")
        return np.zeros(shape, dtype=lst.element_dtype)
    if item.shape != shape:
        raise GraphError(f"{node.type} {node.name!r}: element {k} has shape {list(item.shape)}, but the node reads "
                         f"elements of shape {list(shape)}")
    return np.array(item, copy=True)


def _index(node: Node, lst: TensorList, index: np.ndarray, verb: str) -> int:
    k = int(np.asarray(index).reshape(-1)[0])
    if not 0 <= k < len(lst.items):
        raise GraphError(f"{node.type} {node.name!r}: trying to {verb} element {k} in a list with {len(lst.items)} "
                         "elements")
    return k


def _empty(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    shape, bound = args
    bound = int(np.asarray(bound).reshape(-1)[0])
    if bound < -1:
        raise GraphError(f"EmptyTensorList {node.name!r}: max_num_elements must be >= -1, got {bound}")
    return [wrap(TensorList(np.dtype(node.attrs["element_dtype"].numpy), _shape_from(shape), (), bound))]


def _reserve(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    shape, count = args
    count = int(np.asarray(count).reshape(-1)[0])
    if count < 0:
        raise GraphError(f"TensorListReserve {node.name!r}: the num_elements to reserve must be a non negative "
                         f"number, but got {count}")
    if count > MAX_LIST_LENGTH:
        raise GraphError(f"TensorListReserve {node.name!r}: {count} elements, above graph_ir's bound of "
                         f"{MAX_LIST_LENGTH}")
    lst = TensorList(np.dtype(node.attrs["element_dtype"].numpy), _shape_from(shape), (None,) * count, unset=count)
    return [wrap(_bounded(node, lst))]


def _from_tensor(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    tensor, shape = args
    lst = TensorList(tensor.dtype, _shape_from(shape), ())
    _check_element(node, lst, tensor[0] if len(tensor) else np.empty(tensor.shape[1:]), "an element of 'tensor'")
    items = tuple(_frozen(x) for x in tensor)
    return [wrap(_bounded(node, lst.changed(items, added=items)))]


def _get_item(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    return [_item(node, lst, _index(node, lst, args[1], "access"))]


def _set_item(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst, index, item = unwrap(node, args[0]), args[1], args[2]
    _check_dtype(node, lst)
    k = _index(node, lst, index, "modify")
    _check_element(node, lst, item, "input 'item'")
    items = list(lst.items)
    old, items[k] = items[k], _frozen(item)
    return [wrap(_bounded(node, lst.changed(tuple(items), added=[items[k]], removed=[old]), items[k].nbytes))]


def _push_back(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst, tensor = unwrap(node, args[0]), args[1]
    _check_dtype(node, lst)
    _check_element(node, lst, tensor, "input 'tensor'")
    if 0 <= lst.max_num_elements <= len(lst.items):
        raise GraphError(f"TensorListPushBack {node.name!r}: tried to push item into a full list; list size: "
                         f"{len(lst.items)}, max_num_elements: {lst.max_num_elements}")
    item = _frozen(tensor)
    return [wrap(_bounded(node, lst.changed((*lst.items, item), added=[item]), item.nbytes))]


def _pop_back(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    if not lst.items:
        raise GraphError(f"TensorListPopBack {node.name!r}: trying to pop from an empty list")
    return [wrap(lst.changed(lst.items[:-1], removed=lst.items[-1:])), _item(node, lst, len(lst.items) - 1)]


def _stack(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    lst = unwrap(node, args[0])
    _check_dtype(node, lst)
    want = node.attrs["num_elements"]
    if len(lst.items) != want:
        raise GraphError(f"TensorListStack {node.name!r}: operation expected a list with {want} elements but got a "
                         f"list with {len(lst.items)} elements")
    out = np.empty(node.output_descs[0].shape, dtype=lst.element_dtype)
    for k in range(want):
        out[k] = _item(node, lst, k)
    return [out]


def _length(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    return [np.array(len(unwrap(node, args[0]).items), dtype=np.int32)]


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
