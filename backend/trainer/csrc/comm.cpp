// c10d process groups and the tutorial's parallel-region operations, behind a C ABI.
//
// The collectives are libtorch's own (TCPStore rendezvous, ProcessGroupGloo on CPU,
// ProcessGroupNCCL on GPU with -DSCALEBOOK_NCCL): the engine PyTorch's DDP uses. The region
// operations are autograd Functions, so gradients flow through the collectives exactly as in
// the tutorial's distributed/mappings.py. Every entry point catches C++ exceptions and reports
// them through (err, err_len).

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm.h"
#include "error.h"
#ifdef SCALEBOOK_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

struct SbStore {
    c10::intrusive_ptr<c10d::Store> store;
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <typename F>
void run(SbGroup* g, uint64_t bytes, F&& issue) {
    sb_run(g, bytes, std::forward<F>(issue));
}

// In-place all-reduce. Gloo has no AVG, so it sums and divides.
void all_reduce(SbGroup* g, at::Tensor& t, int op) {
    if (g->size == 1) return;
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op == 2 ? c10d::ReduceOp::MAX : (op == 1 && g->nccl ? c10d::ReduceOp::AVG : c10d::ReduceOp::SUM);
    opts.timeout = g->timeout;
    run(g, t.nbytes(), [&] { return g->backend->allreduce(tensors, opts); });
    if (op == 1 && !g->nccl) t.div_(g->size);
}

// All-gather of chunks whose sizes along `dim` may differ (the tutorial's uneven context
// split): pad every chunk to the largest, gather equal shapes, trim and concatenate.
at::Tensor all_gather(SbGroup* g, const at::Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
    if (g->size == 1) return x;
    const int64_t longest = *std::max_element(sizes.begin(), sizes.end());
    at::Tensor local = x.contiguous();
    if (local.size(dim) < longest) {
        std::vector<int64_t> pad_shape = local.sizes().vec();
        pad_shape[dim] = longest - local.size(dim);
        local = at::cat({local, at::zeros(pad_shape, local.options())}, dim);
    }
    std::vector<at::Tensor> outputs;
    for (int i = 0; i < g->size; ++i) outputs.push_back(at::empty_like(local));
    std::vector<std::vector<at::Tensor>> out{outputs};
    std::vector<at::Tensor> in{local};
    c10d::AllgatherOptions opts;
    opts.timeout = g->timeout;
    run(g, local.nbytes() * g->size, [&] { return g->backend->allgather(out, in, opts); });
    std::vector<at::Tensor> parts;
    for (int i = 0; i < g->size; ++i) parts.push_back(out[0][i].narrow(dim, 0, sizes[i]));
    return at::cat(parts, dim);
}

// This rank's chunk of `x` along `dim`.
at::Tensor own_chunk(SbGroup* g, const at::Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
    int64_t start = 0;
    for (int i = 0; i < g->rank; ++i) start += sizes[i];
    return x.narrow(dim, start, sizes[g->rank]).contiguous();
}

// Reduce-scatter with uneven chunks: the sum over the group of `x`, keeping this rank's chunk.
// c10d's reduce-scatter wants equal chunks, so this is an all-reduce followed by the slice
// (twice the traffic of a ring reduce-scatter; the autograd contract is the same).
at::Tensor reduce_scatter(SbGroup* g, const at::Tensor& x, int64_t dim, const std::vector<int64_t>& sizes) {
    if (g->size == 1) return x;
    at::Tensor full = x.contiguous().clone();
    all_reduce(g, full, 0);
    return own_chunk(g, full, dim, sizes);
}

SbGroup* group_of(AutogradContext* ctx) {
    return reinterpret_cast<SbGroup*>(ctx->saved_data["group"].toInt());
}

std::vector<int64_t> sizes_of(AutogradContext* ctx) {
    return ctx->saved_data["sizes"].toIntVector();
}

int64_t dim_of(AutogradContext* ctx) { return ctx->saved_data["dim"].toInt(); }

// What the backward of a sequence operation needs: the group, the dimension, the chunk sizes.
void remember(AutogradContext* ctx, int64_t group, int64_t dim, const std::vector<int64_t>& sizes) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sizes"] = sizes;
}

// copy_to_parallel_region: identity forward, gradient summed over the group backward.
struct CopyTo : public torch::autograd::Function<CopyTo> {
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
        ctx->saved_data["group"] = group;
        return x.clone();
    }
    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        at::Tensor g = grads[0].contiguous().clone();
        all_reduce(group_of(ctx), g, 0);
        return {g, at::Tensor()};
    }
};

// reduce_from_parallel_region: sum over the group forward, identity backward.
struct ReduceFrom : public torch::autograd::Function<ReduceFrom> {
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
        at::Tensor y = x.contiguous().clone();
        all_reduce(reinterpret_cast<SbGroup*>(group), y, 0);
        return y;
    }
    static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

// scatter_to_parallel_region: keep this rank's chunk forward, all-gather gradients backward.
struct ScatterTo : public torch::autograd::Function<ScatterTo> {
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group, int64_t dim, std::vector<int64_t> sizes) {
        remember(ctx, group, dim, sizes);
        return own_chunk(reinterpret_cast<SbGroup*>(group), x, dim, sizes);
    }
    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        at::Tensor g = all_gather(group_of(ctx), grads[0], dim_of(ctx), sizes_of(ctx));
        return {g, at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

// All-gather forward. Backward, with Reduce = false (gather_from_parallel_region: cp shards
// back to the sequence) keep this rank's chunk; with Reduce = true
// (all_gather_from_parallel_region: K and V over cp) reduce-scatter (sum), since every rank's
// attention used every rank's keys and values.
template <bool Reduce>
struct Gather : public torch::autograd::Function<Gather<Reduce>> {
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group, int64_t dim, std::vector<int64_t> sizes) {
        remember(ctx, group, dim, sizes);
        return all_gather(reinterpret_cast<SbGroup*>(group), x, dim, sizes);
    }
    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        SbGroup* g = group_of(ctx);
        at::Tensor out = Reduce ? reduce_scatter(g, grads[0], dim_of(ctx), sizes_of(ctx))
                                : own_chunk(g, grads[0], dim_of(ctx), sizes_of(ctx));
        return {out, at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

using GatherFrom = Gather<false>;
using AllGatherFrom = Gather<true>;

std::chrono::milliseconds ms(int64_t v) { return std::chrono::milliseconds(v); }

}  // namespace

extern "C" {

SbStore* sb_store_connect(const char* host, int port, int world, int is_master, int64_t timeout_ms, char* err, size_t err_len) {
    SbStore* out = nullptr;
    guarded(err, err_len, [&] {
        c10d::TCPStoreOptions opts;
        opts.port = static_cast<std::uint16_t>(port);
        opts.isServer = is_master != 0;
        opts.numWorkers = world;
        opts.waitWorkers = false;
        opts.timeout = ms(timeout_ms);
        out = new SbStore{c10::make_intrusive<c10d::TCPStore>(std::string(host), opts)};
    });
    return out;
}

void sb_store_free(SbStore* s) { delete s; }

// A process group named `name` (unique per group of ranks), backed by a prefix of the store.
// A group of one rank needs no store and no backend: its collectives are no-ops.
SbGroup* sb_group_new(SbStore* s, const char* name, int rank, int size, int nccl, int64_t timeout_ms, const char* gloo_host,
                      char* err, size_t err_len) {
    SbGroup* out = nullptr;
    guarded(err, err_len, [&] {
        c10::intrusive_ptr<c10d::Backend> backend;
        if (size > 1 && s == nullptr) throw std::runtime_error("a group of more than one rank needs a store");
        c10::intrusive_ptr<c10d::Store> store;
        if (size > 1) store = c10::make_intrusive<c10d::PrefixStore>(std::string(name), s->store);
        if (size > 1 && nccl) {
#ifdef SCALEBOOK_NCCL
            auto opts = c10d::ProcessGroupNCCL::Options::create();
            opts->timeout = ms(timeout_ms);
            backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
#else
            throw std::runtime_error("this build has no NCCL; rebuild with --features cuda");
#endif
        } else if (size > 1) {
            auto opts = c10d::ProcessGroupGloo::Options::create(ms(timeout_ms));
            const std::string host = gloo_host == nullptr ? "" : gloo_host;
            opts->devices.push_back(host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                                 : c10d::ProcessGroupGloo::createDeviceForHostname(host));
            backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
        }
        out = new SbGroup{backend, rank, size, nccl != 0, ms(timeout_ms)};
    });
    return out;
}

void sb_group_free(SbGroup* g) { delete g; }

// The group's collectives so far: seconds, bytes and calls (see SbGroup).
void sb_group_stats(const SbGroup* g, double* seconds, uint64_t* bytes, uint64_t* calls) {
    *seconds = g->seconds;
    *bytes = g->bytes;
    *calls = g->calls;
}

int sb_all_reduce(SbGroup* g, at::Tensor* t, int op, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!t->is_contiguous()) throw std::runtime_error("all_reduce needs a contiguous tensor");
        all_reduce(g, *t, op);
    });
}

int sb_broadcast(SbGroup* g, at::Tensor* t, int root, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (g->size == 1) return;
        if (!t->is_contiguous()) throw std::runtime_error("broadcast needs a contiguous tensor");
        std::vector<at::Tensor> tensors{*t};
        c10d::BroadcastOptions opts;
        opts.rootRank = root;
        opts.timeout = g->timeout;
        run(g, t->nbytes(), [&] { return g->backend->broadcast(tensors, opts); });
    });
}

// Flat all-gather into `out` (see sb_all_gather_into).
int sb_all_gather_flat(SbGroup* g, at::Tensor* out, at::Tensor* in, char* err, size_t err_len) {
    return guarded(err, err_len, [&] { sb_all_gather_into(g, *out, *in); });
}

// Flat reduce-scatter of `in` into `out`; op: 0 sum, 1 average (see sb_reduce_scatter_into).
int sb_reduce_scatter_flat(SbGroup* g, at::Tensor* out, at::Tensor* in, int op, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (op != 0 && op != 1) throw std::runtime_error("reduce_scatter sums or averages");
        sb_reduce_scatter_into(g, *out, *in, op == 1);
    });
}

int sb_barrier(SbGroup* g, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (g->size == 1) return;
        c10d::BarrierOptions opts;
        opts.timeout = g->timeout;
        run(g, 0, [&] { return g->backend->barrier(opts); });
    });
}

// The autograd region operations. kind: 0 copy-to, 1 reduce-from, 2 scatter-to,
// 3 gather-from, 4 all-gather-from (see the structs above).
int sb_region(SbGroup* g, int kind, at::Tensor* x, int64_t dim, const int64_t* sizes, size_t n, at::Tensor** out, char* err,
              size_t err_len) {
    return guarded(err, err_len, [&] {
        const auto handle = reinterpret_cast<int64_t>(g);
        const std::vector<int64_t> s(sizes, sizes + n);
        at::Tensor y;
        switch (kind) {
            case 0: y = CopyTo::apply(*x, handle); break;
            case 1: y = ReduceFrom::apply(*x, handle); break;
            case 2: y = ScatterTo::apply(*x, handle, dim, s); break;
            case 3: y = GatherFrom::apply(*x, handle, dim, s); break;
            case 4: y = AllGatherFrom::apply(*x, handle, dim, s); break;
            default: throw std::runtime_error("unknown region operation");
        }
        *out = new at::Tensor(std::move(y));
    });
}

}  // extern "C"
