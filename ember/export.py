"""Exporting jitted functions for persistent serialization (``jax.export``).

``export(ember.jit(f))(*arg_specs)`` traces and lowers ``f`` for the given shapes and dtypes
into an ``Exported``: the HLO module (``mlir_module()``, ember's HLO text where JAX gives
StableHLO), the argument and result trees and abstract values, and the platforms. It can be
called from ember programs (``exported.call(*args)``, under jit and grad) and serialized to
bytes that ``deserialize`` turns back into an ``Exported`` in another process, without the
original Python function.

The serialized form (``serialize``) is a versioned header followed by a JSON document (the
module text, the trees as registered node kinds, the abstract values, the VJPs up to the
requested order) and the raw bytes of the large captured constants the module takes as
arguments. Nothing is pickled: a pytree node type must be registered for serialization
(``register_pytree_node_serialization``, ``register_namedtuple_serialization``).

Differences from JAX: shape polymorphism (``symbolic_shape`` and friends) is not supported
(NotImplementedError); programs calling host callbacks cannot be exported (the callback is
Python state of the exporting process). The module is ember's platform-neutral HLO, so
every platform name is accepted, and a module exported for other platforms runs on "cpu"
only when the platform check is disabled (``DisabledSafetyCheck.platform()``).

Example:
    >>> from ember import export
    >>> exp = export.export(ember.jit(jnp.sin))(np.arange(4, dtype=np.float32))
    >>> exp.in_avals
    (ShapedArray(float32[4]),)
    >>> export.deserialize(exp.serialize()).call(np.zeros(4, np.float32))
    Array([0., 0., 0., 0.], dtype=float32)
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import json
import re
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import ml_dtypes
import numpy as np

from ember import _pytree, core, dtypes

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform",
           "deserialize", "export", "is_symbolic_dim",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]

T = TypeVar("T")

minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
_CALLING_CONVENTION_VERSION = 10

# The serialized form: magic, format version (u32), JSON length (u64), JSON, constant bytes.
_MAGIC = b"EMBER-EXPORT\x00"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<IQ")
_HOST_CALLBACK_TARGET = "ember.host_callback"


class DisabledSafetyCheck:
    """A safety check to skip on (de)serialization (``export(..., disabled_checks=...)``).

    Example:
        >>> DisabledSafetyCheck.platform()
        platform
    """

    @classmethod
    def platform(cls) -> DisabledSafetyCheck:
        """Allows calling on a platform the function was not exported for."""
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> DisabledSafetyCheck:
        """Allows a custom call target not known to be stable."""
        return cls(f"custom_call:{target_name}")

    def is_custom_call(self) -> str | None:
        """The custom call target this check allows, if it is one."""
        m = re.match(r"custom_call:(.+)$", self._impl)
        return m.group(1) if m else None

    def __init__(self, _impl: str):
        self._impl = _impl

    def __str__(self) -> str:
        return self._impl

    __repr__ = __str__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self) -> int:
        return hash(self._impl)


# --------------------------------------------------------------------------- symbolic shapes

_NO_SHAPE_POLY = ("ember.export: shape polymorphism (symbolic dimensions) is not supported; "
                  "export with concrete shapes")


def symbolic_shape(shape_spec: str | None, *, constraints: Sequence[str] = (),
                   scope: Any = None, like: Sequence[int | None] | None = None) -> tuple:
    """Parses a symbolic shape (not supported: raises NotImplementedError)."""
    raise NotImplementedError(f"symbolic_shape: {_NO_SHAPE_POLY}")


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: Any = None) -> Any:
    """Symbolic argument specs (not supported: raises NotImplementedError)."""
    raise NotImplementedError(f"symbolic_args_specs: {_NO_SHAPE_POLY}")


def is_symbolic_dim(p: Any) -> bool:
    """Whether ``p`` is a symbolic dimension (never, as ember has none).

    Example:
        >>> is_symbolic_dim(3)
        False
    """
    return False


class SymbolicScope:
    """A scope of symbolic dimensions (not supported: raises NotImplementedError)."""

    def __init__(self, constraints_str: Sequence[str] = ()):
        raise NotImplementedError(f"SymbolicScope: {_NO_SHAPE_POLY}")


# --------------------------------------------------------------------------- pytree registry

# type -> (serialized name, serialize aux); serialized name -> (type, deserialize aux,
# from_children).
_serializers: dict[type, tuple[str, Callable[[Any], bytes]]] = {}
_deserializers: dict[str, tuple[type, Callable[[bytes], Any], Callable]] = {}


def register_pytree_node_serialization(
        nodetype: type[T], *, serialized_name: str,
        serialize_auxdata: Callable[[Any], bytes],
        deserialize_auxdata: Callable[[bytes], Any],
        from_children: Callable[[Any, Sequence[Any]], Any] | None = None) -> type[T]:
    """Registers a custom pytree node type for the ``in_tree``/``out_tree`` of serialized
    ``Exported``s. Call it after ``ember._pytree.register_pytree_node``.

    Args:
        nodetype: the node type.
        serialized_name: the name written in the serialization (unique).
        serialize_auxdata: the node's aux data to bytes.
        deserialize_auxdata: bytes back to the aux data.
        from_children: ``(aux, children) -> node``; defaults to the registered unflatten.

    Returns:
        ``nodetype`` (usable as a class decorator).

    Example:
        >>> register_pytree_node_serialization(
        ...     Box, serialized_name="my.Box",
        ...     serialize_auxdata=lambda aux: aux.encode(),
        ...     deserialize_auxdata=lambda b: b.decode())
    """
    if nodetype in _serializers:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. "
                         "Previous registration was with serialized_name "
                         f"`{_serializers[nodetype][0]}`.")
    if serialized_name in _deserializers:
        raise ValueError("Duplicate serialization registration for serialized_name "
                         f"`{serialized_name}`. Previous registration was for type "
                         f"`{_deserializers[serialized_name][0]}`.")
    if from_children is None:
        if not _pytree.is_tree_node(nodetype) or _is_namedtuple(nodetype):
            raise ValueError("If `from_children` is not present, you must call first "
                             f"`ember._pytree.register_pytree_node` for `{nodetype}`")
        from_children = _pytree._kind_of_type(nodetype).unflatten
    _serializers[nodetype] = (serialized_name, serialize_auxdata)
    _deserializers[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def _is_namedtuple(t: type) -> bool:
    return (isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields")
            and all(isinstance(f, str) for f in t._fields))


def register_namedtuple_serialization(nodetype: type[T], *, serialized_name: str) -> type[T]:
    """Registers a ``collections.namedtuple`` type for serialization.

    Example:
        >>> Point = register_namedtuple_serialization(
        ...     collections.namedtuple("Point", "x y"), serialized_name="my.Point")
    """
    if not _is_namedtuple(nodetype):
        raise ValueError("Use `ember.export.register_pytree_node_serialization` for types "
                         "other than `collections.namedtuple`.")
    fields = list(nodetype._fields)
    return register_pytree_node_serialization(
        nodetype, serialized_name=serialized_name,
        serialize_auxdata=lambda aux: json.dumps(fields).encode("utf-8"),
        deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")),
        from_children=lambda keys, children: nodetype(**dict(zip(keys, children))))


def _ordered_dict_keys(keys: Any) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only "
                                  f"when the keys are strings. Found keys: {keys}.")
    return json.dumps(list(keys)).encode("utf-8")


register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=_ordered_dict_keys,
    deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")),
    from_children=lambda keys, children: collections.OrderedDict(zip(keys, children)))


def _tree_to_json(treedef: Any) -> Any:
    data = treedef.node_data()
    if data is None:
        return "*"
    t, aux = data
    children = [_tree_to_json(c) for c in treedef.children()]
    if t is tuple or t is list:
        return {"k": t.__name__, "c": children}
    if t is type(None):
        return {"k": "None"}
    if t is dict:
        if not all(isinstance(k, str) for k in aux):
            raise TypeError("Serialization of dict pytree nodes is supported only when the "
                            f"keys are strings. Found keys: {aux}.")
        return {"k": "dict", "keys": list(aux), "c": children}
    entry = _serializers.get(t)
    if entry is None:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type `{t}`. "
                         "Use `export.register_pytree_node_serialization` or "
                         "`export.register_namedtuple_serialization`.")
    name, serialize_aux = entry
    aux_bytes = serialize_aux(aux)
    if not isinstance(aux_bytes, (bytes, bytearray)):
        raise TypeError(f"the serialize_auxdata of `{name}` must return bytes, got "
                        f"{type(aux_bytes).__name__}")
    return {"k": "custom", "name": name, "aux": base64.b64encode(aux_bytes).decode("ascii"),
            "c": children}


class _Hole:
    """A placeholder leaf while a treedef is rebuilt from its serialization."""


def _example_from_json(node: Any) -> Any:
    # An object of the serialized structure with _Hole leaves; its tree_structure is the
    # treedef.
    if node == "*":
        return _Hole()
    if not isinstance(node, dict) or not isinstance(node.get("c", []), list):
        raise ValueError(f"malformed pytree node {node!r}")
    children = [_example_from_json(c) for c in node.get("c", [])]
    kind = node.get("k")
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "None":
        return None
    if kind == "dict":
        keys = node.get("keys")
        if not isinstance(keys, list) or len(keys) != len(children):
            raise ValueError("malformed dict pytree node")
        return dict(zip(keys, children))
    if kind == "custom":
        entry = _deserializers.get(node.get("name"))
        if entry is None:
            raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type "
                             f"`{node.get('name')}`. Use "
                             "`export.register_pytree_node_serialization` or "
                             "`export.register_namedtuple_serialization`.")
        _, deserialize_aux, from_children = entry
        aux = deserialize_aux(base64.b64decode(node["aux"]))
        return from_children(aux, children)
    raise ValueError(f"unknown pytree node kind {kind!r}")


def _tree_from_json(node: Any) -> Any:
    return _pytree.tree_structure(_example_from_json(node))


# --------------------------------------------------------------------------- avals

_DTYPE_NAME = re.compile(r"^[a-z0-9_]{1,32}$")


def _dtype_to_name(dt: np.dtype) -> str:
    return "float0" if dt == dtypes.float0 else np.dtype(dt).name


def _dtype_from_name(name: Any) -> np.dtype:
    if name == "float0":
        return dtypes.float0
    if not isinstance(name, str) or not _DTYPE_NAME.match(name):
        raise ValueError(f"unknown dtype {name!r}")
    try:
        dt = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown dtype {name!r}") from None
    if dt.kind not in "biufc" and dt.name not in ("bfloat16",) and not hasattr(ml_dtypes, name):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def _aval_to_json(a: core.ShapedArray) -> list:
    return [list(a.shape), _dtype_to_name(a.dtype), bool(a.weak_type)]


def _aval_from_json(x: Any) -> core.ShapedArray:
    if (not isinstance(x, list) or len(x) != 3 or not isinstance(x[0], list)
            or not all(type(d) is int and d >= 0 for d in x[0])):
        raise ValueError(f"malformed abstract value {x!r}")
    return core.ShapedArray(tuple(x[0]), _dtype_from_name(x[1]), bool(x[2]))


# --------------------------------------------------------------------------- Exported


@dataclasses.dataclass(frozen=True)
class Exported:
    """A jitted function lowered to an HLO module, with its calling convention.

    Attributes:
        fun_name: the exported function's name.
        in_tree: the treedef of ``(args, kwargs)``.
        in_avals: the flat tuple of argument abstract values.
        out_tree: the treedef of the results.
        out_avals: the flat tuple of result abstract values.
        in_shardings_hlo: one ``None`` per argument (one device).
        out_shardings_hlo: one ``None`` per result.
        nr_devices: the number of devices (1).
        platforms: the platforms exported for.
        ordered_effects: always empty.
        unordered_effects: always empty.
        disabled_safety_checks: the checks disabled at export.
        mlir_module_serialized: the module's HLO text, UTF-8 encoded.
        calling_convention_version: the calling convention's version.
        module_kept_var_idx: the arguments the module takes (``float0`` ones are dropped).
        uses_global_constants: always False (no shape polymorphism).

    Example:
        >>> exp = export(ember.jit(lambda x: x * 2))(1.0)
        >>> exp.call(3.0)
        Array(6., dtype=float32, weak_type=True)
    """

    fun_name: str
    in_tree: Any
    in_avals: tuple[core.ShapedArray, ...]
    out_tree: Any
    out_avals: tuple[core.ShapedArray, ...]
    in_shardings_hlo: tuple[None, ...]
    out_shardings_hlo: tuple[None, ...]
    nr_devices: int
    platforms: tuple[str, ...]
    ordered_effects: tuple
    unordered_effects: tuple
    disabled_safety_checks: Sequence[DisabledSafetyCheck]
    mlir_module_serialized: bytes
    calling_convention_version: int
    module_kept_var_idx: tuple[int, ...]
    uses_global_constants: bool
    _hoisted_consts: tuple = dataclasses.field(default=(), compare=False, repr=False)
    _get_vjp: Callable[[Exported], Exported] | None = dataclasses.field(
        default=None, compare=False, repr=False)
    _runner: list = dataclasses.field(default_factory=list, compare=False, repr=False)

    def mlir_module(self) -> str:
        """The module's text (ember's HLO)."""
        return self.mlir_module_serialized.decode("utf-8")

    def __str__(self) -> str:
        return f"Exported(fun_name={self.fun_name}, ...)"

    def in_shardings_jax(self, mesh: Any) -> tuple[None, ...]:
        """The arguments' shardings for ``mesh``: unspecified (``None``) on one device."""
        return (None,) * len(self.in_avals)

    def out_shardings_jax(self, mesh: Any) -> tuple[None, ...]:
        """The results' shardings for ``mesh``: unspecified (``None``) on one device."""
        return (None,) * len(self.out_avals)

    def has_vjp(self) -> bool:
        """Whether the VJP is available (``vjp()``)."""
        return self._get_vjp is not None

    def vjp(self) -> Exported:
        """The exported VJP: takes the flat primal arguments then one cotangent per flat
        result, and returns the cotangents of the flat arguments.

        Raises:
            ValueError: when deserialized without its VJP (``serialize(vjp_order=0)``).
        """
        if self._get_vjp is None:
            raise ValueError("No VJP is available")
        return self._get_vjp(self)

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """The self-contained serialization of this function and its VJPs up to
        ``vjp_order`` (2 allows ``grad(grad(f))`` of the deserialized function).

        Example:
            >>> blob = exp.serialize(vjp_order=1)
        """
        if not isinstance(vjp_order, int) or vjp_order < 0:
            raise ValueError(f"serialize: vjp_order must be a non-negative int, got "
                             f"{vjp_order!r}")
        blobs: list[bytes] = []
        doc = self._to_json(vjp_order, blobs)
        doc["blob_sizes"] = [len(b) for b in blobs]
        text = json.dumps(doc).encode("utf-8")
        out = bytearray(_MAGIC)
        out += _HEADER.pack(_FORMAT_VERSION, len(text))
        out += text
        for b in blobs:
            out += b
        return out

    def _to_json(self, vjp_order: int, blobs: list[bytes]) -> dict:
        consts = []
        for c in self._hoisted_consts:
            raw = np.ascontiguousarray(c).tobytes()
            consts.append({"aval": [list(c.shape), _dtype_to_name(c.dtype), False],
                           "index": len(blobs), "nbytes": len(raw)})
            blobs.append(raw)
        vjp = None
        if vjp_order > 0:
            vjp = self.vjp()._to_json(vjp_order - 1, blobs)
        return {
            "fun_name": self.fun_name,
            "in_tree": _tree_to_json(self.in_tree),
            "out_tree": _tree_to_json(self.out_tree),
            "in_avals": [_aval_to_json(a) for a in self.in_avals],
            "out_avals": [_aval_to_json(a) for a in self.out_avals],
            "nr_devices": self.nr_devices,
            "platforms": list(self.platforms),
            "disabled_checks": [str(c) for c in self.disabled_safety_checks],
            "module": self.mlir_module(),
            "calling_convention_version": self.calling_convention_version,
            "module_kept_var_idx": list(self.module_kept_var_idx),
            "consts": consts,
            "vjp": vjp,
        }

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the exported function from an ember program (eagerly, under jit, and
        under grad when the VJP is available).

        Args:
            *args: arguments of the structure, shapes and dtypes exported for.
            **kwargs: keyword arguments, likewise.

        Returns:
            The results, with the exported function's output structure.

        Example:
            >>> exp.call(np.ones(4, np.float32))
        """
        return _call(self, args, kwargs)

    @property
    def _run(self) -> _RunExported:
        run = self.__dict__.get("_run_obj")
        if run is None:  # (frozen: cached through object.__setattr__)
            run = _RunExported(self)
            object.__setattr__(self, "_run_obj", run)
        return run

    def _executable(self) -> Any:
        # Compiled once per Exported (lock: two threads may call it first together).
        if self._runner:
            return self._runner[0]
        with _compile_lock:
            if not self._runner:
                self._runner.append(_compile(self))
        return self._runner[0]


_compile_lock = threading.Lock()


def _compile(exp: Exported) -> Any:
    from ember.backends import canonical_name
    from ember.compiler.parser import parse_module
    from ember.config import config
    from ember.runtime.dispatch import compile_module
    kept = [exp.in_avals[i] for i in exp.module_kept_var_idx]
    outs = [a for a in exp.out_avals if a.dtype != dtypes.float0]
    return compile_module(parse_module(exp.mlir_module()), exp.fun_name,
                          f"exported_{exp.fun_name}",
                          canonical_name(config.read("jax_default_backend")), kept, outs,
                          list(exp._hoisted_consts))


class _RunExported:
    """The host function a call runs: the exported module on the NumPy values of the kept
    (non-``float0``) arguments, giving the non-``float0`` results."""

    def __init__(self, exp: Exported):
        self.exp = exp

    def __call__(self, *values: Any) -> list:
        exp = self.exp
        kept = [np.asarray(v, exp.in_avals[i].dtype)
                for v, i in zip(values, exp.module_kept_var_idx)]
        return exp._executable().execute_values(kept)

    def __repr__(self) -> str:
        return f"call_exported[{self.exp.fun_name}]"


def _check_platform(exp: Exported) -> None:
    platform = default_export_platform()
    if (platform not in exp.platforms
            and DisabledSafetyCheck.platform() not in exp.disabled_safety_checks):
        raise ValueError(f"Function '{exp.fun_name}' was exported for platforms "
                         f"'{exp.platforms}' but it is used on '{(platform,)}'.")


def _arg_path(in_tree: Any, i: int) -> str:
    # "args[0]" / "kwargs['y']" / "args[1]['a']" for flat argument i (JAX's descriptor).
    example = _pytree.tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    paths = _pytree.tree_flatten_with_path(example)[0]
    path = paths[i][0]
    head = "args" if path and getattr(path[0], "idx", None) == 0 else "kwargs"
    return head + "".join(str(k) for k in path[1:])


def _check_args(exp: Exported, in_tree: Any, avals: Sequence[core.ShapedArray]) -> None:
    if in_tree != exp.in_tree:
        raise ValueError(
            "The invocation args and kwargs must have the same pytree structure as when the "
            f"function '{exp.fun_name}' was exported, but they differ: called with "
            f"{in_tree}, exported for {exp.in_tree}.")
    for i, (want, got) in enumerate(zip(exp.in_avals, avals)):
        if len(want.shape) != len(got.shape):
            raise ValueError(f"Rank mismatch for {_arg_path(in_tree, i)}: expected "
                             f"{want.shape} and called with {got.shape}")
        if want.dtype != got.dtype:
            raise ValueError(f"Dtype mismatch for {_arg_path(in_tree, i)}: expected "
                             f"{want.dtype} and called with {got.dtype}")
        for d, (w, g) in enumerate(zip(want.shape, got.shape)):
            if w != g:
                raise ValueError(f"Shape mismatch for {_arg_path(in_tree, i)}.shape[{d}] "
                                 f"(expected same constant): expected {want.shape} and "
                                 f"called with {got.shape}")


def _call(exp: Exported, args: tuple, kwargs: dict) -> Any:
    from ember.api import _abstractify
    _check_platform(exp)
    flat, in_tree = _pytree.tree_flatten((args, kwargs))
    flat = [x if isinstance(x, (core.Tracer, np.ndarray)) or hasattr(x, "aval")
            else np.asarray(x, dtypes.dtype(x, canonicalize=True)) for x in flat]
    _check_args(exp, in_tree, [_abstractify(x) for x in flat])
    # float0 values carry no data: the module neither takes nor makes them, and they stay
    # out of the traced call (a float0 constant cannot be lowered).
    kept = [flat[i] for i in exp.module_kept_var_idx]
    if core.is_eval_context() and not any(isinstance(x, core.Tracer) for x in kept):
        # Eagerly, nothing to differentiate or batch: run the executable directly.
        from ember.runtime.array import Array
        exe = exp._executable()
        outs = iter(exe.execute([x if type(x) is Array else np.asarray(x, a.dtype)
                                 for x, a in zip(kept, exe.in_avals)]))
    else:
        outs = iter(_flat_call(exp)(*kept))
    outs = [np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0 else next(outs)
            for a in exp.out_avals]
    return _pytree.tree_unflatten(exp.out_tree, outs)


def _bind(exp: Exported, kept: Sequence[Any]) -> list:
    return list(_host_call(exp)(*kept))


def _host_call(exp: Exported) -> Callable:
    """The module as a pure host call of the kept arguments, which vmap refuses with JAX's
    error (a batch dimension would have to be symbolic in the exported shapes)."""
    from ember.custom_batching import custom_vmap
    from ember.lax.callback import pure_callback_p
    cached = exp.__dict__.get("_host")
    if cached is not None:
        return cached
    avals = tuple(a for a in exp.out_avals if a.dtype != dtypes.float0)

    @custom_vmap
    def host(*kept):
        return list(pure_callback_p.bind(*kept, callback=exp._run, result_avals=avals,
                                         vmap_method=None))

    @host.def_vmap
    def _refuse(axis_size, in_batched, *kept):
        raise NotImplementedError("Batching rule for 'call_exported' not implemented")

    object.__setattr__(exp, "_host", host)
    return host


def _flat_call(exp: Exported) -> Callable:
    """The function of the kept arguments a call runs, giving the non-float0 results: the
    module as a pure host call, with the exported VJP as its custom VJP (as in JAX, a
    missing VJP fails only when differentiated)."""
    from ember.custom_derivatives import custom_vjp
    cached = exp.__dict__.get("_flat")
    if cached is not None:
        return cached

    @custom_vjp
    def f_flat(*kept):
        return _bind(exp, kept)

    def fwd(*kept):  # (calls f_flat itself: a higher-order grad differentiates it again)
        return f_flat(*kept), kept

    def bwd(kept, cts):
        vjp_exp = exp.vjp()
        primals = [np.zeros(a.shape, dtypes.float0) for a in exp.in_avals]
        for i, x in zip(exp.module_kept_var_idx, kept):
            primals[i] = x
        it = iter(cts)
        all_cts = [np.zeros(a.shape, dtypes.float0) if a.dtype == dtypes.float0 else next(it)
                   for a in exp.out_avals]
        in_cts = vjp_exp.call(*primals, *all_cts)
        return tuple(in_cts[i] for i in exp.module_kept_var_idx)

    f_flat.defvjp(fwd, bwd)
    object.__setattr__(exp, "_flat", f_flat)
    return f_flat


# --------------------------------------------------------------------------- export


def default_export_platform() -> str:
    """The platform ``export`` lowers for by default: ``"cpu"``.

    Example:
        >>> default_export_platform()
        'cpu'
    """
    return "cpu"


def export(fun_jit: Any, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence[DisabledSafetyCheck] = ()) -> Callable[..., Exported]:
    """Exports a jitted function for persistent serialization.

    Args:
        fun_jit: the result of ``ember.jit``.
        platforms: the platforms to export for (default: ``default_export_platform()``).
        disabled_checks: safety checks to skip (``DisabledSafetyCheck``).

    Returns:
        A function taking pytrees of ``ShapeDtypeStruct`` (or arrays) like ``fun_jit``'s
        arguments and returning an ``Exported``.

    Example:
        >>> exp = export(ember.jit(jnp.sin))(np.arange(4, dtype=np.float32))
        >>> exp.fun_name, exp.in_avals
        ('sin', (ShapedArray(float32[4]),))
    """
    from ember.stages import Wrapped
    if not isinstance(fun_jit, Wrapped):
        raise ValueError(f"Function to be exported must be the result of `jit` but is: "
                         f"{fun_jit}")
    if platforms is None:
        platforms_t = (default_export_platform(),)
    else:
        if isinstance(platforms, str) or not all(isinstance(p, str) for p in platforms):
            raise TypeError(f"export: platforms must be a sequence of strings, got "
                            f"{platforms!r}")
        platforms_t = tuple(p.lower() for p in platforms)
        if not platforms_t:
            raise ValueError("export: platforms must not be empty")
    checks = tuple(disabled_checks)
    for c in checks:
        if not isinstance(c, DisabledSafetyCheck):
            raise TypeError(f"export: disabled_checks must hold DisabledSafetyCheck values, "
                            f"got {c!r}")

    def do_export(*args_specs: Any, **kwargs_specs: Any) -> Exported:
        traced = fun_jit.trace(*args_specs, **kwargs_specs)
        in_avals = tuple(_pytree.tree_leaves(traced.in_avals))
        return _export_closed(traced.jaxpr, traced.fun_name, traced.in_tree, in_avals,
                              traced.out_tree, platforms_t, checks)

    return do_export


def _export_closed(closed: Any, fun_name: str, in_tree: Any, in_avals: tuple, out_tree: Any,
                   platforms: tuple, checks: tuple,
                   vjp_source: Callable | None = None) -> Exported:
    from ember.compiler.lower import lower_closed_jaxpr
    from ember.runtime.dispatch import _without_float0
    out_avals = tuple(closed.out_avals)
    stripped = _without_float0(closed)
    lowered = lower_closed_jaxpr(stripped if stripped is not None else closed,
                                 name=f"jit_{fun_name}")
    _check_custom_calls(lowered.module, checks)
    kept = tuple(i for i, a in enumerate(in_avals) if a.dtype != dtypes.float0)
    primal = (lambda *flat: _eval_flat(closed, flat)) if vjp_source is None else vjp_source
    exp_holder: list = []

    def get_vjp(exp: Exported) -> Exported:
        if not exp_holder:
            exp_holder.append(_export_vjp(exp, primal))
        return exp_holder[0]

    return Exported(
        fun_name=fun_name, in_tree=in_tree, in_avals=in_avals, out_tree=out_tree,
        out_avals=out_avals, in_shardings_hlo=(None,) * len(in_avals),
        out_shardings_hlo=(None,) * len(out_avals), nr_devices=1, platforms=platforms,
        ordered_effects=(), unordered_effects=(), disabled_safety_checks=checks,
        mlir_module_serialized=lowered.module.to_text().encode("utf-8"),
        calling_convention_version=_CALLING_CONVENTION_VERSION, module_kept_var_idx=kept,
        uses_global_constants=False,
        _hoisted_consts=tuple(np.asarray(c) for c in lowered.hoisted_consts),
        _get_vjp=get_vjp)


def _eval_flat(closed: Any, flat: Sequence[Any]) -> list:
    from ember.jaxpr import eval_closed_jaxpr
    return list(eval_closed_jaxpr(closed, *flat))


def _export_vjp(exp: Exported, primal: Callable) -> Exported:
    """Exports ``(*primals, *out_cts) -> in_cts`` of the flat ``primal`` (JAX's calling
    convention of an exported VJP)."""
    import ember
    from ember.interpreters.ad import tangent_aval
    n = len(exp.in_avals)

    def fun_vjp_jax(*primals_and_cts):
        primals, cts = primals_and_cts[:n], primals_and_cts[n:]
        _, pullback = ember.vjp(lambda *xs: list(primal(*xs)), *primals)
        return tuple(pullback(list(cts)))

    specs = [ember.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
             for a in (*exp.in_avals, *map(tangent_aval, exp.out_avals))]
    traced = ember.jit(fun_vjp_jax).trace(*specs)
    in_avals = tuple(_pytree.tree_leaves(traced.in_avals))
    return _export_closed(traced.jaxpr, "fun_vjp_jax", traced.in_tree, in_avals,
                          traced.out_tree, exp.platforms, tuple(exp.disabled_safety_checks),
                          vjp_source=lambda *flat: _eval_flat(traced.jaxpr, flat))


def _check_custom_calls(module: Any, checks: tuple) -> None:
    allowed = {c.is_custom_call() for c in checks}
    for comp in module.computations:
        for inst in comp.instructions:
            target = inst.attrs.get("call_target_name") if inst.opcode == "custom_call" else None
            if target == _HOST_CALLBACK_TARGET and target not in allowed:
                raise ValueError(
                    "Cannot serialize code with custom calls whose targets have no "
                    f"compatibility guarantees: {target} (a host callback: its Python "
                    "function cannot be serialized).")


# --------------------------------------------------------------------------- deserialize


def deserialize(blob: bytes | bytearray) -> Exported:
    """An ``Exported`` from ``Exported.serialize()``'s bytes (in any process).

    Raises:
        ValueError: for bytes that are not an ember serialization of a supported version,
            or that are corrupt.

    Example:
        >>> exp2 = deserialize(exp.serialize())
        >>> exp2.call(np.ones(4, np.float32))
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize: expected bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if not blob.startswith(_MAGIC):
        raise ValueError("deserialize: not a serialized ember Exported (bad magic bytes)")
    start = len(_MAGIC)
    if len(blob) < start + _HEADER.size:
        raise ValueError("deserialize: the serialization is truncated")
    version, n = _HEADER.unpack_from(blob, start)
    if version != _FORMAT_VERSION:
        raise ValueError(f"deserialize: unsupported serialization format version {version} "
                         f"(this ember reads version {_FORMAT_VERSION})")
    start += _HEADER.size
    if len(blob) < start + n:
        raise ValueError("deserialize: the serialization is truncated")
    try:
        doc = json.loads(blob[start:start + n].decode("utf-8"))
        data = memoryview(blob)[start + n:]
        offsets = [0]
        for size in doc["blob_sizes"]:
            offsets.append(offsets[-1] + int(size))
        if offsets[-1] != len(data):
            raise ValueError("the constants' bytes do not match their sizes")
        return _from_json(doc, data, offsets)
    except ValueError as e:
        raise ValueError(f"deserialize: corrupt serialization: {e}") from e
    except (TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise ValueError(f"deserialize: corrupt serialization: {type(e).__name__}: "
                         f"{e}") from e


def _from_json(doc: Any, data: memoryview, offsets: list[int]) -> Exported:
    from ember.compiler.parser import parse_module
    from ember.compiler.verifier import verify_module
    if not isinstance(doc, dict):
        raise ValueError("the document is not an object")
    version = doc["calling_convention_version"]
    if not (minimum_supported_calling_convention_version <= version
            <= maximum_supported_calling_convention_version):
        raise ValueError(f"unsupported calling convention version {version}")
    text = doc["module"]
    if not isinstance(text, str):
        raise ValueError("the module is not text")
    try:
        verify_module(parse_module(text))
    except Exception as e:  # (the parser's and verifier's own errors, whatever their class)
        raise ValueError(f"the module does not parse: {e}") from e
    in_avals = tuple(_aval_from_json(a) for a in doc["in_avals"])
    out_avals = tuple(_aval_from_json(a) for a in doc["out_avals"])
    in_tree = _tree_from_json(doc["in_tree"])
    out_tree = _tree_from_json(doc["out_tree"])
    if in_tree.num_leaves != len(in_avals) or out_tree.num_leaves != len(out_avals):
        raise ValueError("the trees do not match the abstract values")
    kept = tuple(int(i) for i in doc["module_kept_var_idx"])
    if any(not 0 <= i < len(in_avals) for i in kept):
        raise ValueError("module_kept_var_idx out of range")
    hoisted = tuple(_read_const(data, offsets, c) for c in doc["consts"])
    vjp_doc = doc.get("vjp")
    vjp = _from_json(vjp_doc, data, offsets) if vjp_doc is not None else None
    platforms = tuple(str(p) for p in doc["platforms"])
    checks = tuple(DisabledSafetyCheck(str(c)) for c in doc["disabled_checks"])
    return Exported(
        fun_name=str(doc["fun_name"]), in_tree=in_tree, in_avals=in_avals, out_tree=out_tree,
        out_avals=out_avals, in_shardings_hlo=(None,) * len(in_avals),
        out_shardings_hlo=(None,) * len(out_avals), nr_devices=int(doc["nr_devices"]),
        platforms=platforms, ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=checks, mlir_module_serialized=text.encode("utf-8"),
        calling_convention_version=version, module_kept_var_idx=kept,
        uses_global_constants=False, _hoisted_consts=hoisted,
        _get_vjp=(lambda _: vjp) if vjp is not None else None)


def _read_const(data: memoryview, offsets: list[int], c: dict) -> np.ndarray:
    # Constants (of the whole document, nested VJPs included) follow the JSON one after
    # another; ``offsets`` are their starts, from the document's ``blob_sizes``.
    aval = _aval_from_json(c["aval"])
    index = int(c["index"])
    if not 0 <= index < len(offsets) - 1:
        raise ValueError("a constant's index is out of range")
    lo, hi = offsets[index], offsets[index + 1]
    if hi - lo != aval.size * aval.dtype.itemsize:
        raise ValueError("a constant's bytes do not match its type")
    return np.frombuffer(data[lo:hi], dtype=aval.dtype).reshape(aval.shape)
