// The shims' one way of reporting a C++ exception across the C boundary: its message copied
// into the caller's buffer, NUL-terminated and cut to fit.
#pragma once

#include <cstring>
#include <exception>

inline void write_error(const std::exception& e, char* err, size_t err_len) {
    if (err == nullptr || err_len == 0) return;
    std::strncpy(err, e.what(), err_len - 1);
    err[err_len - 1] = '\0';
}

// Runs `f` as a shim function's body: 0 when it returns, 1 with the message of what it threw
// in `err` when it throws.
template <typename F>
int guarded(char* err, size_t err_len, F&& f) {
    try {
        f();
        return 0;
    } catch (const std::exception& e) {
        write_error(e, err, err_len);
        return 1;
    }
}
