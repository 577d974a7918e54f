"""float32 arithmetic rounded as TF's CPU kernels round it, where NumPy's differs in the last bits: Eigen's exp
(its vectorized pexp, which Eigen's scalar exp calls too), Eigen's sum of a vector (8-lane AVX packets), and glibc's
log1pf. Each is its algorithm in float32 NumPy steps, bitwise the original on x86-64 (TF's wheel is built with AVX
and without FMA, so a multiply-add rounds twice; glibc's generic build has no FMA either). glibc's log1pf is
fdlibm's up to glibc 2.40 and correctly rounded after (CORE-MATH): which one this process's libm has is probed once.
graph_ir.Session runs with subnormals flushed, as TF does (graph_ir/executors/denormals.py)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

_F = np.float32
# Eigen's pexp_float (Eigen/src/Core/arch/Default/GenericPacketMathFunctions.h): log2(e), ln 2 in two parts, and the
# degree-6 minimax polynomial's coefficients p2..p6 of exp(r) on [-ln(2)/2, ln(2)/2].
_LOG2E, _LN2_A, _LN2_B = 1.44269504088896341, -0.693359375, 2.12194440e-4
_P = (0.49999988079071044921875, 0.16666518151760101318359375, 4.166965186595916748046875e-2,
      8.36894474923610687255859375e-3, 1.37449637986719608306884765625e-3)
# fdlibm's log1pf as glibc 2.36 has it (sysdeps/ieee754/flt-32/s_log1pf.c): ln 2 in two parts and Lp1..Lp7.
_LN2_HI, _LN2_LO = _F(6.9313812256e-01), _F(9.0580006145e-06)
_LP = tuple(_F(v) for v in (6.6666668653e-01, 4.0000000596e-01, 2.8571429849e-01, 2.2222198546e-01,
                            1.8183572590e-01, 1.5313838422e-01, 1.4798198640e-01))


def _madd(a, b, c) -> np.ndarray:
    """a * b + c in float32, rounded after the product and after the sum (no FMA)."""
    return (np.asarray(a, _F) * _F(b) + _F(c)).astype(_F)


def eigen_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) as Eigen computes it: x = m ln 2 + r with m = floor(x log2(e) + 1/2) (x clamped at 88.723), ln 2
    taken off in two parts, exp(r) = 1 + r + r^2 (p2 + p3 r + ... + p6 r^4) evaluated in even and odd halves,
    times 2^m; max(that, x); 0 below -104 and where subnormal."""
    x = np.asarray(x, _F)
    with np.errstate(all="ignore"):
        clamped = np.minimum(x, _F(88.723))
        m = np.floor(_madd(clamped, _LOG2E, 0.5))
        r = _madd(m, _LN2_B, _madd(m, _LN2_A, clamped))
        r2 = r * r
        even = _madd(r2, _madd(r2, _P[4], _P[2]), _P[0])
        odd = _madd(r2, _P[3], _P[1])
        y = _madd(r2, _madd(r, odd, even), r + _F(1))
        out = np.maximum(np.ldexp(y, np.nan_to_num(m).astype(np.int32)).astype(_F), x)
    return np.where((x < _F(-104)) | (np.abs(out) < np.finfo(_F).tiny), _F(0), out)


def eigen_sum(x: np.ndarray) -> np.ndarray:
    """The sum over the last axis as Eigen reduces a float32 vector (Eigen/src/Core/Redux.h, linear vectorized
    traversal, packets of 8): two packet accumulators over pairs of packets, added, plus a last whole packet; the
    lanes reduced as AVX's predux does (halves added, then (l0 + l2) + (l1 + l3)); the elements past the last whole
    packet added one by one. Below 8 elements, left to right."""
    x = np.asarray(x, _F)
    n, lanes = x.shape[-1], 8
    whole, pairs = n // lanes * lanes, n // (2 * lanes) * (2 * lanes)
    if not whole:
        total = x[..., 0].copy()
        for k in range(1, n):
            total = total + x[..., k]
        return total
    acc = x[..., :lanes].copy()
    if whole > lanes:
        other = x[..., lanes:2 * lanes].copy()
        for k in range(2 * lanes, pairs, 2 * lanes):
            acc, other = acc + x[..., k:k + lanes], other + x[..., k + lanes:k + 2 * lanes]
        acc = acc + other
        if whole > pairs:
            acc = acc + x[..., pairs:pairs + lanes]
    half = acc[..., :4] + acc[..., 4:]
    total = (half[..., 0] + half[..., 2]) + (half[..., 1] + half[..., 3])
    for k in range(whole, n):
        total = total + x[..., k]
    return total


def fdlibm_log1pf(x: np.ndarray) -> np.ndarray:
    """log(1 + x) for x >= 0 (or NaN) as glibc's log1pf: x < 2^-29 directly; below 0.41422 f = x (k = 0); else
    1 + x = 2^k (1 + f) with sqrt(2)/2 <= 1 + f < sqrt(2) and the rounding of 1 + x kept as a correction c; then
    log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) with s = f / (2 + f), plus k ln 2 + c in two parts."""
    x = np.asarray(x, _F)
    with np.errstate(all="ignore"):
        bits = x.view(np.int32)
        small = bits < 0x3ED413D7  # x < 0.41422: k = 0, f = x
        u = (_F(1) + x).astype(_F)
        hu = u.view(np.int32)
        k = (hu >> 23) - 127
        c = (np.where(k > 0, _F(1) - (u - x), x - (u - _F(1))) / u).astype(_F)
        hu = hu & 0x007FFFFF
        high = hu >= 0x3504F7  # 1 + f >= sqrt(2): normalize to u / 2
        u = np.where(high, hu | 0x3F000000, hu | 0x3F800000).astype(np.int32).view(_F)
        k = np.where(small, 0, k + high)
        hu = np.where(small, 1, np.where(high, (0x00800000 - hu) >> 2, hu))
        f = np.where(small, x, u - _F(1)).astype(_F)
        c = np.where(small, _F(0), c)
        kf = k.astype(_F)
        hfsq = (_F(0.5) * f * f).astype(_F)
        s = (f / (_F(2) + f)).astype(_F)
        z = s * s
        poly = _LP[6]
        for p in _LP[5::-1]:
            poly = p + z * poly
        r = z * poly
        main = np.where(k == 0, f - (hfsq - s * (hfsq + r)),
                        kf * _LN2_HI - ((hfsq - (s * (hfsq + r) + (kf * _LN2_LO + c))) - f))
        r0 = hfsq * (_F(1) - _F(0.66666666666666666) * f)  # |f| < 2^-20
        near = np.where(f == 0, np.where(k == 0, _F(0), kf * _LN2_HI + (c + kf * _LN2_LO)),
                        np.where(k == 0, f - r0, kf * _LN2_HI - ((r0 - (kf * _LN2_LO + c)) - f)))
        out = np.where(hu == 0, near, main)
        out = np.where(bits < 0x31000000, np.where(bits < 0x24800000, x, x - x * x * _F(0.5)), out)
    return out.astype(_F)


@functools.cache
def _libm_is_fdlibm() -> bool:
    """Whether this process's libm log1pf is fdlibm's: asked (through ctypes) on values where fdlibm's and the
    correctly rounded log1pf differ; False without a loadable libm."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6").log1pf
    except (OSError, AttributeError):
        return False
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    x = np.linspace(0, 1, 4097, dtype=_F)[1:]
    fdlibm = fdlibm_log1pf(x)
    differ = np.flatnonzero(fdlibm != np.log1p(x.astype(np.float64)).astype(_F))[:16]
    return bool(differ.size) and all(_F(fn(float(x[k]))) == fdlibm[k] for k in differ)


def libm_log1pf(x: np.ndarray) -> np.ndarray:
    """log(1 + x) for x >= 0 in float32 as this process's libm (TF's log1pf) rounds it."""
    x = np.asarray(x, _F)
    return fdlibm_log1pf(x) if _libm_is_fdlibm() else np.log1p(x.astype(np.float64)).astype(_F)
