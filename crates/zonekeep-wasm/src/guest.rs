//! One module instance: its store (with the budgets and the log's state), its memory and its
//! exports; one call at a time, each under fresh fuel and a wall-time deadline. Every way a call
//! can end badly comes back as a [`Failure`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{
    Caller, Extern, Linker, Memory, ResourceLimiter, Store, Trap, TypedFunc, UpdateDeadline,
};

use crate::error::{Failure, LoadError};
use crate::load::{ZoneModule, LOG_IMPORT};
use crate::sandbox::{ModuleEngine, Sandbox, EPOCH_PERIOD};
use crate::wire::{put_bytes, put_u32, put_u64};

/// The memory and table caps of one instance, and what the module asked for past them.
#[derive(Debug)]
struct Caps {
    memory: usize,
    table: usize,
    denied: Option<usize>,
    /// Growths refused in the running call.
    refusals: u32,
}

/// Growths past the cap one call may be refused (answered -1) before the call is stopped: an
/// allocator may try again smaller a few times, but each refusal is a call into the host that
/// fuel does not price, so a module asking in a loop is stopped rather than left to spin.
const MAX_GROW_REFUSALS: u32 = 64;

impl ResourceLimiter for Caps {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Refused as WebAssembly refuses: `memory.grow` answers -1 and the module goes on (its
        // allocator can report running out). A trap that follows is named after the refusal.
        if desired > self.memory {
            self.denied = Some(desired);
            self.refusals += 1;
            if self.refusals > MAX_GROW_REFUSALS {
                return Err(wasmtime::Error::msg(
                    "memory cap exceeded, asked again and again",
                ));
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table {
            self.refusals += 1;
            if self.refusals > MAX_GROW_REFUSALS {
                return Err(wasmtime::Error::msg(
                    "table cap exceeded, asked again and again",
                ));
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// Why the epoch callback ended a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupt {
    Deadline,
    TickDeadline,
    Stopped,
}

/// The log's rate: a token bucket refilled in wall time (it shapes only what reaches the host's
/// log, never the zone's state, so wall time is fine here).
#[derive(Debug)]
struct LogBucket {
    tokens: f64,
    burst: f64,
    per_second: f64,
    at: Instant,
}

impl LogBucket {
    fn allow(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + dt * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A zone instance's store data.
#[derive(Debug)]
pub(crate) struct GuestState {
    zone_id: String,
    caps: Caps,
    log: LogBucket,
    log_calls: u32,
    log_calls_per_call: u32,
    log_line_bytes: usize,
    log_suppressed: u64,
    flood: bool,
    panic: Option<String>,
    interrupt: Option<Interrupt>,
    stop: Arc<AtomicBool>,
    /// Epochs the running call has seen (counted rather than timed, so arming a call costs no
    /// clock read).
    epochs: u32,
    /// Epochs a call may see: its deadline in [`EPOCH_PERIOD`]s, rounded up.
    max_epochs: u32,
    deadline: Duration,
    /// Epochs the calls of the current tick have seen together, when the running call counts
    /// against its tick; `None` for the host's own calls.
    tick_epochs: Option<u32>,
    /// Epochs a tick's calls may see together.
    max_tick_epochs: u32,
    tick_deadline: Duration,
}

impl GuestState {
    fn new(zone_id: &str, sandbox: &Sandbox) -> Self {
        Self {
            zone_id: zone_id.to_owned(),
            caps: Caps {
                memory: sandbox.memory_bytes,
                table: sandbox.table_elements,
                denied: None,
                refusals: 0,
            },
            log: LogBucket {
                tokens: f64::from(sandbox.log_burst),
                burst: f64::from(sandbox.log_burst),
                per_second: f64::from(sandbox.log_per_second),
                at: Instant::now(),
            },
            log_calls: 0,
            log_calls_per_call: sandbox.log_calls_per_call,
            log_line_bytes: sandbox.log_line_bytes,
            log_suppressed: 0,
            flood: false,
            panic: None,
            interrupt: None,
            stop: Arc::new(AtomicBool::new(false)),
            epochs: 0,
            max_epochs: epochs_in(sandbox.call_deadline),
            deadline: sandbox.call_deadline,
            tick_epochs: None,
            max_tick_epochs: epochs_in(sandbox.tick_deadline),
            tick_deadline: sandbox.tick_deadline,
        }
    }
}

/// `d` in [`EPOCH_PERIOD`]s, rounded up.
fn epochs_in(d: Duration) -> u32 {
    u32::try_from(d.as_nanos().div_ceil(EPOCH_PERIOD.as_nanos())).unwrap_or(u32::MAX)
}

/// A log line as it may reach the host's log: cut, lossily decoded, control characters shown as
/// `?` (a module cannot forge log lines of its own).
pub(crate) fn clean_line(bytes: &[u8], cap: usize) -> String {
    let cut = &bytes[..bytes.len().min(cap)];
    String::from_utf8_lossy(cut)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn log(mut caller: Caller<'_, GuestState>, level: i32, ptr: i32, len: i32) -> wasmtime::Result<()> {
    {
        let st = caller.data_mut();
        st.log_calls = st.log_calls.saturating_add(1);
        if st.log_calls > st.log_calls_per_call {
            st.flood = true;
            return Err(wasmtime::Error::msg("log flood"));
        }
    }
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        return Err(wasmtime::Error::msg("log called without a memory"));
    };
    let start = ptr as u32 as usize;
    let len = len as u32 as usize;
    let cap = caller.data().log_line_bytes;
    let line = match start
        .checked_add(len)
        .and_then(|end| memory.data(&caller).get(start..end))
    {
        Some(bytes) => clean_line(bytes, cap),
        None => return Err(wasmtime::Error::msg("log line outside the module's memory")),
    };
    let st = caller.data_mut();
    if level == zonekeep_abi::level::PANIC {
        st.panic.get_or_insert(line);
        return Ok(());
    }
    if !st.log.allow(Instant::now()) {
        st.log_suppressed = st.log_suppressed.saturating_add(1);
        return Ok(());
    }
    let zone = st.zone_id.as_str();
    use zonekeep_abi::level;
    match level {
        i32::MIN..=level::TRACE => tracing::trace!(target: "zonekeep::module", zone, "{line}"),
        level::DEBUG => tracing::debug!(target: "zonekeep::module", zone, "{line}"),
        level::INFO => tracing::info!(target: "zonekeep::module", zone, "{line}"),
        level::WARN => tracing::warn!(target: "zonekeep::module", zone, "{line}"),
        _ => tracing::error!(target: "zonekeep::module", zone, "{line}"),
    }
    Ok(())
}

/// The linker every instance is made with: the log and nothing else.
pub(crate) fn linker(engine: &ModuleEngine) -> Result<Linker<GuestState>, LoadError> {
    let mut linker = Linker::new(engine.engine());
    linker
        .func_wrap(LOG_IMPORT.0, LOG_IMPORT.1, log)
        .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
    Ok(linker)
}

/// What one tick's calls have left to spend together.
#[derive(Debug, Clone, Copy)]
struct TickBudget {
    tick: u64,
    fuel_left: u64,
    epochs: u32,
}

/// One zone's instance of a module.
pub(crate) struct Guest {
    store: Store<GuestState>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    call: TypedFunc<(i32, i32), i64>,
    abi: TypedFunc<(), i32>,
    fuel: u64,
    fuel_per_tick: u64,
    /// The tick whose budget the calls are spending, and what it has left.
    budget: Option<TickBudget>,
    /// The next call's input; the caller encodes into it.
    pub input: Vec<u8>,
    fuel_used: u64,
    /// The guest's input buffer from its last `zk_alloc`, and the length asked for: inputs up
    /// to that length are written there without asking again (docs/MODULES.md, `zk_alloc`).
    buffer: Option<(u32, usize)>,
}

impl Guest {
    /// Instantiates `module` for `zone_id` (its start function, if any, runs under the budgets).
    pub fn new(module: &ZoneModule, zone_id: &str) -> Result<Self, Failure> {
        let sandbox = module.engine().sandbox();
        let mut store = Store::new(module.engine().engine(), GuestState::new(zone_id, sandbox));
        store.limiter(|s| &mut s.caps);
        store.epoch_deadline_callback(|mut ctx| {
            let st = ctx.data_mut();
            if st.stop.load(Ordering::Relaxed) {
                st.interrupt = Some(Interrupt::Stopped);
                return Err(wasmtime::Error::msg("stopped by the host"));
            }
            st.epochs += 1;
            if st.epochs > st.max_epochs {
                st.interrupt = Some(Interrupt::Deadline);
                return Err(wasmtime::Error::msg("call deadline passed"));
            }
            if let Some(t) = &mut st.tick_epochs {
                *t += 1;
                if *t > st.max_tick_epochs {
                    st.interrupt = Some(Interrupt::TickDeadline);
                    return Err(wasmtime::Error::msg("tick deadline passed"));
                }
            }
            Ok(UpdateDeadline::Continue(1))
        });
        let fuel = sandbox.fuel_per_call;
        let fuel_per_tick = sandbox.fuel_per_tick;
        Self::arm(&mut store, fuel, None);
        let instance = module
            .linker()
            .instantiate(&mut store, module.module())
            .map_err(|e| classify(&mut store, Budget::Call(fuel), e))?;
        let abi = |e: wasmtime::Error| Failure::Abi(format!("{e:#}"));
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| Failure::Abi("no memory export".into()))?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&mut store, "zk_alloc")
            .map_err(abi)?;
        let call = instance
            .get_typed_func::<(i32, i32), i64>(&mut store, "zk_call")
            .map_err(abi)?;
        let abi = instance
            .get_typed_func::<(), i32>(&mut store, "zk_abi")
            .map_err(abi)?;
        Ok(Self {
            store,
            memory,
            alloc,
            call,
            abi,
            fuel,
            fuel_per_tick,
            budget: None,
            input: Vec::with_capacity(256),
            fuel_used: 0,
            buffer: None,
        })
    }

    /// Asks a throwaway instance of `module` its ABI version and, if it is this host's, the
    /// zone settings it wants (its CONFIG answer).
    pub fn probe(module: &ZoneModule) -> Result<(i32, Vec<u8>), LoadError> {
        let mut guest =
            Self::new(module, "(load check)").map_err(|f| LoadError::Start(f.to_string()))?;
        let fuel = guest.fuel;
        Self::arm(&mut guest.store, fuel, None);
        let version = guest.abi.call(&mut guest.store, ()).map_err(|e| {
            LoadError::Start(classify(&mut guest.store, Budget::Call(fuel), e).to_string())
        })?;
        if !(zonekeep_abi::OLDEST_ABI_VERSION..=zonekeep_abi::ABI_VERSION).contains(&version) {
            return Ok((version, Vec::new()));
        }
        guest.input.clear();
        guest.input.extend_from_slice(&0u64.to_le_bytes());
        let settings = guest
            .call(zonekeep_abi::op::CONFIG, None)
            .map_err(|f| LoadError::Start(format!("asking its zone settings: {f}")))?;
        Ok((version, settings.to_vec()))
    }

    /// Asks a throwaway instance of `module` to migrate `save`, written under the older state
    /// version `from` (its MIGRATE answer, as it is). The instance is started and called under
    /// a call's own budgets, as [`probe`](Self::probe) is, and dropped after.
    pub fn migrate(module: &ZoneModule, from: u32, save: &[u8]) -> Result<Vec<u8>, Failure> {
        let mut guest = Self::new(module, "(migration)")?;
        guest.input.clear();
        // The tick, as for CONFIG: no zone runs this instance.
        put_u64(&mut guest.input, 0);
        put_u32(&mut guest.input, from);
        put_bytes(&mut guest.input, save);
        guest
            .call(zonekeep_abi::op::MIGRATE, None)
            .map(<[u8]>::to_vec)
    }

    /// Fresh fuel and a fresh deadline for the next call, and nothing left over from the last
    /// one (a panic line logged without a trap must not name a later failure). `tick_epochs`:
    /// the epochs its tick's calls have already seen, when it counts against its tick.
    fn arm(store: &mut Store<GuestState>, fuel: u64, tick_epochs: Option<u32>) {
        // Setting fuel fails only on an engine without fuel metering, which ours always has.
        let _ = store.set_fuel(fuel);
        store.set_epoch_deadline(1);
        let st = store.data_mut();
        st.epochs = 0;
        st.log_calls = 0;
        st.tick_epochs = tick_epochs;
        st.panic = None;
        st.flood = false;
        st.interrupt = None;
        st.caps.denied = None;
        st.caps.refusals = 0;
    }

    /// A handle that stops this instance's running (or next) call, from any thread, within one
    /// epoch period.
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        self.store.data().stop.clone()
    }

    /// Fuel the last call used.
    pub fn fuel_used(&self) -> u64 {
        self.fuel_used
    }

    /// Log lines dropped by the rate limit so far.
    pub fn log_suppressed(&self) -> u64 {
        self.store.data().log_suppressed
    }

    /// The instance's linear memory, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.memory.data_size(&self.store)
    }

    /// Runs hook `op` on [`input`](Self::input); the output stays valid until the next call.
    /// `tick`: the zone's tick, when the call counts against that tick's budget (see
    /// [`Sandbox::fuel_per_tick`]); `None` for the host's own calls, which have only their own.
    pub fn call(&mut self, op: u32, tick: Option<u64>) -> Result<&[u8], Failure> {
        let budget = match tick {
            Some(tick) => {
                let b = match self.budget {
                    Some(b) if b.tick == tick => b,
                    _ => TickBudget {
                        tick,
                        fuel_left: self.fuel_per_tick,
                        epochs: 0,
                    },
                };
                self.budget = Some(b);
                if b.fuel_left < self.fuel {
                    Budget::Tick {
                        left: b.fuel_left,
                        per_tick: self.fuel_per_tick,
                    }
                } else {
                    Budget::Call(self.fuel)
                }
            }
            None => Budget::Call(self.fuel),
        };
        let fuel = budget.fuel();
        Self::arm(
            &mut self.store,
            fuel,
            self.budget.filter(|_| tick.is_some()).map(|b| b.epochs),
        );
        let len = i32::try_from(self.input.len())
            .map_err(|_| Failure::Abi("a call's input is over 2 GiB".into()))?;
        let result = self.call_inner(op, len);
        self.fuel_used = fuel.saturating_sub(self.store.get_fuel().unwrap_or(0));
        if let (Some(b), Some(_)) = (&mut self.budget, tick) {
            b.fuel_left = b.fuel_left.saturating_sub(self.fuel_used);
            b.epochs = self.store.data().tick_epochs.unwrap_or(b.epochs);
        }
        let out = result.map_err(|e| classify(&mut self.store, budget, e))?;
        // Read in place: nothing runs in the instance until the caller is done with it.
        Ok(self.memory.data(&self.store).get(out).unwrap_or_default())
    }

    /// The call; answers where its output lies in the guest's memory (checked to be inside).
    fn call_inner(&mut self, op: u32, len: i32) -> wasmtime::Result<std::ops::Range<usize>> {
        let ptr = match self.buffer {
            Some((ptr, room)) if self.input.len() <= room => ptr,
            _ => {
                let ptr = self.alloc.call(&mut self.store, len)? as u32;
                self.buffer = Some((ptr, self.input.len()));
                ptr
            }
        };
        self.memory
            .write(&mut self.store, ptr as usize, &self.input)
            .map_err(|_| {
                wasmtime::Error::new(AbiViolation("zk_alloc returned a buffer outside memory"))
            })?;
        let op = i32::try_from(op).map_err(|_| wasmtime::Error::msg("op out of range"))?;
        let packed = self.call.call(&mut self.store, (op, len))? as u64;
        let (ptr, out_len) = ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize);
        match ptr.checked_add(out_len) {
            Some(end) if end <= self.memory.data_size(&self.store) => Ok(ptr..end),
            _ => Err(wasmtime::Error::new(AbiViolation(
                "zk_call returned an output outside memory",
            ))),
        }
    }
}

/// The module broke the ABI at the boundary.
#[derive(Debug)]
struct AbiViolation(&'static str);

impl std::fmt::Display for AbiViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for AbiViolation {}

/// The fuel a call was given, and whose budget bounded it.
#[derive(Debug, Clone, Copy)]
enum Budget {
    /// The call's own budget.
    Call(u64),
    /// What its tick had left, less than a call's own budget.
    Tick { left: u64, per_tick: u64 },
}

impl Budget {
    fn fuel(self) -> u64 {
        match self {
            Budget::Call(f) => f,
            Budget::Tick { left, .. } => left,
        }
    }
}

/// What a failed call means, from what the store saw during it and the error it ended with.
fn classify(store: &mut Store<GuestState>, budget: Budget, e: wasmtime::Error) -> Failure {
    let st = store.data_mut();
    if st.flood {
        return Failure::LogFlood(st.log_calls_per_call);
    }
    if let Some(msg) = st.panic.take() {
        return Failure::Panic(msg);
    }
    if let Some(asked) = st.caps.denied.take() {
        return Failure::Memory {
            asked,
            cap: st.caps.memory,
        };
    }
    match st.interrupt.take() {
        Some(Interrupt::Deadline) => return Failure::Deadline(st.deadline.as_millis()),
        Some(Interrupt::TickDeadline) => {
            return Failure::TickDeadline(st.tick_deadline.as_millis())
        }
        Some(Interrupt::Stopped) => return Failure::Stopped,
        None => {}
    }
    if let Some(v) = e.downcast_ref::<AbiViolation>() {
        return Failure::Abi(v.0.to_owned());
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => match budget {
            Budget::Call(fuel) => Failure::Fuel(fuel),
            Budget::Tick { per_tick, .. } => Failure::TickFuel(per_tick),
        },
        Some(Trap::StackOverflow) => Failure::Stack,
        Some(t) => Failure::Trap(t.to_string()),
        None => Failure::Trap(format!("{e:#}")),
    }
}
