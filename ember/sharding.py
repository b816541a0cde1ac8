"""``ember.sharding``: JAX's sharding names (``jax.sharding``) on ember's one CPU device.

ember runs on a single device, so every mesh has axes of size 1 and every sharding places
the whole array on that device: shards are the full array, ``shard_shape`` is the global
shape and every sharding is fully replicated. The objects still carry what JAX programs
inspect (mesh axis names and types, partition specs, memory kinds) and validate them as JAX
does, so sharded JAX code runs unchanged and reports the same shardings.

Example:
    >>> from ember.sharding import Mesh, NamedSharding, PartitionSpec as P
    >>> mesh = Mesh(np.array(ember.devices()).reshape(1, 1), ('x', 'y'))
    >>> NamedSharding(mesh, P('x', None)).shard_shape((4, 3))
    (4, 3)
"""

from __future__ import annotations

import collections
import enum
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.runtime.array import CpuDevice
from ember.runtime.array import devices as _devices

__all__ = ["AbstractMesh", "AxisType", "DuplicateSpecError", "Mesh", "NamedSharding",
           "PartitionSpec", "Sharding", "SingleDeviceSharding", "auto_axes", "explicit_axes",
           "get_abstract_mesh",
           "get_mesh", "make_single_device_sharding", "reshard", "set_mesh", "use_mesh",
           "use_abstract_mesh"]

_MEMORY_KINDS = ("device", "pinned_host", "unpinned_host")


class DuplicateSpecError(ValueError):
    """A partition spec maps one mesh axis to two array dimensions."""


# --------------------------------------------------------------------------- PartitionSpec


class _Unconstrained:
    """``PartitionSpec.UNCONSTRAINED``: the dimension's sharding is left to the compiler."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCONSTRAINED"

    def __reduce__(self):
        return (_unconstrained, ())


def _unconstrained():
    return UNCONSTRAINED


UNCONSTRAINED = _Unconstrained()


def _canonical_entry(entry: Any) -> Any:
    if isinstance(entry, list):
        entry = tuple(entry)
    if isinstance(entry, tuple) and len(entry) == 1:  # (P(('x',)) is P('x'), as in JAX)
        return entry[0]
    return entry


class PartitionSpec:
    """How each dimension of an array is split over mesh axes: one entry per leading
    dimension, each ``None`` (not split), a mesh axis name, a tuple of axis names (split over
    their product) or ``PartitionSpec.UNCONSTRAINED``. Dimensions past the entries are not
    split.

    Example:
        >>> P('x', None)
        P('x', None)
        >>> P(('x', 'y'))
        P(('x', 'y'),)
    """

    __slots__ = ("_partitions", "unreduced", "reduced")
    UNCONSTRAINED = UNCONSTRAINED

    def __init__(self, *partitions: Any, unreduced: Any = frozenset(),
                 reduced: Any = frozenset()):
        self._partitions = tuple(_canonical_entry(p) for p in partitions)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={set(sorted(v))!r}" for k, v in (
            ("unreduced", self.unreduced), ("reduced", self.reduced)) if v)
        body = repr(self._partitions)[1:-1]
        if extra and body.endswith(","):
            body = body[:-1]
        return f"P({body}{extra})"

    __str__ = __repr__

    def __len__(self) -> int:
        return len(self._partitions)

    def __getitem__(self, i):
        return self._partitions[i]

    def __iter__(self):
        return iter(self._partitions)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, PartitionSpec) and self._partitions == other._partitions
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __hash__(self) -> int:
        return hash((self._partitions, self.unreduced, self.reduced))

    def __add__(self, other: Any) -> PartitionSpec:
        other = other._partitions if isinstance(other, PartitionSpec) else tuple(other)
        return PartitionSpec(*self._partitions, *other, unreduced=self.unreduced,
                             reduced=self.reduced)

    def __radd__(self, other: Any) -> PartitionSpec:
        return PartitionSpec(*tuple(other), *self._partitions, unreduced=self.unreduced,
                             reduced=self.reduced)

    def index(self, value: Any) -> int:
        return self._partitions.index(value)

    def count(self, value: Any) -> int:
        return self._partitions.count(value)

    def __reduce__(self):
        return (_make_spec, (self._partitions, self.unreduced, self.reduced))

    def _normalized(self, ndim: int) -> PartitionSpec:
        """The spec padded with ``None`` to ``ndim`` entries."""
        return PartitionSpec(*self._partitions, *([None] * (ndim - len(self))),
                             unreduced=self.unreduced, reduced=self.reduced)


def _make_spec(partitions, unreduced, reduced):
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


def spec_axis_names(spec: PartitionSpec) -> list:
    """The mesh axis names ``spec`` uses, in order (with repeats)."""
    names = []
    for entry in spec:
        if entry is None or entry is UNCONSTRAINED:
            continue
        names.extend(entry if isinstance(entry, tuple) else (entry,))
    return names


# --------------------------------------------------------------------------- meshes


class AxisType(enum.Enum):
    """How a mesh axis is partitioned: by the compiler (``Auto``), in the types of values
    (``Explicit``) or by the user's code inside ``shard_map`` (``Manual``)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


def _axis_types(axis_types: Any, n: int, default: AxisType, api: str) -> tuple:
    if axis_types is None:
        return (default,) * n
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if len(axis_types) != n or not all(isinstance(t, AxisType) for t in axis_types):
        raise ValueError(f"{api}: axis_types must be a tuple of {n} jax.sharding.AxisType "
                         f"values, one per axis name, got {axis_types!r}")
    return axis_types


def _types_text(types: tuple) -> str:
    return f"axis_types=({', '.join(t.name for t in types)}{',' if len(types) == 1 else ''})"


class _MeshBase:
    """What a concrete and an abstract mesh share: axis names, sizes and types."""

    def lowering_fingerprint(self) -> str:  # (see ``Sharding.lowering_fingerprint``)
        return repr(self)

    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple

    @property
    def shape(self) -> collections.OrderedDict:
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def empty(self) -> bool:
        return not self.axis_names

    @property
    def is_multi_process(self) -> bool:
        return False

    def _axes_text(self) -> str:
        return ", ".join(f"{n!r}: {s}" for n, s in zip(self.axis_names, self.axis_sizes))

    def _check_spec(self, spec: PartitionSpec, api: str = "NamedSharding") -> None:
        """JAX's errors for a spec naming an axis not in this mesh, or one axis twice."""
        names = spec_axis_names(spec)
        for n in names:
            if n not in self.axis_names:
                raise ValueError(f"Resource axis: {n} of {spec} is not found in mesh: "
                                 f"{self.axis_names}.")
        for n in names:
            if names.count(n) > 1:
                raise DuplicateSpecError(
                    f"A single {api} spec specification can map every mesh axis to at most "
                    f"one positional dimension, but {spec} has duplicate entries for `{n}`")


class Mesh(_MeshBase):
    """A grid of devices with named axes (ember has one device: every axis has size 1).

    Args:
        devices: an array (or nested sequence) of devices, one dimension per axis name.
        axis_names: the axis names (a string for one axis).
        axis_types: an ``AxisType`` per axis (default ``Auto``).

    Example:
        >>> Mesh(np.array(ember.devices()), ('x',))
        Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Auto,))
    """

    def __init__(self, devices: Any, axis_names: Any, axis_types: Any = None):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        devs = np.asarray(devices, dtype=object) if not isinstance(devices, np.ndarray) \
            else devices
        if devs.ndim != len(axis_names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length "
                f"of its second argument (`axis_names`), but got devices.ndim == {devs.ndim} "
                f"and len(axis_names) == {len(axis_names)}.")
        for d in devs.flat if devs.ndim else ():
            if not isinstance(d, CpuDevice):
                raise TypeError(f"Mesh: devices must be ember devices (ember.devices()), "
                                f"got {d!r}")
        self.devices = devs
        self.axis_names = axis_names
        self.axis_sizes = tuple(devs.shape)
        self.axis_types = _axis_types(axis_types, len(axis_names), AxisType.Auto, "Mesh")
        self._stack_token = None

    @property
    def device_ids(self) -> np.ndarray:
        return np.array([d.id for d in self.devices.flat] if self.devices.ndim else [],
                        dtype=int).reshape(self.devices.shape if self.devices.ndim else (0,))

    @property
    def local_devices(self) -> list:
        return list(self.devices.flat) if self.devices.ndim else []

    @property
    def local_mesh(self) -> Mesh:
        return self

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                            _device_kind="cpu" if not self.empty else None)

    def _key(self) -> tuple:
        return (tuple(self.device_ids.flat), self.axis_sizes, self.axis_names,
                self.axis_types)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"{_types_text(self.axis_types)})")

    def __str__(self) -> str:
        if self.empty:
            return "Mesh()"
        return f"Mesh({self._axes_text()}, {_types_text(self.axis_types)})"

    # ``with mesh:`` (JAX's older context) lets bare ``PartitionSpec``s name this mesh in
    # the block; unlike ``set_mesh`` it leaves ``get_mesh``/``get_abstract_mesh`` empty.
    def __enter__(self) -> Mesh:
        import warnings
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with "
                      "jax.set_mesh(mesh):` instead.", DeprecationWarning, stacklevel=2)
        _state.legacy.append(self)
        return self

    def __exit__(self, *exc_info) -> None:
        _state.legacy.pop()


class AbstractMesh(_MeshBase):
    """A mesh's axis names, sizes and types without devices (what ``get_abstract_mesh``
    returns under ``set_mesh``).

    Example:
        >>> AbstractMesh((1,), ('x',))
        AbstractMesh('x': 1, axis_types=(Auto,))
    """

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[Any],
                 axis_types: Any = None, *, _device_kind: str | None = None):
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        self.axis_names = tuple(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: axis_sizes {self.axis_sizes} and axis_names "
                             f"{self.axis_names} must have the same length")
        self.axis_types = _axis_types(axis_types, len(self.axis_names), AxisType.Auto,
                                      "AbstractMesh")
        self._device_kind = _device_kind

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return self

    def _key(self) -> tuple:
        return (self.axis_sizes, self.axis_names, self.axis_types)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.empty:
            return "AbstractMesh((), axis_types=())"
        extra = (f", device_kind={self._device_kind}, num_cores=None, platform=cpu"
                 if self._device_kind else "")
        return f"AbstractMesh({self._axes_text()}, {_types_text(self.axis_types)}{extra})"

    __str__ = __repr__


_EMPTY_MESH = Mesh(np.empty((), dtype=object), ())


class _MeshState(threading.local):
    def __init__(self):
        self.stack: list[Mesh] = []  # set_mesh
        self.legacy: list[Mesh] = []  # ``with mesh:``


_state = _MeshState()


def get_mesh() -> Mesh:
    """The concrete mesh set by ``set_mesh`` (an empty ``Mesh`` when none is)."""
    return _state.stack[-1] if _state.stack else _EMPTY_MESH


def context_mesh() -> Mesh | AbstractMesh:
    """The mesh a staged sharding constraint records: ``set_mesh``'s (abstract), else that
    of an enclosing ``with mesh:``, else an empty ``Mesh`` (what JAX prints)."""
    mesh = get_mesh()
    if not mesh.empty:
        return mesh.abstract_mesh
    return _state.legacy[-1] if _state.legacy else mesh


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh of the context (``set_mesh``); an empty one when none is set.

    Example:
        >>> ember.sharding.get_abstract_mesh()
        AbstractMesh((), axis_types=())
    """
    return get_mesh().abstract_mesh


class set_mesh:  # noqa: N801 - a function that also works as a context manager, as JAX's
    """Makes ``mesh`` the context mesh: used by ``with_sharding_constraint``, ``shard_map``,
    ``jit`` and ``reshard`` when given bare ``PartitionSpec``s. Called alone it sets the mesh
    for the rest of the program; as ``with set_mesh(mesh):`` only for the block.

    Example:
        >>> with ember.set_mesh(ember.make_mesh((1,), ('x',))):
        ...     ember.sharding.get_abstract_mesh().axis_names
        ('x',)
    """

    def __init__(self, mesh: Mesh):
        if not isinstance(mesh, Mesh):
            raise ValueError(f"set_mesh: expected a jax.sharding.Mesh, got {mesh!r}")
        self._mesh = mesh
        _state.stack.append(mesh)
        self._depth = len(_state.stack)

    def __enter__(self) -> Mesh:
        return self._mesh

    def __exit__(self, *exc_info) -> None:
        del _state.stack[self._depth - 1:]


use_mesh = set_mesh  # (JAX's earlier name)


class use_abstract_mesh:  # noqa: N801
    """Accepted for JAX's sake: ember's meshes carry no devices that matter, so the abstract
    mesh's concrete counterpart (one device per axis of size 1) becomes the context mesh."""

    def __init__(self, mesh: AbstractMesh):
        self._mesh = make_mesh_from_abstract(mesh)

    def __enter__(self):
        _state.stack.append(self._mesh)
        return self._mesh

    def __exit__(self, *exc_info) -> None:
        _state.stack.pop()


def make_mesh_from_abstract(mesh: AbstractMesh) -> Mesh:
    if mesh.size != 1:
        raise ValueError(f"{mesh} needs {mesh.size} devices; ember has 1")
    devs = np.empty(mesh.axis_sizes, dtype=object)
    devs.flat[:] = _devices()
    return Mesh(devs, mesh.axis_names, mesh.axis_types)


# --------------------------------------------------------------------------- shardings


def _full_index(ndim: int) -> tuple:
    return (slice(None),) * ndim


class Sharding:
    """How an array is laid out over devices. On ember's one device every sharding holds
    the whole array on that device; subclasses differ in what they record."""

    _memory_kind: str | None = None

    def lowering_fingerprint(self) -> str:
        """A stable text of the sharding, for ``compiler.lowering_fingerprint`` (as a param
        of ``sharding_constraint``): its repr, which names every field."""
        return repr(self)

    @property
    def device_set(self) -> set:
        return set(_devices())

    @property
    def addressable_devices(self) -> set:
        return self.device_set

    @property
    def _device_assignment(self) -> tuple:
        return tuple(_devices())

    @property
    def is_fully_replicated(self) -> bool:
        return True

    @property
    def is_fully_addressable(self) -> bool:
        return True

    @property
    def num_devices(self) -> int:
        return len(self.device_set)

    @property
    def memory_kind(self) -> str:
        return self._memory_kind or "device"

    def with_memory_kind(self, kind: str) -> Sharding:
        raise NotImplementedError

    def check_rank(self, ndim: int, api: str = "device_put args") -> None:
        """Raises JAX's ValueError if this sharding cannot apply to a value of rank ``ndim``."""

    def shard_shape(self, global_shape: Sequence[int]) -> tuple:
        """The shape of each shard of an array of ``global_shape`` (the global shape: one
        device holds it all)."""
        global_shape = tuple(global_shape)
        self.check_rank(len(global_shape), "shard_shape")
        return global_shape

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """Each device's index (a tuple of slices) into an array of ``global_shape``."""
        global_shape = tuple(global_shape)
        self.check_rank(len(global_shape), "devices_indices_map")
        return {d: _full_index(len(global_shape)) for d in _devices()}

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        return self.devices_indices_map(global_shape)

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """Whether both place an array of rank ``ndim`` the same way (on one device: the
        same devices and memory kind)."""
        if not isinstance(other, Sharding):
            return False
        return self.device_set == other.device_set and self.memory_kind == other.memory_kind


def _memory_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in _MEMORY_KINDS:
        raise ValueError(
            "Could not find memory addressable by device cpu. Device cpu can address the "
            f"following memory kinds: {', '.join(_MEMORY_KINDS)}. Got memory kind: {kind}")
    return kind


class SingleDeviceSharding(Sharding):
    """The whole array on one device (every array's sharding unless placed otherwise).

    Example:
        >>> ember.numpy.ones(2).sharding
        SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)
    """

    def __init__(self, device: CpuDevice, *, memory_kind: str | None = None):
        if not isinstance(device, CpuDevice):
            raise TypeError(f"SingleDeviceSharding: device must be an ember device, "
                            f"got {device!r}")
        self._device = device
        self._memory_kind = _memory_kind(memory_kind)

    @property
    def device_set(self) -> set:
        return {self._device}

    @property
    def _device_assignment(self) -> tuple:
        return (self._device,)

    def with_memory_kind(self, kind: str) -> SingleDeviceSharding:
        return SingleDeviceSharding(self._device, memory_kind=kind)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, SingleDeviceSharding) and other._device == self._device
                and other.memory_kind == self.memory_kind)

    def __hash__(self) -> int:
        return hash((self._device, self.memory_kind))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class NamedSharding(Sharding):
    """An array split over a mesh's named axes as a ``PartitionSpec`` says.

    Args:
        mesh: a ``Mesh`` (or ``AbstractMesh``).
        spec: a ``PartitionSpec``; each mesh axis it names must be in the mesh, once.
        memory_kind: ``None`` (``"device"``), ``"device"``, ``"pinned_host"`` or
            ``"unpinned_host"``.

    Example:
        >>> mesh = ember.make_mesh((1,), ('x',))
        >>> NamedSharding(mesh, P('x')).spec
        P('x',)
    """

    def __init__(self, mesh: Mesh | AbstractMesh, spec: PartitionSpec, *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, _MeshBase):
            raise TypeError(f"NamedSharding: mesh must be a jax.sharding.Mesh or "
                            f"AbstractMesh, got {mesh!r}")
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"NamedSharding: spec must be a jax.sharding.PartitionSpec, "
                            f"got {spec!r}")
        mesh._check_spec(spec)
        self.mesh = mesh
        self.spec = spec
        self._memory_kind = _memory_kind(memory_kind)

    def with_memory_kind(self, kind: str) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def update(self, **kwargs) -> NamedSharding:
        return NamedSharding(kwargs.get("mesh", self.mesh), kwargs.get("spec", self.spec),
                             memory_kind=kwargs.get("memory_kind", self._memory_kind))

    @property
    def device_set(self) -> set:
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError("device_set is not available for a NamedSharding of an "
                             "AbstractMesh")
        return set(self.mesh.devices.flat)

    @property
    def _device_assignment(self) -> tuple:
        return tuple(self.mesh.devices.flat)

    def check_rank(self, ndim: int, api: str = "device_put args") -> None:
        if len(self.spec) > ndim:
            raise ValueError(
                f"One of {api} is incompatible with its sharding annotation {self}: "
                f"Sharding {self} is only valid for values of rank at least {len(self.spec)}"
                f", but was applied to a value of rank {ndim}.")

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, NamedSharding) and self.mesh == other.mesh
                and self.spec == other.spec and self.memory_kind == other.memory_kind)

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec, self.memory_kind))

    def __repr__(self) -> str:
        if isinstance(self.mesh, AbstractMesh):
            return f"NamedSharding(mesh={self.mesh}, spec={self.spec})"
        return (f"NamedSharding(mesh={self.mesh}, spec={self.spec}, "
                f"memory_kind={self.memory_kind})")


def make_single_device_sharding(device: CpuDevice) -> SingleDeviceSharding:
    """``SingleDeviceSharding(device)``."""
    return SingleDeviceSharding(device)


def default_sharding() -> SingleDeviceSharding:
    """The sharding of an array nobody placed: the whole array on ember's device."""
    return _DEFAULT


_DEFAULT = SingleDeviceSharding(_devices()[0])


def resolve_sharding(s: Any, api: str, what: str = "shardings") -> Sharding | None:
    """``s`` as a Sharding: a ``PartitionSpec`` is taken over the context mesh (JAX's
    RuntimeError when there is none); ``None`` stays ``None``; a device becomes a
    ``SingleDeviceSharding``. Anything else is JAX's TypeError."""
    if s is None or isinstance(s, Sharding):
        return s
    if isinstance(s, CpuDevice):
        return SingleDeviceSharding(s)
    if isinstance(s, PartitionSpec):
        mesh = get_mesh()
        if mesh.empty and _state.legacy:
            mesh = _state.legacy[-1]
        if mesh.empty:
            raise RuntimeError(
                f"{api} requires a non-empty mesh in context if you are passing "
                f"`PartitionSpec`s to {what}. You can define a context mesh via "
                "`jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to "
                f"{what} and then the mesh context manager is not required.")
        return NamedSharding(mesh, s)
    raise TypeError(f"{what} leaf specifications are expected to be PartitionSpec instances "
                    f"or None, but got {s}")


def reshard(xs: Any, out_shardings: Any) -> Any:
    """Places a pytree of arrays with the given shardings (a pytree prefix; bare
    ``PartitionSpec``s are taken over the context mesh). Values are unchanged: on one
    device a reshard moves no data.

    Example:
        >>> with ember.set_mesh(ember.make_mesh((1,), ('x',))):
        ...     ember.sharding.reshard(jnp.ones(2), P('x')).sharding.spec
        P('x',)
    """
    from ember._sharding_api import put_sharded
    return put_sharded(xs, out_shardings, "reshard", "out_shardings")


def is_sharding_leaf(x: Any) -> bool:
    """Leaves of a pytree of shardings: ``None``, shardings, specs and devices."""
    return x is None or isinstance(x, (Sharding, PartitionSpec, CpuDevice))


def broadcast_shardings(prefix: Any, tree: Any, api: str, what: str) -> list:
    """One entry of ``prefix`` (a pytree prefix of ``tree``) per leaf of ``tree``; JAX's
    ValueError when ``prefix`` is not a prefix of ``tree``."""
    from ember import _pytree
    pre_leaves, pre_def = _pytree.tree_flatten(prefix, is_leaf=is_sharding_leaf)
    try:
        subtrees = pre_def.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"{api} {what} specification must be a tree prefix of the "
                         f"corresponding value, got specification {prefix} for value tree "
                         f"{_pytree.tree_structure(tree)}: {e}") from None
    out = []
    for s, sub in zip(pre_leaves, subtrees):
        out.extend([s] * len(_pytree.tree_leaves(sub)))
    return out


def placed(x: Any, s: Sharding | None) -> Any:
    """A concrete array ``x`` as an array (sharing its buffer) whose ``.sharding`` is ``s``;
    anything else (tracers, ``s`` of an abstract mesh) is returned as it is."""
    from ember.runtime.array import Array
    if type(x) is not Array or s is None or (
            isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh)):
        return x
    out = Array._wrap(x._value, x.aval)
    out._sharding = s
    return out


def _axes_wrapper(f: Any, kind: str, sharding: Any) -> Any:
    import functools
    if f is None:
        return lambda g: _axes_wrapper(g, kind, sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        if kind == "in" and sharding is not None:
            args = reshard(args, sharding)
        out = f(*args, **kwargs)
        return reshard(out, sharding) if kind == "out" and sharding is not None else out
    return wrapped


def auto_axes(f: Any = None, /, *, axes: Any = None, out_sharding: Any = None) -> Any:
    """Runs ``f`` with mesh ``axes`` made automatic and reshards its result to
    ``out_sharding`` (on one device axis types change no value: only the result's
    sharding is set).

    Example:
        >>> with ember.set_mesh(ember.make_mesh((1,), ('x',))):
        ...     y = ember.sharding.auto_axes(jnp.sin, out_sharding=P('x'))(jnp.zeros(2))
        >>> y.sharding.spec
        P('x',)
    """
    return _axes_wrapper(f, "out", out_sharding)


def explicit_axes(f: Any = None, /, *, axes: Any = None, in_sharding: Any = None) -> Any:
    """Runs ``f`` with mesh ``axes`` made explicit, its arguments resharded to
    ``in_sharding`` first (on one device only their shardings change).

    Example:
        >>> with ember.set_mesh(ember.make_mesh((1,), ('x',))):
        ...     ember.sharding.explicit_axes(jnp.sin, in_sharding=P('x'))(jnp.zeros(2))
        Array([0., 0.], dtype=float32)
    """
    return _axes_wrapper(f, "in", in_sharding)
