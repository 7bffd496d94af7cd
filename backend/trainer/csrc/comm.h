// The process group the shims share: comm.cpp's collectives and reducer.cpp's overlapped
// gradient all-reduce both issue work on it and count it.

#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

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
