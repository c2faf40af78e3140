//! Why a module is refused at load, and why a module zone stopped.

/// Why a module was refused at load. Nothing of a refused module runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The engine could not be set up.
    #[error("module engine: {0}")]
    Engine(String),
    /// Larger than [`Sandbox::module_bytes`](crate::Sandbox::module_bytes).
    #[error("the module is {size} bytes; at most {limit} are accepted")]
    TooLarge {
        /// The module's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The module's shape is past the sandbox's limits (functions, a body's size, locals): it
    /// would cost too much to compile.
    #[error("the module is too costly to compile: {0}")]
    Shape(String),
    /// Not a valid WebAssembly binary (text modules are not accepted either).
    #[error("not a valid WebAssembly module: {0}")]
    Invalid(String),
    /// The module imports something other than the log.
    #[error(
        "the module imports {module}.{name}: a zone module may import only zonekeep.log{hint}"
    )]
    ForbiddenImport {
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// `zonekeep.log` is imported with another signature.
    #[error("zonekeep.log must be imported as (i32, i32, i32) -> (), found {0}")]
    LogSignature(String),
    /// A required export is missing or has another type.
    #[error("the module must export {name} as {expected}")]
    MissingExport {
        /// The export's name.
        name: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// The module speaks a version of the ABI this host does not run.
    #[error("the module speaks ABI version {0}; this host runs versions {oldest} to {host}", oldest = zonekeep_abi::OLDEST_ABI_VERSION, host = zonekeep_abi::ABI_VERSION)]
    AbiVersion(i32),
    /// The module's client contract (at the end of its CONFIG answer) is not valid.
    #[error("the module's client contract: {0}")]
    Contract(#[from] zonekeep_protocol::contract::ContractError),
    /// The module asks for zone settings the host cannot run (its CONFIG answer).
    #[error("the module's zone settings: {0}")]
    Settings(String),
    /// Instantiating the module or asking its ABI version failed.
    #[error("the module failed when started: {0}")]
    Start(String),
}

/// Why a module zone stopped: its reason `failed: …` in the admin API and in its players' kick.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// A call used more than its fuel.
    #[error("CPU budget exceeded: a call used more than {0} fuel")]
    Fuel(u64),
    /// A tick's calls together used more than the tick's fuel.
    #[error("CPU budget per tick exceeded: the calls of one tick used more than {0} fuel")]
    TickFuel(u64),
    /// A tick's calls together ran past the tick's wall-time deadline.
    #[error("the calls of one tick ran longer than {0} ms")]
    TickDeadline(u128),
    /// A call ran past its wall-time deadline.
    #[error("a call ran longer than {0} ms")]
    Deadline(u128),
    /// The host stopped the call from outside (shutdown, fencing).
    #[error("stopped by the host")]
    Stopped,
    /// The module's memory would have grown past its cap.
    #[error("memory cap exceeded: the module asked for {asked} bytes, the cap is {cap}")]
    Memory {
        /// What the module asked for.
        asked: usize,
        /// The cap.
        cap: usize,
    },
    /// The wasm stack overflowed (deep recursion).
    #[error("stack overflow (recursion too deep)")]
    Stack,
    /// The module panicked; the message is the one it logged.
    #[error("panicked: {0}")]
    Panic(String),
    /// The module logged more lines in one call than a call may.
    #[error("log flood: more than {0} log lines in one call")]
    LogFlood(u32),
    /// Any other trap.
    #[error("trapped: {0}")]
    Trap(String),
    /// The module broke the ABI (an output out of bounds, an undecodable command buffer).
    #[error("bad command buffer: {0}")]
    Abi(String),
    /// A command the world or the context refused (an unknown handle, a value out of range).
    #[error("refused command: {0}")]
    Command(String),
}
