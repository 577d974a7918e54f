"""The storage behind TensorList values (graph_ir/executors/tensorlist.py): one array of elements that successive
list values share, so that a push or SetItem costs what it writes, not the list's length, while every list value
keeps TF's value semantics (an op returns a new list and its input stays as it was).

- A Store holds the elements of one family of list values: `data`, an array of `capacity` elements of one shape
  (dense) or, once elements of different shapes are set, an object array of per-element arrays; `is_set` flags the
  set elements (an unset one, from TensorListReserve, reads as zeros).
- A Version is one list value's view of a store, as in Baker's persistent arrays (H. G. Baker, "Shallow binding
  makes functional arrays fast", 1991): the newest version reads the store itself; an older one holds the element
  its successor overwrote. Writing through the newest version writes the store in place (amortized O(1), the store
  doubles when full); reading or writing an older version first moves the store back to it (one element per
  version in between), or, more than MAX_REROOT versions back, gives it a copy of its own.
- Memory: a store is counted at its real size (its arrays, and an array object per element in the object form),
  against MAX_LIST_BYTES for one list and MAX_LIVE_LIST_BYTES for all lists alive in the process together, before
  it allocates; a GraphError names the node. The copying and moving back beyond what an op writes is added to WORK,
  which a While charges to its run's work budget (graph_ir/executors/control.py).
"""

from __future__ import annotations

import numpy as np

from graph_ir.ir.errors import GraphError
from graph_ir.ir.nodes import Node

MAX_LIST_BYTES = 256 * 2**20
MAX_LIVE_LIST_BYTES = 256 * 2**20
MAX_LIST_LENGTH = 2**24
MAX_REROOT = 64  # versions a read or write moves the store back through before it copies instead
OBJECT_BYTES = 8 + 112  # an element in the object form: its pointer and its ndarray object (sys.getsizeof)
WORK = [0]  # elements copied or moved back beyond what the ops wrote (charged to the loops' work budget)
_LIVE = [0]  # bytes of all stores alive in the process
HINT_BYTES = 16 * 2**20  # the most a list's max_num_elements may make its first allocation hold
_BEYOND = object()  # a diff's element for a push: the slot was beyond the older version's length (nothing to restore)


class Store:
    """Elements (`data`, None until one is set), their set flags, the bytes counted for them, and the bytes of
    elements written in the object form."""

    __slots__ = ("bytes", "data", "is_set", "written")

    def __init__(self):
        self.data, self.is_set, self.bytes, self.written = None, None, 0, 0

    @property
    def capacity(self) -> int:
        return 0 if self.data is None else len(self.data)

    def __del__(self) -> None:
        _LIVE[0] -= self.bytes


class Version:
    """One list value's elements: the store's when `diff` is None, else `newer`'s with element k as it was:
    diff = (k, element, is_set, newer); element _BEYOND: k is beyond this version's length."""

    __slots__ = ("diff", "store")

    def __init__(self, store: Store):
        self.store, self.diff = store, None


def _store_bytes(as_objects: bool, capacity: int, element_bytes: int, written: int) -> int:
    """A store's bytes: per element a set flag and its bytes (dense) or its pointer (the object form, plus the
    `written` bytes of the elements' own arrays and objects)."""
    return capacity * (1 + 8) + written if as_objects else capacity * (1 + element_bytes)


def _account(node: Node, store: Store, new_bytes: int) -> None:
    """Counts `store` at `new_bytes` from now on, refusing what would pass the bounds (before it is allocated)."""
    if new_bytes > MAX_LIST_BYTES:
        raise GraphError(f"{node.type} {node.name!r}: the list would hold {new_bytes} bytes (its elements, their set "
                         f"flags and Python's objects), above graph_ir's bound of {MAX_LIST_BYTES} bytes per list")
    live = _LIVE[0] - store.bytes + new_bytes
    if live > MAX_LIVE_LIST_BYTES:
        raise GraphError(f"{node.type} {node.name!r}: the TensorLists alive would hold {live} bytes together, above "
                         f"graph_ir's bound of {MAX_LIVE_LIST_BYTES} bytes for all lists")
    _LIVE[0], store.bytes = live, new_bytes


def from_array(node: Node, tensor: np.ndarray) -> Version:
    """A store holding the elements tensor[0], tensor[1], ... (one copy)."""
    store = Store()
    _account(node, store, tensor.nbytes + len(tensor))
    store.data, store.is_set = np.array(tensor, copy=True, order="C"), np.ones(len(tensor), dtype=bool)
    return Version(store)


def check_unset(node: Node, count: int, item_bytes: int) -> None:
    """Refuses a reserved list whose `count` unset elements of `item_bytes` would pass the per-list bound once set."""
    if count > MAX_LIST_LENGTH:
        raise GraphError(f"{node.type} {node.name!r}: {count} elements, above graph_ir's bound of {MAX_LIST_LENGTH}")
    if count * (item_bytes + 1) > MAX_LIST_BYTES:
        raise GraphError(f"{node.type} {node.name!r}: the list would hold {count * (item_bytes + 1)} bytes (its "
                         f"elements and their set flags), above graph_ir's bound of {MAX_LIST_BYTES} bytes per list")


def _path(version: Version) -> list[Version]:
    path = []
    while version.diff is not None:
        path.append(version)
        version = version.diff[3]
    return path


def current(node: Node, version: Version) -> Store:
    """The store, holding `version`'s elements."""
    if version.diff is None:  # the newest version: the store as it is
        return version.store
    path = _path(version)
    store = path[-1].diff[3].store
    if len(path) > MAX_REROOT:  # a copy of its own, the store's elements as they were for it
        copy = Store()
        _account(node, copy, store.bytes)
        copy.written = store.written
        if store.data is not None:
            copy.data, copy.is_set = store.data.copy(), store.is_set.copy()
            WORK[0] += store.data.size
        for v in reversed(path):
            _restore(copy, *v.diff[:3])
        WORK[0] += len(path)
        version.store, version.diff = copy, None
        return copy
    for v in reversed(path):  # move the store back one version at a time
        k, old, old_set, newer = v.diff
        now, now_set = _element(store, k), k < store.capacity and bool(store.is_set[k])
        _restore(store, k, old, old_set)
        newer.diff = (k, now, now_set, v)
        WORK[0] += np.size(now) if now is not None else 1
        v.store, v.diff, newer.store = store, None, None
    return store


def _restore(store: Store, k: int, old: object, old_set: bool) -> None:
    """Slot k as a diff saved it (an unset element: zeros in the dense form)."""
    if old is not _BEYOND and k < store.capacity:
        store.data[k] = 0 if old is None and store.data.dtype != object else old
        store.is_set[k] = old_set


def _element(store: Store, k: int) -> object:
    data = store.data
    if data is None or k >= len(data):  # never set: unset
        return None
    return data[k] if data.dtype == object else data[k].copy()


def read(node: Node, version: Version, k: int) -> np.ndarray | None:
    """Element k of `version` (None: unset)."""
    store = version.store if version.diff is None else current(node, version)
    data = store.data
    if data is None or k >= len(data) or not store.is_set[k]:
        return None
    return np.array(data[k], copy=True)


def _fit(node: Node, store: Store, length: int, item: np.ndarray, hint: int) -> None:
    """Makes room in `store` for `length` elements, in a form that holds `item` (dense while the shapes agree); the
    first allocation holds `hint` elements (the list's max_num_elements) when they fit in HINT_BYTES."""
    data = store.data
    if data is not None and data.dtype != object and data.shape[1:] != item.shape:  # to the object form
        store.written += int(store.is_set.sum()) * (data[0].nbytes + OBJECT_BYTES)
        _account(node, store, _store_bytes(True, len(data), 0, store.written))
        objects = np.empty(len(data), dtype=object)
        for k in np.flatnonzero(store.is_set):
            objects[k] = data[k].copy()
        WORK[0] += data.size + len(data)
        store.data = data = objects
    if length <= store.capacity:
        return
    capacity = max(length, 2 * store.capacity, 4)
    if data is None and hint > capacity and hint * (item.nbytes + 1) <= HINT_BYTES:
        capacity = hint
    as_objects = data is not None and data.dtype == object
    _account(node, store, _store_bytes(as_objects, capacity, item.nbytes, store.written))
    # Unset elements read as zeros only within a reserved length, which the first allocation covers (zeros); the
    # slots a store grows by are pushed before any version reads them.
    make = np.zeros if data is None else np.empty
    grown = np.empty(capacity, dtype=object) if as_objects else make((capacity, *item.shape), dtype=item.dtype)
    flags = np.zeros(capacity, dtype=bool)
    if data is not None:
        grown[:len(data)], flags[:len(data)] = data, store.is_set
        WORK[0] += data.size
    store.data, store.is_set = grown, flags


def write(node: Node, version: Version, length: int, k: int, item: np.ndarray | None, appends: bool = False,
          hint: int = -1, saved: np.ndarray | None = None) -> Version:
    """The version after setting element k to `item` (None: left as it is, a pop past k), `length` elements long;
    `appends`: k is beyond `version`'s length (a push), so `version` needs nothing of slot k back. `version` keeps
    its elements (slot k saved for it; `saved`: a copy of set element k already made, never written, as graph_ir
    writes no intermediate value in place). `hint`: the elements the list may come to hold (_fit)."""
    store = version.store if version.diff is None else current(node, version)
    data = store.data
    if appends:
        old, old_set = _BEYOND, False
    elif saved is not None:
        old, old_set = saved, True
    else:
        old, old_set = _element(store, k), data is not None and k < len(data) and bool(store.is_set[k])
    if item is not None:
        if data is None or length > len(data) or data.dtype == object or data.shape[1:] != item.shape:
            _fit(node, store, length, item, hint)
        if store.data.dtype == object:
            store.written += item.nbytes + OBJECT_BYTES
            _account(node, store, _store_bytes(True, store.capacity, 0, store.written))
            item = np.array(item, copy=True)
            item.flags.writeable = False
        store.data[k], store.is_set[k] = item, True
    newer = Version(store)
    version.diff, version.store = (k, old, old_set, newer), None
    return newer
