// Error checks and owning buffers for the CUDA backend. Every CUDA, cuDNN and cuBLAS call goes
// through a check that throws std::runtime_error naming the call, so that a failure anywhere (no
// device, out of memory, unsupported engine) reaches the user as a message, never as garbage.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace jiriki::nn::cuda {

[[noreturn]] inline void fail(const char* what, const std::string& why, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA backend: ") + what + " failed: " + why + " (" + file + ":" +
                           std::to_string(line) + ")");
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

// cuDNN's status name plus its last error message, which usually says what was wrong.
inline std::string cudnn_status_text(cudnnStatus_t s) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  std::string text = cudnnGetErrorString(s);
  if (last[0]) text += std::string(" (") + last + ")";
  return text;
}

}  // namespace jiriki::nn::cuda

#define JIRIKI_CUDA_CHECK(call)                                                                         \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) ::jiriki::nn::cuda::fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__); \
  } while (0)
#define JIRIKI_CUDNN_CHECK(call)                                                                      \
  do {                                                                                                \
    cudnnStatus_t s_ = (call);                                                                        \
    if (s_ != CUDNN_STATUS_SUCCESS)                                                                   \
      ::jiriki::nn::cuda::fail(#call, ::jiriki::nn::cuda::cudnn_status_text(s_), __FILE__, __LINE__); \
  } while (0)
#define JIRIKI_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                                 \
    cublasStatus_t s_ = (call);                                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                                   \
      ::jiriki::nn::cuda::fail(#call, ::jiriki::nn::cuda::cublas_status_name(s_), __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: launch errors (bad configuration) surface here, faults at the next sync.
#define JIRIKI_CUDA_CHECK_LAUNCH() JIRIKI_CUDA_CHECK(cudaGetLastError())

namespace jiriki::nn::cuda {

// Device memory owned by one object; the device current at construction must be current at
// destruction too (the evaluator keeps its device current while it lives in a call).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) JIRIKI_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory, so that copies to and from the device are true asynchronous DMA.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes) {
    if (bytes) JIRIKI_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

}  // namespace jiriki::nn::cuda
