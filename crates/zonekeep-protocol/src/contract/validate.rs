//! The rules a contract follows before a host accepts it or codegen writes from it: identifier
//! names, the limits, distinct names, tags and topics, and where rest and optional values may
//! stand.

use std::collections::BTreeSet;

use super::{
    Contract, ContractError, ValueDef, MAX_CONSTS, MAX_DOC_LEN, MAX_EVENTS, MAX_INPUTS,
    MAX_NAME_LEN, MAX_VALUES,
};

fn check_name(name: &str, upper: bool) -> Result<(), ContractError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| {
        if upper {
            c.is_ascii_uppercase()
        } else {
            c.is_ascii_lowercase()
        }
    });
    let rest_ok = chars.all(|c| {
        c == '_'
            || c.is_ascii_digit()
            || if upper {
                c.is_ascii_uppercase()
            } else {
                c.is_ascii_lowercase()
            }
    });
    if !first_ok || !rest_ok || name.len() > MAX_NAME_LEN {
        return Err(ContractError::BadName(name.to_owned()));
    }
    Ok(())
}

fn check_doc(doc: &str) -> Result<(), ContractError> {
    if doc.len() > MAX_DOC_LEN {
        return Err(ContractError::TooMany {
            what: "a doc text",
            limit: MAX_DOC_LEN,
        });
    }
    Ok(())
}

pub(super) fn too_many(what: &'static str, len: usize, limit: usize) -> Result<(), ContractError> {
    if len > limit {
        return Err(ContractError::TooMany { what, limit });
    }
    Ok(())
}

fn unique<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), ContractError> {
    let mut seen = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(ContractError::Duplicate(n.to_owned()));
        }
    }
    Ok(())
}

fn check_values(item: &str, values: &[ValueDef]) -> Result<(), ContractError> {
    too_many("values of one input or event", values.len(), MAX_VALUES)?;
    unique(values.iter().map(|v| v.name.as_str()))?;
    let placement = |value: &ValueDef, why| ContractError::Placement {
        item: item.to_owned(),
        value: value.name.clone(),
        why,
    };
    let mut optional_seen = false;
    for (i, v) in values.iter().enumerate() {
        check_name(&v.name, false)?;
        check_doc(&v.doc)?;
        if v.ty.is_rest() && i + 1 != values.len() {
            return Err(placement(v, "a rest type must be the last value"));
        }
        if v.optional && v.ty.width().is_none() {
            return Err(placement(v, "only fixed-width values can be optional"));
        }
        if optional_seen && !v.optional {
            return Err(placement(
                v,
                "every value after an optional one must be optional",
            ));
        }
        optional_seen |= v.optional;
    }
    Ok(())
}

impl Contract {
    /// Checks names, limits, tags, topics and where each value may stand.
    pub fn validate(&self) -> Result<(), ContractError> {
        too_many("inputs", self.inputs.len(), MAX_INPUTS)?;
        too_many("events", self.events.len(), MAX_EVENTS)?;
        too_many("constants", self.consts.len(), MAX_CONSTS)?;
        unique(self.inputs.iter().map(|i| i.name.as_str()))?;
        unique(self.events.iter().map(|e| e.name.as_str()))?;
        unique(self.consts.iter().map(|c| c.name.as_str()))?;
        let tagged = self.inputs.iter().filter(|i| i.tag.is_some()).count();
        if self.inputs.len() > 1 && tagged != self.inputs.len() {
            return Err(ContractError::Tags("several inputs need a tag each"));
        }
        let mut tags = BTreeSet::new();
        for i in &self.inputs {
            check_name(&i.name, false)?;
            check_doc(&i.doc)?;
            if let Some(t) = i.tag {
                if !tags.insert(t) {
                    return Err(ContractError::Tags("two inputs share a tag"));
                }
            }
            check_values(&i.name, &i.values)?;
        }
        let mut topics = BTreeSet::new();
        for e in &self.events {
            check_name(&e.name, false)?;
            check_doc(&e.doc)?;
            if !topics.insert(e.topic) {
                return Err(ContractError::DuplicateTopic(e.topic));
            }
            check_values(&e.name, &e.values)?;
        }
        for c in &self.consts {
            check_name(&c.name, true)?;
            check_doc(&c.doc)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::contract::{EventDef, InputDef, ValueType};

    #[test]
    fn names_must_be_identifiers() {
        for bad in ["", "Walk", "9lives", "a-b", "a b", "ä"] {
            let c = Contract::new().input(InputDef::new(bad, ""));
            assert_eq!(c.validate(), Err(ContractError::BadName(bad.to_owned())));
        }
        let c = Contract::new().constant("lower", 1, "");
        assert_eq!(c.validate(), Err(ContractError::BadName("lower".into())));
        let long = "a".repeat(65);
        let c = Contract::new().event(EventDef::new(&long, 1, ""));
        assert!(matches!(c.validate(), Err(ContractError::BadName(_))));
    }

    #[test]
    fn duplicates_and_shared_topics_are_refused() {
        let c = Contract::new()
            .event(EventDef::new("a", 1, ""))
            .event(EventDef::new("b", 1, ""));
        assert_eq!(c.validate(), Err(ContractError::DuplicateTopic(1)));
        let c = Contract::new()
            .event(EventDef::new("a", 1, ""))
            .event(EventDef::new("a", 2, ""));
        assert_eq!(c.validate(), Err(ContractError::Duplicate("a".into())));
        let c = Contract::new().input(InputDef::new("a", "").value("x", ValueType::U8, "").value(
            "x",
            ValueType::U8,
            "",
        ));
        assert_eq!(c.validate(), Err(ContractError::Duplicate("x".into())));
    }

    #[test]
    fn several_inputs_need_distinct_tags() {
        let untagged = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", ""));
        assert!(matches!(untagged.validate(), Err(ContractError::Tags(_))));
        let shared = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", "").tagged(1));
        assert!(matches!(shared.validate(), Err(ContractError::Tags(_))));
        let fine = Contract::new()
            .input(InputDef::new("a", "").tagged(1))
            .input(InputDef::new("b", "").tagged(2));
        assert_eq!(fine.validate(), Ok(()));
    }

    #[test]
    fn rest_and_optional_values_stand_only_at_the_end() {
        let rest_first = Contract::new().event(
            EventDef::new("e", 1, "")
                .value("text", ValueType::RestStr, "")
                .value("n", ValueType::U8, ""),
        );
        assert!(matches!(
            rest_first.validate(),
            Err(ContractError::Placement { .. })
        ));
        let required_after_optional = Contract::new().input(
            InputDef::new("i", "")
                .optional("a", ValueType::U8, "")
                .value("b", ValueType::U8, ""),
        );
        assert!(matches!(
            required_after_optional.validate(),
            Err(ContractError::Placement { .. })
        ));
        let optional_str =
            Contract::new().input(InputDef::new("i", "").optional("s", ValueType::Str, ""));
        assert!(matches!(
            optional_str.validate(),
            Err(ContractError::Placement { .. })
        ));
    }
}
