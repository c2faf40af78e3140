//! Laying out Rust text as rustfmt does: lines, doc comments, identifiers and literals, and the
//! few breaks of long calls, chains, match arms and `use` lists the generated code can need.

use crate::names::{doc_line, Name};

/// Rustfmt's `max_width`.
pub(super) const MAX_WIDTH: usize = 100;

/// Rustfmt's `chain_width`: a chain of two or more calls wider than this is broken.
const CHAIN_WIDTH: usize = 60;

/// Rustfmt's `tab_spaces`.
const TAB: usize = 4;

/// Strict and reserved keywords that can be raw identifiers (`r#type`).
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn",
    "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let",
    "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return",
    "static", "struct", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield",
];

/// The text being written, line by line.
#[derive(Default)]
pub(super) struct Out {
    pub(super) text: String,
}

impl Out {
    pub(super) fn line(&mut self, indent: usize, text: &str) {
        if !text.is_empty() {
            for _ in 0..indent {
                self.text.push_str("    ");
            }
            self.text.push_str(text);
        }
        self.text.push('\n');
    }

    pub(super) fn blank(&mut self) {
        self.text.push('\n');
    }

    pub(super) fn doc(&mut self, indent: usize, text: &str) {
        let text = doc_line(text);
        if text.is_empty() {
            self.line(indent, "///");
        } else {
            self.line(indent, &format!("/// {text}"));
        }
    }

    /// Fixed doc lines.
    pub(super) fn docs(&mut self, indent: usize, lines: &[&str]) {
        for l in lines {
            self.line(indent, &format!("/// {l}"));
        }
    }

    /// `use {path}::{items}`, one item without braces, the list on a line of its own when the
    /// statement does not fit.
    pub(super) fn use_list(&mut self, path: &str, items: &[&str]) {
        match items {
            [] => {}
            [one] => self.line(0, &format!("use {path}::{one};")),
            many => {
                let list = many.join(", ");
                let one = format!("use {path}::{{{list}}};");
                if one.len() <= MAX_WIDTH {
                    self.line(0, &one);
                } else {
                    self.line(0, &format!("use {path}::{{"));
                    self.line(1, &format!("{list},"));
                    self.line(0, "};");
                }
            }
        }
    }

    /// A match arm whose body calls `callee` with `arg`: its argument on a line of its own when
    /// the arm does not fit on one, the body in a block when even that does not fit.
    pub(super) fn arm(&mut self, indent: usize, pattern: &str, callee: &str, arg: &str) {
        let one = format!("{pattern} => {callee}({arg}),");
        let open = format!("{pattern} => {callee}(");
        if indent * TAB + one.len() <= MAX_WIDTH {
            self.line(indent, &one);
        } else if indent * TAB + open.len() <= MAX_WIDTH {
            self.line(indent, &open);
            self.line(indent + 1, &format!("{arg},"));
            self.line(indent, "),");
        } else {
            self.line(indent, &format!("{pattern} => {{"));
            self.line(indent + 1, &format!("{callee}({arg})"));
            self.line(indent, "}");
        }
    }

    /// A statement `{head}{callee}({args});`, the arguments one a line when it does not fit.
    pub(super) fn call_args(&mut self, indent: usize, head: &str, callee: &str, args: &[&str]) {
        let one = format!("{head}{callee}({});", args.join(", "));
        if indent * TAB + one.len() <= MAX_WIDTH {
            self.line(indent, &one);
            return;
        }
        self.line(indent, &format!("{head}{callee}("));
        for a in args {
            self.line(indent + 1, &format!("{a},"));
        }
        self.line(indent, ");");
    }

    /// A call statement with one argument, the argument on its own line when it does not fit. An
    /// argument `self.field.method()` longer than rustfmt's `chain_width` is broken as rustfmt
    /// breaks it.
    pub(super) fn call(&mut self, indent: usize, callee: &str, arg: &str) {
        let one = format!("{callee}({arg});");
        let parts: Vec<&str> = arg.split('.').collect();
        let long_chain = arg.len() > CHAIN_WIDTH;
        match parts.as_slice() {
            ["self", field, method] if long_chain => {
                self.line(indent, &format!("{callee}("));
                self.line(indent + 1, &format!("self.{field}"));
                self.line(indent + 2, &format!(".{method},"));
                self.line(indent, ");");
            }
            _ if indent * TAB + one.len() <= MAX_WIDTH => self.line(indent, &one),
            _ => {
                self.line(indent, &format!("{callee}("));
                self.line(indent + 1, &format!("{arg},"));
                self.line(indent, ");");
            }
        }
    }

    /// A struct literal's field `{name}: {root}.{links}…,` whose value is a method chain: broken
    /// one link a line when it is too wide, or when it has two links or more and the chain is
    /// wider than rustfmt's `chain_width`. As rustfmt does, the first link stays by a root
    /// that ends before the first tab stop.
    pub(super) fn field_chain(&mut self, indent: usize, name: &str, root: &str, links: &[&str]) {
        let chain = format!("{root}.{}", links.join("."));
        let one = format!("{name}: {chain},");
        let too_wide = indent * TAB + one.len() > MAX_WIDTH;
        let long_chain = links.len() > 1 && chain.len() > CHAIN_WIDTH;
        if !too_wide && !long_chain {
            self.line(indent, &one);
            return;
        }
        let offset = name.len() + 2;
        let (first, rest) = match links.split_first() {
            // Nothing would be left to break: rustfmt overflows the line too.
            Some((_, [])) if offset + root.len() <= TAB => {
                self.line(indent, &one);
                return;
            }
            Some((first, rest)) if offset + root.len() <= TAB => (format!("{root}.{first}"), rest),
            _ => (root.to_owned(), links),
        };
        self.line(indent, &format!("{name}: {first}"));
        let last = rest.len().saturating_sub(1);
        for (i, link) in rest.iter().enumerate() {
            let comma = if i == last { "," } else { "" };
            self.line(indent + 1, &format!(".{link}{comma}"));
        }
    }
}

/// A field or value identifier: snake case, keywords escaped.
pub(super) fn ident(name: &Name) -> String {
    let s = name.snake();
    match s.as_str() {
        "self" | "super" | "crate" | "Self" => format!("{s}_"),
        k if KEYWORDS.contains(&k) => format!("r#{s}"),
        _ => s,
    }
}

/// An `f32` literal that reproduces `v` exactly.
pub(super) fn f32_lit(v: f32) -> String {
    format!("{v:?}_f32")
}

/// A doc text, or `fallback` when it is empty.
pub(super) fn doc_or(doc: &str, fallback: String) -> String {
    if doc.trim().is_empty() {
        fallback
    } else {
        doc.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_escaped() {
        assert_eq!(ident(&Name::new("type")), "r#type");
        assert_eq!(ident(&Name::new("async")), "r#async");
        assert_eq!(ident(&Name::new("self")), "self_");
        assert_eq!(ident(&Name::new("crate")), "crate_");
        assert_eq!(ident(&Name::new("hit-points")), "hit_points");
    }

    #[test]
    fn float_literals_give_back_the_exact_f32() {
        let values = [
            -8.0_f32,
            0.1,
            -0.0,
            1e-7,
            123_456.79,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
        ];
        for v in values {
            let lit = f32_lit(v);
            let text = lit.trim_end_matches("_f32");
            assert_eq!(
                text.parse::<f32>().map(f32::to_bits),
                Ok(v.to_bits()),
                "{lit}"
            );
        }
    }

    #[test]
    fn long_chains_break_as_rustfmt_breaks_them() {
        let mut out = Out::default();
        let field = "a".repeat(50);
        out.call(2, "out.raw", &format!("self.{field}.as_bytes()"));
        let expected = format!(
            "        out.raw(\n            self.{field}\n                .as_bytes(),\n        );\n"
        );
        assert_eq!(out.text, expected);
    }

    #[test]
    fn long_field_chains_break_as_rustfmt_breaks_them() {
        let mut out = Out::default();
        // Two links past the chain width; a one-letter field keeps the first link by its root.
        let value = format!("str(\"{}\")?", "a".repeat(40));
        out.field_chain(3, "f", "r", &[&value, "to_owned()"]);
        // One link, too wide for the line: the root alone, after a longer field name.
        let name = "b".repeat(45);
        let read = format!("i16(\"{name}\")?");
        out.field_chain(3, &name, "r", &[&read]);
        // Short enough: one line.
        out.field_chain(3, "by", "r", &["u32(\"by\")?"]);
        let expected = format!(
            "            f: r.{value}\n                .to_owned(),\n\
             \x20           {name}: r\n                .{read},\n\
             \x20           by: r.u32(\"by\")?,\n"
        );
        assert_eq!(out.text, expected);
    }

    #[test]
    fn long_use_lists_go_on_a_line_of_their_own() {
        let mut out = Out::default();
        out.use_list("a::b", &["C"]);
        out.use_list("a::b", &["C", "D"]);
        let long = ["Abcdefghijklmnopqrstuvwxyz"; 4];
        out.use_list("zonekeep_client::payload", &long);
        let expected = format!(
            "use a::b::C;\nuse a::b::{{C, D}};\nuse zonekeep_client::payload::{{\n    {},\n}};\n",
            long.join(", ")
        );
        assert_eq!(out.text, expected);
    }
}
