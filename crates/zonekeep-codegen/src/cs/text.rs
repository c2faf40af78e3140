//! Text of the C#: lines and indents, XML doc text, string and float literals, the namespace, and
//! member names made distinct.

use std::fmt::Write as _;

use crate::names::{doc_line, Name};

/// Lines of text, indented four spaces a level, never with trailing spaces.
pub(super) struct Out {
    text: String,
}

impl Out {
    pub(super) fn new() -> Self {
        Self {
            text: String::new(),
        }
    }

    pub(super) fn into_text(self) -> String {
        self.text
    }

    pub(super) fn line(&mut self, depth: usize, text: &str) {
        let text = text.trim_end();
        if !text.is_empty() {
            for _ in 0..depth {
                self.text.push_str("    ");
            }
            self.text.push_str(text);
        }
        self.text.push('\n');
    }

    pub(super) fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A one-line `/// <summary>` doc comment; `xml` is already escaped.
    pub(super) fn summary(&mut self, depth: usize, xml: &str) {
        self.line(depth, &format!("/// <summary>{xml}</summary>"));
    }
}

/// Text for a `//` comment: one line, with the characters C# takes as line ends (U+2028,
/// U+2029) made spaces so the comment cannot end early.
pub(super) fn xml_free(text: &str) -> String {
    doc_line(text)
        .chars()
        .map(|c| match c {
            '\u{2028}' | '\u{2029}' => ' ',
            c => c,
        })
        .collect()
}

/// Text for an XML doc comment: [`xml_free`]'s one line with `& < >` escaped.
pub(super) fn xml(text: &str) -> String {
    xml_free(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A name inside a doc comment: `<c>name</c>`.
pub(super) fn code(text: &str) -> String {
    format!("<c>{}</c>", xml(text))
}

/// Text as a C# string literal: quotes and backslashes escaped, and every control character and
/// C#'s other line ends (U+2028, U+2029) written as `\uXXXX`, so the literal stays on its line.
pub(super) fn string_lit(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A C# `float` literal of exactly `v`: Rust's shortest round-trip form of the f32 and `f`.
pub(super) fn float_lit(v: f32) -> String {
    format!("{v:?}f")
}

/// Names given out in one scope (a type's members, or the file's types), each made distinct
/// from those before it with trailing `_`s.
pub(super) struct Names {
    taken: Vec<String>,
}

impl Names {
    pub(super) fn new(reserved: &[&str]) -> Self {
        Self {
            taken: reserved.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    pub(super) fn add(&mut self, base: String) -> String {
        let mut name = base;
        while self.taken.contains(&name) {
            name.push('_');
        }
        self.taken.push(name.clone());
        name
    }
}

/// The namespace as given when it is a dotted list of identifiers, else each part made one.
pub(super) fn namespace(text: &str) -> String {
    let parts: Vec<String> = text
        .split('.')
        .map(|part| {
            let ok = part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if ok && KEYWORDS.contains(&part) {
                format!("@{part}")
            } else if ok {
                part.to_owned()
            } else {
                Name::new(part).pascal()
            }
        })
        .collect();
    parts.join(".")
}

/// C#'s reserved words, which an identifier may only be with an `@`.
const KEYWORDS: [&str; 77] = [
    "abstract",
    "as",
    "base",
    "bool",
    "break",
    "byte",
    "case",
    "catch",
    "char",
    "checked",
    "class",
    "const",
    "continue",
    "decimal",
    "default",
    "delegate",
    "do",
    "double",
    "else",
    "enum",
    "event",
    "explicit",
    "extern",
    "false",
    "finally",
    "fixed",
    "float",
    "for",
    "foreach",
    "goto",
    "if",
    "implicit",
    "in",
    "int",
    "interface",
    "internal",
    "is",
    "lock",
    "long",
    "namespace",
    "new",
    "null",
    "object",
    "operator",
    "out",
    "override",
    "params",
    "private",
    "protected",
    "public",
    "readonly",
    "ref",
    "return",
    "sbyte",
    "sealed",
    "short",
    "sizeof",
    "stackalloc",
    "static",
    "string",
    "struct",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "uint",
    "ulong",
    "unchecked",
    "unsafe",
    "ushort",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn float_literals_give_back_the_exact_f32() {
        for v in [
            -8.0f32,
            0.01,
            0.1,
            1.0e-7,
            3.402_823_5e38,
            f32::MIN_POSITIVE,
            1.0e-45,
            16_777_217.0,
            -0.0,
        ] {
            let lit = float_lit(v);
            let back: f32 = lit.trim_end_matches('f').parse().unwrap();
            assert_eq!(back.to_bits(), v.to_bits(), "{lit}");
        }
        assert_eq!(float_lit(-8.0), "-8.0f");
        assert_eq!(float_lit(0.01), "0.01f");
    }

    #[test]
    fn literals_and_comments_stay_on_their_line() {
        assert_eq!(string_lit("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(string_lit("a\u{2028}b\nc"), "\"a\\u2028b\\u000ac\"");
        assert_eq!(
            xml("a < b && c > d\u{2029}e"),
            "a &lt; b &amp;&amp; c &gt; d e"
        );
    }

    #[test]
    fn members_that_would_clash_get_a_trailing_underscore() {
        let mut names = Names::new(&["Topic", "HitEvent"]);
        assert_eq!(names.add("Topic".into()), "Topic_");
        assert_eq!(names.add("Topic_".into()), "Topic__");
        assert_eq!(names.add("Damage".into()), "Damage");
        assert_eq!(names.add("HitEvent".into()), "HitEvent_");
    }

    #[test]
    fn a_namespace_is_made_of_identifiers() {
        assert_eq!(namespace("Zonekeep.Generated"), "Zonekeep.Generated");
        assert_eq!(namespace("My Game.net-code"), "MyGame.NetCode");
        assert_eq!(namespace("Game.event"), "Game.@event");
    }
}
