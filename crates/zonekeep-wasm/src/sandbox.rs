//! The sandbox's limits and the engine every module of a process is compiled and run on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine};

use crate::error::LoadError;

/// How often the engine's epoch advances: the granularity of a call's wall-time deadline and of
/// stopping a call from outside.
pub const EPOCH_PERIOD: Duration = Duration::from_millis(10);

/// What one module zone may use. The CPU budget is in fuel, so a replay of the same inputs runs
/// out at the same instruction; the wall-time deadline is the backstop for what fuel does not
/// count (a host function, a slow machine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Fuel for one call into the module (about one unit per WebAssembly instruction).
    pub fuel_per_call: u64,
    /// Fuel for all the calls a zone's game makes in one tick together (its inputs, its tick,
    /// its timers, joins and leaves, settlements): one call never gets more than what its tick
    /// has left, so a zone cannot buy more CPU by making more calls. The host's own calls
    /// (create, restore, save, the state hash) count only against [`fuel_per_call`](Self::fuel_per_call):
    /// they come at wall-clock moments, and a replay must run out at the same instruction.
    pub fuel_per_tick: u64,
    /// Wall time one call may take before it is interrupted.
    pub call_deadline: Duration,
    /// Wall time all of a tick's calls may take together before the one running is interrupted:
    /// the backstop for what fuel does not count, per tick as [`call_deadline`](Self::call_deadline)
    /// is per call.
    pub tick_deadline: Duration,
    /// Largest linear memory of one zone instance, in bytes.
    pub memory_bytes: usize,
    /// Largest table of one zone instance, in elements.
    pub table_elements: usize,
    /// WebAssembly stack of one call, in bytes (deep recursion traps past it).
    pub stack_bytes: usize,
    /// Log lines a zone may write at once before its rate applies.
    pub log_burst: u32,
    /// Log lines a zone may write per second, sustained.
    pub log_per_second: u32,
    /// Log calls within one call past which the zone is stopped as a log flood.
    pub log_calls_per_call: u32,
    /// Longest log line kept, in bytes (longer lines are cut).
    pub log_line_bytes: usize,
    /// Largest module accepted, in bytes.
    pub module_bytes: usize,
    /// Most functions a module may define. Compiling costs time and memory per function, so
    /// this and the two below bound what a module can make the compiler do before it runs.
    pub max_functions: u32,
    /// Largest body of one function, in bytes (the compiler's cost grows faster than linearly
    /// in a function's size).
    pub max_function_bytes: usize,
    /// Most locals one function may declare.
    pub max_locals: u32,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self {
            fuel_per_call: 50_000_000,
            fuel_per_tick: 20_000_000,
            call_deadline: Duration::from_secs(1),
            tick_deadline: Duration::from_millis(250),
            memory_bytes: 64 << 20,
            table_elements: 10_000,
            stack_bytes: 512 << 10,
            log_burst: 100,
            log_per_second: 20,
            log_calls_per_call: 10_000,
            log_line_bytes: 1024,
            module_bytes: 32 << 20,
            max_functions: 20_000,
            max_function_bytes: 256 << 10,
            max_locals: 4_096,
        }
    }
}

/// The wasmtime engine modules are compiled for and run on, with the sandbox's limits and the
/// thread that advances its epoch. One per process; cheap to share behind an `Arc`.
pub struct ModuleEngine {
    engine: Engine,
    sandbox: Sandbox,
    ticker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for ModuleEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleEngine")
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl ModuleEngine {
    /// An engine enforcing `sandbox`: fuel metering, epoch interruption and the stack cap are
    /// compiled into every module it loads.
    pub fn new(sandbox: Sandbox) -> Result<Arc<Self>, LoadError> {
        let mut config = Config::new();
        config
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(sandbox.stack_bytes);
        let engine = Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("zonekeep-wasm-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_PERIOD);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| LoadError::Engine(format!("epoch thread: {e}")))?
        };
        Ok(Arc::new(Self {
            engine,
            sandbox,
            ticker: Some(ticker),
            stop,
        }))
    }

    /// The wasmtime engine.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The limits every zone of this engine runs under.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

impl Drop for ModuleEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
