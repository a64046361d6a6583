//! A Node-API call's argument memory, read by raw pointer: the `Uint32Array` tape
//! ([`TapeArray`]), how much of a string one read can hold ([`read_capacity`],
//! [`read_whole`]), and the status check of a Node-API call. Both the class methods (`agent`)
//! and the plain functions (`raw`) use it, so it is its own file: `raw` calls the agent, and
//! the agent no longer imports `raw`.
//!
//! Handles: every `sys::napi_env` and `sys::napi_value` given to these functions is the
//! current Node-API callback's own (see each function's `# Safety`).

use std::ffi::c_void;
use std::ptr;

use napi::sys;

type Result<T> = napi::Result<T>;

pub(crate) fn failed(what: &str) -> napi::Error {
    napi::Error::from_reason(format!("runcore: Node-API call failed: {what}"))
}

pub(crate) fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(failed(what))
    }
}

/// The most bytes one `napi_get_value_string_utf8` call is offered: Node hands the size to V8
/// as an `int`, so a buffer of 2^31 bytes or more would read as nothing.
const READ_MAX: usize = (1 << 30) - 1;

/// The size offered to Node for a buffer of `capacity` bytes.
pub(crate) fn read_capacity(capacity: usize) -> usize {
    capacity.min(READ_MAX)
}

/// Whether a read that wrote `written` bytes into `capacity` offered bytes holds the whole
/// string: Node stops before a character that does not fit (at most 4 bytes) and keeps one
/// byte for the NUL, so 5 bytes short of the end it was all. Holds for every length.
pub(crate) fn read_whole(written: usize, capacity: usize) -> bool {
    capacity <= READ_MAX && written.saturating_add(5) < capacity
}

/// A `Uint32Array` argument's memory, only ever accessed through raw pointer reads and
/// writes: JavaScript may back it with a `SharedArrayBuffer` that another thread writes while
/// this call runs, so no Rust reference to it is ever made.
pub(crate) struct TapeArray {
    data: *mut u32,
    length: usize,
}

impl TapeArray {
    /// Its length in words.
    pub(crate) fn len(&self) -> usize {
        self.length
    }

    /// The word at `index` (0 past the end).
    pub(crate) fn read(&self, index: usize) -> u32 {
        if index >= self.length {
            return 0;
        }
        // SAFETY: `index` < `length`, and the array's `length` words at `data` are alive
        // while this `TapeArray` is (`tape_array`'s contract: it is used only during the call
        // it came from); a volatile read of memory another thread may write yields some value
        // and makes no reference.
        unsafe { self.data.add(index).read_volatile() }
    }

    /// Copies `words` to the start of the array (as many as fit).
    pub(crate) fn write(&self, words: &[u32]) {
        let count = words.len().min(self.length);
        // SAFETY: `count` <= `length` words fit in the array, alive while this `TapeArray` is
        // (`tape_array`'s contract); the source is a Rust slice of our own, which cannot overlap
        // JavaScript's array memory; raw writes make no reference to shared memory.
        unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), self.data, count) };
    }
}

/// The `Uint32Array` `value`, an argument of the current call (`env`'s).
///
/// # Safety
///
/// `env` is the environment of the Node-API call running now and `value` one of its
/// arguments; the `TapeArray` returned is used only until that call returns (the array's
/// memory is kept alive by the call's handle scope, not by the `TapeArray`).
pub(crate) unsafe fn tape_array(env: sys::napi_env, value: sys::napi_value) -> Result<TapeArray> {
    // SAFETY: the same contract as this function's.
    unsafe { words(env, value) }
}

/// The `Uint32Array` `value`.
///
/// # Safety
///
/// As [`tape_array`]: `env` and `value` are the running call's, and the `TapeArray` is used
/// only until it returns.
pub(crate) unsafe fn words(env: sys::napi_env, value: sys::napi_value) -> Result<TapeArray> {
    let mut kind = 0;
    let mut length = 0;
    let mut data: *mut c_void = ptr::null_mut();
    let mut buffer = ptr::null_mut();
    let mut offset = 0;
    // SAFETY: `env` and `value` are the running call's (this function's contract); the status
    // says whether `value` is a typed array; every out-parameter is a local.
    let status = unsafe {
        sys::napi_get_typedarray_info(
            env,
            value,
            &mut kind,
            &mut length,
            &mut data,
            &mut buffer,
            &mut offset,
        )
    };
    check(status, "napi_get_typedarray_info")?;
    if kind != sys::TypedarrayType::uint32_array {
        return Err(failed("the tape is not a Uint32Array"));
    }
    if length == 0 || data.is_null() {
        return Ok(TapeArray {
            data: ptr::null_mut(),
            length: 0,
        });
    }
    Ok(TapeArray {
        data: data.cast::<u32>(),
        length,
    })
}
