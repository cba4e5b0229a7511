// Embeds networks/*.jnn with the assembler's .incbin; CMakeLists.txt defines JIRIKI_SHIPPED_CPU /
// JIRIKI_SHIPPED_GPU (the file's path) and *_SHA256 (its hash, which also makes a changed network
// change this file's preprocessed text, so that no compiler cache serves the old object).
#include "nn/shipped_networks.h"

// The read-only data section and the way back to code: PE/COFF (Windows) knows no .previous.
#ifdef _WIN32
#define JIRIKI_RODATA_SECTION ".section .rdata,\"dr\"\n"
#define JIRIKI_SECTION_BACK ".text\n"
#else
#define JIRIKI_RODATA_SECTION ".section .rodata\n"
#define JIRIKI_SECTION_BACK ".previous\n"
#endif
#define JIRIKI_INCBIN(sym, path)                                                                           \
  asm(JIRIKI_RODATA_SECTION ".global " #sym "\n.balign 64\n" #sym ":\n.incbin \"" path "\"\n.global " #sym \
                            "_end\n" #sym "_end:\n" JIRIKI_SECTION_BACK);                                  \
  extern "C" const uint8_t sym[], sym##_end[];

#ifdef JIRIKI_SHIPPED_CPU
JIRIKI_INCBIN(jiriki_shipped_cpu, JIRIKI_SHIPPED_CPU)
#endif
#ifdef JIRIKI_SHIPPED_GPU
JIRIKI_INCBIN(jiriki_shipped_gpu, JIRIKI_SHIPPED_GPU)
#endif

namespace jiriki::nn {

std::optional<ShippedNetwork> shipped_network(bool for_gpu) {
#ifdef JIRIKI_SHIPPED_GPU
  if (for_gpu)
    return ShippedNetwork{jiriki_shipped_gpu, size_t(jiriki_shipped_gpu_end - jiriki_shipped_gpu),
                          std::string("networks/gpu.jnn (sha256 ") + JIRIKI_SHIPPED_GPU_SHA256 + ")"};
#endif
#ifdef JIRIKI_SHIPPED_CPU
  if (!for_gpu)
    return ShippedNetwork{jiriki_shipped_cpu, size_t(jiriki_shipped_cpu_end - jiriki_shipped_cpu),
                          std::string("networks/cpu.jnn (sha256 ") + JIRIKI_SHIPPED_CPU_SHA256 + ")"};
#endif
  (void)for_gpu;
  return std::nullopt;
}

}  // namespace jiriki::nn
