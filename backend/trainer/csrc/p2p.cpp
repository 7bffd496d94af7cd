// Point-to-point transfers between two ranks of a process group (the pipeline's activations
// and gradients), behind a C ABI. c10d's own ProcessGroup::send/recv, so the same code runs
// over Gloo on the CPU and NCCL on GPUs.
//
// A send is issued and returned as work to wait for later: a stage sends its output and goes
// on with its next pass, as the schedules assume (with Gloo, a send whose receiver has not yet
// posted its receive would otherwise block both ranks whenever each sends to the other first).
// A receive waits: the pass that posts it cannot start without it. Messages are matched by
// tag (Gloo; NCCL matches them in the order they are issued).

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm.h"
#include "error.h"

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <vector>

// A send under way: its work, and the tensor it reads from, kept alive until it is done.
struct SbSent {
    SbGroup* group;
    c10::intrusive_ptr<c10d::Work> work;
    at::Tensor tensor;
    std::chrono::steady_clock::time_point start;
};

namespace {

void check_peer(const SbGroup* g, int peer) {
    if (peer < 0 || peer >= g->size || peer == g->rank) throw std::runtime_error("a point-to-point peer must be another rank of the group");
}

// Counts a transfer that ended into the group's traffic, as the collectives are counted.
void count(SbGroup* g, const at::Tensor& t, std::chrono::steady_clock::time_point start) {
    g->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    g->bytes += t.nbytes();
    g->calls += 1;
}

}  // namespace

extern "C" {

// Issues the send of `t` (contiguous) to group rank `peer` under `tag`; `*out` is the work to
// wait for with sb_sent_wait and free with sb_sent_free.
int sb_send(SbGroup* g, at::Tensor* t, int peer, int tag, SbSent** out, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        check_peer(g, peer);
        if (!t->is_contiguous()) throw std::runtime_error("send needs a contiguous tensor");
        std::vector<at::Tensor> tensors{*t};
        const auto start = std::chrono::steady_clock::now();
        auto work = g->backend->send(tensors, peer, tag);
        *out = new SbSent{g, work, *t, start};
    });
}

// Waits until the send has left this rank (at most the group's timeout with Gloo).
int sb_sent_wait(SbSent* s, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!sb_wait(s->group, s->work)) throw std::runtime_error("send timed out");
        count(s->group, s->tensor, s->start);
    });
}

void sb_sent_free(SbSent* s) { delete s; }

// Receives into `t` (contiguous, of the sent shape and type) from group rank `peer` under
// `tag`, waiting for it.
int sb_recv(SbGroup* g, at::Tensor* t, int peer, int tag, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        check_peer(g, peer);
        if (!t->is_contiguous()) throw std::runtime_error("recv needs a contiguous tensor");
        std::vector<at::Tensor> tensors{*t};
        const auto start = std::chrono::steady_clock::now();
        auto work = g->backend->recv(tensors, peer, tag);
        if (!sb_wait(g, work)) throw std::runtime_error("recv timed out");
        count(g, *t, start);
    });
}

}  // extern "C"
