//! [`Handles`]: the entity handles a zone's SDK gives out.

use crate::ctx::Entity;

/// Entity handles: never 0, unique among live entities, reused after despawn (last freed,
/// first reused).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Handles {
    /// `live[h]`: whether handle `h` names a live entity (index 0 unused).
    live: Vec<bool>,
    free: Vec<u32>,
}

impl Handles {
    /// No live handles.
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle for a new entity.
    ///
    /// # Panics
    /// With 2³² − 1 entities alive at once (far beyond any memory a module can have).
    pub fn allocate(&mut self) -> Entity {
        if self.live.is_empty() {
            self.live.push(false); // handle 0 names nothing
        }
        let handle = match self.free.pop() {
            Some(h) => h,
            None => match u32::try_from(self.live.len()) {
                Ok(h) if h < u32::MAX => {
                    self.live.push(false);
                    h
                }
                _ => panic!("no entity handle left"),
            },
        };
        if let Some(slot) = self.live.get_mut(handle as usize) {
            *slot = true;
        }
        match Entity::from_handle(handle) {
            Some(e) => e,
            None => panic!("handle 0 is never allocated"),
        }
    }

    /// Free `entity`'s handle; `false` if it was not live (nothing changes then).
    pub fn release(&mut self, entity: Entity) -> bool {
        match self.live.get_mut(entity.handle() as usize) {
            Some(slot) if *slot => {
                *slot = false;
                self.free.push(entity.handle());
                true
            }
            _ => false,
        }
    }

    /// Whether `entity` is live.
    #[cfg(test)]
    pub fn is_live(&self, entity: Entity) -> bool {
        self.live
            .get(entity.handle() as usize)
            .copied()
            .unwrap_or(false)
    }

    /// How many entities are live.
    pub fn live_count(&self) -> usize {
        self.live.iter().filter(|l| **l).count()
    }
}
