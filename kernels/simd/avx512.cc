// The AVX-512F path. Compiled with -mavx512f (see setup.py / BUILD); called only when CPUID has it.
#include "kernels/simd/kernel_table.h"

#define OPTIM_SIMD_NS avx512
#include "kernels/simd/vec_avx512.h"

namespace optim_kernels {
namespace avx512 {
#include "kernels/simd/bodies.h"
}  // namespace avx512

const KernelTable kAvx512Kernels = avx512::kTable;

}  // namespace optim_kernels
