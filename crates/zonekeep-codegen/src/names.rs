//! Identifiers from names: a schema's names are any text of up to 64 bytes, so each becomes a
//! list of lowercase ASCII words that every language's case convention is built from.

/// A name as words, e.g. `pickup-radius`, `pickupRadius` and `PICKUP_RADIUS` are all
/// `["pickup", "radius"]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Name {
    words: Vec<String>,
}

impl Name {
    /// Splits `text` at every character that is not an ASCII letter or digit and where a lowercase
    /// letter or digit meets an uppercase one. A name that starts with a digit gets a leading `n`
    /// word, and one with no letters or digits is `unnamed`, so every result is an identifier.
    pub(crate) fn new(text: &str) -> Self {
        let mut words: Vec<String> = Vec::new();
        let mut current = String::new();
        let mut prev_lower = false;
        for c in text.chars() {
            if !c.is_ascii_alphanumeric() {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
                prev_lower = false;
                continue;
            }
            if c.is_ascii_uppercase() && prev_lower && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            current.push(c.to_ascii_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
        if words.is_empty() {
            words.push("unnamed".to_owned());
        }
        if words[0].starts_with(|c: char| c.is_ascii_digit()) {
            words.insert(0, "n".to_owned());
        }
        Self { words }
    }

    /// `PickupRadius`.
    pub(crate) fn pascal(&self) -> String {
        self.words.iter().map(|w| capitalized(w)).collect()
    }

    /// `pickupRadius`.
    pub(crate) fn camel(&self) -> String {
        let mut out = String::new();
        for (i, w) in self.words.iter().enumerate() {
            if i == 0 {
                out.push_str(w);
            } else {
                out.push_str(&capitalized(w));
            }
        }
        out
    }

    /// `pickup_radius`.
    pub(crate) fn snake(&self) -> String {
        self.words.join("_")
    }

    /// `PICKUP_RADIUS`.
    pub(crate) fn screaming(&self) -> String {
        self.snake().to_ascii_uppercase()
    }
}

fn capitalized(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    if let Some(first) = chars.next() {
        out.push(first.to_ascii_uppercase());
    }
    out.extend(chars);
    out
}

/// Text as a string literal of TypeScript, C# or Rust: quotes and backslashes escaped, everything
/// else as is ([`crate::model::Model::new`] refuses names holding control characters, whose
/// escapes the three languages write differently).
pub(crate) fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Doc text on one line, safe inside a `/** */` or `///` comment (C# escapes it further for its
/// XML docs).
pub(crate) fn doc_line(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    one_line.replace("*/", "* /").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_words_whatever_their_case() {
        for text in [
            "pickup-radius",
            "pickupRadius",
            "PICKUP_RADIUS",
            "Pickup Radius",
        ] {
            let n = Name::new(text);
            assert_eq!(n.pascal(), "PickupRadius", "{text}");
            assert_eq!(n.camel(), "pickupRadius", "{text}");
            assert_eq!(n.snake(), "pickup_radius", "{text}");
            assert_eq!(n.screaming(), "PICKUP_RADIUS", "{text}");
        }
    }

    #[test]
    fn every_name_becomes_an_identifier() {
        assert_eq!(Name::new("2d-pos").camel(), "n2dPos");
        assert_eq!(Name::new("--").snake(), "unnamed");
        assert_eq!(Name::new("é").snake(), "unnamed");
        assert_eq!(Name::new("hp2Max").snake(), "hp2_max");
    }

    #[test]
    fn literals_and_docs_cannot_break_out() {
        assert_eq!(string_literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(doc_line("ends */ here\nnext"), "ends * / here next");
    }
}
