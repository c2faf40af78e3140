//! `zonekeep codegen --kind KIND --lang ts|cs|rust`: typed client code for a zone kind, written
//! from what a zone of it declares (its entity schema) and its client contract (inputs, events,
//! constants). Native kinds are this binary's (`--dev-kinds` adds the dev ones); a module kind is
//! read from its file (`--module KIND=FILE`).
//!
//! With `--out FILE` the code is written there; with `--check` as well, nothing is written and
//! the exit code says whether `FILE` is what this build would write (0) or stale (1), for a CI
//! step. Exit 2 when the kind cannot be described.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use zonekeep_codegen::{generate, KindApi, Lang, Options};
use zonekeep_server::Host;

use crate::modules::{parse_module_arg, ModuleArg};

/// The SDK to write for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LangArg {
    /// TypeScript for `@zonekeep/client`.
    Ts,
    /// C# for the Zonekeep package (Unity, Godot).
    Cs,
    /// Rust for `zonekeep-client`.
    Rust,
}

impl LangArg {
    fn lang(self) -> Lang {
        match self {
            LangArg::Ts => Lang::Ts,
            LangArg::Cs => Lang::Cs,
            LangArg::Rust => Lang::Rust,
        }
    }

    fn name(self) -> &'static str {
        match self {
            LangArg::Ts => "ts",
            LangArg::Cs => "cs",
            LangArg::Rust => "rust",
        }
    }
}

/// `zonekeep codegen`.
#[derive(Debug, Args)]
pub(crate) struct CodegenArgs {
    /// The zone kind to write code for.
    #[arg(long)]
    kind: String,
    /// The language: ts, cs or rust.
    #[arg(long, value_enum)]
    lang: LangArg,
    /// Write to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write nothing; exit 1 when `--out` differs from what would be written.
    #[arg(long, requires = "out")]
    check: bool,
    /// Also know the dev and bench zone kinds, as `serve --dev-kinds` does.
    #[arg(long)]
    dev_kinds: bool,
    /// A module kind, `KIND=FILE` (the .wasm file); may repeat.
    #[arg(long = "module", value_name = "KIND=FILE", value_parser = parse_module_arg)]
    modules: Vec<ModuleArg>,
    /// TypeScript: the module the SDK is imported from.
    #[arg(long, default_value = "@zonekeep/client")]
    ts_import: String,
    /// C#: the namespace of the generated types.
    #[arg(long, default_value = "Zonekeep.Generated")]
    cs_namespace: String,
}

impl CodegenArgs {
    /// The command line that writes the same text, for the generated file's header: every flag
    /// that changes the text, none that only says where it goes.
    fn command(&self) -> String {
        let mut parts = vec![
            "zonekeep codegen".to_owned(),
            format!("--kind {}", self.kind),
            format!("--lang {}", self.lang.name()),
        ];
        if self.dev_kinds {
            parts.push("--dev-kinds".into());
        }
        for m in &self.modules {
            match &m.file {
                Some(file) => parts.push(format!("--module {}={}", m.kind, file.display())),
                None => parts.push(format!("--module {}", m.kind)),
            }
        }
        if self.lang == LangArg::Ts && self.ts_import != "@zonekeep/client" {
            parts.push(format!("--ts-import {}", self.ts_import));
        }
        if self.lang == LangArg::Cs && self.cs_namespace != "Zonekeep.Generated" {
            parts.push(format!("--cs-namespace {}", self.cs_namespace));
        }
        parts.join(" ")
    }
}

/// Runs `zonekeep codegen`.
pub(crate) fn run(args: CodegenArgs) -> Result<ExitCode> {
    let text = match describe_and_write(&args) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("zonekeep codegen: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let Some(out) = &args.out else {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    };
    if args.check {
        let committed = std::fs::read_to_string(out).unwrap_or_default();
        if committed == text {
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "zonekeep codegen: {} is stale; rewrite it with `{} --out {}`",
            out.display(),
            args.command(),
            out.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn describe_and_write(args: &CodegenArgs) -> Result<String> {
    let builder = crate::kinds::register_kinds(Host::builder(), args.dev_kinds);
    let (builder, _) = crate::modules::register_modules(builder, &args.modules)?;
    let (schema, contract) = builder.describe(&args.kind)?;
    let api = KindApi {
        kind: args.kind.clone(),
        schema,
        contract,
    };
    let options = Options {
        command: args.command(),
        ts_import: args.ts_import.clone(),
        cs_namespace: args.cs_namespace.clone(),
    };
    Ok(generate(&api, args.lang.lang(), &options)?)
}
