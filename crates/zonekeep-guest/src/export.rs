//! The exports: [`export_zone!`](crate::export_zone) and the [`Runtime`] behind them.

use crate::dispatch::{dispatch, Fatal, Guest};
use crate::log::{fatal, install_panic_hook};
use crate::zone::Zone;

/// The module's whole state behind the exports: the zone, the input buffer the host writes to
/// and the output buffer it reads. [`export_zone!`](crate::export_zone) keeps one in a
/// single-threaded global; there is no other use for it.
pub struct Runtime<Z> {
    guest: Guest<Z>,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl<Z: Zone> Default for Runtime<Z> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Z: Zone> Runtime<Z> {
    /// A module before CREATE, with empty buffers.
    pub fn new() -> Self {
        Self {
            guest: Guest::new(),
            input: Vec::new(),
            output: Vec::new(),
        }
    }

    /// `zk_alloc(len)`: the address of a buffer of at least `len` bytes for the next call's
    /// input. A negative `len`, or one the memory cannot hold, stops the zone.
    pub fn alloc(&mut self, len: i32) -> i32 {
        install_panic_hook();
        let len = match usize::try_from(len) {
            Ok(len) => len,
            Err(_) => fatal(&format!("zk_alloc({len}): a negative length")),
        };
        if self.input.len() < len {
            if self.input.try_reserve(len - self.input.len()).is_err() {
                fatal(&format!("zk_alloc({len}): out of memory"));
            }
            self.input.resize(len, 0);
        }
        address(self.input.as_ptr()) as i32
    }

    /// `zk_call(op, len)`: run `op` on the first `len` bytes of the input buffer and return
    /// `(ptr << 32) | out_len` of the output, valid until the next call. A `len` beyond the
    /// buffer, an unknown op, a malformed input or an error from create/restore stops the zone
    /// (logged at level 5, then a trap).
    pub fn call(&mut self, op: i32, len: i32) -> i64 {
        install_panic_hook();
        let Self {
            guest,
            input,
            output,
        } = self;
        let bytes = usize::try_from(len).ok().and_then(|n| input.get(..n));
        let Some(bytes) = bytes else {
            let e = Fatal::BadLength {
                len: i64::from(len),
                allocated: input.len(),
            };
            fatal(&e.to_string())
        };
        // A negative op becomes a number no op has: refused as unknown.
        if let Err(e) = dispatch(guest, op as u32, bytes, output) {
            fatal(&e.to_string());
        }
        ((u64::from(address(output.as_ptr())) << 32) | output.len() as u64) as i64
    }
}

#[cfg(test)]
impl<Z: Zone> Runtime<Z> {
    /// Write `bytes` where the host would (native tests cannot write through the address).
    pub(crate) fn write_input(&mut self, bytes: &[u8]) {
        self.input[..bytes.len()].copy_from_slice(bytes);
    }

    /// The last call's output.
    pub(crate) fn output(&self) -> &[u8] {
        &self.output
    }
}

/// A guest address as the ABI's 32-bit pointer (exact on wasm32; natively only a placeholder,
/// since native builds never hand memory to a host).
fn address(ptr: *const u8) -> u32 {
    ptr as usize as u32
}

/// Export `$zone` (a type implementing [`Zone`](crate::Zone)) as the module's zone: generates
/// the `zk_abi`, `zk_alloc` and `zk_call` exports around one [`Runtime`] in a single-threaded
/// global. Invoke it once, in the crate built as the `cdylib` (see the crate's example).
/// Natively the exports compile too but nothing calls them.
#[macro_export]
macro_rules! export_zone {
    ($zone:ty) => {
        const _: () = {
            ::std::thread_local! {
                static ZONEKEEP_RUNTIME: ::core::cell::RefCell<$crate::Runtime<$zone>> =
                    ::core::cell::RefCell::new($crate::Runtime::new());
            }

            /// The ABI version.
            // SAFETY (`no_mangle`): `zk_abi` is a name the ABI reserves for this export, and
            // `export_zone!` is invoked once per module, so no other symbol has it.
            #[allow(unsafe_code)]
            #[no_mangle]
            pub extern "C" fn zk_abi() -> i32 {
                $crate::ABI_VERSION
            }

            /// A buffer of at least `len` bytes for the next call's input.
            // SAFETY (`no_mangle`): as for `zk_abi`. The buffer stays owned by the runtime; no
            // reference to it is held between calls, so the host's writes alias nothing.
            #[allow(unsafe_code)]
            #[no_mangle]
            pub extern "C" fn zk_alloc(len: i32) -> i32 {
                ZONEKEEP_RUNTIME.with(|rt| rt.borrow_mut().alloc(len))
            }

            /// Run hook `op` on the `len` input bytes; returns `(ptr << 32) | out_len`.
            // SAFETY (`no_mangle`): as for `zk_abi`. A re-entrant call finds the runtime
            // borrowed and panics (a trap), never aliasing it.
            #[allow(unsafe_code)]
            #[no_mangle]
            pub extern "C" fn zk_call(op: i32, len: i32) -> i64 {
                ZONEKEEP_RUNTIME.with(|rt| rt.borrow_mut().call(op, len))
            }
        };
    };
}
