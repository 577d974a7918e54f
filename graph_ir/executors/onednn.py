"""Which dtypes TF's x86 CPU build runs through oneDNN on this machine. TF asks the CPU
(tensorflow/core/util/util.cc, IsDataTypeSupportedByOneDNNOnThisCPU): float32 always; bfloat16 with AVX-512F or
AVX-NE-CONVERT; float16 with AVX-512BW and AVX512-FP16 or AMX-FP16, or with AVX-NE-CONVERT. Elsewhere (an AMD EPYC,
say) TF's float16 ops fall back to its Eigen kernels, which round between ops (a Conv2D, then its BiasAdd) and
treat a softmax row holding inf as all NaN. So does every dtype when TF_ENABLE_ONEDNN_OPTS turns oneDNN off. The
executors and the lowering follow what TF runs here.

This is the one place that knows what depends on the CPU; describe() says what it found (pytest's header, without -q,
and CI's log print it)."""

from __future__ import annotations

import functools
import os
import platform


def _cpuinfo_field(name: str) -> str:
    """The first value of `name` in Linux's /proc/cpuinfo ("" elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux's /proc/cpuinfo names them (empty elsewhere, or on other machines)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    return frozenset(_cpuinfo_field("flags").split())


def onednn_enabled() -> bool:
    """TF's IsMklEnabled on x86 Linux (tensorflow/core/util/util.cc): on unless TF_ENABLE_ONEDNN_OPTS says off, read
    as TF's ReadBoolFromEnvVar reads it ("0" or "false" in any case; any other value leaves the default)."""
    return os.environ.get("TF_ENABLE_ONEDNN_OPTS", "").lower() not in ("0", "false")


def onednn_runs(dtype: str) -> bool:
    """Whether TF's oneDNN kernels take `dtype` ("float32", "bfloat16", "float16") on this CPU, as TF decides it."""
    if not onednn_enabled():
        return False
    flags = cpu_flags()
    if dtype == "float32":
        return bool(flags)
    if dtype == "bfloat16":
        return "avx512f" in flags or "avx_ne_convert" in flags
    if dtype == "float16":
        return ("avx512bw" in flags and ("avx512_fp16" in flags or "amx_fp16" in flags)) or "avx_ne_convert" in flags
    return False


def describe() -> str:
    """One line: the CPU, its features that decide TF's kernels, and which dtypes TF's oneDNN takes here."""
    name = _cpuinfo_field("model name") or platform.machine() or "unknown CPU"
    features = [f for f in ("avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16",
                            "avx_ne_convert") if f in cpu_flags()]
    dtypes = ("float32", "bfloat16", "float16")
    taken = [d for d in dtypes if onednn_runs(d)]
    eigen = [d for d in dtypes if d not in taken]
    switch = "on" if onednn_enabled() else "off (TF_ENABLE_ONEDNN_OPTS)"
    return (f"{name} [{' '.join(features) or 'no AVX-512'}]; TF's oneDNN {switch} takes "
            f"{', '.join(taken) or 'no dtype'}; Eigen kernels for {', '.join(eigen) or 'none'}")
