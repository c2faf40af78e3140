//! A contract's bytes, the form a module hands its host (docs/MODULES.md, "The client
//! contract"). Decoding checks every count against its limit before it allocates, and validates
//! what it read, so a host never holds a contract it could not have built.

use super::validate::too_many;
use super::{
    ConstDef, Contract, ContractError, EventDef, InputDef, ValueDef, ValueType, CONTRACT_FORMAT,
    MAX_CONSTS, MAX_DOC_LEN, MAX_EVENTS, MAX_INPUTS, MAX_NAME_LEN, MAX_VALUES,
};

impl Contract {
    /// The contract's bytes (docs/MODULES.md, "The client contract"): the form a module hands
    /// its host.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![CONTRACT_FORMAT];
        put_len(&mut out, self.consts.len());
        for c in &self.consts {
            put_str(&mut out, &c.name);
            out.extend_from_slice(&c.value.to_le_bytes());
            put_str(&mut out, &c.doc);
        }
        put_len(&mut out, self.inputs.len());
        for i in &self.inputs {
            put_str(&mut out, &i.name);
            match i.tag {
                Some(t) => out.extend_from_slice(&[1, t]),
                None => out.push(0),
            }
            put_str(&mut out, &i.doc);
            put_values(&mut out, &i.values);
        }
        put_len(&mut out, self.events.len());
        for e in &self.events {
            put_str(&mut out, &e.name);
            out.extend_from_slice(&e.topic.to_le_bytes());
            put_str(&mut out, &e.doc);
            put_values(&mut out, &e.values);
        }
        out
    }

    /// Reads and validates a contract's bytes; every count is checked against its limit before
    /// anything is allocated for it.
    pub fn decode(bytes: &[u8]) -> Result<Contract, ContractError> {
        let mut r = Bytes { rest: bytes };
        if r.u8()? != CONTRACT_FORMAT {
            return Err(ContractError::Malformed("unknown format byte"));
        }
        let mut contract = Contract::new();
        for _ in 0..r.count(MAX_CONSTS, "constants")? {
            let name = r.str(MAX_NAME_LEN)?;
            let value = i64::from_le_bytes(r.array()?);
            let doc = r.str(MAX_DOC_LEN)?;
            contract.consts.push(ConstDef { name, value, doc });
        }
        for _ in 0..r.count(MAX_INPUTS, "inputs")? {
            let name = r.str(MAX_NAME_LEN)?;
            let tag = match r.u8()? {
                0 => None,
                1 => Some(r.u8()?),
                _ => {
                    return Err(ContractError::Malformed(
                        "an input's tag flag is not 0 or 1",
                    ))
                }
            };
            let doc = r.str(MAX_DOC_LEN)?;
            let values = r.values()?;
            contract.inputs.push(InputDef {
                name,
                tag,
                values,
                doc,
            });
        }
        for _ in 0..r.count(MAX_EVENTS, "events")? {
            let name = r.str(MAX_NAME_LEN)?;
            let topic = u16::from_le_bytes(r.array()?);
            let doc = r.str(MAX_DOC_LEN)?;
            let values = r.values()?;
            contract.events.push(EventDef {
                name,
                topic,
                values,
                doc,
            });
        }
        if !r.rest.is_empty() {
            return Err(ContractError::Malformed("bytes left after the last event"));
        }
        contract.validate()?;
        Ok(contract)
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_values(out: &mut Vec<u8>, values: &[ValueDef]) {
    put_len(out, values.len());
    for v in values {
        put_str(out, &v.name);
        out.push(v.ty.code());
        out.push(u8::from(v.optional));
        put_str(out, &v.doc);
    }
}

/// A cursor over contract bytes that never reads past them.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ContractError> {
        if self.rest.len() < n {
            return Err(ContractError::Malformed("the bytes end early"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ContractError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, ContractError> {
        Ok(self.array::<1>()?[0])
    }

    fn len(&mut self) -> Result<usize, ContractError> {
        usize::try_from(u32::from_le_bytes(self.array()?))
            .map_err(|_| ContractError::Malformed("a length does not fit"))
    }

    fn count(&mut self, limit: usize, what: &'static str) -> Result<usize, ContractError> {
        let n = self.len()?;
        too_many(what, n, limit)?;
        Ok(n)
    }

    fn str(&mut self, limit: usize) -> Result<String, ContractError> {
        let n = self.len()?;
        too_many("a name or doc text", n, limit)?;
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ContractError::Malformed("text is not UTF-8"))
    }

    fn values(&mut self) -> Result<Vec<ValueDef>, ContractError> {
        let n = self.count(MAX_VALUES, "values of one input or event")?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.str(MAX_NAME_LEN)?;
            let ty = ValueType::from_code(self.u8()?)
                .ok_or(ContractError::Malformed("unknown value type"))?;
            let optional = match self.u8()? {
                0 => false,
                1 => true,
                _ => return Err(ContractError::Malformed("an optional flag is not 0 or 1")),
            };
            let doc = self.str(MAX_DOC_LEN)?;
            values.push(ValueDef {
                name,
                ty,
                optional,
                doc,
            });
        }
        Ok(values)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sample() -> Contract {
        Contract::new()
            .constant("DIR_UP", 1, "Up.")
            .constant("MIN", -5, "")
            .input(
                InputDef::new("walk", "Walks.")
                    .value("dir", ValueType::U8, "Direction bits.")
                    .optional("flags", ValueType::U8, "Flag bits."),
            )
            .event(EventDef::new("scored", 1, "Points.").value("amount", ValueType::U32, ""))
            .event(EventDef::new("said", 2, "Text.").value("text", ValueType::RestStr, ""))
    }

    #[test]
    fn a_contract_survives_its_bytes() {
        let c = sample();
        c.validate().unwrap();
        assert_eq!(Contract::decode(&c.encode()).unwrap(), c);
        assert_eq!(
            Contract::decode(&Contract::new().encode()).unwrap(),
            Contract::new()
        );
    }

    #[test]
    fn every_cut_of_the_bytes_is_refused_not_a_panic() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Contract::decode(&bytes[..n]).is_err(), "cut at {n}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            Contract::decode(&long),
            Err(ContractError::Malformed("bytes left after the last event"))
        );
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut bytes = vec![CONTRACT_FORMAT];
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            Contract::decode(&bytes),
            Err(ContractError::TooMany {
                what: "constants",
                limit: MAX_CONSTS
            })
        );
    }
}
