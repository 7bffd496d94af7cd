// DDP's overlapped gradient all-reduce, and ZeRO's reduce-scatter, behind a C ABI.
//
// What PyTorch's Reducer does: a hook after each parameter's gradient accumulation counts the
// parameter in; when every parameter of a bucket has its gradient, the bucket's gradients are
// copied into one flat buffer and its all-reduce is issued without waiting, so it runs while
// backward goes on computing the layers below. Buckets are issued strictly in their order
// (the reverse of the forward pass, the order backward produces them), so every rank issues
// the same collectives in the same order. `finish` issues what is left, waits for all of it
// and writes the averaged gradients back.
//
// ZeRO stages 2 and 3 (`sb_reducer_scatter`): each bucket is a unit whose flat gradient,
// padded to the group's size times its shard, is reduce-scattered instead, and `finish` adds
// this rank's chunk of the average into the unit's gradient shard. The parameters' own
// gradients are let go as soon as they are in the flat buffer, and at stage 3 the unit's
// gathered parameters too (FSDP's post-backward: its backward is over once every parameter of
// it has its gradient).
//
// Counting: the bytes and calls go to the group's totals like any collective's; the seconds
// are only those `finish` spends waiting, the communication backward did not hide.

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "comm.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Bucket {
    std::vector<size_t> params;
    // Hook calls still to come before the bucket is full, for the armed backward.
    size_t pending = 0;
    at::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
    // ZeRO: the unit's gradient shard, which receives this rank's chunk of the average; the
    // chunk in flight; the unit's gathered parameters to release once it is issued (stage 3).
    at::Tensor shard;
    at::Tensor chunk;
    at::Tensor release;
};

struct State {
    SbGroup* group;
    std::vector<at::Tensor> params;
    std::vector<size_t> bucket_of;
    std::vector<Bucket> buckets;
    // Kept alive so the hooks stay on the nodes every graph uses for these parameters.
    // Whatever pointer this libtorch holds nodes in (intrusive in 2.13, shared in 2.11).
    std::vector<decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()))> accumulators;
    std::mutex mutex;
    bool armed = false;
    size_t next = 0;
    size_t early = 0;
    std::string error;

    // The gradient of parameter i, as a flat float32 vector (zeros if backward gave none).
    at::Tensor flat_grad(size_t i) {
        at::Tensor& grad = params[i].mutable_grad();
        if (!grad.defined()) grad = at::zeros_like(params[i]);
        return grad.to(at::kFloat).reshape({-1});
    }

    // Issues bucket b's all-reduce, or its reduce-scatter for ZeRO (called with the mutex held).
    void launch(Bucket& b) {
        if (b.shard.defined()) return launch_scatter(b);
        RECORD_USER_SCOPE("c10d::all_reduce");
        std::vector<at::Tensor> grads;
        for (size_t i : b.params) grads.push_back(flat_grad(i));
        b.flat = at::cat(grads);
        std::vector<at::Tensor> tensors{b.flat};
        c10d::AllreduceOptions opts;
        opts.reduceOp = c10d::ReduceOp::SUM;
        opts.timeout = group->timeout;
        b.work = group->backend->allreduce(tensors, opts);
    }

    void launch_scatter(Bucket& b) {
        RECORD_USER_SCOPE("c10d::reduce_scatter");
        std::vector<at::Tensor> grads;
        for (size_t i : b.params) grads.push_back(flat_grad(i));
        const int64_t padded = b.shard.numel() * group->size;
        int64_t n = 0;
        for (const at::Tensor& g : grads) n += g.numel();
        if (n > padded) throw std::runtime_error("a unit's gradients are larger than its shards");
        if (n < padded) grads.push_back(at::zeros({padded - n}, grads.front().options()));
        b.flat = at::cat(grads);
        grads.clear();
        for (size_t i : b.params) params[i].mutable_grad().reset();
        if (b.release.defined()) sb_release_storage(b.release);
        b.chunk = at::empty_like(b.shard);
        if (group->size == 1) {
            b.chunk.copy_(b.flat);
            return;
        }
        c10d::ReduceScatterOptions opts;
        opts.reduceOp = c10d::ReduceOp::SUM;
        opts.timeout = group->timeout;
        b.work = group->backend->_reduce_scatter_base(b.chunk, b.flat, opts);
    }

    // Issues every full bucket at the head of the order.
    void launch_ready() {
        while (next < buckets.size() && buckets[next].pending == 0) launch(buckets[next++]);
    }

    void ready(size_t param) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!armed || !error.empty()) return;
        Bucket& b = buckets[bucket_of[param]];
        if (b.pending > 0) --b.pending;
        try {
            launch_ready();
            early = next;
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
};

void write_error(const std::string& what, char* err, size_t err_len) {
    if (err == nullptr || err_len == 0) return;
    std::strncpy(err, what.c_str(), err_len - 1);
    err[err_len - 1] = '\0';
}

}  // namespace

struct SbReducer {
    std::shared_ptr<State> state;
};

extern "C" {

// A reducer for `params` over `group`: parameter i goes in bucket bucket_of[i], buckets issued
// in index order. Hooks the parameters' gradient accumulators.
SbReducer* sb_reducer_new(SbGroup* group, at::Tensor** params, const size_t* bucket_of, size_t n, size_t buckets, char* err,
                          size_t err_len) {
    try {
        auto state = std::make_shared<State>();
        state->group = group;
        state->buckets.resize(buckets);
        for (size_t i = 0; i < n; ++i) {
            if (bucket_of[i] >= buckets) throw std::runtime_error("a parameter's bucket is out of range");
            state->params.push_back(*params[i]);
            state->bucket_of.push_back(bucket_of[i]);
            state->buckets[bucket_of[i]].params.push_back(i);
        }
        std::weak_ptr<State> weak = state;
        for (size_t i = 0; i < n; ++i) {
            auto acc = torch::autograd::impl::grad_accumulator(state->params[i]);
            if (!acc) throw std::runtime_error("a parameter has no gradient accumulator (does it require grad?)");
            acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
                [weak, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                    if (auto s = weak.lock()) s->ready(i);
                    return outputs;
                }));
            state->accumulators.push_back(std::move(acc));
        }
        return new SbReducer{std::move(state)};
    } catch (const std::exception& e) {
        write_error(e.what(), err, err_len);
        return nullptr;
    }
}

void sb_reducer_free(SbReducer* r) { delete r; }

// Turns the reducer's buckets into ZeRO units: bucket b reduce-scatters into `shards[b]` (this
// rank's chunk of the unit's gradient, accumulated into), and, where `release[b]` is not null,
// releases that unit's gathered parameters once its gradients are issued (stage 3).
int sb_reducer_scatter(SbReducer* r, at::Tensor** shards, at::Tensor** release, size_t n, char* err, size_t err_len) {
    State& s = *r->state;
    std::lock_guard<std::mutex> lock(s.mutex);
    try {
        if (n != s.buckets.size()) throw std::runtime_error("one gradient shard per unit");
        for (size_t b = 0; b < n; ++b) {
            s.buckets[b].shard = *shards[b];
            if (release != nullptr && release[b] != nullptr) s.buckets[b].release = *release[b];
        }
        return 0;
    } catch (const std::exception& e) {
        write_error(e.what(), err, err_len);
        return 1;
    }
}

// Arms the hooks for the next backward pass, in which each parameter's gradient is complete
// after `firings` accumulations (one per thread that back-propagates a slice of the batch).
void sb_reducer_arm(SbReducer* r, size_t firings) {
    State& s = *r->state;
    std::lock_guard<std::mutex> lock(s.mutex);
    for (Bucket& b : s.buckets) {
        b.pending = b.params.size() * firings;
        b.flat = at::Tensor();
        b.work.reset();
    }
    s.next = 0;
    s.early = 0;
    s.error.clear();
    s.armed = true;
}

// Issues the buckets backward did not, waits for every bucket, and writes the sum (divided by
// the group's size when `average`) back into the gradients. `early` receives how many buckets
// were issued during backward.
int sb_reducer_finish(SbReducer* r, int average, size_t* early, char* err, size_t err_len) {
    State& s = *r->state;
    std::lock_guard<std::mutex> lock(s.mutex);
    s.armed = false;
    *early = s.early;
    s.early = 0;
    try {
        if (!s.error.empty()) throw std::runtime_error(s.error);
        while (s.next < s.buckets.size()) s.launch(s.buckets[s.next++]);
        SbGroup* g = s.group;
        for (Bucket& b : s.buckets) {
            const auto start = std::chrono::steady_clock::now();
            if (b.work && !sb_wait(g, b.work)) throw std::runtime_error("all-reduce timed out");
            g->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            g->bytes += b.flat.nbytes();
            g->calls += 1;
            if (b.shard.defined()) {
                b.shard.add_(b.chunk, average ? 1.0 / g->size : 1.0);
                b.flat = at::Tensor();
                b.chunk = at::Tensor();
                b.work.reset();
                continue;
            }
            if (average) b.flat.div_(g->size);
            int64_t offset = 0;
            for (size_t i : b.params) {
                at::Tensor& grad = s.params[i].mutable_grad();
                const int64_t n = grad.numel();
                grad.copy_(b.flat.narrow(0, offset, n).view_as(grad));
                offset += n;
            }
            b.flat = at::Tensor();
            b.work.reset();
        }
        s.next = 0;
        return 0;
    } catch (const std::exception& e) {
        write_error(e.what(), err, err_len);
        return 1;
    }
}

}  // extern "C"
