// The process group the shims share: comm.cpp's collectives and reducer.cpp's overlapped
// gradient all-reduce both issue work on it and count it.

#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>

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

// Issues a collective (`issue` returns its work), waits for it, and counts it.
template <typename F>
void sb_run(SbGroup* g, uint64_t bytes, F&& issue) {
    const auto start = std::chrono::steady_clock::now();
    const c10::intrusive_ptr<c10d::Work> work = issue();
    if (!sb_wait(g, work)) throw std::runtime_error("collective timed out");
    g->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    g->bytes += bytes;
    g->calls += 1;
}

// Flat all-gather: `out` (contiguous, the group's size times `in`'s elements) receives every
// rank's `in`, in rank order. Counted at the gathered size, as the estimate counts it.
inline void sb_all_gather_into(SbGroup* g, at::Tensor& out, const at::Tensor& in) {
    if (!out.is_contiguous() || out.numel() != in.numel() * g->size) throw std::runtime_error("all_gather needs a contiguous output of size x input");
    if (g->size == 1) {
        out.copy_(in.reshape_as(out));
        return;
    }
    at::Tensor input = in.contiguous();
    c10d::AllgatherOptions opts;
    opts.timeout = g->timeout;
    sb_run(g, out.nbytes(), [&] { return g->backend->_allgather_base(out, input, opts); });
}

// Flat reduce-scatter: `out` receives this rank's chunk (chunk r of `in`, which holds the
// group's size times `out`'s elements) of the sum over the group, divided by the group's size
// when `average` (Gloo has no AVG). Both backends have it (libtorch 2.13's Gloo as
// ProcessGroupGloo::_reduce_scatter_base, NCCL natively): a ring moves each byte once where an
// all-reduce moves it twice.
inline void sb_reduce_scatter_into(SbGroup* g, at::Tensor& out, at::Tensor& in, bool average) {
    if (!out.is_contiguous() || in.numel() != out.numel() * g->size) throw std::runtime_error("reduce_scatter needs an input of size x output");
    if (g->size == 1) {
        out.copy_(in.reshape_as(out));
        return;
    }
    at::Tensor input = in.contiguous();
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = average && g->nccl ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM;
    opts.timeout = g->timeout;
    sb_run(g, input.nbytes(), [&] { return g->backend->_reduce_scatter_base(out, input, opts); });
    if (average && !g->nccl) out.div_(g->size);
}

// Gives `t`'s storage `nbytes` of fresh memory from its allocator (0 releases it). Every
// tensor on that storage (a ZeRO unit's parameters) sees the new memory; no version counter
// moves, so autograd's saved parameters stay valid (FSDP resizes its flat parameter's storage
// the same way).
inline void sb_resize_storage(const at::Tensor& t, size_t nbytes) {
    c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
    if (s->nbytes() == nbytes) return;
    if (s->allocator() == nullptr) throw std::runtime_error("a unit's buffer has no allocator to resize it with");
    at::DataPtr data = s->allocator()->allocate(nbytes);
    s->set_data_ptr_noswap(std::move(data));
    s->set_nbytes(nbytes);
}

inline void sb_release_storage(const at::Tensor& t) { sb_resize_storage(t, 0); }
