// A step's phases timed on the GPU: an event recorded in the compute stream at each phase's
// boundary, read after the step's loss has been read (which waits for the step anyway). Timing
// by a device synchronisation after each phase instead left the GPU idle while the host queued
// the next phase's first kernels, a few milliseconds a step on an H200. Built only with the
// `cuda` feature, with c10's device-generic events, as `cuda_copy.cpp` is.

#include "error.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <memory>

struct SbMark {
    // Timing needs the backend's default events (PyTorch's own default disables timing).
    c10::Event event{c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT};
};

extern "C" {

// A mark at this point of GPU `device`'s current stream.
SbMark* sb_mark_record(int device, char* err, size_t err_len) {
    try {
        const auto index = static_cast<c10::DeviceIndex>(device);
        c10::DeviceGuard on_device(c10::Device(c10::DeviceType::CUDA, index));
        auto mark = std::make_unique<SbMark>();
        mark->event.record(c10::cuda::getCurrentCUDAStream(index));
        return mark.release();
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return nullptr;
    }
}

// Milliseconds of GPU time from `earlier` to `later`, once the GPU has reached `later`.
int sb_mark_elapsed(const SbMark* earlier, const SbMark* later, double* ms, char* err, size_t err_len) {
    try {
        later->event.synchronize();
        *ms = earlier->event.elapsedTime(later->event);
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

void sb_mark_free(SbMark* mark) { delete mark; }

}  // extern "C"
