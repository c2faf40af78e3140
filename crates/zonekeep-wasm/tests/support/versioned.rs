//! Zone modules, written in the text format, whose saves have a state version: each keeps its
//! create params' text as its whole state (its save), declares a state version in its CONFIG
//! answer (or none, as a module written before state versions) and answers MIGRATE (op 20) as
//! told. Every other call answers nothing.
#![allow(dead_code)]

/// How a [`versioned`] module answers MIGRATE.
#[derive(Debug, Clone, Copy)]
pub enum Migration<'a> {
    /// Nothing at all, as a module answers a call it does not know.
    Silent,
    /// `u8 0`: no migration from any version.
    None,
    /// From version `from`: `u8 1`, then `prefix` and the old save after it; from any other
    /// version, `u8 0`.
    Prefix {
        /// The one version it migrates from.
        from: u32,
        /// What the migrated save starts with.
        prefix: &'a str,
    },
    /// `u8 2`, then `str reason`: the migration fails.
    Fail(&'a str),
    /// A trap (`unreachable`).
    Trap,
    /// A loop that never ends (its budget stops it).
    Spin,
    /// These bytes, as they are.
    Raw(&'a [u8]),
}

/// CONFIG's answer declaring `version`: the seven settings and `max_entities` all the host's,
/// not lasting, then the version. `None`: empty (every setting the host's, no version).
pub fn config_declaring(version: Option<u32>) -> Vec<u8> {
    let Some(version) = version else {
        return Vec::new();
    };
    let mut out = vec![0; 7 * 4 + 4];
    out.push(0);
    out.extend_from_slice(&version.to_le_bytes());
    out
}

fn data(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

/// A module of the ABI at state `version` (`None`: it declares none, so version 1) whose state
/// is the params it was created with, saved and restored as they are, and whose MIGRATE answers
/// as `migration` says.
pub fn versioned(version: Option<u32>, migration: Migration<'_>) -> Vec<u8> {
    let settings = config_declaring(version);
    // A fixed answer at 1536 (and `u8 0` at 1520, for Prefix from another version).
    let (answer, migrate) = match migration {
        Migration::Silent => (Vec::new(), "(nop)".to_owned()),
        Migration::None => (
            vec![0],
            "(return (call $out (i32.const 1536) (i32.const 1)))".to_owned(),
        ),
        Migration::Fail(reason) => {
            let mut a = vec![2];
            a.extend_from_slice(&u32::try_from(reason.len()).unwrap().to_le_bytes());
            a.extend_from_slice(reason.as_bytes());
            let body = format!(
                "(return (call $out (i32.const 1536) (i32.const {})))",
                a.len()
            );
            (a, body)
        }
        Migration::Raw(bytes) => (
            bytes.to_vec(),
            format!(
                "(return (call $out (i32.const 1536) (i32.const {})))",
                bytes.len()
            ),
        ),
        Migration::Prefix { from, prefix } => {
            let mut a = vec![1];
            a.extend_from_slice(prefix.as_bytes());
            let p = a.len();
            // The input: u64 tick at 4096, u32 from at 4104, the save's u32 length at 4108 and
            // its bytes from 4112. The answer is built at 16384.
            let body = format!(
                r#"(if (i32.ne (i32.load (i32.const 4104)) (i32.const {from}))
                    (then (return (call $out (i32.const 1520) (i32.const 1)))))
                (memory.copy (i32.const 16384) (i32.const 1536) (i32.const {p}))
                (memory.copy (i32.const {at}) (i32.const 4112) (i32.load (i32.const 4108)))
                (return (call $out (i32.const 16384)
                    (i32.add (i32.const {p}) (i32.load (i32.const 4108)))))"#,
                at = 16384 + p
            );
            (a, body)
        }
        Migration::Trap => (Vec::new(), "unreachable".to_owned()),
        Migration::Spin => (Vec::new(), "(loop $spin (br $spin))".to_owned()),
    };
    assert!(answer.len() <= 512, "the fixed answer fits below 2048");
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (global $len (mut i32) (i32.const 0))
            (data (i32.const 1024) "{settings}")
            (data (i32.const 1520) "\00")
            (data (i32.const 1536) "{answer}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            ;; The address after the `str` (or `bytes`) at $p.
            (func $skip (param $p i32) (result i32)
                (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
            ;; The `bytes` at $p become the state, at 8192.
            (func $keep (param $p i32)
                (global.set $len (i32.load (local.get $p)))
                (memory.copy (i32.const 8192) (i32.add (local.get $p) (i32.const 4))
                    (global.get $len)))
            (func $out (param $ptr i32) (param $n i32) (result i64)
                (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
                    (i64.extend_i32_u (local.get $n))))
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                ;; CREATE: u64 tick, u64 seed, str zone_id, then str params: the state.
                (if (i32.eq (local.get $op) (i32.const 1))
                    (then (call $keep (call $skip (i32.const 4112))) (return (i64.const 0))))
                ;; RESTORE: as CREATE, then str fact_prefix and bytes save: the state.
                (if (i32.eq (local.get $op) (i32.const 11))
                    (then
                        (call $keep (call $skip (call $skip (call $skip (i32.const 4112)))))
                        (return (i64.const 0))))
                ;; SAVE: the state.
                (if (i32.eq (local.get $op) (i32.const 10))
                    (then (return (call $out (i32.const 8192) (global.get $len)))))
                ;; CONFIG.
                (if (i32.eq (local.get $op) (i32.const 14))
                    (then (return (call $out (i32.const 1024) (i32.const {settings_len})))))
                ;; MIGRATE.
                (if (i32.eq (local.get $op) (i32.const 20))
                    (then {migrate}))
                i64.const 0))"#,
        settings = data(&settings),
        settings_len = settings.len(),
        answer = data(&answer),
    ))
    .unwrap()
}
