// The process group the shims share: comm.cpp's collectives and reducer.cpp's overlapped
// gradient all-reduce both issue work on it and count it.

#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>

struct SbGroup {
    c10::intrusive_ptr<c10d::Backend> backend;
    int rank;
    int size;
    bool nccl;
    std::chrono::milliseconds timeout;
    // What the group's collectives have cost so far, for the run's measured step split: the
    // host's time from issuing each to its end (the whole collective with Gloo, which runs on
    // the host; only the queueing with NCCL, which runs on a stream), the bytes of their
    // buffers (an all-gather's gathered size, as the estimate counts it), and their number.
    double seconds = 0.0;
    uint64_t bytes = 0;
    uint64_t calls = 0;
};

// Waits for `work` as its backend wants. Gloo runs the collective on the host: wait for it, at
// most the group's timeout. NCCL runs it on a stream of its own: a wait without a timeout only
// orders the current (compute) stream after it and the host goes on queueing work, while a
// wait with one would block the host until the kernel ends; the process group's watchdog
// enforces NCCL's timeout (set when the group was made).
inline bool sb_wait(const SbGroup* g, const c10::intrusive_ptr<c10d::Work>& work) {
    return g->nccl ? work->wait() : work->wait(g->timeout);
}
