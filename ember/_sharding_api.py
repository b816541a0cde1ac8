"""Top-level sharding names (``ember.make_mesh``, ``ember.shard_map``, ``ember.P``, ...) and
the helpers that place arrays with a sharding (``device_put``, ``jit``'s shardings).

ember has one device, so every mesh axis has size 1: ``shard_map`` runs ``f`` on whole
arrays under one size-1 ``vmap`` per mesh axis, which binds the axis names for collectives
(``lax.psum(x, 'x')``, ``all_gather``, ``axis_index``...) and gives JAX's one-device results.

Example:
    >>> mesh = ember.make_mesh((1,), ('x',))
    >>> f = ember.shard_map(lambda a: lax.psum(a, 'x'), mesh=mesh, in_specs=P('x'),
    ...                     out_specs=P())
    >>> f(jnp.arange(3.))
    Array([0., 1., 2.], dtype=float32)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ember import _pytree, core
from ember.runtime.array import Array, CpuDevice
from ember.runtime.array import device_put as _device_put
from ember.runtime.array import devices as _devices
from ember.sharding import (
    AbstractMesh,
    AxisType,
    Mesh,
    NamedSharding,
    PartitionSpec,
    Sharding,
    broadcast_shardings,
    get_mesh,
    is_sharding_leaf,
    placed,
    reshard,
    resolve_sharding,
    set_mesh,
    spec_axis_names,
)

P = PartitionSpec

__all__ = ["Format", "NamedSharding", "P", "Shard", "ShardedJit", "check_jit_shardings",
           "make_array_from_callback", "make_array_from_process_local_data",
           "make_array_from_single_device_arrays", "make_mesh", "place_outputs", "reshard",
           "set_mesh", "shard_map", "with_jit_shardings"]


class Shard:
    """One shard of an array: its device, its index into the global array, its replica id
    and its data (an ``Array``)."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device: CpuDevice, index: tuple, replica_id: int, data: Any):
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self) -> str:
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


class Format(NamedTuple):
    """An array's layout and sharding (``Array.format``); ember's layout is row-major."""

    layout: Any
    sharding: Sharding


def shards_of(x: Array) -> list[Shard]:
    """``x.addressable_shards``: one shard holding the whole array."""
    return [Shard(d, idx, 0, x) for d, idx in x.sharding.devices_indices_map(x.shape).items()]


# --------------------------------------------------------------------------- meshes


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              axis_types: tuple | None = None, *, devices: Sequence | None = None) -> Mesh:
    """A ``Mesh`` of the devices with the given axis sizes and names (their product must be
    the number of devices: 1 on ember). Axes are ``Explicit`` unless ``axis_types`` says
    otherwise, as in JAX.

    Example:
        >>> ember.make_mesh((1, 1), ('x', 'y')).shape
        OrderedDict([('x', 1), ('y', 1)])
    """
    axis_shapes = tuple(int(s) for s in axis_shapes)
    axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(
            "Mesh requires the ndim of its first argument (`devices`) to equal the length "
            f"of its second argument (`axis_names`), but got devices.ndim == "
            f"{len(axis_shapes)} and len(axis_names) == {len(axis_names)}.")
    devs = list(_devices() if devices is None else devices)
    if len(devs) < math.prod(axis_shapes):
        raise ValueError(f"Number of devices {len(devs)} must be >= the product of "
                         f"mesh_shape {axis_shapes}")
    grid = np.empty(axis_shapes, dtype=object)
    grid.flat[:] = devs[:math.prod(axis_shapes)]
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(axis_names)
    return Mesh(grid, axis_names, axis_types)


# --------------------------------------------------------------------------- placement


def put_sharded(x: Any, shardings: Any, api: str, what: str,
                may_alias: bool | None = None, donate: bool = False) -> Any:
    """``x`` (a pytree) on the device, each leaf carrying its sharding from ``shardings``
    (a pytree prefix of ``x``), validated as ``api`` does in JAX."""
    leaves, treedef = _pytree.tree_flatten(x)
    per_leaf = broadcast_shardings(shardings, x, api, what)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        if api == "device_put" and not is_sharding_leaf(s):
            raise ValueError(
                "`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, "
                "`jax.Device`, `Format`, `jax.memory.Space` or a pytree of these values. "
                f"Received invalid value: {s}")
        s = resolve_sharding(s, api, what)
        out = _device_put(leaf, may_alias=may_alias, donate=donate)
        if s is not None and getattr(out, "_sharding", None) != s:
            s.check_rank(core.get_aval(out).ndim, f"{api} args")
            out = placed(out, s)
        outs.append(out)
    return _pytree.tree_unflatten(treedef, outs)


def device_put_placed(x: Any, device: Any, may_alias: bool | None, donate: bool) -> Any:
    """``device_put(x, device)`` with a device, a sharding or a pytree prefix of them."""
    return put_sharded(x, device, "device_put", "device", may_alias, donate)


def make_array_from_callback(shape: Sequence[int], sharding: Sharding,
                             data_callback: Callable, dtype: Any = None) -> Array:
    """The global array whose shards ``data_callback(index)`` returns (one call per device,
    each with that device's index: on ember, one call with the whole index).

    Example:
        >>> s = ember.NamedSharding(ember.make_mesh((1,), ('x',)), P('x'))
        >>> data = np.arange(4.)
        >>> ember.make_array_from_callback((4,), s, lambda idx: data[idx])
        Array([0., 1., 2., 3.], dtype=float32)
    """
    shape = tuple(shape)
    if not isinstance(sharding, Sharding):
        raise TypeError(f"make_array_from_callback: sharding must be a jax.sharding."
                        f"Sharding, got {sharding!r}")
    ((_, index),) = sharding.devices_indices_map(shape).items()
    value = np.asarray(data_callback(index), dtype=dtype)
    if value.shape != shape:
        raise ValueError(f"make_array_from_callback: the callback returned shape "
                         f"{value.shape} for index {index}, expected {shape}")
    return placed(_device_put(value), sharding)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Sharding,
                                         arrays: Sequence[Any], *, dtype: Any = None) -> Array:
    """The global array made of one array per device (on ember: one array, the whole)."""
    shape = tuple(shape)
    arrays = list(arrays)
    if len(arrays) != 1:
        raise ValueError(f"make_array_from_single_device_arrays: expected 1 array (one per "
                         f"addressable device), got {len(arrays)}")
    value = np.asarray(arrays[0], dtype=dtype)
    if value.shape != shape:
        raise ValueError(f"make_array_from_single_device_arrays: the array's shape "
                         f"{value.shape} does not match the global shape {shape}")
    return placed(_device_put(value), sharding)


def make_array_from_process_local_data(sharding: Sharding, local_data: Any,
                                       global_shape: Sequence[int] | None = None) -> Array:
    """The global array from this process's data (one process: the data is the array)."""
    value = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != value.shape:
        raise ValueError(f"make_array_from_process_local_data: local data of shape "
                         f"{value.shape} does not match global_shape {tuple(global_shape)} "
                         "(one process holds the whole array)")
    return placed(_device_put(value), sharding)


# --------------------------------------------------------------------------- jit's shardings


def _check_jit_leaf(s: Any, what: str) -> None:
    if s is None or isinstance(s, (Sharding, PartitionSpec)):
        if isinstance(s, PartitionSpec):
            resolve_sharding(s, "jit", what)
        return
    raise TypeError(f"{what} leaf specifications are expected to be PartitionSpec instances "
                    f"or None, but got {s}")


def check_jit_shardings(in_shardings: Any, out_shardings: Any) -> None:
    """Validates ``jit``'s ``in_shardings``/``out_shardings`` when ``jit`` is called (JAX's
    TypeError for a leaf that is not a Sharding, PartitionSpec or None)."""
    for what, tree in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        for leaf in _pytree.tree_leaves(tree, is_leaf=lambda x: x is None or isinstance(
                x, (Sharding, PartitionSpec))):
            if leaf is None or isinstance(leaf, (Sharding, PartitionSpec)):
                continue
            _check_jit_leaf(leaf, what)


def check_jit_args(args: Sequence[Any], in_shardings: Any) -> None:
    """Checks the positional ``args`` of a jitted call against ``in_shardings`` (a prefix of
    the argument tuple; a lone sharding applies to every argument), as JAX does."""
    if in_shardings is None:
        return
    if isinstance(in_shardings, (list, tuple)) and not isinstance(in_shardings,
                                                                  PartitionSpec):
        if len(in_shardings) != len(args):
            raise ValueError(
                "pjit in_shardings specification must be a tree prefix of the positional "
                "arguments tuple. In particular, pjit in_shardings must either be a "
                "Sharding, a PartitionSpec, or a tuple of length equal to the number of "
                "positional arguments. But pjit in_shardings is the wrong length: got a "
                f"tuple or list of length {len(in_shardings)} for an args tuple of length "
                f"{len(args)}.")
        in_shardings = tuple(in_shardings)
    per_leaf = broadcast_shardings(in_shardings, tuple(args), "pjit", "in_shardings")
    for leaf, s in zip(_pytree.tree_leaves(tuple(args)), per_leaf):
        s = resolve_sharding(s, "jit", "in_shardings")
        if s is not None:
            s.check_rank(core.get_aval(leaf).ndim, "pjit arguments")


def place_outputs(outs: Any, out_shardings: Any) -> Any:
    """``jit``'s outputs placed with ``out_shardings`` (a pytree prefix of the outputs;
    ``None`` leaves an output as it is): each output's ``.sharding`` is then what JAX
    reports. Raises JAX's ValueError for a sharding longer than its output's rank."""
    if out_shardings is None:
        return outs
    per_leaf = broadcast_shardings(out_shardings, outs, "pjit", "out_shardings")
    leaves, treedef = _pytree.tree_flatten(outs)
    placed_leaves = []
    for leaf, s in zip(leaves, per_leaf):
        s = resolve_sharding(s, "jit", "out_shardings")
        if s is not None:
            s.check_rank(core.get_aval(leaf).ndim, "pjit outputs")
        placed_leaves.append(placed(leaf, s))
    return _pytree.tree_unflatten(treedef, placed_leaves)


# --------------------------------------------------------------------------- shard_map


class _InferFromArgs:
    def __repr__(self) -> str:
        return "jax.sharding.Infer"


Infer = _InferFromArgs()

# Collectives whose result is the same on every member of their axes (the rest vary).
_INVARIANT_COLLECTIVES = frozenset({"psum", "pmax", "pmin", "pbroadcast"})


_SCALAR_HINT = (
    "\n\nFor scalar values (rank 0), consider using an out_specs entry of `P()`, where "
    "`P = jax.sharding.PartitionSpec`. In particular, for rank 0 outputs which are not "
    "constant over the mesh, add at least one (singleton) axis to them so that they can be "
    "concatenated using out_specs.")


def _fun_name(f: Callable) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _set_text(names: Any) -> str:
    return "{" + ", ".join(str(n) for n in sorted(names, key=str)) + "}"


def _check_specs(kind: str, specs: list, avals: list, paths: list, manual: frozenset,
                 f: Callable) -> None:
    """JAX's errors for specs naming non-manual axes or longer than their value's rank."""
    for spec, aval, path in zip(specs, avals, paths):
        for name in spec_axis_names(spec):
            if name not in manual:
                raise ValueError(
                    f"shard_map {kind} argument must refer to an axis marked as manual "
                    f"({manual}), but:\n\n  {kind} refers to {name!r}\n\n"
                    f"Check the {kind} values passed to shard_map.")
        if len(spec) > aval.ndim:
            shape_text = f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"
            what = ("the passed " + path) if kind == "in_specs" else f"{_fun_name(f)}(*args)"
            val = "input" if kind == "in_specs" else "output"
            raise ValueError(
                f"shard_map applied to the function {_fun_name(f)!r} was given an {kind} "
                f"entry which is too long to be compatible with the corresponding {val} "
                f"value from the function:\n\n{kind} is {spec} which has length {len(spec)}"
                f", but {what} has shape {shape_text}, which has rank {aval.ndim} "
                f"(and {aval.ndim} < {len(spec)})\n\nEntries in {kind} must be of length "
                f"no greater than the number of axes in the corresponding {val} value.\n\n"
                "Either revise the spec to be shorter, or modify "
                f"{_fun_name(f)!r} so that its {val}s have sufficient rank."
                + (_SCALAR_HINT if kind == "out_specs" and aval.ndim == 0 else ""))


def _flat_specs(specs: Any, tree: Any, kind: str) -> list:
    """One PartitionSpec per leaf of ``tree`` (``specs`` a prefix of it; None is P())."""
    pre_leaves, pre_def = _pytree.tree_flatten(
        specs, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
    try:
        subtrees = pre_def.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"shard_map {kind} must be a pytree prefix of the "
                         f"{'arguments' if kind == 'in_specs' else 'outputs'}: {e}") from None
    out = []
    for spec, sub in zip(pre_leaves, subtrees):
        if spec is None:
            spec = PartitionSpec()
        if not isinstance(spec, PartitionSpec):
            raise TypeError(
                f"shard_map {kind} argument must be a pytree of `jax.sharding.PartitionSpec` "
                f"instances, but:\n\n  {kind} is {spec} of type {type(spec).__name__}, \n\n"
                f"Check the {kind} values passed to shard_map.")
        out.extend([spec] * len(_pytree.tree_leaves(sub)))
    return out


def _varying_axes(jaxpr: Any, in_vma: list[frozenset]) -> list[frozenset]:
    """The mesh axes each output of ``jaxpr`` may vary over, given its inputs': collectives
    that reduce over axes make their result invariant over them, ``axis_index`` and the other
    collectives make it vary, other primitives vary as their operands do. An equation
    holding jaxprs is entered when its operands map one-to-one onto the inner jaxpr's
    (``pjit``); otherwise its outputs vary as its operands, unless a reducing collective is
    inside (then nothing is assumed, so that valid programs are never refused)."""
    from ember import jaxpr as jx
    from ember.interpreters import batching
    env: dict[int, frozenset] = {}

    def read(a) -> frozenset:
        return frozenset() if isinstance(a, jx.Literal) else env.get(a.id, frozenset())

    for v, vma in zip(jaxpr.invars, in_vma):
        env[v.id] = vma
    for eqn in jaxpr.eqns:
        ins = frozenset().union(*[read(a) for a in eqn.invars])
        name = eqn.primitive.name
        axes_of = batching.collective_axes.get(eqn.primitive)
        subs = _sub_jaxprs(eqn.params)
        if axes_of is not None:
            axes = frozenset(axes_of(eqn.params))
            outs = [ins - axes if name in _INVARIANT_COLLECTIVES else ins | axes]
            outs = outs * len(eqn.outvars)
        elif len(subs) == 1 and len(subs[0].invars) == len(eqn.invars) \
                and len(subs[0].outvars) == len(eqn.outvars):
            outs = _varying_axes(subs[0], [read(a) for a in eqn.invars])
        elif subs and any(_has_reduction(s) for s in subs):
            outs = [frozenset()] * len(eqn.outvars)
        else:
            outs = [ins] * len(eqn.outvars)
        for v, vma in zip(eqn.outvars, outs):
            env[v.id] = vma
    return [read(a) for a in jaxpr.outvars]


def _sub_jaxprs(params: dict) -> list:
    """The jaxprs an equation's params hold (directly or in a tuple: cond's branches)."""
    from ember import jaxpr as jx
    out = []
    for p in params.values():
        for q in (p if isinstance(p, tuple) else (p,)):
            if isinstance(q, jx.ClosedJaxpr):
                out.append(q.jaxpr)
            elif isinstance(q, jx.Jaxpr):
                out.append(q)
    return out


def _has_reduction(jaxpr: Any) -> bool:
    return any(eqn.primitive.name in _INVARIANT_COLLECTIVES
               or any(_has_reduction(s) for s in _sub_jaxprs(eqn.params))
               for eqn in jaxpr.eqns)


def _check_vma(f: Callable, mesh: Mesh, out_specs: list, out_vma: list) -> None:
    for spec, vma in zip(out_specs, out_vma):
        named = frozenset(spec_axis_names(spec))
        extra = vma - named
        if extra:
            raise ValueError(
                f"shard_map applied to the function {_fun_name(f)!r} was given out_specs "
                "which require replication which can't be statically inferred given the "
                f"mesh:\n\nThe mesh given has shape {mesh.axis_sizes} with corresponding "
                f"axis names {mesh.axis_names}.\n\nout_specs is {spec} which implies that "
                "the corresponding output value is only varying across mesh axes "
                f"{_set_text(named)} and not {_set_text(extra)}, but it was inferred to be "
                f"possibly varying over {_set_text(extra)}\n\nCheck if these output values "
                "are meant to be replicated over those mesh axes. If not, consider revising "
                "the corresponding out_specs entries. If so, consider disabling the check "
                "by passing the check_vma=False argument to `jax.shard_map`.")


def _run_manual(body: Callable, xs: list, names: Sequence[Any]) -> list:
    """``body`` on ``xs`` under one size-1 vmap per name (binding it for collectives); a
    result mapped along the vmap's axis has it removed (each shard is the whole value)."""
    from ember.interpreters import batching
    from ember.lax.shape import squeeze
    if not names:
        return list(body(*xs))
    outs, dims = batching.batch_flat(lambda *ys: _run_manual(body, list(ys), names[1:]),
                                     xs, [None] * len(xs), 1, names[0])
    return [o if d is None else squeeze(o, (d,)) for o, d in zip(outs, dims)]


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = Infer,
              mesh: Mesh | AbstractMesh | None = None, axis_names: Any = frozenset(),
              check_vma: bool = True) -> Callable:
    """Maps ``f`` over shards of its arguments on a device mesh; inside ``f``, collectives
    (``lax.psum``, ``all_gather``, ``axis_index``, ...) work over the mesh axis names.

    ember's mesh axes all have size 1, so each shard is the whole array: ``f`` runs once on
    the full arguments. Specs are validated as JAX does, and with ``check_vma`` an output
    whose ``out_specs`` leaves out an axis it may vary over is refused.

    Args:
        f: the per-shard function (omitted: returns a decorator).
        out_specs: a PartitionSpec per output (a pytree prefix of the outputs).
        in_specs: a PartitionSpec per argument (a pytree prefix of the argument tuple);
            default: each argument's sharding spec (``P()`` if it has none).
        mesh: the mesh (default: the one of ``set_mesh``).
        axis_names: the mesh axes made manual (default: all).
        check_vma: check that outputs are replicated over the axes their spec omits.

    Example:
        >>> mesh = ember.make_mesh((1,), ('i',))
        >>> ember.shard_map(lambda a: a + lax.axis_index('i'), mesh=mesh, in_specs=P('i'),
        ...                 out_specs=P('i'))(jnp.zeros(2))
        Array([0., 0.], dtype=float32)
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs,
                                 mesh=mesh, axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, but got {f} "
                        f"of type {type(f)}.")

    @functools.wraps(f)
    def sharded(*args):
        from ember.interpreters import batching
        from ember.interpreters.partial_eval import trace_to_jaxpr
        from ember.jaxpr import eval_jaxpr
        m = get_mesh() if mesh is None else mesh
        if m.empty:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
        if m.size != 1:
            raise ValueError(f"shard_map: {m} has {m.size} devices; ember has 1")
        manual = frozenset(axis_names) or frozenset(m.axis_names)
        if not manual <= frozenset(m.axis_names):
            raise ValueError(f"jax.shard_map requires axis_names={manual} to be a subset of "
                             f"mesh.axis_names={frozenset(m.axis_names)}")
        names = [n for n in m.axis_names if n in manual]
        flat, in_tree = _pytree.tree_flatten(args)
        avals = [core.get_aval(x) for x in flat]
        paths = [f"args{_pytree.keystr(p)}" for p, _ in _pytree.tree_flatten_with_path(
            args)[0]]
        if in_specs is Infer:
            specs = [getattr(getattr(x, "_sharding", None), "spec", PartitionSpec())
                     for x in flat]
        else:
            specs = _flat_specs(in_specs, args, "in_specs")
        _check_specs("in_specs", specs, avals, paths, manual, f)
        out_tree = []

        def flat_f(*xs):
            outs = f(*_pytree.tree_unflatten(in_tree, list(xs)))
            leaves, tree = _pytree.tree_flatten(outs)
            out_tree.append(tree)
            return leaves

        body = flat_f
        if check_vma:
            envs = [batching.extend_axis_env(n, 1) for n in names]
            for e in envs:
                e.__enter__()
            try:
                closed, _ = trace_to_jaxpr(flat_f, avals)
            finally:
                for e in reversed(envs):
                    e.__exit__(None, None, None)
            body = functools.partial(eval_jaxpr, closed.jaxpr, closed.consts)
        outs = _run_manual(body, list(flat), names)
        tree = out_tree[0]
        o_specs = _flat_specs(out_specs, _pytree.tree_unflatten(tree, outs), "out_specs")
        _check_specs("out_specs", o_specs, [core.get_aval(o) for o in outs],
                     [""] * len(outs), manual, f)
        if check_vma:
            in_vma = [frozenset(spec_axis_names(s)) for s in specs]
            _check_vma(f, m, o_specs, _varying_axes(closed.jaxpr, in_vma))
        if isinstance(m, Mesh):
            outs = [placed(o, NamedSharding(m, s)) for o, s in zip(outs, o_specs)]
        return _pytree.tree_unflatten(tree, outs)

    return sharded


class ShardedJit:
    """A jitted function with ``in_shardings``/``out_shardings``: arguments are checked
    against ``in_shardings`` (ranks, as JAX does) and outputs placed with ``out_shardings``
    (their ``.sharding``). Every other attribute is the jitted function's (``lower``...)."""

    def __init__(self, jitted: Callable, in_shardings: Any, out_shardings: Any):
        check_jit_shardings(in_shardings, out_shardings)
        self._jitted = jitted
        self._in = in_shardings
        self._out = out_shardings
        functools.update_wrapper(self, jitted, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        static = getattr(self._jitted, "_static_nums", frozenset())
        check_jit_args([a for i, a in enumerate(args) if i not in static], self._in)
        return place_outputs(self._jitted(*args, **kwargs), self._out)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jitted, name)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        import types
        return self if obj is None else types.MethodType(self, obj)


def with_jit_shardings(jitted: Callable, in_shardings: Any, out_shardings: Any) -> Callable:
    """``jitted`` itself when both shardings are None (no cost on the common path), else a
    ``ShardedJit`` applying them. ``ember.jit`` calls it on the JitFunction it builds."""
    if in_shardings is None and out_shardings is None:
        return jitted
    return ShardedJit(jitted, in_shardings, out_shardings)
