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
