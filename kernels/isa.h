// Instruction-set paths of the kernels and the run-time choice between them. The wheel is built for baseline
// x86-64; the AVX2 and AVX-512 paths live in their own translation units (kernels/simd/) compiled with those
// instruction sets, and are called only when CPUID says the CPU has them.
#pragma once

namespace optim_kernels {

enum class Isa : int {
  kPortable = 0,  // plain C++ (whatever the compiler vectorizes for baseline x86-64 or another architecture)
  kAvx2 = 1,      // AVX2 + F16C + FMA (8 floats)
  kAvx512 = 2,    // AVX-512F (16 floats), with its half-conversion instructions
  kAvx512Bf16 = 3,  // AVX-512F + AVX512_BF16 + AVX512DQ: also the bfloat16 conversion instruction
};

const char* isa_name(Isa isa);

// The best path this CPU supports.
Isa best_supported_isa();

// The path in use, chosen once per process: the best supported one, or the one the environment variable
// TF_PLUGIN_ISA names ("portable", "avx2", "avx512", "avx512bf16"), capped to what the CPU supports.
Isa active_isa();

}  // namespace optim_kernels
