"""Which dtypes TF's x86 CPU build runs through oneDNN on this machine. TF asks the CPU
(tensorflow/core/util/util.cc, IsDataTypeSupportedByOneDNNOnThisCPU): float32 always; bfloat16 with AVX-512F or
AVX-NE-CONVERT; float16 with AVX-512BW and AVX512-FP16 or AMX-FP16, or with AVX-NE-CONVERT. Elsewhere (an AMD EPYC,
say) TF's float16 ops fall back to its Eigen kernels, which round between ops (a Conv2D, then its BiasAdd) and
treat a softmax row holding inf as all NaN. So does every dtype when TF_ENABLE_ONEDNN_OPTS turns oneDNN off. The
executors and the lowering follow what TF runs here."""

from __future__ import annotations

import functools
import os
import platform


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux's /proc/cpuinfo names them (empty elsewhere, or on other machines)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


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
