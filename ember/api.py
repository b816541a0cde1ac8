"""User-facing transformations: jit (with lower/compile), eval_shape, disable_jit, make_jaxpr.

A jitted call computes the signature of its arguments (pytree structure, each leaf's shape,
dtype and weak type, the static arguments, the x64 flag), looks it up in the function's
compile cache (``ember.runtime.compile_cache``) and runs the cached executable; a miss traces
the function to a jaxpr and compiles it (``ember.runtime.dispatch.compile_closed_jaxpr``).
Under another transformation a jitted call is staged as one ``pjit`` equation.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import operator
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import _pytree, core, dtypes
from ember import monitoring as _monitoring
from ember.config import config as _config
from ember.errors import UnexpectedTracerError
from ember.interpreters import batching
from ember.interpreters import partial_eval as pe
from ember.interpreters.pjit import bind_pjit
from ember.jaxpr import ClosedJaxpr, eval_closed_jaxpr
from ember.runtime.array import Array
from ember.runtime.compile_cache import CacheEntry


def _abstractify(x: Any) -> core.ShapedArray:
    if isinstance(x, core.ShapedArray):
        return x
    if hasattr(x, "shape") and hasattr(x, "dtype") and not core.is_array_like(x):
        return core.ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype),
                                getattr(x, "weak_type", False))
    return core.get_aval(x)


def _positional_namer(fun: Callable) -> Callable[[int], str] | None:
    """Maps an argument position to its parameter name; None when ``fun`` has no signature."""
    names = _code_parameter_names(fun)
    if names is not None:
        positional, varargs = names
    else:
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            return None
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = next((p.name for p in params if p.kind == p.VAR_POSITIONAL), "args")
    return lambda i: (positional[i] if i < len(positional)
                      else f"{varargs}[{i - len(positional)}]")


def _code_parameter_names(fun: Callable) -> tuple[Sequence[str], str] | None:
    """A plain function's positional parameter names and its ``*args`` name, read from its
    code object (what ``inspect.signature`` finds, at a fraction of its cost); None for
    anything else (wrapped functions, partials, callables)."""
    if type(fun) is not types.FunctionType or "__wrapped__" in fun.__dict__ \
            or "__signature__" in fun.__dict__:
        return None
    code = fun.__code__
    varargs = "args"
    if code.co_flags & inspect.CO_VARARGS:
        varargs = code.co_varnames[code.co_argcount + code.co_kwonlyargcount]
    return code.co_varnames[:code.co_argcount], varargs


def _arg_names(fun: Callable, args: Sequence[Any], kwargs: dict,
               dyn_positions: Sequence[int]) -> list[str] | None:
    """The Python parameter name of each flat argument leaf (for error messages)."""
    namer = _positional_namer(fun)
    if namer is None:
        return None
    names: list[str] = []
    for i in dyn_positions:
        names.extend([namer(i)] * len(_pytree.tree_leaves(args[i])))
    for key in sorted(kwargs):  # dicts flatten in sorted key order
        names.extend([key] * len(_pytree.tree_leaves(kwargs[key])))
    return names


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple[Any, int]] | None = None,
               return_shape: bool = False) -> Callable[..., ClosedJaxpr]:
    """Returns a function that traces ``fun`` on example arguments and gives its jaxpr.

    ``axis_env``: ``(name, size)`` pairs binding axis names for collectives (``lax.psum``
    and friends), as an enclosing ``vmap(..., axis_name=name)`` of that size would.

    Example:
        >>> print(ember.make_jaxpr(jnp.sin)(1.0))
        { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """
    if not callable(fun):
        raise TypeError(f"make_jaxpr: expected a callable, got {type(fun).__name__}: {fun!r}")
    # As jit's (JAX traces with jit): checked against the signature, named static arguments
    # may be given by keyword, negative numbers count from the end of each call's arguments.
    static_nums, static_names, _, _ = _resolve_argnums(fun, static_argnums, None, None, None,
                                                       caller="make_jaxpr")

    @functools.wraps(fun)
    def make(*args, **kwargs):
        static = {i + len(args) if i < 0 else i for i in static_nums}
        static_kw = {k: v for k, v in kwargs.items() if k in static_names}
        _check_hashable(fun, [(i, args[i]) for i in sorted(static) if i < len(args)]
                        + list(static_kw.items()), "make_jaxpr")
        dyn_positions = [i for i in range(len(args)) if i not in static]
        dyn_args = [args[i] for i in dyn_positions]
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
        flat, in_tree = _pytree.tree_flatten(_keys_over_structs((dyn_args, dyn_kwargs)))
        in_avals = [_abstractify(x) for x in flat]
        out_trees = []

        def flat_fun(*flat_tracers):
            dyn, kw = _pytree.tree_unflatten(in_tree, list(flat_tracers))
            full = list(args)
            for i, v in zip(dyn_positions, dyn):
                full[i] = v
            out_flat, out_tree = _pytree.tree_flatten(fun(*full, **kw, **static_kw))
            out_trees.append(out_tree)
            return out_flat

        names = _arg_names(fun, args, dyn_kwargs, dyn_positions)
        with contextlib.ExitStack() as stack:
            for name, size in axis_env or ():
                stack.enter_context(batching.extend_axis_env(name, size))
            closed, _ = pe.trace_to_jaxpr(flat_fun, in_avals, names)
        if return_shape:
            return closed, _shape_structs(out_trees[-1], closed.out_avals)
        return closed

    return make


def _is_key_dtype(dtype: Any) -> bool:
    return getattr(dtype, "type", None) is dtypes.prng_key


class ShapeDtypeStruct:
    """A shape and dtype standing in for an array (for eval_shape, make_jaxpr and jit's
    ``lower``/``trace``). Immutable and hashable, as JAX's. The dtype may be a typed PRNG
    key's (``random.key(0).dtype``): the struct then stands in for a key array.

    Example:
        >>> ember.ShapeDtypeStruct((2, 3), jnp.float32)
        ShapeDtypeStruct(shape=(2, 3), dtype=float32)
    """

    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape: Sequence[int], dtype: Any, *, sharding: Any = None,
                 weak_type: bool = False):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype", dtype if _is_key_dtype(dtype) else np.dtype(dtype))
        object.__setattr__(self, "weak_type", weak_type)
        object.__setattr__(self, "sharding", sharding)  # (recorded, as JAX's; None by default)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):  # (unset attributes may be set: copy and pickle do that)
            raise RuntimeError(f"Cannot reassign attributes ({name}) of immutable "
                               "ShapeDtypeStruct objects")
        object.__setattr__(self, name, value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def update(self, **kwargs: Any) -> ShapeDtypeStruct:
        """A copy with ``shape``, ``dtype``, ``sharding`` or ``weak_type`` replaced."""
        unknown = sorted(set(kwargs) - {"shape", "dtype", "sharding", "weak_type"})
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update: unexpected arguments {unknown}")
        return ShapeDtypeStruct(kwargs.get("shape", self.shape), kwargs.get("dtype", self.dtype),
                                sharding=kwargs.get("sharding", self.sharding),
                                weak_type=kwargs.get("weak_type", self.weak_type))

    def _key(self) -> tuple:
        return (self.shape, self.dtype, self.weak_type, self.sharding)

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeDtypeStruct) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        sharding = f", sharding={self.sharding!r}" if self.sharding is not None else ""
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{sharding}{weak})"


# --------------------------------------------------------------------------- jit

_log = logging.getLogger("ember")


def _fun_name(fun: Callable) -> str:
    while isinstance(fun, functools.partial):
        fun = fun.func
    return getattr(fun, "__name__", None) or type(fun).__name__


def _index_tuple(x: Any, what: str) -> tuple[int, ...]:
    if x is None:
        return ()
    try:
        return (operator.index(x),)
    except TypeError:
        pass
    try:
        return tuple(operator.index(i) for i in x)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {x!r}") from None


def _name_tuple(x: Any, what: str) -> tuple[str, ...]:
    if x is None:
        return ()
    if isinstance(x, str):
        return (x,)
    try:
        names = tuple(x)
    except TypeError:
        names = (x,)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must be a string or a sequence of strings, got {x!r}")
    return names


def _infer_argnums_and_argnames(params: list, nums: Any, names: Any, what: str
                                ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Completes ``{what}_argnums`` from ``{what}_argnames`` and vice versa (as JAX does:
    only parameters that may be given either way are matched, negative numbers never)."""
    if nums is None and names is None:
        return (), ()
    nums = None if nums is None else _index_tuple(nums, f"{what}_argnums")
    names = None if names is None else _name_tuple(names, f"{what}_argnames")
    either = [(i, p.name) for i, p in enumerate(params) if p.kind == p.POSITIONAL_OR_KEYWORD]
    if names is None:
        names = tuple(name for i, name in either if i in nums)
    elif nums is None:
        nums = tuple(i for i, name in either if name in names)
    return nums, names


def _validate_argnums(params: list, nums: tuple[int, ...], what: str) -> None:
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return  # (any position is valid)
    n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    if nums and (-min(nums) > n or max(nums) >= n):
        raise ValueError(f"{what}={nums} names a position the function does not have "
                         f"(it takes {n} positional arguments)")


def _validate_argnames(params: list, names: tuple[str, ...], what: str) -> None:
    positional_only = {p.name for p in params if p.kind == p.POSITIONAL_ONLY}
    if bad := sorted(positional_only & set(names)):
        raise ValueError(f"{what} names {bad}, which are positional-only arguments")
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return
    if bad := sorted(set(names) - {p.name for p in params}):
        raise ValueError(f"{what} names {bad}, which the function does not take")


def _resolve_argnums(fun: Callable, static_argnums: Any, static_argnames: Any,
                     donate_argnums: Any, donate_argnames: Any, caller: str = "jit"
                     ) -> tuple[tuple, ...]:
    """Checks jit's static and donated arguments against ``fun``'s signature and completes
    numbers from names and names from numbers, as JAX does. Negative numbers stay as they
    are: they count from the end of each call's positional arguments."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):  # (some builtins have no signature: nothing to check)
        if donate_argnames is not None:
            raise ValueError(f"{caller}: the signature of {fun!r} cannot be read, so "
                             "donate_argnames cannot be matched; pass donate_argnums") from None
        return (_index_tuple(static_argnums, f"{caller}: static_argnums"),
                _name_tuple(static_argnames, f"{caller}: static_argnames"),
                _index_tuple(donate_argnums, f"{caller}: donate_argnums"), ())
    static = _infer_argnums_and_argnames(params, static_argnums, static_argnames,
                                         f"{caller}: static")
    donate = _infer_argnums_and_argnames(params, donate_argnums, donate_argnames,
                                         f"{caller}: donate")
    for (nums, names), what in ((static, f"{caller}: static"), (donate, f"{caller}: donate")):
        _validate_argnums(params, nums, f"{what}_argnums")
        _validate_argnames(params, names, f"{what}_argnames")
    if both := sorted(set(static[1]) & set(donate[1])):
        raise ValueError(f"{caller}: arguments {both} are both static and donated; "
                         "static_argnames and donate_argnames cannot intersect")
    return (*static, *donate)


class _Signature:
    """A call's arguments split into static and dynamic parts, with the cache key."""

    __slots__ = ("key", "flat", "avals", "in_tree", "statics", "args", "kwargs")

    def __init__(self, key, flat, avals, in_tree, statics, args, kwargs):
        self.key = key
        self.flat = flat
        self.avals = avals
        self.in_tree = in_tree
        self.statics = statics
        self.args = args
        self.kwargs = kwargs


def _check_hashable(fun: Callable, statics: list[tuple[Any, Any]], caller: str = "jit") -> None:
    for where, value in statics:
        try:
            hash(value)
        except TypeError as e:
            name = where if isinstance(where, str) else _positional_name(fun, where)
            raise ValueError(  # (JAX's class for it)
                f"{caller}: the static argument {name!r} of type {type(value).__name__} is not "
                f"hashable ({e}). Static arguments (static_argnums/static_argnames) are part "
                "of the compile cache key and must be hashable: pass a tuple instead of a "
                "list, or make the argument dynamic.") from None


def _positional_name(fun: Callable, i: int) -> str:
    namer = _positional_namer(fun)
    return f"args[{i}]" if namer is None else namer(i)


def _arg_groups(sig: _Signature) -> list[tuple[int | str, Any]]:
    """The dynamic arguments of a call in flattening order, each with its position (or its
    keyword): one group of leaves each."""
    dyn_args, dyn_kwargs = _pytree.tree_unflatten(sig.in_tree, sig.flat)
    positions = [i for i in range(len(sig.args)) if not any(w == i for w, _ in sig.statics)]
    return [*zip(positions, dyn_args), *((k, dyn_kwargs[k]) for k in sorted(dyn_kwargs))]


def _leaf_names(fun: Callable, sig: _Signature) -> list[str]:
    """One readable name per flat argument leaf (``x``, or ``x[0]`` in a pytree argument)."""
    names = []
    for where, arg in _arg_groups(sig):
        name = where if isinstance(where, str) else _positional_name(fun, where)
        n = len(_pytree.tree_leaves(arg))
        names.extend([name] if n == 1 else [f"{name}[{j}]" for j in range(n)])
    return names


class ArgInfo:
    """One argument leaf of a traced, lowered or compiled function: its abstract value and
    whether it is donated (``args_info`` of those stages, as in JAX)."""

    __slots__ = ("_aval", "donated")

    def __init__(self, aval: core.ShapedArray, donated: bool):
        self._aval = aval
        self.donated = donated

    @property
    def shape(self) -> tuple[int, ...]:
        return self._aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self._aval.dtype

    def __eq__(self, other) -> bool:
        return (isinstance(other, ArgInfo) and self._aval == other._aval
                and self.donated == other.donated)

    def __hash__(self) -> int:
        return hash((self._aval, self.donated))

    def __repr__(self) -> str:
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


class _Stage:
    """What the traced, lowered and compiled forms of a jitted call share (JAX's ``Stage``):
    the description of its arguments (``in_tree`` is that of ``(args, kwargs)``, static
    arguments left out) and of its outputs."""

    _jitted: JitFunction
    _sig: _Signature
    _entry: CacheEntry

    @property
    def in_tree(self) -> Any:
        return self._sig.in_tree

    @property
    def in_avals(self) -> Any:
        return _pytree.tree_unflatten(self._sig.in_tree, self._sig.avals)

    @property
    def args_info(self) -> Any:
        donated = self._jitted._donated_leaves(self._sig)
        return _pytree.tree_unflatten(
            self._sig.in_tree, [ArgInfo(a, d) for a, d in zip(self._sig.avals, donated)])

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The flat indices of the donated argument leaves."""
        return tuple(i for i, d in enumerate(self._jitted._donated_leaves(self._sig)) if d)

    @property
    def out_tree(self) -> Any:
        return self._entry.out_tree

    @property
    def out_info(self) -> Any:
        """The outputs as a pytree of ``ShapeDtypeStruct`` (without weak types, as JAX's
        lowered and compiled stages give them)."""
        return _shape_structs(self._entry.out_tree, self._entry.closed.out_avals, weak=False)


class Traced(_Stage):
    """A jitted function traced for one signature (``jitted.trace(...)``): its ``jaxpr``,
    argument and output descriptions, and ``lower()``.

    Example:
        >>> traced = ember.jit(jnp.sin).trace(1.0)
        >>> traced.jaxpr
        { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
    """

    def __init__(self, jitted: JitFunction, sig: _Signature, entry: Any):
        self._jitted = jitted
        self._sig = sig
        self._entry = entry

    @property
    def jaxpr(self) -> ClosedJaxpr:
        return self._entry.closed

    @property
    def fun_name(self) -> str:
        return self._jitted.__name__

    @property
    def out_avals(self) -> Any:
        return _pytree.tree_unflatten(self._entry.out_tree, self._entry.closed.out_avals)

    @property
    def out_info(self) -> Any:
        """The outputs as a pytree of ``ShapeDtypeStruct`` (with their weak types)."""
        return _shape_structs(self._entry.out_tree, self._entry.closed.out_avals)

    def lower(self) -> Lowered:
        return Lowered(self._jitted, self._sig, self._entry)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Evaluates the jaxpr op by op on the dynamic arguments (the static ones are traced
        in), as JAX's ``Traced`` does."""
        flat, in_tree = _pytree.tree_flatten((args, kwargs))
        if in_tree != self._sig.in_tree:
            raise TypeError(f"Traced {self.fun_name}: the arguments' structure {in_tree} is "
                            f"not the one it was traced for, {self._sig.in_tree}")
        outs = eval_closed_jaxpr(self._entry.closed, *flat)
        return _pytree.tree_unflatten(self._entry.out_tree, outs)


class Lowered(_Stage):
    """A jitted function lowered for one signature: ``as_text()`` shows the HLO module
    before optimization and ``compile()`` gives a ``Compiled``.

    Example:
        >>> lowered = ember.jit(jnp.sin).lower(ember.ShapeDtypeStruct((3,), jnp.float32))
        >>> compiled = lowered.compile()
    """

    def __init__(self, jitted: JitFunction, sig: _Signature, entry: Any):
        from ember.compiler.lower import lower_closed_jaxpr
        self._jitted = jitted
        self._sig = sig
        self._entry = entry
        self._lowered = lower_closed_jaxpr(entry.closed, name=f"jit_{jitted.__name__}")

    @property
    def jaxpr(self) -> ClosedJaxpr:
        return self._entry.closed

    def as_text(self) -> str:
        """The HLO module's text, before optimization."""
        return self._lowered.module.to_text()

    def cost_analysis(self) -> dict:
        """Cost estimates of the unoptimized module (``flops``, ``bytes accessed``, ...)."""
        from ember.compiler.cost_analysis import cost_analysis
        return dict(cost_analysis(self._lowered.module))

    def compile(self) -> Compiled:
        """Optimizes and compiles the module for the jitted function's backend."""
        from ember.runtime.dispatch import compile_closed_jaxpr
        exe = compile_closed_jaxpr(self._entry.closed, self._jitted.__name__,
                                   self._jitted._backend)
        return Compiled(self._jitted, self._sig, self._entry, exe)


class Compiled(_Stage):
    """A compiled jitted function for one signature; call it with matching arguments.

    Example:
        >>> compiled = ember.jit(jnp.sin).lower(1.0).compile()
        >>> compiled(2.0)
        Array(0.9092974, dtype=float32, weak_type=True)
    """

    def __init__(self, jitted: JitFunction, sig: _Signature, entry: Any, executable: Any):
        self._jitted = jitted
        self._sig = sig
        self._entry = entry
        self._executable = executable

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Called with the dynamic arguments only, as in JAX: the static ones are compiled in.
        statics = self._sig.statics
        positional = {w: v for w, v in statics if not isinstance(w, str)}
        full, given = [], list(args)
        for i in range(len(args) + len(positional)):
            if i in positional:
                full.append(positional[i])
            elif given:
                full.append(given.pop(0))
        static_kw = {w: v for w, v in statics if isinstance(w, str)}
        if static_kw.keys() & kwargs.keys():
            raise TypeError(f"Compiled {self._jitted.__name__}: the arguments do not match "
                            f"the signature it was compiled for: static arguments "
                            f"{sorted(static_kw.keys() & kwargs.keys())} are compiled in")
        full_kwargs = {**kwargs, **static_kw}
        sig = self._jitted._signature(tuple(full), full_kwargs)
        if _key_without_weak_types(sig) != _key_without_weak_types(self._sig):
            raise TypeError(f"Compiled {self._jitted.__name__}: the arguments do not match "
                            f"the signature it was compiled for: "
                            f"{_describe_change(self._jitted, self._sig, sig)}")
        tracer = next((x for x in sig.flat if isinstance(x, core.Tracer)), None)
        if tracer is not None and not core.is_eval_context():
            raise TypeError(f"Compiled {self._jitted.__name__}: transformations (jit, grad, "
                            "vmap, ...) cannot be applied to a function lowered and compiled "
                            f"for one signature; got a tracer of type {type(tracer).__name__}. "
                            "Call the jitted function itself instead.")
        return self._entry.unflatten(_execute(self._executable, sig))

    def as_text(self) -> str:
        """The optimized HLO module's text (fusions visible)."""
        return self._executable.module.to_text()

    def cost_analysis(self) -> dict:
        """Cost estimates of the optimized module: ``flops``, ``bytes accessed``, ..."""
        from ember.compiler.cost_analysis import cost_analysis
        return dict(cost_analysis(self._executable.module))

    def memory_analysis(self) -> MemoryAnalysis:
        """Buffer sizes of the optimized module (``peak_bytes`` from buffer assignment)."""
        from ember.compiler.buffer_assignment import assign_buffers
        assignment = assign_buffers(self._executable.module)
        arg_bytes = sum(a.size * a.dtype.itemsize for a in self._executable.in_avals)
        out_bytes = sum(a.size * a.dtype.itemsize for a in self._executable.out_avals)
        return MemoryAnalysis(int(assignment.peak_bytes), arg_bytes, out_bytes,
                              int(getattr(assignment, "total_allocation_bytes", 0)))


def _key_without_weak_types(sig: _Signature) -> tuple:
    # A compiled function takes arguments that differ from its signature in weak types only
    # (JAX's check ignores them too): the dtypes the code reads are the same.
    return (sig.in_tree, [a.strip_weak_type() for a in sig.avals], sig.key[3])


class MemoryAnalysis:
    """Memory use of a compiled function, in bytes."""

    __slots__ = ("peak_bytes", "argument_size_in_bytes", "output_size_in_bytes",
                 "temp_size_in_bytes")

    def __init__(self, peak_bytes: int, argument_size_in_bytes: int,
                 output_size_in_bytes: int, temp_size_in_bytes: int):
        self.peak_bytes = peak_bytes
        self.argument_size_in_bytes = argument_size_in_bytes
        self.output_size_in_bytes = output_size_in_bytes
        self.temp_size_in_bytes = temp_size_in_bytes

    @property
    def peak_memory_in_bytes(self) -> int:  # (JAX's name)
        return self.peak_bytes

    def __repr__(self) -> str:
        return (f"MemoryAnalysis(peak_bytes={self.peak_bytes}, argument_size_in_bytes="
                f"{self.argument_size_in_bytes}, output_size_in_bytes="
                f"{self.output_size_in_bytes}, temp_size_in_bytes={self.temp_size_in_bytes})")


def _shape_structs(out_tree: Any, avals: Sequence[core.ShapedArray], weak: bool = True) -> Any:
    """The outputs as ``ShapeDtypeStruct``s; a key array's is one of the key dtype."""
    tree = _pytree.tree_unflatten(
        out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=weak and a.weak_type)
                   for a in avals])
    from ember.random.key_array import PRNGKeyArray
    return _pytree.tree_map(
        lambda x: ShapeDtypeStruct(x._base_array.shape[:-1], x.dtype)
        if isinstance(x, PRNGKeyArray) else x, tree, is_leaf=lambda x: isinstance(x, PRNGKeyArray))


def _keys_over_structs(tree: Any) -> Any:
    """``tree`` with each ``ShapeDtypeStruct`` of a key dtype made a key array over a struct
    of its ``uint32`` key data (how ember's pytrees carry keys); the same tree when none."""
    leaves = _pytree.tree_leaves(tree)
    if not any(type(x) is ShapeDtypeStruct and _is_key_dtype(x.dtype) for x in leaves):
        return tree
    from ember.random.key_array import PRNGKeyArray
    return _pytree.tree_map(
        lambda x: PRNGKeyArray(ShapeDtypeStruct(x.shape + (2,), np.uint32))
        if type(x) is ShapeDtypeStruct and _is_key_dtype(x.dtype) else x, tree)


def _flat_values(sig: _Signature) -> list:
    # Arrays are passed as they are (possibly pending); anything else becomes a NumPy value
    # of its canonical dtype. (A tracer here outlived its transformation: calls under a
    # transformation are staged, not run.)
    values = []
    for x, a in zip(sig.flat, sig.avals):
        if type(x) is Array:
            values.append(x)
        elif isinstance(x, core.Tracer):
            raise UnexpectedTracerError(x, "It was passed to a jitted function outside of "
                                           "the transformation that created it.")
        else:
            values.append(np.asarray(x, dtype=a.dtype))
    return values


# The last element of a fast-path key whose arguments are not all Arrays: such calls run
# by ``_execute_mixed`` (scalars converted, NumPy arrays read in place).
_MIXED = object()
_PY_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64),
                     float: np.dtype(np.float64), complex: np.dtype(np.complex128)}
_INT_BOUNDS = {np.dtype(np.int32): (-(1 << 31), 1 << 31), np.dtype(np.int64): (-(1 << 63), 1 << 63)}


def _fast_key(args: tuple) -> tuple | None:
    """The cached-call fast path's key of positional ``args``: the trace settings and, per
    argument, an Array's aval, a Python scalar's type, or a NumPy array's or scalar's shape
    and dtype (when the dtype is canonical, so it needs no conversion); None when an
    argument is anything else (or an int out of its dtype's range: the slow path raises)."""
    key = [_config.trace_key]
    mixed = False
    for a in args:
        t = type(a)
        if t is Array:
            key.append(a.aval)
            continue
        mixed = True
        part = _host_leaf_key(a)
        if part is None:
            return None
        key.append(part)
    if mixed:
        key.append(_MIXED)
    return tuple(key)


def _host_leaf_key(x: Any) -> Any:
    """A fast-path key's part for a leaf that is not an Array: a Python scalar's type, a
    canonical NumPy array's or scalar's shape and dtype; None for anything else (or an int
    out of its dtype's range: the slow path raises)."""
    t = type(x)
    if t in _PY_SCALAR_DTYPES:
        if t is int:
            lo, hi = _INT_BOUNDS[dtypes.canonicalize_dtype(np.int64)]
            if not lo <= x < hi:
                return None
        return t
    if (t is np.ndarray or isinstance(x, np.generic)) and \
            dtypes.canonicalize_dtype(x.dtype) == x.dtype:
        return (x.shape, x.dtype)
    return None


def _execute_mixed(executable: Any, args: Sequence) -> list:
    """``_execute`` for a call whose ``_fast_key`` ends in ``_MIXED`` (``args``: its leaves)."""
    values, callers = [], []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            if a.flags.writeable:
                callers.append(a)
                a = a.view()
                a.flags.writeable = False
        elif t in _PY_SCALAR_DTYPES:
            a = np.asarray(a, dtypes.canonicalize_dtype(_PY_SCALAR_DTYPES[t]))
        elif t is not Array:  # a NumPy scalar
            a = np.asarray(a)
        values.append(a)
    if not callers:
        return executable.execute(values)
    return _unshare(executable.execute_now(values), callers)


# The first element of a ``_tree_fast_key``: its keys never equal ``_fast_key``'s; and the
# mark of its keyword part (each part of a key tells what it is: no two calls of different
# structure share a key).
_TREE, _KWARGS = object(), object()


def _tree_fast_key(args: tuple, kwargs: dict, static_nums: frozenset,
                   static_names: frozenset) -> tuple | None:
    """The fast path's ``(key, leaves, mixed)`` of a call with containers (tuples, lists,
    dicts with sortable keys, None), keyword arguments or static arguments: the key holds
    the structure, each leaf's ``_fast_key`` part and the static values; the leaves come in
    ``tree_flatten``'s order, so they are the flat arguments the slow path would make. None
    when something else (a custom pytree node, an unhashable static value, ...) is there:
    the slow path takes those."""
    n = len(args)
    key: list = [_TREE, _config.trace_key, n]
    leaves: list = []
    mixed = [False]
    statics = False
    for i, a in enumerate(args):
        if i in static_nums or (i - n) in static_nums:
            key.append((i, type(a), a))
            statics = True
        elif not _add_tree(a, key, leaves, mixed):
            return None
    if kwargs:
        dynamic = []
        for name in sorted(kwargs):
            value = kwargs[name]
            if name in static_names:
                key.append((name, type(value), value))
                statics = True
            else:
                dynamic.append(name)
        key.append((_KWARGS, tuple(dynamic)))
        for name in dynamic:
            if not _add_tree(kwargs[name], key, leaves, mixed):
                return None
    if mixed[0]:
        key.append(_MIXED)
    key = tuple(key)
    if statics:
        try:
            hash(key)
        except TypeError:  # (an unhashable static value: the slow path raises JAX's error)
            return None
    return key, leaves, mixed[0]


def _add_tree(x: Any, key: list, leaves: list, mixed: list) -> bool:
    t = type(x)
    if t is Array:
        key.append(x.aval)
        leaves.append(x)
        return True
    if t is tuple or t is list:
        key.append((t, len(x)))
        for c in x:
            if not _add_tree(c, key, leaves, mixed):
                return False
        return True
    if t is dict:
        try:
            names = tuple(sorted(x))
        except TypeError:
            return False
        key.append((dict, names))
        for k in names:
            if not _add_tree(x[k], key, leaves, mixed):
                return False
        return True
    if x is None:
        key.append(None)
        return True
    part = _host_leaf_key(x)
    if part is None:
        return False
    mixed[0] = True
    key.append(part)
    leaves.append(x)
    return True


def _unshare(outs: list, callers: list) -> list:
    """Copies each output sharing memory with a caller's array (outputs are frozen and must
    not be the caller's)."""
    for out in outs:
        if type(out) is Array and any(np.may_share_memory(out._value, c) for c in callers):
            value = out._value.copy()
            value.flags.writeable = False
            out._value = value
    return outs


def _execute(executable: Any, sig: _Signature) -> list:
    """Runs ``executable`` on the call's values. A caller's writeable NumPy array is read
    where it is, through a read-only view, but the run happens now rather than queued (the
    caller may change the array as soon as the call returns: JAX's result holds the values
    of the call), and an output sharing its memory (a function returning its argument, or a
    view of it) is copied (outputs are frozen and must not be the caller's)."""
    values = _flat_values(sig)
    callers = []
    for i, (v, x) in enumerate(zip(values, sig.flat)):
        if v is x and type(v) is np.ndarray and v.flags.writeable:
            callers.append(v)
            values[i] = view = v.view()
            view.flags.writeable = False
    if not callers:
        return executable.execute(values)
    return _unshare(executable.execute_now(values), callers)


def _arg_desc(jitted: JitFunction, sig: _Signature) -> list[tuple[str, str]]:
    desc = [(n, a.str_short() + (" (weak)" if a.weak_type else ""))
            for n, a in zip(_leaf_names(jitted._fun, sig), sig.avals)]
    for where, value in sig.statics:
        name = where if isinstance(where, str) else _positional_name(jitted._fun, where)
        desc.append((name, repr(value)))
    return desc


def _describe_change(jitted: JitFunction, old: _Signature | list, new: _Signature) -> str:
    old_desc = old if isinstance(old, list) else _arg_desc(jitted, old)
    new_desc = _arg_desc(jitted, new)
    before, after = dict(old_desc), dict(new_desc)
    changes = [f"argument {n!r} changed from {before[n]} to {d}"
               for n, d in new_desc if n in before and before[n] != d]
    changes += [f"argument {n!r} ({d}) is new" for n, d in new_desc if n not in before]
    changes += [f"argument {n!r} is gone" for n, _ in old_desc if n not in after]
    return "; ".join(changes) or "the argument structure or the x64 setting changed"


class JitFunction:
    """A function compiled on first call for each new argument signature (see ``jit``)."""

    def __init__(self, fun: Callable, static_argnums: Any, static_argnames: Any,
                 donate_argnums: Any, donate_argnames: Any, backend: str | None):
        from ember.backends import canonical_name
        from ember.runtime.compile_cache import function_cache
        nums, names, donate_nums, donate_names = _resolve_argnums(
            fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
        self._fun = fun
        self._static_nums = frozenset(nums)
        self._static_names = frozenset(names)
        self._donate = (donate_nums, donate_names)  # accepted; no effect yet
        self._backend = canonical_name(backend or _config.read("jax_default_backend"))
        # Only positional Arrays and no static arguments: eligible for the fast path.
        self._plain = not nums and not names
        options = (tuple(sorted(nums)), tuple(sorted(names)), self._donate, self._backend)
        self._cache = function_cache(fun, options)
        functools.update_wrapper(self, fun, updated=())  # not __dict__: it would clobber ours
        self.__name__ = _fun_name(fun)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # Decorating a method: bind ``self`` like a plain function would.
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _config.jit_disabled:
            return self._fun(*args, **kwargs)
        if type(core._ctx.trace) is core.EvalTrace:
            if self._plain and not kwargs:
                key = _fast_key(args)
                if key is not None:
                    entry = self._cache.fast.get(key)
                    if entry is not None:
                        if key[-1] is _MIXED:
                            return entry.unflatten(_execute_mixed(entry.executable, args))
                        return entry.unflatten(entry.executable.execute(list(args)))
                    return self._call_slow(args, kwargs)
            found = _tree_fast_key(args, kwargs, self._static_nums, self._static_names)
            if found is not None:
                entry = self._cache.fast.get(found[0])
                if entry is not None:
                    if found[2]:
                        return entry.unflatten(_execute_mixed(entry.executable, found[1]))
                    return entry.unflatten(entry.executable.execute(found[1]))
        return self._call_slow(args, kwargs)

    def _call_slow(self, args: tuple, kwargs: dict) -> Any:
        sig = self._signature(args, kwargs)
        if not core.is_eval_context():
            entry = self._entry(sig)
            outs = bind_pjit(entry.closed, self.__name__, sig.flat)
            return entry.out_tree.unflatten(outs)
        entry = self._entry(sig)
        if entry.executable is None:
            self._compile(sig, entry)
        if _config.debug_checks:  # (jax_debug_nans/infs: never served by the fast path)
            return self._call_checked(sig, entry, args, kwargs)
        if batching.axis_env_key():  # (see ``_signature``: the fast keys do not hold it)
            return entry.unflatten(_execute(entry.executable, sig))
        key = _fast_key(args) if self._plain and not kwargs else None
        if key is None:
            found = _tree_fast_key(args, kwargs, self._static_nums, self._static_names)
            key = found and found[0]
        if key is not None:
            self._cache.fast[key] = entry
        return entry.unflatten(_execute(entry.executable, sig))

    def _call_checked(self, sig: _Signature, entry: CacheEntry, args: tuple,
                      kwargs: dict) -> Any:
        """A call under ``jax_debug_nans``/``jax_debug_infs``: outputs with a NaN/inf make
        the function run again without jit, op by op, to name the primitive (as in JAX)."""
        from ember.runtime.eager import deoptimized_error, special_value
        outs = _execute(entry.executable, sig)
        for out in outs:
            kind = special_value(np.asarray(out))
            if kind is not None:
                raise deoptimized_error(self.__name__, kind,
                                        lambda: self._fun(*args, **kwargs)) from None
        return entry.unflatten(outs)

    def _signature(self, args: tuple, kwargs: dict, abstract: bool = False) -> _Signature:
        statics: list[tuple[Any, Any]] = []
        dyn_args = []
        static_nums = self._static_nums
        if any(i < 0 for i in static_nums):  # (counted from the end of this call's arguments)
            for i in static_nums:
                if i < -len(args):
                    raise ValueError(
                        "Positional argument indices, e.g. for `static_argnums`, must have "
                        "value greater than or equal to -len(args) and less than len(args), "
                        f"but got value {i} for len(args) == {len(args)}")
            static_nums = {i + len(args) if i < 0 else i for i in static_nums}
        for i, a in enumerate(args):
            if i in static_nums:
                statics.append((i, a))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self._static_names:
                statics.append((k, v))
            else:
                dyn_kwargs[k] = v
        dyn = (tuple(dyn_args), dyn_kwargs)
        flat, in_tree = _pytree.tree_flatten(_keys_over_structs(dyn) if abstract else dyn)
        avals = []
        for x in flat:
            if type(x) is Array:
                avals.append(x.aval)
                continue
            try:
                avals.append(_abstractify(x) if abstract else core.get_aval(x))
            except TypeError:
                sig = _Signature(None, flat, [], in_tree, statics, args, kwargs)
                name = _leaf_names(self._fun, sig)[len(avals)]
                raise TypeError(f"jit {self.__name__}: argument {name!r} of type "
                                f"{type(x).__name__} is not a valid ember type; mark it "
                                "static (static_argnums/static_argnames) if it is a "
                                "Python value") from None
        static_key = tuple((w, type(v), v) for w, v in statics)
        key = (_config.trace_key, in_tree, tuple(avals), static_key)
        axis_env = batching.axis_env_key()
        if axis_env:  # (a trace with collectives depends on the bound axis names and sizes)
            key += (axis_env,)
        try:
            hash(static_key)
        except TypeError:
            _check_hashable(self._fun, statics)
            raise
        return _Signature(key, flat, avals, in_tree, statics, args, kwargs)

    def _entry(self, sig: _Signature) -> CacheEntry:
        entry = self._cache.lookup(sig.key)
        if entry is None:
            entry = self._trace(sig)
            # A jaxpr closing over values of an enclosing trace must not outlive it.
            if not any(isinstance(c, core.Tracer) for c in entry.closed.consts):
                self._cache.insert(sig.key, entry)
        return entry

    def _trace(self, sig: _Signature) -> CacheEntry:
        static_pos = {w: v for w, v in sig.statics if not isinstance(w, str)}
        static_kw = {w: v for w, v in sig.statics if isinstance(w, str)}
        n_pos = len(sig.args)
        out_trees = []

        def flat_fun(*leaves):
            dyn_args, dyn_kwargs = _pytree.tree_unflatten(sig.in_tree, list(leaves))
            it = iter(dyn_args)
            full = [static_pos[i] if i in static_pos else next(it) for i in range(n_pos)]
            out = self._fun(*full, **dyn_kwargs, **static_kw)
            out_flat, out_tree = _pytree.tree_flatten(out)
            out_trees.append(out_tree)
            return out_flat

        if _config.jax_no_tracing:
            raise RuntimeError(f"re-tracing function {_fun_name(self._fun)} for `jit`, but "
                               "'no_tracing' is set")
        dyn_positions = [i for i in range(n_pos) if i not in static_pos]
        names = _arg_names(self._fun, sig.args, {k: v for k, v in sig.kwargs.items()
                                                 if k not in static_kw}, dyn_positions)
        closed, _ = _monitoring._timed(_monitoring.JAXPR_TRACE_EVENT, self.__name__,
                                       pe.trace_to_jaxpr, flat_fun, sig.avals, names)
        return CacheEntry(closed, out_trees[-1], [])

    def _compile(self, sig: _Signature, entry: CacheEntry) -> None:
        from ember.runtime.dispatch import compile_closed_jaxpr
        entry.arg_desc = _arg_desc(self, sig)
        if _config.read("jax_log_compiles"):
            self._log_compile(sig, entry)
        elif _config.read("jax_explain_cache_misses") and self._cache.last is not None:
            _log.warning("jit(%s) cache miss: %s", self.__name__,
                         _describe_change(self, self._cache.last.arg_desc, sig))
        entry.executable = compile_closed_jaxpr(entry.closed, self.__name__, self._backend)
        self._cache.last = entry
        self._cache.compiles += 1

    def _log_compile(self, sig: _Signature, entry: CacheEntry) -> None:
        args = ", ".join(f"{n}: {d}" for n, d in entry.arg_desc)
        _log.warning("Compiling jit(%s) for arguments (%s) on backend %r", self.__name__, args,
                     self._backend)
        last = self._cache.last
        if last is not None:
            _log.warning("jit(%s) cache miss: %s", self.__name__,
                         _describe_change(self, last.arg_desc, sig))

    def _donated_leaves(self, sig: _Signature) -> list[bool]:
        """Whether each flat argument leaf of a call is donated."""
        nums, names = self._donate
        nums = {i + len(sig.args) if i < 0 else i for i in nums}
        donated = []
        for where, arg in _arg_groups(sig):
            donated += [where in nums or where in names] * len(_pytree.tree_leaves(arg))
        return donated

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """Traces for these arguments (arrays or ``ShapeDtypeStruct``s): the ``Traced``
        stage, with the jaxpr, before lowering.

        Example:
            >>> print(ember.jit(jnp.sin).trace(1.0).jaxpr)
            { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }
        """
        sig = self._signature(args, kwargs, abstract=True)
        return Traced(self, sig, self._entry(sig))

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Traces and lowers for these arguments (arrays or ``ShapeDtypeStruct``s).

        Example:
            >>> print(ember.jit(jnp.sin).lower(1.0).as_text())
        """
        sig = self._signature(args, kwargs, abstract=True)
        return Lowered(self, sig, self._entry(sig))

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The output shapes/dtypes as ``ShapeDtypeStruct``s, computing nothing."""
        sig = self._signature(args, kwargs, abstract=True)
        entry = self._entry(sig)
        return _shape_structs(entry.out_tree, entry.closed.out_avals)

    def clear_cache(self) -> None:
        """Forgets every compiled signature of this function."""
        self._cache.clear()

    def _cache_size(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"<ember.jit of {self._fun!r}>"


def jit(fun: Callable | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None,
        keep_unused: bool = False, device: Any = None, inline: bool = False,
        backend: str | None = None, compiler_options: dict | None = None) -> Any:
    """Compiles ``fun``: traced once per argument signature, then run as an executable.

    Arguments are pytrees of arrays and scalars; the compiled code is reused while every
    leaf's shape, dtype and weak type, the pytree structure and the static arguments stay
    the same. Static arguments (``static_argnums``/``static_argnames``) are Python values
    the function may branch on; they must be hashable. ``donate_argnums`` and
    ``donate_argnames`` are accepted and have no effect yet; so are JAX's ``keep_unused``
    (ember's executables always take every argument), ``inline`` (a jit called inside
    another is compiled as part of it either way) and ``compiler_options`` (XLA's flags).
    ``in_shardings``/``out_shardings`` (``ember.sharding`` objects, pytree prefixes of the
    arguments and outputs) are checked as JAX checks them, and the outputs carry
    ``out_shardings`` as their ``.sharding``; on ember's one device every sharding holds
    the whole array. ``device``: the device to run on (there is one). ``backend``:
    ``"interpreter"`` (the NumPy reference backend) or ``"cpu"`` (native code compiled by
    LLVM; the default). Used as ``@jit``, ``jit(f)`` or
    ``functools.partial(jit, static_argnames=...)``.

    Example:
        >>> @ember.jit
        ... def f(x, y):
        ...     return jnp.sin(x) * y
        >>> f(jnp.ones(3), 2.0)
        Array([1.682942, 1.682942, 1.682942], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, device=device, inline=inline,
                                 backend=backend, compiler_options=compiler_options)
    if not callable(fun):
        raise TypeError(f"jit: expected a callable, got {type(fun).__name__}: {fun!r}")
    if device is not None and backend is not None:
        raise ValueError("can't specify both a device and a backend for jit, got "
                         f"device={device!r} and backend={backend!r}")
    jitted = JitFunction(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                         backend)
    if in_shardings is None and out_shardings is None:
        return jitted
    from ember._sharding_api import with_jit_shardings
    return with_jit_shardings(jitted, in_shardings, out_shardings)


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of ``fun``'s outputs, as ``ShapeDtypeStruct``s, computed by
    tracing only (arguments may be arrays or ``ShapeDtypeStruct``s).

    Example:
        >>> ember.eval_shape(jnp.sum, ember.ShapeDtypeStruct((2, 3), jnp.float32))
        ShapeDtypeStruct(shape=(), dtype=float32)
    """
    flat, in_tree = _pytree.tree_flatten(_keys_over_structs((args, kwargs)))
    avals = [_abstractify(x) for x in flat]
    out_trees = []

    def flat_fun(*leaves):
        a, kw = _pytree.tree_unflatten(in_tree, list(leaves))
        out_flat, out_tree = _pytree.tree_flatten(fun(*a, **kw))
        out_trees.append(out_tree)
        return out_flat

    names = _arg_names(fun, args, kwargs, range(len(args)))
    closed, _ = pe.trace_to_jaxpr(flat_fun, avals, names)
    return _shape_structs(out_trees[-1], closed.out_avals)


@contextlib.contextmanager
def disable_jit(disable: bool = True):
    """Within the block, jitted functions run op by op in Python (for debugging).

    Example:
        >>> with ember.disable_jit():
        ...     f(x)  # print() inside f now sees concrete values
    """
    previous = _config.read("jax_disable_jit")
    _config.update("jax_disable_jit", disable)
    try:
        yield
    finally:
        _config.update("jax_disable_jit", previous)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Within the block, operations whose operands are all concrete (not traced) run at
    once, even inside ``jit``, so their results are concrete values that Python can inspect
    (``int(...)``, ``if``); operations on traced values are staged as usual.

    Example:
        >>> @ember.jit
        ... def f(x):
        ...     with ember.ensure_compile_time_eval():
        ...         n = int(jnp.arange(4).sum())  # concrete: 6
        ...     return x * n
    """
    previous = pe.compile_time_eval.on
    pe.compile_time_eval.on = True
    try:
        yield
    finally:
        pe.compile_time_eval.on = previous


def typeof(x: Any) -> core.ShapedArray:
    """The abstract value of ``x``: its shape, dtype and weak type (a ``ShapedArray``).

    Example:
        >>> ember.typeof(jnp.ones((2, 3)))
        ShapedArray(float32[2,3])
    """
    try:
        return core.get_aval(x)
    except TypeError:
        raise TypeError(f"typeof: {type(x).__name__} is not a valid JAX type") from None


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``fun``, named ``name`` for profilers (as ``jax.named_call``). ember's programs carry
    no such metadata, so the result calls ``fun`` as it is.

    Example:
        >>> g = ember.named_call(jnp.sin, name="my_sin")
        >>> g(0.0)
        Array(0., dtype=float32, weak_type=True)
    """
    if not callable(fun):
        raise TypeError(f"named_call: expected a callable, got {fun!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {name!r}")

    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    return named


def named_scope(name: str):
    """A context manager (or function decorator) naming the operations traced inside it,
    as ``jax.named_scope``. JAX puts the name in its HLO metadata for profilers; ember's
    HLO has no such metadata, so the scope only checks its argument, for code written for
    JAX to run unchanged.

    Raises:
        TypeError: if ``name`` is not a string (as in JAX, when called).

    Example:
        >>> with ember.named_scope("layer1"):
        ...     y = x * 2
    """
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    return _no_op_scope()


@contextlib.contextmanager
def _no_op_scope():
    yield


# --------------------------------------------------------------------------- autodiff
# Implemented in ember._ad_api, ember.custom_derivatives and ember.ad_checkpoint.
from ember._ad_api import (  # noqa: E402, F401 - re-exported
    fwd_and_bwd,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linear_transpose,
    linearize,
    value_and_grad,
    vjp,
)
from ember._vmap_api import vmap  # noqa: E402, F401 - re-exported
from ember.ad_checkpoint import checkpoint, remat  # noqa: E402, F401 - re-exported
from ember.custom_derivatives import (  # noqa: E402, F401 - re-exported
    closure_convert,
    custom_gradient,
    custom_jvp,
    custom_vjp,
)
from ember.lax.ad_util import stop_gradient  # noqa: E402, F401 - re-exported
