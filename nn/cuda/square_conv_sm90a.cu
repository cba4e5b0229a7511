// Hopper 3x3 convolution on square-major activations; see square_conv.h for the why.
//
// A CTA computes 128 x c_out output tiles: 128 batch positions at one square. Warpgroup 0 is the
// producer: one thread issues TMA loads of 64-channel slices (128 x 64 activations from the
// neighbouring square, c_out x 64 weights of that tap) into a 4-stage ring, and the tile's
// residual into a buffer of its own. Warpgroups 1 and 2 each multiply 64 of the rows with wgmma
// (m64 x c_out x k16, both operands in shared memory, in the 128-byte swizzle TMA writes) into fp32
// registers, then add bias and residual, apply the activation and write bf16 into the staging tile,
// which the producer stores by TMA. Only the taps that land on the board are loaded and multiplied.
//
// What probes on an H100 at batch 1024 showed (bench/results/nn_cuda_h100.txt): the multiplies
// alone run at ~850 TFLOP/s; a first epilogue that read the residual from global memory right
// before each use stalled on every load and took longer than the multiplies; with the residual
// arriving by TMA, 4-byte scattered stores still cost a third of the time. Both now go through a
// swizzled staging tile and TMA. 256-row tiles and multicasting the weights to a cluster of CTAs
// were no faster. The CTAs are persistent (one per SM) and walk a host-made schedule.
#include "nn/cuda/square_conv.h"

#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "nn/cuda/activation.cuh"

namespace jiriki::nn::cuda {
namespace {

constexpr int kTile = kSquareTile;  // rows of a CTA's tile
constexpr int kSlice = 64;          // channels per k step: one 128-byte swizzle row of bf16
constexpr int kStages = 4;
constexpr int kThreads = 384;

// Shared memory: the ring, the residual tile, the bias, the barriers (+ slack to align to 1024).
__host__ __device__ constexpr int ring_bytes(int c_out) { return kStages * (kTile + c_out) * kSlice * 2; }
__host__ __device__ constexpr int smem_bytes(int c_out) {
  return 1024 + ring_bytes(c_out) + kTile * c_out * 2 + c_out * 4 + (2 * kStages + 2) * 8;
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define JIRIKI_SQUARE_CONV_DEVICE 1
#endif

#ifdef JIRIKI_SQUARE_CONV_DEVICE
__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ inline void bar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ inline void bar_expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ inline void bar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ inline void bar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ inline void tma_load(void* dst, const void* map, uint64_t* bar, int col, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(col), "r"(row)
      : "memory");
}

__device__ inline void tma_store(const void* map, const void* src, int col, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(smem_addr(src)), "r"(col), "r"(row)
               : "memory");
}
__device__ inline void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Until the shared memory of this thread's bulk stores has been read (may be overwritten).
__device__ inline void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Until they are complete.
__device__ inline void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Shared-memory matrix descriptor for a K-major operand in TMA's 128-byte swizzle: rows of 128
// bytes, groups of 8 rows 1024 bytes apart (stride byte offset), leading byte offset unused.
__device__ inline uint64_t smem_desc(const void* p) {
  return (uint64_t(smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Byte offset of bf16 element (row, col) in tiles of 64 columns written by TMA with the 128-byte
// swizzle: each tile is rows x 128 bytes, and the 16-byte chunk index is XORed with row % 8.
__device__ inline uint32_t swizzled(int row, int col, int rows) {
  return (col / 64) * rows * 128 + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16) + (col % 8) * 2;
}

template <int N>
struct Wgmma;
template <>
struct Wgmma<128> {
  __device__ static void mma(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b));
  }
};
template <>
struct Wgmma<192> {
  __device__ static void mma(float* d, uint64_t a, uint64_t b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
        "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
        "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
        "%57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, "
        "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, "
        "0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
          "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
          "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
          "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
          "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(a), "l"(b));
  }
};

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The activations of nn/cuda/activation.cuh, chosen at compile time.
template <SquareAct ACT>
__device__ inline float activate(float v) {
  if constexpr (ACT == SquareAct::relu) return relu(v);
  if constexpr (ACT == SquareAct::swish) return swish(v);
  return v;
}

// Tile `id` = square * row_tiles + row tile, with the taps of that square that land on the board.
struct Tile {
  int square, row0, y_lo, x_lo, taps_x, taps;
  __device__ Tile(int id, int row_tiles) {
    square = id / row_tiles;
    row0 = (id % row_tiles) * kTile;
    const int sy = square / 9, sx = square % 9;
    y_lo = sy > 0 ? -1 : 0;
    x_lo = sx > 0 ? -1 : 0;
    taps_x = (sx < 8 ? 1 : 0) - x_lo + 1;
    taps = ((sy < 8 ? 1 : 0) - y_lo + 1) * taps_x;
  }
};
#endif  // JIRIKI_SQUARE_CONV_DEVICE

// Persistent: CTA b computes the tiles schedule[b * per_cta ...] (ended by -1), so the producer
// loads the next tile while the consumers finish the last one.
template <int CIN, int COUT, SquareAct ACT, bool RESIDUAL>
__global__ void __launch_bounds__(kThreads, 1)
    square_conv_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                       const __grid_constant__ CUtensorMap r_map, const __grid_constant__ CUtensorMap y_map,
                       const float* __restrict__ bias, int batch, const short* __restrict__ schedule, int per_cta) {
#ifdef JIRIKI_SQUARE_CONV_DEVICE
  constexpr int kABytes = kTile * kSlice * 2;
  constexpr int kBBytes = COUT * kSlice * 2;
  constexpr int kRBytes = kTile * COUT * 2;
  constexpr int kSlices = CIN / kSlice;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* a_ring = smem;
  unsigned char* b_ring = smem + kStages * kABytes;
  unsigned char* r_tile = smem + ring_bytes(COUT);
  float* bias_s = reinterpret_cast<float*>(r_tile + kRBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(bias_s + COUT);
  uint64_t* empty = full + kStages;
  // The staging tile holds the residual (if any), then the output until TMA has stored it.
  uint64_t* r_full = empty + kStages;  // staging tile ready for the epilogue
  uint64_t* o_full = r_full + 1;       // output staged, to be stored

  const int row_tiles = batch / kTile;
  const short* mine = schedule + blockIdx.x * per_cta;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    bar_init(r_full, 1);
    bar_init(o_full, 256);  // every consumer thread
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  for (int c = threadIdx.x; c < COUT; c += kThreads) bias_s[c] = bias[c];
  __syncthreads();

  const int group = threadIdx.x / 128;
  if (group == 0) {
    // The producer needs few registers; the consumers' accumulators and epilogue need many.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0) return;
    auto tile_store_row = [&](int id) {
      const Tile tile(id, row_tiles);
      return tile.square * batch + tile.row0;
    };
    auto store_staged = [&](int row, int parity) {
      bar_wait(o_full, parity);
      for (int part = 0; part < COUT / 64; ++part) tma_store(&y_map, r_tile + part * kTile * 128, part * 64, row);
      bulk_commit();
      bulk_wait_read();
    };
    int last = -1;
    int step = 0;  // counts across tiles: stage and phase of the ring
    for (int t = 0; t < per_cta && mine[t] >= 0; ++t) {
      const Tile tile(mine[t], row_tiles);
      const int steps = tile.taps * kSlices;
      for (int k = 0; k < steps; ++k, ++step) {
        const int stage = step % kStages;
        bar_wait(&empty[stage], ((step / kStages) & 1) ^ 1);
        const int tap = k / kSlices, slice = k % kSlices;
        const int dy = tile.y_lo + tap / tile.taps_x, dx = tile.x_lo + tap % tile.taps_x;
        bar_expect_bytes(&full[stage], kABytes + kBBytes);
        tma_load(a_ring + stage * kABytes, &x_map, &full[stage], slice * kSlice,
                 (tile.square + dy * 9 + dx) * batch + tile.row0);
        tma_load(b_ring + stage * kBBytes, &w_map, &full[stage], slice * kSlice, (3 * (dy + 1) + dx + 1) * COUT);
        if (k != (steps < kStages ? steps : kStages) - 1) continue;
        // The ring is full of this tile's slices and the consumers are done multiplying the last
        // tile: store its output once they have staged it, and once TMA has read the staging
        // tile, fill it with this tile's residual, which then has most of the tile to arrive.
        if (t > 0) store_staged(tile_store_row(mine[t - 1]), (t - 1) & 1);
        if constexpr (RESIDUAL) {
          bar_expect_bytes(r_full, kRBytes);
          for (int part = 0; part < COUT / 64; ++part)
            tma_load(r_tile + part * kTile * 128, &r_map, r_full, part * 64, tile.square * batch + tile.row0);
        } else {
          bar_arrive(r_full);
        }
      }
      last = t;
    }
    if (last >= 0) store_staged(tile_store_row(mine[last]), last & 1);
    bulk_wait();
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int half = group - 1;  // which 64 rows of a tile
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  int step = 0;
  for (int t = 0; t < per_cta && mine[t] >= 0; ++t) {
    const Tile tile(mine[t], row_tiles);
    float acc[COUT / 2];
#pragma unroll
    for (int r = 0; r < COUT / 2; ++r) acc[r] = 0.0f;
    for (int k = 0; k < tile.taps * kSlices; ++k, ++step) {
      const int stage = step % kStages;
      bar_wait(&full[stage], (step / kStages) & 1);
      const unsigned char* a = a_ring + stage * kABytes + half * 64 * 128;
      const unsigned char* b = b_ring + stage * kBBytes;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kSlice / 16; ++kk) Wgmma<COUT>::mma(acc, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk));
      wgmma_commit();
      wgmma_wait<1>();  // the previous step's multiplies are done: hand its stage back
      if (k > 0 && threadIdx.x % 128 == 0) bar_arrive(&empty[(step - 1) % kStages]);
    }
    wgmma_wait<0>();
    if (threadIdx.x % 128 == 0) bar_arrive(&empty[(step - 1) % kStages]);

    // Accumulator layout of wgmma m64nN: register 4j+2h+e holds row 16*warp + lane/4 + 8h,
    // column 8j + 2*(lane%4) + e.
    bar_wait(r_full, t & 1);
    const int tile_row = half * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < COUT / 8; ++j) {
      const int col = 8 * j + 2 * (lane % 4);
      const float2 bj = *reinterpret_cast<const float2*>(bias_s + col);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        auto* at = reinterpret_cast<__nv_bfloat162*>(r_tile + swizzled(tile_row + 8 * h, col, kTile));
        float v0 = acc[4 * j + 2 * h] + bj.x, v1 = acc[4 * j + 2 * h + 1] + bj.y;
        if constexpr (RESIDUAL) {
          const float2 r = __bfloat1622float2(*at);
          v0 += r.x;
          v1 += r.y;
        }
        *at = __floats2bfloat162_rn(activate<ACT>(v0), activate<ACT>(v1));
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // TMA reads what we wrote
    bar_arrive(o_full);
  }
#endif  // JIRIKI_SQUARE_CONV_DEVICE
}

using Kernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, const float*, int, const short*, int);

template <int CIN, int COUT>
Kernel kernel_for_act(SquareAct act, bool residual) {
  if (act == SquareAct::relu)
    return residual ? square_conv_kernel<CIN, COUT, SquareAct::relu, true>
                    : square_conv_kernel<CIN, COUT, SquareAct::relu, false>;
  if (act == SquareAct::swish)
    return residual ? square_conv_kernel<CIN, COUT, SquareAct::swish, true>
                    : square_conv_kernel<CIN, COUT, SquareAct::swish, false>;
  return nullptr;
}

// The shapes of the networks' 3x3 convolutions: the stem (128 padded input planes) and the tower.
Kernel kernel_for(int c_in, int c_out, SquareAct act, bool residual) {
  if (c_in == 128 && c_out == 128) return kernel_for_act<128, 128>(act, residual);
  if (c_in == 128 && c_out == 192) return kernel_for_act<128, 192>(act, residual);
  if (c_in == 192 && c_out == 192) return kernel_for_act<192, 192>(act, residual);
  return nullptr;
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

// A 2-D bf16 tensor map over `rows` rows of `cols` contiguous elements, read in boxes of
// box_rows x 64 with the 128-byte swizzle that wgmma's descriptors above expect.
void encode(void* out, const __nv_bfloat16* base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  EncodeTiled fn = encode_tiled();
  if (!fn) throw std::runtime_error("square conv: the CUDA driver lacks cuTensorMapEncodeTiled");
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * 2};
  const cuuint32_t box[2] = {kSlice, box_rows};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r =
      fn(static_cast<CUtensorMap*>(out), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(base), dims,
         strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("square conv: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
}

// List scheduling in row-tile order: the tiles of row tile 0 (its 81 squares, most taps first),
// then row tile 1, ..., each to the CTA that frees up first if a tile costs its taps. CTAs that run
// together then read the same rows, which stay in L2 for the nine taps that read them; in a
// balance-first order the input came again from memory and the kernel ran at half speed.
// Returns [ctas][per_cta] tile ids, -1-padded, on the device; cached for the process.
const short* schedule_for(int row_tiles, int ctas, int* per_cta) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, std::pair<short*, int>> cache;
  int device = 0;
  cudaGetDevice(&device);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{device, row_tiles, ctas}];
  if (!slot.first) {
    std::vector<std::pair<int, int>> tiles;  // (taps, id)
    for (int r = 0; r < row_tiles; ++r) {
      const size_t first = tiles.size();
      for (int square = 0; square < 81; ++square) {
        const int y = square / 9, x = square % 9;
        tiles.push_back({(y > 0 && y < 8 ? 3 : 2) * (x > 0 && x < 8 ? 3 : 2), square * row_tiles + r});
      }
      std::stable_sort(tiles.begin() + first, tiles.end(), [](auto& a, auto& b) { return a.first > b.first; });
    }
    std::vector<std::vector<short>> lists(ctas);
    using Load = std::pair<int, int>;  // (taps so far, cta)
    std::priority_queue<Load, std::vector<Load>, std::greater<Load>> least;
    for (int c = 0; c < ctas; ++c) least.push({0, c});
    for (auto [taps, id] : tiles) {
      auto [load, c] = least.top();
      least.pop();
      lists[c].push_back(static_cast<short>(id));
      least.push({load + taps, c});
    }
    int per = 0;
    for (auto& l : lists) per = std::max(per, int(l.size()));
    std::vector<short> flat(size_t(ctas) * per, -1);
    for (int c = 0; c < ctas; ++c) std::copy(lists[c].begin(), lists[c].end(), flat.begin() + size_t(c) * per);
    short* d = nullptr;
    if (cudaMalloc(&d, flat.size() * sizeof(short)) != cudaSuccess ||
        cudaMemcpy(d, flat.data(), flat.size() * sizeof(short), cudaMemcpyHostToDevice) != cudaSuccess)
      throw std::runtime_error("square conv: could not upload the tile schedule");
    slot = {d, per};
  }
  *per_cta = slot.second;
  return slot.first;
}

}  // namespace

static_assert(sizeof(CUtensorMap) == sizeof(SquareConvPlan{}.x_map));

bool square_conv_supported(int device, int c_in, int c_out) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  Kernel k = kernel_for(c_in, c_out, SquareAct::relu, true);
  if (major != 9 || minor != 0 || !k || !encode_tiled()) return false;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, k) != cudaSuccess) {
    cudaGetLastError();  // not sticky, but would be reported by the next launch check
    return false;
  }
  return attr.numRegs > 32;  // a body compiled without sm_90a features is empty
}

SquareConvPlan make_square_conv_plan(const __nv_bfloat16* x, const __nv_bfloat16* w, const float* bias,
                                     const __nv_bfloat16* residual, __nv_bfloat16* y, SquareAct act, int batch,
                                     int c_in, int c_out) {
  Kernel k = kernel_for(c_in, c_out, act, residual != nullptr);
  if (!k || batch <= 0 || batch % kTile != 0)
    throw std::runtime_error("square conv: unsupported shape " + std::to_string(c_in) + "->" + std::to_string(c_out) +
                             " at batch " + std::to_string(batch));
  if (x == y || (residual && residual != y && residual == x))
    throw std::runtime_error("square conv: the output must not be the input");
  SquareConvPlan plan;
  encode(plan.x_map, x, uint64_t(81) * batch, c_in, kTile);
  encode(plan.w_map, w, uint64_t(9) * c_out, c_in, c_out);
  encode(plan.r_map, residual ? residual : y, uint64_t(81) * batch, c_out, kTile);
  encode(plan.y_map, y, uint64_t(81) * batch, c_out, kTile);
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes(c_out)) != cudaSuccess)
    throw std::runtime_error("square conv: could not configure the kernel");
  plan.kernel = reinterpret_cast<const void*>(k);
  plan.ctas = std::min(sms, 81 * (batch / kTile));
  plan.schedule = schedule_for(batch / kTile, plan.ctas, &plan.per_cta);
  plan.smem = smem_bytes(c_out);
  plan.bias = bias;
  plan.batch = batch;
  return plan;
}

void launch_square_conv(const SquareConvPlan& plan, cudaStream_t stream) {
  CUtensorMap x_map, w_map, r_map, y_map;
  memcpy(&x_map, plan.x_map, sizeof x_map);
  memcpy(&w_map, plan.w_map, sizeof w_map);
  memcpy(&r_map, plan.r_map, sizeof r_map);
  memcpy(&y_map, plan.y_map, sizeof y_map);
  reinterpret_cast<Kernel>(const_cast<void*>(plan.kernel))<<<plan.ctas, kThreads, plan.smem, stream>>>(
      x_map, w_map, r_map, y_map, plan.bias, plan.batch, plan.schedule, plan.per_cta);
}

}  // namespace jiriki::nn::cuda
