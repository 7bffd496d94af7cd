// Batches copied to the GPU on a stream of their own: the copy of the next batch runs while
// the current step computes, and the step that uses it waits for it on the GPU (an event the
// compute stream waits on), never on the host. Built only with the `cuda` feature.
//
// The device memory is allocated on the copy stream and used on the compute stream, so the
// caching allocator is told (recordStream) not to hand it out again before the compute stream
// is done with it. The pinned host batch is safe too: a non-blocking copy from pinned memory
// records its own event with PyTorch's host allocator, which keeps the block until it fires.
//
// Events and guards are c10's device-generic ones, which reach CUDA through libc10_cuda: the
// CUDA-specific headers' inline versions would call the CUDA runtime from this object, and
// the trainer does not link it (libtorch_cuda does).

#include "error.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

struct SbCopy {
    at::Tensor tensor;
    c10::Event done{c10::DeviceType::CUDA};
};

namespace {

// One copy stream per GPU, for the life of the process.
c10::cuda::CUDAStream copy_stream(c10::DeviceIndex device) {
    static std::mutex mutex;
    static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(device);
    if (it == streams.end()) it = streams.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
    return it->second;
}

}  // namespace

extern "C" {

// Starts copying `host` to GPU `device` on the copy stream.
SbCopy* sb_copy_start(const at::Tensor* host, int device, char* err, size_t err_len) {
    try {
        const auto index = static_cast<c10::DeviceIndex>(device);
        const c10::Device gpu(c10::DeviceType::CUDA, index);
        c10::DeviceGuard on_device(gpu);
        const c10::Stream stream = copy_stream(index);
        auto copy = std::make_unique<SbCopy>();
        c10::StreamGuard on_copy_stream(stream);
        copy->tensor = host->to(gpu, /*non_blocking=*/true);
        copy->done.record(stream);
        return copy.release();
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return nullptr;
    }
}

// The copied tensor, for use on the current stream, which waits for the copy; frees `copy`
// (also when it fails).
int sb_copy_finish(SbCopy* raw, at::Tensor** out, char* err, size_t err_len) {
    const std::unique_ptr<SbCopy> copy(raw);
    try {
        c10::DeviceGuard on_device(copy->tensor.device());
        const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(copy->tensor.device().index());
        copy->done.block(compute);
        c10::cuda::CUDACachingAllocator::recordStream(copy->tensor.storage().data_ptr(), compute);
        *out = new at::Tensor(std::move(copy->tensor));
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

void sb_copy_free(SbCopy* copy) { delete copy; }

}  // extern "C"
