//! Safe faces of `csrc/profile.cpp`: libtorch's profiler and named ranges.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::Path;

use crate::Error;

unsafe extern "C" {
    fn sb_profiler_start(cuda: c_int, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_profiler_stop(path: *const c_char, err: *mut c_char, err_len: usize) -> c_int;
    fn sb_profiler_join_thread() -> c_int;
    fn sb_profiler_leave_thread();
    fn sb_range_push(name: *const c_char, len: usize) -> *mut c_void;
    fn sb_range_pop(handle: *mut c_void);
}

use super::call;

/// A running recording of this process's operators (one per process at a time, as in
/// libtorch). Finish it with [`Recording::save`]; dropped unsaved, it stops and discards.
pub struct Recording {
    saved: bool,
}

impl Recording {
    /// Starts recording the operators of this thread (and of the threads that
    /// [`ProfiledThread::join`]), with CUDA kernels when `cuda`.
    pub fn start(cuda: bool) -> Result<Recording, Error> {
        // SAFETY: a plain value in, error buffer valid for its length.
        call("starting the profiler", |err, len| unsafe { sb_profiler_start(c_int::from(cuda), err, len) })?;
        Ok(Recording { saved: false })
    }

    /// Stops recording and writes the Chrome trace to `path`.
    pub fn save(mut self, path: &Path) -> Result<(), Error> {
        self.saved = true;
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Native { what: "saving the profile".into(), message: format!("{} has a NUL byte", path.display()) })?;
        // SAFETY: a C string that lives through the call, error buffer valid for its length.
        call("saving the profile", |err, len| unsafe { sb_profiler_stop(c_path.as_ptr(), err, len) })
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if !self.saved {
            // An empty path: the shim stops without saving.
            let _ = call("stopping the profiler", |err, len| unsafe { sb_profiler_stop(c"".as_ptr(), err, len) });
        }
    }
}

/// A thread's membership in the running profile: a thread the caller spawns records its
/// operators only while it holds one. A no-op when nothing records.
pub struct ProfiledThread {
    joined: bool,
}

impl ProfiledThread {
    pub fn join() -> ProfiledThread {
        // SAFETY: no arguments; the shim catches every exception.
        ProfiledThread { joined: unsafe { sb_profiler_join_thread() } != 0 }
    }
}

impl Drop for ProfiledThread {
    fn drop(&mut self) {
        if self.joined {
            // SAFETY: leaves what this thread joined; the shim catches every exception.
            unsafe { sb_profiler_leave_thread() }
        }
    }
}

/// A named range, from [`Range::enter`] until dropped (on the same thread): a user
/// annotation in a profile, and an NVTX range on a CUDA build.
pub struct Range {
    handle: *mut c_void,
}

impl Range {
    pub fn enter(name: &str) -> Range {
        // SAFETY: the shim copies `len` bytes of `name` before returning.
        Range { handle: unsafe { sb_range_push(name.as_ptr().cast(), name.len()) } }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        // SAFETY: the handle came from sb_range_push and is popped once (null is ignored).
        unsafe { sb_range_pop(self.handle) }
    }
}
