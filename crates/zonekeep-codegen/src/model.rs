//! The kind's API digested once for every language: identifiers derived and checked for
//! collisions, so each emitter only writes text.

use zonekeep_protocol::contract::{ConstDef, EventDef, InputDef, ValueDef};
use zonekeep_protocol::schema::{FieldDef, KindDef};

use crate::names::Name;
use crate::{CodegenError, KindApi};

/// One entity kind of the schema.
#[derive(Debug)]
pub(crate) struct Entity<'a> {
    /// Its identifier.
    pub(crate) name: Name,
    /// The schema's kind.
    pub(crate) def: &'a KindDef,
    /// Each field's identifier, in wire order.
    pub(crate) fields: Vec<(Name, &'a FieldDef)>,
}

/// One input or event: its identifier and its values' identifiers.
#[derive(Debug)]
pub(crate) struct Item<'a, T> {
    /// Its identifier.
    pub(crate) name: Name,
    /// The contract's declaration.
    pub(crate) def: &'a T,
    /// Each value's identifier, in payload order.
    pub(crate) values: Vec<(Name, &'a ValueDef)>,
}

/// Everything an emitter writes from.
#[derive(Debug)]
pub(crate) struct Model<'a> {
    /// The zone kind's name, as the registry knows it.
    pub(crate) kind: &'a str,
    /// The zone kind as an identifier.
    pub(crate) kind_name: Name,
    /// Entity kinds, in schema order.
    pub(crate) entities: Vec<Entity<'a>>,
    /// Input layouts.
    pub(crate) inputs: Vec<Item<'a, InputDef>>,
    /// Event types.
    pub(crate) events: Vec<Item<'a, EventDef>>,
    /// Constants, with their identifiers.
    pub(crate) consts: Vec<(Name, &'a ConstDef)>,
}

fn distinct(what: &str, names: &[(Name, &str)]) -> Result<(), CodegenError> {
    for (i, (a, a_text)) in names.iter().enumerate() {
        if let Some((_, b_text)) = names[..i].iter().find(|(b, _)| b == a) {
            return Err(CodegenError::Collision {
                what: what.to_owned(),
                a: (*b_text).to_owned(),
                b: (*a_text).to_owned(),
            });
        }
    }
    Ok(())
}

fn no_control(text: &str) -> Result<(), CodegenError> {
    if text.chars().any(char::is_control) {
        return Err(CodegenError::Schema(format!(
            "the name {text:?} holds a control character"
        )));
    }
    Ok(())
}

fn values<'a>(
    item: &str,
    values: &'a [ValueDef],
) -> Result<Vec<(Name, &'a ValueDef)>, CodegenError> {
    let named: Vec<(Name, &ValueDef)> = values.iter().map(|v| (Name::new(&v.name), v)).collect();
    let check: Vec<(Name, &str)> = named
        .iter()
        .map(|(n, v)| (n.clone(), v.name.as_str()))
        .collect();
    distinct(&format!("values of `{item}`"), &check)?;
    Ok(named)
}

impl<'a> Model<'a> {
    /// Validates `api` and derives every identifier.
    pub(crate) fn new(api: &'a KindApi) -> Result<Self, CodegenError> {
        api.contract.validate()?;
        api.schema
            .validate()
            .map_err(|e| CodegenError::Schema(e.to_string()))?;
        no_control(&api.kind)?;
        let mut entities = Vec::with_capacity(api.schema.kinds.len());
        for def in &api.schema.kinds {
            no_control(&def.name)?;
            let fields: Vec<(Name, &FieldDef)> = def
                .fields
                .iter()
                .map(|f| no_control(&f.name).map(|()| (Name::new(&f.name), f)))
                .collect::<Result<_, _>>()?;
            let check: Vec<(Name, &str)> = fields
                .iter()
                .map(|(n, f)| (n.clone(), f.name.as_str()))
                .collect();
            distinct(&format!("fields of kind `{}`", def.name), &check)?;
            entities.push(Entity {
                name: Name::new(&def.name),
                def,
                fields,
            });
        }
        let check: Vec<(Name, &str)> = entities
            .iter()
            .map(|e| (e.name.clone(), e.def.name.as_str()))
            .collect();
        distinct("entity kinds", &check)?;
        let inputs = api
            .contract
            .inputs
            .iter()
            .map(|def| {
                Ok(Item {
                    name: Name::new(&def.name),
                    def,
                    values: values(&def.name, &def.values)?,
                })
            })
            .collect::<Result<Vec<_>, CodegenError>>()?;
        let events = api
            .contract
            .events
            .iter()
            .map(|def| {
                Ok(Item {
                    name: Name::new(&def.name),
                    def,
                    values: values(&def.name, &def.values)?,
                })
            })
            .collect::<Result<Vec<_>, CodegenError>>()?;
        let consts = api
            .contract
            .consts
            .iter()
            .map(|c| (Name::new(&c.name), c))
            .collect();
        Ok(Self {
            kind: &api.kind,
            kind_name: Name::new(&api.kind),
            entities,
            inputs,
            events,
            consts,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use zonekeep_protocol::contract::Contract;
    use zonekeep_protocol::schema::{FieldType, Schema};

    fn api(kinds: Vec<KindDef>) -> KindApi {
        KindApi {
            kind: "k".into(),
            schema: Schema {
                pos_step: 0.01,
                kinds,
            },
            contract: Contract::new(),
        }
    }

    fn field(name: &str) -> FieldDef {
        FieldDef {
            name: name.into(),
            ty: FieldType::Bool,
        }
    }

    #[test]
    fn fields_that_become_one_identifier_are_refused() {
        let a = api(vec![KindDef {
            name: "player".into(),
            fields: vec![field("hit-points"), field("hitPoints")],
        }]);
        let e = Model::new(&a).unwrap_err();
        assert_eq!(
            e,
            CodegenError::Collision {
                what: "fields of kind `player`".into(),
                a: "hit-points".into(),
                b: "hitPoints".into()
            }
        );
    }

    #[test]
    fn kinds_that_become_one_identifier_are_refused() {
        let k = |n: &str| KindDef {
            name: n.into(),
            fields: vec![],
        };
        let a = api(vec![k("drone"), k("Drone")]);
        assert!(matches!(
            Model::new(&a),
            Err(CodegenError::Collision { .. })
        ));
    }

    #[test]
    fn control_characters_in_names_are_refused() {
        let a = api(vec![KindDef {
            name: "bad\nname".into(),
            fields: vec![],
        }]);
        assert!(matches!(Model::new(&a), Err(CodegenError::Schema(_))));
    }
}
