// The AVX2 + F16C path. Compiled with -mavx2 -mf16c -mfma (see setup.py / BUILD); called only when CPUID has them.
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/vec_avx2.h"

namespace optim_kernels {
namespace avx2 {
#include "kernels/simd/bodies.h"
}  // namespace avx2

const KernelTable kAvx2Kernels = avx2::kTable;

}  // namespace optim_kernels
