// libtorch's own profiler (Kineto) and named ranges, behind a C ABI.
//
// A profile records every operator of the threads that take part (the thread that starts it,
// the autograd engine's threads, and threads that join) and saves it as Chrome-trace JSON.
// A range is a user-scope RecordFunction: it shows in that trace as a `user_annotation`
// event and costs a flag check when no profiler is on. On a CUDA build it is also an NVTX
// range (libtorch's own NVTX stub), so `nsys` shows the same names.

#include "error.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#ifdef SCALEBOOK_NVTX
#include <torch/csrc/profiler/stubs/base.h>
#endif

#include <cstring>
#include <exception>
#include <set>
#include <string>

namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities(int cuda) {
    std::set<ActivityType> set{ActivityType::CPU};
    if (cuda) set.insert(ActivityType::CUDA);
    return set;
}

// The name lives beside the RecordFunction, which only keeps a view of it.
struct Range {
    std::string name;
    at::RecordFunction record{at::RecordScope::USER_SCOPE};
};

}  // namespace

extern "C" {

// Starts recording (CPU operators, and CUDA kernels when `cuda`).
int sb_profiler_start(int cuda, char* err, size_t err_len) {
    try {
        const ProfilerConfig config(ProfilerState::KINETO);
        prof::prepareProfiler(config, activities(cuda));
        prof::enableProfiler(config, activities(cuda));
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// Stops recording and writes the Chrome trace to `path` (an empty path: discards it).
int sb_profiler_stop(const char* path, char* err, size_t err_len) {
    try {
        auto result = prof::disableProfiler();
        if (result && path[0] != '\0') result->save(path);
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// Makes this thread's operators part of the running profile, if one runs; returns whether it
// joined (to leave it with sb_profiler_leave_thread).
int sb_profiler_join_thread() {
    try {
        if (!prof::isProfilerEnabledInMainThread()) return 0;
        prof::enableProfilerInChildThread();
        return 1;
    } catch (...) {
        return 0;
    }
}

void sb_profiler_leave_thread() {
    try {
        prof::disableProfilerInChildThread();
    } catch (...) {
    }
}

// Opens a range named by `len` bytes at `name`; close it with sb_range_pop on the same thread.
void* sb_range_push(const char* name, size_t len) {
    try {
        auto* range = new Range{std::string(name, len)};
        if (range->record.isActive()) range->record.before(std::string_view(range->name));
#ifdef SCALEBOOK_NVTX
        torch::profiler::impl::cudaStubs()->rangePush(range->name.c_str());
#endif
        return range;
    } catch (...) {
        return nullptr;
    }
}

void sb_range_pop(void* handle) {
    if (handle == nullptr) return;
#ifdef SCALEBOOK_NVTX
    try {
        torch::profiler::impl::cudaStubs()->rangePop();
    } catch (...) {
    }
#endif
    // The RecordFunction's destructor ends the range.
    delete static_cast<Range*>(handle);
}

}  // extern "C"
