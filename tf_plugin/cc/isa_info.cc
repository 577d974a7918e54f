// A C entry point for Python (ctypes) to ask which instruction-set path the kernels in this library use.
#include "kernels/isa.h"

extern "C" __attribute__((visibility("default"))) const char* tf_plugin_active_isa() {
  return optim_kernels::isa_name(optim_kernels::active_isa());
}

extern "C" __attribute__((visibility("default"))) const char* tf_plugin_best_isa() {
  return optim_kernels::isa_name(optim_kernels::best_supported_isa());
}
