"""Products: dot, matmul, vdot, inner, outer, tensordot, einsum, kron, trace.

Everything lowers to ``lax.dot_general`` plus reshapes, transposes and (for einsum) sums, so
no intermediate broadcast copy of a batch operand is made.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import core, dtypes, lax
from ember.numpy import reductions
from ember.numpy._util import canonicalize_axis, check_arraylike, ensure_array, promote_dtypes
from ember.numpy.creation import diagonal
from ember.numpy.shape import moveaxis, stack
from ember.numpy.ufuncs import multiply, subtract

# ---------------------------------------------------------------- helpers


def _shape(x: Any) -> tuple[int, ...]:
    return core.get_aval(x).shape


def _transpose(x: Any, perm: Sequence[int]) -> Any:
    perm = tuple(perm)
    return x if perm == tuple(range(len(perm))) else lax.transpose(x, perm)


def _sum(x: Any, axes: Sequence[int]) -> Any:
    """Sums ``x`` over ``axes`` keeping its dtype (for bools: a logical any)."""
    if not axes:
        return x
    reduce = lax.reduce_or if core.get_aval(x).dtype == dtypes.bool_ else lax.reduce_sum
    return reduce(x, tuple(sorted(axes)))


def _dot_kw(precision: Any, preferred_element_type: Any) -> dict:
    return {"precision": precision, "preferred_element_type": preferred_element_type}


def _result(x: Any, preferred_element_type: Any) -> Any:
    if preferred_element_type is None:
        return x
    return lax.convert_element_type(x, preferred_element_type)


def _promote(fn: str, *args: Any) -> list[Any]:
    check_arraylike(fn, *args)
    return [ensure_array(a) for a in promote_dtypes(*args)]


# ---------------------------------------------------------------- matmul / dot


def matmul(a: Any, b: Any, *, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Matrix product with NumPy's rules: 1-d operands are promoted, batch dims broadcast.

    Example:
        >>> jnp.matmul(jnp.ones((5, 2, 3)), jnp.ones((3, 4))).shape
        (5, 2, 4)
    """
    a, b = _promote("matmul", a, b)
    sa, sb = _shape(a), _shape(b)
    for i, s in enumerate((sa, sb)):
        if len(s) == 0:
            raise ValueError(f"matmul: input operand {i} must have at least 1 dimension, got "
                             f"shapes {sa} and {sb}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise TypeError(f"matmul: contracting dimensions do not match for shapes {sa} and "
                        f"{sb} ({ka} != {kb})")  # TypeError, as in JAX
    na, nb = len(sa), len(sb)
    ba = sa[:-2] if na >= 2 else ()
    bb = sb[:-2] if nb >= 2 else ()
    nbatch = max(len(ba), len(bb))
    # Per output batch position: ('batch', i) | ('a', pos) | ('b', pos); size-1 dims that
    # broadcast against the other operand are squeezed away (no broadcast copy is made).
    a_keep, b_keep = list(range(na)), list(range(nb))
    kinds = []
    for i in range(nbatch):
        ia, ib = i - (nbatch - len(ba)), i - (nbatch - len(bb))
        da = ba[ia] if ia >= 0 else None
        db = bb[ib] if ib >= 0 else None
        if da is not None and db is not None:
            if da == db:
                kinds.append(("batch", ia, ib))
            elif da == 1:
                a_keep.remove(ia)
                kinds.append(("b", ib))
            elif db == 1:
                b_keep.remove(ib)
                kinds.append(("a", ia))
            else:
                raise ValueError(f"matmul: batch dimensions of shapes {sa} and {sb} cannot be "
                                 "broadcast together")
        elif da is not None:
            kinds.append(("a", ia))
        else:
            kinds.append(("b", ib))
    if len(a_keep) != na:
        a = lax.reshape(a, [sa[d] for d in a_keep])
    if len(b_keep) != nb:
        b = lax.reshape(b, [sb[d] for d in b_keep])
    a_pos = {d: j for j, d in enumerate(a_keep)}
    b_pos = {d: j for j, d in enumerate(b_keep)}
    lb = tuple(a_pos[k[1]] for k in kinds if k[0] == "batch")
    rb = tuple(b_pos[k[2]] for k in kinds if k[0] == "batch")
    lc, rc = (a_pos[na - 1],), (b_pos[0 if nb == 1 else nb - 2],)
    out = lax.dot_general(a, b, ((lc, rc), (lb, rb)), precision, preferred_element_type)
    # dot_general's output: batch..., a free (a batch-free dims, then M), b free (..., N).
    nbt = len(lb)
    a_free = [k[1] for k in kinds if k[0] == "a"]
    b_free = [k[1] for k in kinds if k[0] == "b"]
    has_m, has_n = na >= 2, nb >= 2
    pos_a = nbt
    pos_b = nbt + len(a_free) + has_m
    perm, ib_, ia_, ibf = [], 0, 0, 0
    for k in kinds:
        if k[0] == "batch":
            perm.append(ib_)
            ib_ += 1
        elif k[0] == "a":
            perm.append(pos_a + ia_)
            ia_ += 1
        else:
            perm.append(pos_b + ibf)
            ibf += 1
    if has_m:
        perm.append(pos_a + len(a_free))
    if has_n:
        perm.append(pos_b + len(b_free))
    return _transpose(out, perm)


def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """NumPy's dot: sum over a's last axis and b's second-to-last (or only) axis.

    Example:
        >>> jnp.dot(jnp.ones((2, 3)), jnp.ones(3)).shape
        (2,)
    """
    a, b = _promote("dot", a, b)
    sa, sb = _shape(a), _shape(b)
    kw = _dot_kw(precision, preferred_element_type)
    if len(sa) == 0 or len(sb) == 0:
        return lax.dot_general(a, b, (((), ()), ((), ())), **kw)
    cb = 0 if len(sb) == 1 else len(sb) - 2
    if sa[-1] != sb[cb]:
        raise TypeError(f"dot: shapes {sa} and {sb} are not aligned: dimension {len(sa) - 1} "
                        f"(size {sa[-1]}) != dimension {cb} (size {sb[cb]})")
    return lax.dot_general(a, b, (((len(sa) - 1,), (cb,)), ((), ())), **kw)


def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Dot product of the flattened arrays, conjugating the first (complex) argument.

    Example:
        >>> jnp.vdot(jnp.ones((2, 2)), jnp.ones(4))
        Array(4., dtype=float32)
    """
    a, b = _promote("vdot", a, b)
    sa, sb = _shape(a), _shape(b)
    na, nb = int(np.prod(sa, dtype=np.int64)), int(np.prod(sb, dtype=np.int64))
    if na != nb:  # TypeError, like the dot_general JAX's vdot reaches
        raise TypeError(f"vdot: arrays of shapes {sa} and {sb} have different sizes "
                        f"({na} != {nb})")
    if dtypes.is_complex(core.get_aval(a).dtype):
        a = lax.conj(a)
    return lax.dot_general(lax.reshape(a, (na,)), lax.reshape(b, (nb,)),
                           (((0,), (0,)), ((), ())), precision, preferred_element_type)


def inner(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Inner product over the last axes of ``a`` and ``b``.

    Example:
        >>> jnp.inner(jnp.ones((2, 3)), jnp.ones((4, 3))).shape
        (2, 4)
    """
    a, b = _promote("inner", a, b)
    sa, sb = _shape(a), _shape(b)
    kw = _dot_kw(precision, preferred_element_type)
    if len(sa) == 0 or len(sb) == 0:
        return lax.dot_general(a, b, (((), ()), ((), ())), **kw)
    if sa[-1] != sb[-1]:
        raise TypeError(f"inner: last dimensions of shapes {sa} and {sb} do not match")
    return lax.dot_general(a, b, (((len(sa) - 1,), (len(sb) - 1,)), ((), ())), **kw)


# ---------------------------------------------------------------- vecdot / matvec / vecmat
# All three are batched matmuls: the vector operands gain a size-1 matrix axis, matmul
# broadcasts the batch dimensions (without a broadcast copy) and the size-1 axes are dropped.


def _check_ndim(fn: str, name: str, x: Any, core_dims: str, nd: int) -> None:
    if len(_shape(x)) < nd:
        raise ValueError(f"{fn}: {name} must have at least {nd} dimension(s) for its core "
                         f"dimensions {core_dims}, got shape {_shape(x)}")


def _check_batch(fn: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise ValueError(f"{fn}: batch dimensions {sa} and {sb} cannot be broadcast "
                         "together") from None


def _conj(x: Any) -> Any:
    return lax.conj(x) if dtypes.is_complex(core.get_aval(x).dtype) else x


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Vector dot product of ``conj(x1)`` and ``x2`` along ``axis``; other dims broadcast.

    ``axis`` indexes each operand separately (as in NumPy's gufunc and JAX); the contracted
    dimensions must have the same size. ``precision`` and ``preferred_element_type`` are
    passed to ``lax.dot_general``.

    Example:
        >>> jnp.vecdot(jnp.ones((5, 3)), jnp.arange(3.0))
        Array([3., 3., 3., 3., 3.], dtype=float32)
    """
    check_arraylike("vecdot", x1, x2)
    a, b = ensure_array(x1), ensure_array(x2)
    sa, sb = _shape(a), _shape(b)
    ia = canonicalize_axis("vecdot", axis, len(sa))
    ib = canonicalize_axis("vecdot", axis, len(sb))
    if sa[ia] != sb[ib]:
        raise ValueError(f"vecdot: the sizes of axis {axis} must match, got shapes {sa} and "
                         f"{sb} ({sa[ia]} != {sb[ib]})")
    a, b = _promote("vecdot", _conj(a), b)
    a, b = moveaxis(a, ia, -1), moveaxis(b, ib, -1)
    batch = _check_batch("vecdot", _shape(a)[:-1], _shape(b)[:-1])
    a = lax.expand_dims(a, (len(sa) - 1,))  # (..., 1, n)
    b = lax.expand_dims(b, (len(sb),))      # (..., n, 1)
    out = matmul(a, b, precision=precision, preferred_element_type=preferred_element_type)
    return lax.reshape(out, batch)


def matvec(x1: Any, x2: Any, /) -> Any:
    """Matrix-vector product: ``x1`` has shape (..., n, m), ``x2`` (..., m); gives (..., n).

    The batch dimensions ``...`` broadcast against each other.

    Example:
        >>> jnp.matvec(jnp.ones((4, 2, 3)), jnp.arange(3.0)).shape
        (4, 2)
    """
    check_arraylike("matvec", x1, x2)
    a, b = ensure_array(x1), ensure_array(x2)
    _check_ndim("matvec", "x1", a, "(n, m)", 2)
    _check_ndim("matvec", "x2", b, "(m,)", 1)
    sa, sb = _shape(a), _shape(b)
    if sa[-1] != sb[-1]:
        raise ValueError(f"matvec: size of core dimension m differs: x1 has shape {sa} "
                         f"(m={sa[-1]}) but x2 has shape {sb} (m={sb[-1]})")
    batch = _check_batch("matvec", sa[:-2], sb[:-1])
    out = matmul(a, lax.expand_dims(b, (len(sb),)))  # (..., n, 1)
    return lax.reshape(out, batch + (sa[-2],))


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Vector-matrix product of ``conj(x1)`` (..., n) and ``x2`` (..., n, m); gives (..., m).

    The batch dimensions ``...`` broadcast against each other.

    Example:
        >>> jnp.vecmat(jnp.arange(2.0), jnp.ones((4, 2, 3))).shape
        (4, 3)
    """
    check_arraylike("vecmat", x1, x2)
    a, b = ensure_array(x1), ensure_array(x2)
    _check_ndim("vecmat", "x1", a, "(n,)", 1)
    _check_ndim("vecmat", "x2", b, "(n, m)", 2)
    sa, sb = _shape(a), _shape(b)
    if sa[-1] != sb[-2]:
        raise ValueError(f"vecmat: size of core dimension n differs: x1 has shape {sa} "
                         f"(n={sa[-1]}) but x2 has shape {sb} (n={sb[-2]})")
    batch = _check_batch("vecmat", sa[:-1], sb[:-2])
    out = matmul(lax.expand_dims(_conj(a), (len(sa) - 1,)), b)  # (..., 1, m)
    return lax.reshape(out, batch + (sb[-1],))


def outer(a: Any, b: Any, out: None = None) -> Any:
    """Outer product of the flattened arrays.

    Example:
        >>> jnp.outer(jnp.ones(2), jnp.ones(3)).shape
        (2, 3)
    """
    if out is not None:
        raise NotImplementedError("outer: the 'out' argument is not supported")
    a, b = _promote("outer", a, b)
    a = lax.reshape(a, (int(np.prod(_shape(a), dtype=np.int64)),))
    b = lax.reshape(b, (int(np.prod(_shape(b), dtype=np.int64)),))
    return lax.dot_general(a, b, (((), ()), ((), ())))


def _axes_list(fn: str, ax: Any, ndim: int, which: str) -> tuple[int, ...]:
    ax = [ax] if isinstance(ax, (int, np.integer)) and not isinstance(ax, bool) else list(ax)
    out = []
    for d in ax:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{fn}: axes for {which} must be integers, got {ax!r}")
        if not -ndim <= d < ndim:
            raise ValueError(f"{fn}: axis {d} for {which} is out of bounds for rank {ndim}")
        out.append(int(d) % ndim)
    if len(set(out)) != len(out):
        raise TypeError(f"{fn}: repeated axis in axes for {which}: {ax!r}")
    return tuple(out)


def tensordot(a: Any, b: Any, axes: int | Sequence[Any] = 2, *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """Tensor contraction over ``axes`` (an int n: a's last n with b's first n; or a pair).

    Example:
        >>> jnp.tensordot(jnp.ones((2, 3, 4)), jnp.ones((3, 4, 5))).shape
        (2, 5)
    """
    a, b = _promote("tensordot", a, b)
    sa, sb = _shape(a), _shape(b)
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        n = max(int(axes), 0)  # a negative count contracts nothing (NumPy and JAX)
        if n > len(sa) or n > len(sb):
            raise TypeError(f"tensordot: axes={n} must be at most the ranks of the operands, "
                            f"got shapes {sa} and {sb}")
        ca, cb = tuple(range(len(sa) - n, len(sa))), tuple(range(n))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: axes must be an int or a pair of sequences, got "
                            f"{axes!r}") from None
        ca = _axes_list("tensordot", ax_a, len(sa), "a")
        cb = _axes_list("tensordot", ax_b, len(sb), "b")
        if len(ca) != len(cb):
            raise TypeError(f"tensordot: axes lists {ax_a!r} and {ax_b!r} have different "
                            "lengths")
    # TypeErrors, as JAX's (its dot_general's shape rule raises them).
    for i, j in zip(ca, cb):
        if sa[i] != sb[j]:
            raise TypeError(f"tensordot: shape mismatch: axis {i} of a (shape {sa}) has size "
                            f"{sa[i]} but axis {j} of b (shape {sb}) has size {sb[j]}")
    return lax.dot_general(a, b, ((ca, cb), ((), ())), precision, preferred_element_type)


def kron(a: Any, b: Any) -> Any:
    """Kronecker product.

    Example:
        >>> jnp.kron(jnp.eye(2), jnp.ones((2, 2))).shape
        (4, 4)
    """
    a, b = _promote("kron", a, b)
    sa, sb = _shape(a), _shape(b)
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    a, b = lax.reshape(a, sa), lax.reshape(b, sb)
    out = lax.dot_general(a, b, (((), ()), ((), ())))  # shape sa + sb
    perm = [p for i in range(n) for p in (i, n + i)]
    out = _transpose(out, perm)
    return lax.reshape(out, [x * y for x, y in zip(sa, sb)])


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Any:
    """Sum along a diagonal of ``a`` (integers accumulate in at least the default int type).

    Example:
        >>> jnp.trace(jnp.eye(3))
        Array(3., dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("trace: the 'out' argument is not supported")
    check_arraylike("trace", a)
    ndim = core.get_aval(a).ndim
    if ndim < 2:
        raise ValueError(f"trace: array must be at least 2-d, got shape {core.get_aval(a).shape}")
    if canonicalize_axis("trace", axis1, ndim) == canonicalize_axis("trace", axis2, ndim):
        raise ValueError(f"trace: axis1 and axis2 cannot be the same, got {axis1} and {axis2}")
    return reductions.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---------------------------------------------------------------- einsum

_LETTERS = set(string.ascii_letters)


def _parse_term(term: str, ndim: int, pos: int) -> list[Any]:
    """Labels of one operand: letters, or ints (-k) for the k-th ellipsis dim from the right."""
    if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
        raise ValueError(f"einsum: invalid ellipsis in subscripts {term!r} of operand {pos}")
    left, ell, right = term.partition("...")
    for c in left + right:
        if c not in _LETTERS:
            raise ValueError(f"einsum: invalid subscript {c!r} in {term!r}; subscripts must be "
                             "letters")
    explicit = len(left) + len(right)
    if (ell and explicit > ndim) or (not ell and explicit != ndim):
        raise ValueError(f"einsum: operand {pos} has {ndim} dimensions but its subscripts "
                         f"{term!r} name {explicit}{' or more' if ell else ''}")
    n_ell = ndim - explicit if ell else 0
    return list(left) + [-(n_ell - i) for i in range(n_ell)] + list(right)


def _sublist_to_str(sub: Sequence[Any]) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, (int, np.integer)) and 0 <= s < 52:
            out.append(string.ascii_letters[int(s)])
        else:
            raise ValueError(f"einsum: sublist entries must be Ellipsis or ints in [0, 52), "
                             f"got {s!r}")
    return "".join(out)


def _take_diagonal(x: Any, labels: list[Any]) -> tuple[Any, list[Any]]:
    """Removes repeated labels of one operand by taking diagonals (a dot with a delta mask)."""
    while True:
        seen: dict[Any, int] = {}
        rep = None
        for i, lab in enumerate(labels):
            if lab in seen:
                rep = (seen[lab], i)
                break
            seen[lab] = i
        if rep is None:
            return x, labels
        i, j = rep
        aval = core.get_aval(x)
        n = aval.shape[i]
        if aval.shape[j] != n:
            raise ValueError(f"einsum: repeated subscript {labels[i]!r} has dimensions of "
                             f"different sizes {n} and {aval.shape[j]}")
        eye = core.concrete_array(np.eye(n, dtype=aval.dtype),
                                  core.ShapedArray((n, n), aval.dtype))
        x = lax.dot_general(x, eye, (((j,), (1,)), ((i,), (0,))))
        labels = [labels[i]] + [lab for k, lab in enumerate(labels) if k not in (i, j)]


def _sum_labels(x: Any, labels: list[Any], drop: set) -> tuple[Any, list[Any]]:
    axes = [i for i, lab in enumerate(labels) if lab in drop]
    if not axes:
        return x, labels
    return _sum(x, axes), [lab for lab in labels if lab not in drop]


def _contract(x: Any, xl: list[Any], y: Any, yl: list[Any], keep: set,
              kw: dict) -> tuple[Any, list[Any]]:
    shared = [lab for lab in xl if lab in yl]
    batch = [lab for lab in shared if lab in keep]
    contract = [lab for lab in shared if lab not in keep]
    dn = ((tuple(xl.index(c) for c in contract), tuple(yl.index(c) for c in contract)),
          (tuple(xl.index(c) for c in batch), tuple(yl.index(c) for c in batch)))
    out = lax.dot_general(x, y, dn, **kw)
    labels = batch + [lab for lab in xl if lab not in shared] + \
        [lab for lab in yl if lab not in shared]
    return out, labels


def _out_size(sizes: dict, labels: list[Any]) -> int:
    return int(np.prod([sizes[lab] for lab in labels], dtype=np.int64))


def einsum(subscripts: Any, *operands: Any, out: None = None, optimize: Any = "auto",
           precision: Any = None, preferred_element_type: Any = None,
           _dot_general: Any = None) -> Any:
    """Einstein summation (``'ij,jk->ik'``), with '...', diagonals and implicit output.

    Operands are contracted pairwise (greedily, smallest intermediate first) with
    ``lax.dot_general``; indices used by a single operand are summed first.

    Example:
        >>> jnp.einsum('ij,jk->ik', jnp.ones((2, 3)), jnp.ones((3, 4))).shape
        (2, 4)
    """
    if out is not None:
        raise NotImplementedError("einsum: the 'out' argument is not supported")
    if not isinstance(subscripts, str):
        # Interleaved form: einsum(op0, sublist0, op1, sublist1, ..., [sublist_out]).
        args = (subscripts,) + operands
        out_sub = args[-1] if len(args) % 2 else None
        args = args[:-1] if len(args) % 2 else args
        ops, subs = list(args[0::2]), list(args[1::2])
        subscripts = ",".join(_sublist_to_str(s) for s in subs)
        if out_sub is not None:
            subscripts += "->" + _sublist_to_str(out_sub)
        operands = tuple(ops)
    check_arraylike("einsum", *operands)
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    subscripts = subscripts.replace(" ", "")
    if subscripts.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} contain more than one '->'")
    ins, arrow, out_term = subscripts.partition("->")
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s) but "
                         f"{len(operands)} were given")
    ops = [ensure_array(o) for o in promote_dtypes(*operands)]
    labels = [_parse_term(t, len(_shape(o)), i) for i, (t, o) in enumerate(zip(terms, ops))]
    n_ell = max([-min([lab for lab in ls if isinstance(lab, int)], default=0)
                 for ls in labels])
    ell_labels = [-(n_ell - i) for i in range(n_ell)]
    # Sizes, with NumPy broadcasting of size-1 dims.
    sizes: dict[Any, int] = {}
    for pos, (ls, o) in enumerate(zip(labels, ops)):
        for lab, s in zip(ls, _shape(o)):
            if sizes.get(lab, 1) == 1:
                sizes[lab] = s
            elif s not in (1, sizes[lab]):
                raise ValueError(f"einsum: size of subscript {_label_str(lab)} is "
                                 f"{sizes[lab]} in one operand but {s} in operand {pos}")
    if arrow:
        if "." in out_term.replace("...", "") or out_term.count("...") > 1:
            raise ValueError(f"einsum: invalid output subscripts {out_term!r}")
        left, ell, right = out_term.partition("...")
        for c in left + right:
            if c not in _LETTERS:
                raise ValueError(f"einsum: invalid output subscript {c!r} in {out_term!r}")
        out_labels = list(left) + (ell_labels if ell else []) + list(right)
        all_in = {lab for ls in labels for lab in ls}
        for lab in out_labels:
            if lab not in all_in:
                raise ValueError(f"einsum: output subscript {_label_str(lab)} does not appear "
                                 "in the inputs")
        if len(set(out_labels)) != len(out_labels):
            raise ValueError(f"einsum: output subscripts {out_term!r} contain a repeat")
    else:
        counts: dict[Any, int] = {}
        for ls in labels:
            for lab in ls:
                if not isinstance(lab, int):
                    counts[lab] = counts.get(lab, 0) + 1
        out_labels = ell_labels + sorted(lab for lab, c in counts.items() if c == 1)
    kw = _dot_kw(precision, preferred_element_type)
    # Per operand: diagonals, broadcast (squeeze) size-1 dims, sums over private labels.
    items = []
    for k, (x, ls) in enumerate(zip(ops, labels)):
        x, ls = _take_diagonal(x, ls)
        shape = _shape(x)
        squeeze = [i for i, lab in enumerate(ls) if shape[i] == 1 and sizes[lab] != 1]
        if squeeze:
            x = lax.reshape(x, [s for i, s in enumerate(shape) if i not in squeeze])
            ls = [lab for i, lab in enumerate(ls) if i not in squeeze]
        others = {lab for j, l2 in enumerate(labels) if j != k for lab in l2}
        x, ls = _sum_labels(x, ls, set(ls) - others - set(out_labels))
        items.append((x, ls))
    while len(items) > 1:
        best = None
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                if optimize is False and (i, j) != (0, 1):
                    continue
                li, lj = items[i][1], items[j][1]
                rest = {lab for k, it in enumerate(items) if k not in (i, j) for lab in it[1]}
                keep = rest | set(out_labels)
                res = [lab for lab in dict.fromkeys(li + lj) if lab in keep]
                cost = (_out_size(sizes, res), i, j)
                if best is None or cost < best[0]:
                    best = (cost, i, j, keep)
        _, i, j, keep = best
        (x, xl), (y, yl) = items[i], items[j]
        x, xl = _sum_labels(x, xl, {lab for lab in xl if lab not in keep and lab not in yl})
        y, yl = _sum_labels(y, yl, {lab for lab in yl if lab not in keep and lab not in xl})
        res = _contract(x, xl, y, yl, keep, kw)
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [res]
    x, ls = items[0]
    x, ls = _sum_labels(x, ls, set(ls) - set(out_labels))
    missing = [lab for lab in out_labels if lab not in ls]
    if missing:  # output labels only present as broadcast size-1 dims
        x = lax.reshape(x, [1] * len(missing) + list(_shape(x)))
        ls = missing + ls
    x = _transpose(x, [ls.index(lab) for lab in out_labels])
    return _result(x, preferred_element_type)


def _label_str(lab: Any) -> str:
    return repr(lab) if isinstance(lab, str) else "'...'"


def einsum_path(subscripts: str, *operands: Any, optimize: Any = "greedy") -> tuple:
    """A trivial contraction path (left to right), for API compatibility.

    Example:
        >>> jnp.einsum_path('ij,jk->ik', jnp.ones((2, 3)), jnp.ones((3, 4)))[0]
        ['einsum_path', (0, 1)]
    """
    n = len(operands)
    path = [(0, 1)] * (n - 1) if n > 1 else [(0,)]
    return ["einsum_path", *path], ""


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Any:
    """Cross product of (batches of) 2- or 3-vectors, broadcasting the batch dimensions.

    The vectors lie along ``axisa`` of ``a`` and ``axisb`` of ``b``; for 3-vectors the result
    vectors lie along ``axisc``. ``axis``, when given, overrides all three. Two 2-vectors give
    the scalar z component; a 2-vector meets a 3-vector as if its z component were 0.

    Example:
        >>> jnp.cross(jnp.array([1, 0, 0]), jnp.array([0, 1, 0]))
        Array([0, 0, 1], dtype=int32)
    """
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross: dimension must be either 2 or 3 for cross product, got "
                         f"{na} and {nb}")

    def components(x, n):
        parts = [lax.index_in_dim(x, i, axis=len(_shape(x)) - 1, keepdims=False)
                 for i in range(n)]
        return parts if n == 3 else [*parts, lax.full_like(parts[0], 0)]  # z of a 2-vector

    a0, a1, a2 = components(a, na)
    b0, b1, b2 = components(b, nb)
    if na == 2 and nb == 2:
        return subtract(multiply(a0, b1), multiply(a1, b0))
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
               subtract(multiply(a2, b0), multiply(a0, b2)),
               subtract(multiply(a0, b1), multiply(a1, b0))])
    return moveaxis(c, 0, axisc)


__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "kron", "trace", "einsum",
           "einsum_path", "cross", "vecdot", "matvec", "vecmat"]
