// The CUDA caching allocator's peak: what PyTorch's torch.cuda.max_memory_allocated reports,
// the tensors alone at their most. A run on a GPU records it as its measured peak memory (a
// CPU run records its peak resident set). Built only with the `cuda` feature: it needs
// libc10_cuda.

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstring>
#include <exception>

extern "C" int sb_cuda_peak_allocated(int device, unsigned long long* peak, char* err, size_t err_len) {
    try {
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
        *peak = static_cast<unsigned long long>(stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak);
        return 0;
    } catch (const std::exception& e) {
        if (err != nullptr && err_len > 0) {
            std::strncpy(err, e.what(), err_len - 1);
            err[err_len - 1] = '\0';
        }
        return 1;
    }
}
