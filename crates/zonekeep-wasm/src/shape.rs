//! A module's shape, checked before it is compiled: how many functions it defines, how large
//! each body is, how many locals each declares. The compiler's time and memory grow with these
//! (faster than linearly in one function's size), so a module past the sandbox's limits is
//! refused by a cheap scan before the expensive step, naming the limit.

use wasmparser::{Parser, Payload};

use crate::error::LoadError;
use crate::sandbox::Sandbox;

/// What the scan found: the largest of each, for the refusal and for tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Functions the module defines (imports not counted).
    pub(crate) functions: u32,
    /// The largest function body, in bytes.
    pub(crate) largest_body: usize,
    /// The most locals one function declares.
    pub(crate) most_locals: u32,
}

/// Scans `bytes` and checks them against `sandbox`'s shape limits. A module the scan cannot read
/// is refused here as invalid (the compiler would refuse it too).
pub(crate) fn check(bytes: &[u8], sandbox: &Sandbox) -> Result<Shape, LoadError> {
    let invalid = |e: wasmparser::BinaryReaderError| LoadError::Invalid(e.to_string());
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(invalid)? {
            Payload::FunctionSection(s) if s.count() > sandbox.max_functions => {
                return Err(LoadError::Shape(format!(
                    "it defines {} functions; at most {} are accepted",
                    s.count(),
                    sandbox.max_functions
                )));
            }
            Payload::CodeSectionEntry(body) => {
                shape.functions += 1;
                let size = body.range().len();
                shape.largest_body = shape.largest_body.max(size);
                if size > sandbox.max_function_bytes {
                    return Err(LoadError::Shape(format!(
                        "function {} is {size} bytes; a function may be at most {} bytes",
                        shape.functions - 1,
                        sandbox.max_function_bytes
                    )));
                }
                let mut locals: u64 = 0;
                for group in body.get_locals_reader().map_err(invalid)? {
                    let (n, _) = group.map_err(invalid)?;
                    locals = locals.saturating_add(u64::from(n));
                }
                let locals = u32::try_from(locals).unwrap_or(u32::MAX);
                shape.most_locals = shape.most_locals.max(locals);
                if locals > sandbox.max_locals {
                    return Err(LoadError::Shape(format!(
                        "function {} declares {locals} locals; at most {} are accepted",
                        shape.functions - 1,
                        sandbox.max_locals
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(shape)
}
