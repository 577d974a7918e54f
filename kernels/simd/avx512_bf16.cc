// The AVX-512F path with the AVX512_BF16 conversion (vcvtne2ps2bf16) for bfloat16 stores. Compiled with -mavx512f
// -mavx512bf16 -mavx512dq -mavx512bw (see kernels/sources.json); called only when CPUID has all four.
#include "kernels/simd/kernel_table.h"

#define OPTIM_SIMD_NS avx512bf16
#include "kernels/simd/vec_avx512.h"

namespace optim_kernels {
namespace avx512bf16 {
#include "kernels/simd/bodies.h"
}  // namespace avx512bf16

const KernelTable kAvx512Bf16Kernels = avx512bf16::kTable;

}  // namespace optim_kernels
