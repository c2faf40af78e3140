//! [`HandleMap`]: a module's entity handles and the world ids they name, looked up once per
//! command that names an entity (a thousand times a tick for a zone moving a thousand NPCs).

use std::collections::HashMap;

use zonekeep_core::EntityId;

/// Handles below this are kept in a vector indexed by handle: the guest SDK gives handles out
/// from 1 and reuses freed ones, so a zone's handles stay this dense. At most 64 Ki entries of
/// 8 bytes, whatever a module does.
const DENSE: u32 = 1 << 16;

/// Live handles → world ids: a vector for the dense handles the SDK makes, a map for any other
/// `u32` a module may choose.
#[derive(Debug, Default)]
pub(crate) struct HandleMap {
    dense: Vec<Option<EntityId>>,
    sparse: HashMap<u32, EntityId>,
}

impl HandleMap {
    /// The entity `handle` names, if it is live.
    pub(crate) fn get(&self, handle: u32) -> Option<EntityId> {
        if handle < DENSE {
            self.dense.get(handle as usize).copied().flatten()
        } else {
            self.sparse.get(&handle).copied()
        }
    }

    /// Whether `handle` is live.
    pub(crate) fn contains(&self, handle: u32) -> bool {
        self.get(handle).is_some()
    }

    /// `handle` names `id` from now on.
    pub(crate) fn insert(&mut self, handle: u32, id: EntityId) {
        if handle < DENSE {
            let i = handle as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            self.dense[i] = Some(id);
        } else {
            self.sparse.insert(handle, id);
        }
    }

    /// `handle` names nothing any more.
    pub(crate) fn remove(&mut self, handle: u32) {
        if handle < DENSE {
            if let Some(slot) = self.dense.get_mut(handle as usize) {
                *slot = None;
            }
        } else {
            self.sparse.remove(&handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_handles_behave_alike() {
        let mut m = HandleMap::default();
        for h in [1, 7, DENSE - 1, DENSE, u32::MAX] {
            assert!(!m.contains(h));
            m.insert(h, EntityId(h / 2));
            assert_eq!(m.get(h), Some(EntityId(h / 2)));
            m.remove(h);
            assert_eq!(m.get(h), None);
            // Removing what is not there is harmless.
            m.remove(h);
        }
        // The vector never grows past the dense bound.
        assert!(m.dense.len() <= DENSE as usize);
        assert_eq!(m.get(0), None);
    }
}
