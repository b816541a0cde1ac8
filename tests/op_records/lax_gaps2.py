"""Records for dot algorithms, conv_general_dilated_local, tokens, JAX's internal primitive
handles (stack_p, unstack_p, tile_p, eq_to_p, ...), ragged_all_to_all, scaled_dot and
jax.nn's scaled matmuls."""

import ml_dtypes
import numpy as np

import ember
from ember import lax
from ember import nn as enn
from tests.op_records.base import OpRecord

F32 = np.dtype("float32")
I32 = np.dtype("int32")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _matmul64(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def _f16_dot_ref(a, b):
    # F16_F16_F16: operands rounded to float16, products summed (in float32 on the CPU),
    # rounded to float16, returned as the float32 result type.
    h = a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)
    return h.astype(np.float16).astype(np.float32)


# ---------------------------------------------------------------- conv_general_dilated_local


def _local_conv_ref(x, k):
    """N C W input, O (C*3) outW kernels, stride 2, window 3, padding (1, 1)."""
    n, c, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1)))
    o, _, ow = k.shape
    out = np.zeros((n, o, ow))
    for j in range(ow):
        patch = xp[:, :, 2 * j:2 * j + 3].reshape(n, c * 3)  # channel-major, then tap
        out[:, :, j] = patch @ k[:, :, j].T.astype(np.float64)
    return out


def _local_conv(x, k):
    return lax.conv_general_dilated_local(x, k, (2,), [(1, 1)], (3,))


def _local_conv_nhwc_ref(x, k):
    """N H W C input, HWIO kernels (output H W), window (2, 2), VALID, rhs_dilation (1, 2)."""
    n, h, w, c = x.shape
    oh, ow, _, o = k.shape
    out = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            # taps in filter order (h, w); the fused I dim is channel-major.
            taps = np.stack([x[:, i + a, j + 2 * b, :] for a in range(2) for b in range(2)],
                            axis=-1)                        # n, c, 4
            out[:, i, j, :] = taps.reshape(n, c * 4).astype(np.float64) @ k[i, j]
    return out


def _local_conv_nhwc(x, k):
    return lax.conv_general_dilated_local(x, k, (1, 1), "VALID", (2, 2), rhs_dilation=(1, 2),
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))


# ---------------------------------------------------------------- ragged_all_to_all
# Axis size 2, 2 slices per peer (K = 4). Member m sends rows IN_OFF[m][e] ... of its operand
# to member e // 2, at row OUT_OFF[m][e] there.
_IN_OFF = np.array([[0, 1, 3, 4], [0, 2, 2, 3]], np.int32)
_SEND = np.array([[1, 2, 1, 0], [2, 0, 1, 2]], np.int32)
_OUT_OFF = np.array([[0, 1, 0, 4], [3, 0, 1, 3]], np.int32)
# recv_sizes[m][i * 2 + s] = send_sizes[i][m * 2 + s]
_RECV = np.array([[1, 2, 2, 0], [1, 0, 1, 2]], np.int32)


def _ragged_ref(operand, output):
    out = output.copy()
    for k in range(2):
        for i in range(2):
            for s in range(2):
                e = 2 * k + s
                n, src, dst = _SEND[i, e], _IN_OFF[i, e], _OUT_OFF[i, e]
                out[k, dst:dst + n] = operand[i, src:src + n]
    return out


def _ragged(operand, output):
    f = lambda *a: lax.ragged_all_to_all(*a, axis_name="i")  # noqa: E731
    return ember.vmap(f, axis_name="i")(operand, output, _IN_OFF, _SEND, _OUT_OFF, _RECV)


# ---------------------------------------------------------------- scaled matmuls


def _bf16(x):
    return np.asarray(x).astype(BF16)


def _scaled_dot_ref(a, b, sa, sb):
    # scales over blocks of 4 contracting elements, applied in bfloat16.
    la = (_bf16(a) * _bf16(np.repeat(sa, 4, axis=1))).astype(np.float64)
    rb = (_bf16(b) * _bf16(np.repeat(sb, 4, axis=0))).astype(np.float64)
    return la @ rb


def _scaled_matmul_ref(a, b, sa, sb):
    a = a.astype(np.float64) * np.repeat(sa, a.shape[-1] // sa.shape[-1], axis=-1)
    b = b.astype(np.float64) * np.repeat(sb, b.shape[-1] // sb.shape[-1], axis=-1)
    return np.einsum("bmk,bnk->bmn", a, b)


RECORDS = [
    OpRecord("lax.dot_general[F32_F32_F32]",
             lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                          precision=lax.DotAlgorithmPreset.F32_F32_F32),
             _matmul64, (F32,), (((3, 4), (4, 2)),), tol=1e-5, kind="lax"),
    # (differentiable: DEFAULT keeps the operand types, so the float64 gradient check holds;
    # F32_F32_F32 rounds float64 operands to float32, as in JAX)
    OpRecord("lax.dot_general[DEFAULT]",
             lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                          precision=lax.DotAlgorithmPreset.DEFAULT),
             _matmul64, (F32,), (((3, 4), (4, 2)), ((2, 4), (4,))), tol=1e-5,
             differentiable=True, kind="lax"),
    OpRecord("lax.dot[F16_F16_F16]",
             lambda a, b: lax.dot(a, b, precision="F16_F16_F16"),
             _f16_dot_ref, (F32,), (((3, 4), (4, 2)), ((4,), (4, 2))), tol=2e-3,
             kind="lax"),
    OpRecord("lax.conv_general_dilated_local", _local_conv, _local_conv_ref, (F32,),
             (((2, 2, 7), (3, 6, 4)),), tol=1e-5, differentiable=True, kind="lax"),
    OpRecord("lax.conv_general_dilated_local[NHWC]", _local_conv_nhwc, _local_conv_nhwc_ref,
             (F32,), (((1, 4, 6, 2), (3, 4, 8, 3)),), tol=1e-5, differentiable=True,
             kind="lax"),
    OpRecord("lax.stack_p", lambda a, b: lax.stack_p.bind(a, b, axis=1),
             lambda a, b: np.stack([a, b], 1), (F32, I32), (((2, 3), (2, 3)), ((4,), (4,))),
             differentiable=True, kind="lax"),
    OpRecord("lax.unstack_p", lambda a: tuple(lax.unstack_p.bind(a, axis=1)),
             lambda a: tuple(np.moveaxis(a, 1, 0)), (F32, I32), (((2, 3),), ((1, 2, 4),)),
             differentiable=True, kind="lax"),
    OpRecord("lax.tile_p", lambda a: lax.tile_p.bind(a, reps=(2,) * a.ndim),
             lambda a: np.tile(a, (2,) * a.ndim), (F32, I32), (((2, 3),), ((3,),)),
             differentiable=True, kind="lax"),
    OpRecord("lax.eq_to_p", lambda a, b: lax.eq_to_p.bind(a, b), np.equal, (I32,),
             (((4,), (4,)), ((2, 3), (2, 3))), rng="small", kind="lax"),
    OpRecord("lax.le_to_p", lambda a, b: lax.le_to_p.bind(a, b), np.less_equal, (I32, F32),
             (((4,), (4,)),), rng="small", kind="lax"),
    OpRecord("lax.lt_to_p", lambda a, b: lax.lt_to_p.bind(a, b), np.less, (I32, F32),
             (((4,), (4,)),), rng="small", kind="lax"),
    OpRecord("lax.stage", lax.stage, lambda a: a, (F32, I32), (((3,),), ((2, 2),)),
             differentiable=True, kind="lax"),
    OpRecord("lax.device_put_p",
             lambda a, b: tuple(lax.device_put_p.bind(a, b, devices=(None, None),
                                                      srcs=(None, None),
                                                      copy_semantics=(None, None))),
             lambda a, b: (a, b), (F32, I32), (((3,), (2, 2)),), differentiable=True,
             kind="lax"),
    OpRecord("lax.approx_top_k_p",
             lambda a: tuple(lax.approx_top_k_p.bind(
                 a, k=2, reduction_dimension=0, recall_target=0.95, is_max_k=False,
                 reduction_input_size_override=-1, aggregate_to_topk=True)),
             lambda a: (np.sort(a, 0)[:2], np.argsort(a, 0, kind="stable")[:2].astype(I32)),
             (F32,), (((5,),), ((6, 3),)), differentiable=True, kind="lax"),
    OpRecord("lax.ragged_all_to_all", _ragged, _ragged_ref, (F32, I32),
             (((2, 5, 2), (2, 6, 2)),), differentiable=True, kind="lax"),
    OpRecord("lax.scaled_dot",
             lambda a, b, sa, sb: lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=sb,
                                                 preferred_element_type=np.float32),
             # (XLA's CPU code skips the bfloat16 rounding of the scaled operands for some
             # small shapes, (3, 8) @ (8, 2) among them: not these)
             _scaled_dot_ref, (F32,), (((4, 8), (8, 5), (4, 2), (2, 5)),), tol=1e-4,
             arg_rngs={2: "positive", 3: "positive"}, kind="lax"),
    OpRecord("nn.scaled_matmul", enn.scaled_matmul, _scaled_matmul_ref, (F32,),
             (((2, 3, 8), (2, 4, 8), (2, 3, 2), (2, 4, 2)),), tol=1e-4,
             arg_rngs={2: "positive", 3: "positive"}, differentiable=True, kind="lax"),
]
