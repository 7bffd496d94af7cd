// The few libtorch entry points tch does not expose, behind a C ABI.
//
// Every function catches C++ exceptions and reports them through (err, err_len) instead of
// letting them unwind into Rust. Tensors arrive as `at::Tensor*`, which is what tch's
// `Tensor::as_mut_ptr()` hands out.

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

#include <cstring>
#include <dlfcn.h>
#include <exception>
#include <string>
#include <vector>

namespace {

void write_error(const std::exception& e, char* err, size_t err_len) {
    if (err == nullptr || err_len == 0) return;
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
}

std::vector<at::Tensor> gather(at::Tensor** tensors, size_t n) {
    std::vector<at::Tensor> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) out.push_back(*tensors[i]);
    return out;
}

}  // namespace

extern "C" {

// Autocast for one device type (tch's own switch only reaches CUDA, with float16).
// device: 0 = CPU, 1 = CUDA; dtype: 0 = bfloat16, 1 = float16.
int sb_set_autocast(int device, int enabled, int dtype, char* err, size_t err_len) {
    try {
        const at::DeviceType type = device == 1 ? at::kCUDA : at::kCPU;
        at::autocast::set_autocast_dtype(type, dtype == 1 ? at::kHalf : at::kBFloat16);
        at::autocast::set_autocast_enabled(type, enabled != 0);
        if (!enabled) at::autocast::clear_cache();
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// TF32 tensor cores for float32 matmuls and convolutions on Ampere and later GPUs.
int sb_set_tf32(int enabled, char* err, size_t err_len) {
    try {
        at::globalContext().setAllowTF32CuBLAS(enabled != 0);
        at::globalContext().setAllowTF32CuDNN(enabled != 0);
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// Back-propagates from `y` with `grad` as its gradient (a pipeline stage's output, whose
// gradient came from the next stage), accumulating into the leaves' gradients as
// `Tensor.backward(grad)` does; tch only back-propagates from scalars.
int sb_backward_with(at::Tensor* y, at::Tensor* grad, char* err, size_t err_len) {
    try {
        y->backward(*grad);
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// An uninitialised float32 CPU tensor in page-locked memory, allocated there directly (a
// tensor's pin_memory() would allocate, then copy the whole batch over).
int sb_empty_pinned(const int64_t* shape, size_t ndim, at::Tensor** out, char* err, size_t err_len) {
    try {
        auto options = at::TensorOptions().dtype(at::kFloat).pinned_memory(true);
        *out = new at::Tensor(at::empty(at::IntArrayRef(shape, ndim), options));
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// One fused multi-tensor Adam step (torch.optim.Adam(fused=True)) over n parameters.
// grad_scale / found_inf may be null; when given, gradients are unscaled inside the kernel
// and the step is skipped where found_inf is set (what GradScaler does with fused Adam).
int sb_fused_adam(at::Tensor** params, at::Tensor** grads, at::Tensor** exp_avgs, at::Tensor** exp_avg_sqs,
                  at::Tensor** steps, size_t n, double lr, double beta1, double beta2, double weight_decay,
                  double eps, at::Tensor* grad_scale, at::Tensor* found_inf, char* err, size_t err_len) {
    try {
        std::vector<at::Tensor> p = gather(params, n), g = gather(grads, n), m = gather(exp_avgs, n),
                                v = gather(exp_avg_sqs, n), s = gather(steps, n), none;
        std::optional<at::Tensor> scale, inf;
        if (grad_scale != nullptr) scale = *grad_scale;
        if (found_inf != nullptr) inf = *found_inf;
        // The kernel reads the step counters but does not advance them: torch.optim.Adam adds
        // one before the call and takes it back where the step was skipped for an inf.
        at::_foreach_add_(s, 1);
        at::_fused_adam_(p, g, m, v, none, s, lr, beta1, beta2, weight_decay, eps, /*amsgrad=*/false,
                         /*maximize=*/false, scale, inf);
        if (inf) at::_foreach_sub_(s, std::vector<at::Tensor>(n, inf->reshape({})));
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// GradScaler's unscale: multiplies every gradient by inv_scale in place and sets found_inf
// to 1 if any of them holds an inf or a NaN.
int sb_unscale_grads(at::Tensor** grads, size_t n, at::Tensor* found_inf, at::Tensor* inv_scale, char* err,
                     size_t err_len) {
    try {
        std::vector<at::Tensor> g = gather(grads, n);
        at::_amp_foreach_non_finite_check_and_unscale_(g, *found_inf, *inv_scale);
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

// Whole-device used memory in bytes, as the tutorial's NVML lines report it (CUDA context and
// allocator cache included). NVML is loaded at run time, so CPU machines need no NVIDIA
// library; returns 1 with a message where there is none.
int sb_gpu_memory_used(unsigned int device, unsigned long long* used, char* err, size_t err_len) {
    struct Memory {
        unsigned long long total, free, used;
    };
    using Init = int (*)();
    using Handle = int (*)(unsigned int, void**);
    using Info = int (*)(void*, Memory*);
    static void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        write_error(std::runtime_error("NVML (libnvidia-ml.so.1) is not available"), err, err_len);
        return 1;
    }
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto handle_of = reinterpret_cast<Handle>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    auto info = reinterpret_cast<Info>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    void* handle = nullptr;
    Memory memory{};
    if (init == nullptr || handle_of == nullptr || info == nullptr || init() != 0 || handle_of(device, &handle) != 0 ||
        info(handle, &memory) != 0) {
        write_error(std::runtime_error("NVML could not read the device's memory"), err, err_len);
        return 1;
    }
    *used = memory.used;
    return 0;
}

}  // extern "C"
