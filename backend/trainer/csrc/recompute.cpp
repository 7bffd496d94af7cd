// Activation recomputation (torch.utils.checkpoint's reentrant form), behind a C ABI.
//
// The forward pass of a part of the model (a transformer block) runs without recording a
// graph, so none of its activations are kept; only its input is. The autograd node put in
// its place runs that part again in backward, this time recording, and back-propagates the
// incoming gradient through the recomputed graph (a nested backward, as the reentrant
// checkpoint does). The parameters' gradients accumulate during that nested pass; the node
// returns the gradient of the input. The random generator's state and autocast's setting at
// the first forward pass are restored for the second, so dropout draws the same masks and
// the same precision is used.
//
// The part itself is Rust code, reached through a function pointer and an opaque handle the
// node owns (its release function is called when the node is destroyed).

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

extern "C" {
// Runs the part on `x`; stores a new tensor in *out, or returns non-zero with a message.
typedef int (*sb_part_run)(const void* part, at::Tensor* x, at::Tensor** out, char* err, size_t err_len);
typedef void (*sb_part_release)(const void* part);
}

namespace {

// The Rust part, released once nothing refers to it.
struct Part {
    const void* handle;
    sb_part_run run_fn;
    sb_part_release release_fn;

    ~Part() { release_fn(handle); }

    at::Tensor run(const at::Tensor& x) const {
        at::Tensor in = x;
        at::Tensor* out = nullptr;
        char err[1024] = {0};
        if (run_fn(handle, &in, &out, err, sizeof err) != 0 || out == nullptr) throw std::runtime_error(err);
        at::Tensor result = std::move(*out);
        delete out;
        return result;
    }
};

// The generator and autocast setting a forward pass ran under.
struct Replay {
    at::Device device;
    at::Tensor rng_state;
    bool autocast;
    at::ScalarType autocast_dtype;

    explicit Replay(const at::Tensor& x)
        : device(x.device()),
          autocast(at::autocast::is_autocast_enabled(x.device().type())),
          autocast_dtype(at::autocast::get_autocast_dtype(x.device().type())) {
        at::Generator gen = at::globalContext().defaultGenerator(device);
        std::lock_guard<std::mutex> lock(gen.mutex());
        rng_state = gen.get_state();
    }

    // Runs `f` under the saved state, then puts the caller's state back.
    template <typename F>
    at::Tensor run(F&& f) const {
        const at::DeviceType type = device.type();
        at::Generator gen = at::globalContext().defaultGenerator(device);
        at::Tensor before;
        {
            std::lock_guard<std::mutex> lock(gen.mutex());
            before = gen.get_state();
            gen.set_state(rng_state);
        }
        const bool was = at::autocast::is_autocast_enabled(type);
        const at::ScalarType was_dtype = at::autocast::get_autocast_dtype(type);
        at::autocast::set_autocast_enabled(type, autocast);
        at::autocast::set_autocast_dtype(type, autocast_dtype);
        auto restore = [&] {
            at::autocast::set_autocast_enabled(type, was);
            at::autocast::set_autocast_dtype(type, was_dtype);
            std::lock_guard<std::mutex> lock(gen.mutex());
            gen.set_state(before);
        };
        try {
            at::Tensor y = f();
            restore();
            return y;
        } catch (...) {
            restore();
            throw;
        }
    }
};

struct RecomputeBackward : public torch::autograd::Node {
    std::shared_ptr<Part> part;
    at::Tensor input;
    Replay replay;

    RecomputeBackward(std::shared_ptr<Part> p, const at::Tensor& x, Replay r)
        : part(std::move(p)), input(x.detach()), replay(std::move(r)) {}

    std::string name() const override { return "RecomputeBackward"; }

    torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
        if (!input.defined()) throw std::runtime_error("recomputation ran twice (its input was released)");
        at::Tensor x = input.detach().requires_grad_(true);
        at::Tensor y = replay.run([&] {
            at::AutoGradMode on(true);
            return part->run(x);
        });
        torch::autograd::backward({y}, {grads[0]});
        return {x.grad()};
    }

    void release_variables() override { input.reset(); }
};

// A new autograd node: libtorch 2.13 holds nodes in intrusive pointers, earlier versions (the
// 2.11 of the GPU machine's PyTorch, bench/gpu/) in shared pointers.
template <typename T, typename... Args>
auto make_node(Args&&... args) {
    if constexpr (std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>) {
        return c10::make_intrusive<T>(std::forward<Args>(args)...);
    } else {
        return std::make_shared<T>(std::forward<Args>(args)...);
    }
}

void write_error(const std::exception& e, char* err, size_t err_len) {
    if (err == nullptr || err_len == 0) return;
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
}

}  // namespace

extern "C" {

// The part's output for `x`, computed without keeping activations; in backward it is
// computed again. The node owns `handle` from here on (released through `release` even when
// this call fails).
int sb_recompute(at::Tensor* x, const void* handle, sb_part_run run, sb_part_release release, at::Tensor** out, char* err,
                 size_t err_len) {
    std::shared_ptr<Part> part(new Part{handle, run, release});
    try {
        Replay replay(*x);
        at::Tensor y;
        {
            at::NoGradGuard no_grad;
            y = part->run(*x);
        }
        if (at::GradMode::is_enabled()) {
            auto node = make_node<RecomputeBackward>(part, *x, std::move(replay));
            node->set_next_edges(torch::autograd::collect_next_edges(*x));
            torch::autograd::set_history(y, node);
        }
        *out = new at::Tensor(std::move(y));
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}

}  // extern "C"
