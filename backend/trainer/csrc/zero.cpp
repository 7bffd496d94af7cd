// ZeRO's parameter shards, behind a C ABI.
//
// A unit's parameters (a DDP bucket's at stages 1 and 2, a transformer block's at stage 3, as
// FSDP wraps them) live in one flat buffer, the `full` tensor: each parameter is a view of its
// storage (set_data, as FSDP's flat parameter). Every dp rank owns one equal chunk of it, its
// shard. At stage 3 the full buffer holds memory only while the unit is in use: gathered from
// every rank's shard before its forward and again before its backward, released after each.
// Gathering and releasing change the storage's memory, not any tensor's metadata or version
// counter, so the autograd graph's saved parameters read the gathered values in backward
// (what FSDP does with its flat parameter's storage).

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/variable.h>

#include "comm.h"
#include "error.h"

#include <cstring>
#include <exception>
#include <string>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gathers the unit whose buffer is `full` from every rank's `shard`, unless it holds its
// values already.
void gather(SbGroup* g, at::Tensor& full, const at::Tensor& shard) {
    if (full.storage().nbytes() >= full.nbytes()) return;
    RECORD_USER_SCOPE("c10d::all_gather");
    sb_resize_storage(full, full.nbytes());
    sb_all_gather_into(g, full, shard);
}

// Identity forward; backward gathers the unit again before the gradient flows on into the
// block that produced `x` (FSDP's pre-backward hook).
struct GatherOnBackward : public torch::autograd::Function<GatherOnBackward> {
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group, const at::Tensor& full, const at::Tensor& shard) {
        ctx->saved_data["group"] = group;
        ctx->saved_data["full"] = full;
        ctx->saved_data["shard"] = shard;
        return x.clone();
    }
    static variable_list backward(AutogradContext* ctx, variable_list grads) {
        at::Tensor full = ctx->saved_data["full"].toTensor();
        const at::Tensor shard = ctx->saved_data["shard"].toTensor();
        gather(reinterpret_cast<SbGroup*>(ctx->saved_data["group"].toInt()), full, shard);
        return {grads[0], at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

}  // namespace

extern "C" {

// Makes `param` a view of `source` (a part of its unit's buffer), keeping its autograd
// identity: its gradient accumulator, hooks and version counter.
int sb_set_data(at::Tensor* param, at::Tensor* source, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (param->sizes() != source->sizes()) throw std::runtime_error("a parameter's place in its unit has another shape");
        param->set_data(*source);
    });
}

// Sets `param`'s gradient to `grad` (a view of the unit's gradient buffer, which backward then
// accumulates into), or clears it when `grad` is null.
int sb_set_grad(at::Tensor* param, at::Tensor* grad, char* err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (grad == nullptr) {
            param->mutable_grad().reset();
        } else {
            param->mutable_grad() = *grad;
        }
    });
}

// The bytes of memory `t`'s storage holds now (0 for a released unit).
uint64_t sb_storage_nbytes(const at::Tensor* t) { return t->defined() ? t->storage().nbytes() : 0; }

// Gathers the unit (`full` from every rank's `shard`) unless it is gathered.
int sb_unit_gather(SbGroup* g, at::Tensor* full, at::Tensor* shard, char* err, size_t err_len) {
    return guarded(err, err_len, [&] { gather(g, *full, *shard); });
}

// Releases the unit's memory; its parameters must not be read until it is gathered again.
int sb_unit_release(at::Tensor* full, char* err, size_t err_len) {
    return guarded(err, err_len, [&] { sb_release_storage(*full); });
}

// `x` (a block's output) through GatherOnBackward.
int sb_unit_gather_on_backward(SbGroup* g, at::Tensor* x, at::Tensor* full, at::Tensor* shard, at::Tensor** out, char* err,
                               size_t err_len) {
    return guarded(err, err_len, [&] {
        at::Tensor y = GatherOnBackward::apply(*x, reinterpret_cast<int64_t>(g), *full, *shard);
        *out = new at::Tensor(std::move(y));
    });
}

}  // extern "C"
