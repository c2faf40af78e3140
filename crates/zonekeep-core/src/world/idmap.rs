//! Entity id → dense index map.
//!
//! Ids are handed out monotonically and never reused, so a plain `Vec` indexed by id would grow with
//! every id ever issued. This map is paged: 1,024 ids per page, a page is allocated on its first
//! insert and freed once every id in it has been issued and removed, so memory follows the live ids
//! (plus 16 bytes of page table per 1,024 ids ever issued). A lookup is two indexings.

const PAGE_BITS: u32 = 10;
const PAGE: usize = 1 << PAGE_BITS;
const EMPTY: u32 = u32::MAX;

#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct IdMap {
    pages: Vec<Option<Box<[u32]>>>,
    /// Live entries per page.
    live: Vec<u32>,
    /// Ids issued per page (a page is retired only once it can receive no more ids).
    issued: Vec<u32>,
}

impl IdMap {
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<usize> {
        let page = self.pages.get((id >> PAGE_BITS) as usize)?.as_ref()?;
        let v = *page.get(id as usize & (PAGE - 1))?;
        (v != EMPTY).then_some(v as usize)
    }

    /// Inserts a freshly issued id (ids arrive in ascending order, each once).
    pub(crate) fn insert(&mut self, id: u32, index: usize) {
        let p = (id >> PAGE_BITS) as usize;
        if self.pages.len() <= p {
            self.pages.resize_with(p + 1, || None);
            self.live.resize(p + 1, 0);
            self.issued.resize(p + 1, 0);
        }
        let page = self.pages[p].get_or_insert_with(|| vec![EMPTY; PAGE].into_boxed_slice());
        if let Some(slot) = page.get_mut(id as usize & (PAGE - 1)) {
            *slot = index as u32;
        }
        self.live[p] += 1;
        self.issued[p] += 1;
    }

    /// The map that inserting every id below `next_id` in order and removing all but `live` leaves
    /// (a restored world): the same page table, the same live and issued counts, and a page
    /// allocated exactly when that history would have left it allocated, so memory and page
    /// retirement carry on as they would have. `live` must be ascending ids below `next_id`.
    pub(crate) fn rebuild(live: impl Iterator<Item = (u32, usize)>, next_id: u32) -> Self {
        let pages = (next_id as usize).div_ceil(PAGE);
        let issued = (0..pages)
            .map(|p| {
                let first = p * PAGE;
                // Every page but the last is full: ids are issued in order, without gaps.
                (next_id as usize).saturating_sub(first).min(PAGE) as u32
            })
            .collect();
        let mut map = IdMap {
            pages: vec![None; pages],
            live: vec![0; pages],
            issued,
        };
        for (id, index) in live {
            let p = (id >> PAGE_BITS) as usize;
            let (Some(entry), Some(count)) = (map.pages.get_mut(p), map.live.get_mut(p)) else {
                continue;
            };
            let page = entry.get_or_insert_with(|| vec![EMPTY; PAGE].into_boxed_slice());
            if let Some(slot) = page.get_mut(id as usize & (PAGE - 1)) {
                *slot = index as u32;
                *count += 1;
            }
        }
        // A page still receiving ids stays allocated even with no live id (it was allocated on
        // its first insert and is retired only once full and empty); a full page without a live
        // id was retired by its last removal.
        for (entry, &issued) in map.pages.iter_mut().zip(&map.issued) {
            if entry.is_none() && (issued as usize) < PAGE {
                *entry = Some(vec![EMPTY; PAGE].into_boxed_slice());
            }
        }
        map
    }

    /// Points a live id at a new index (after compaction).
    pub(crate) fn set(&mut self, id: u32, index: usize) {
        if let Some(Some(page)) = self.pages.get_mut((id >> PAGE_BITS) as usize) {
            if let Some(slot) = page.get_mut(id as usize & (PAGE - 1)) {
                *slot = index as u32;
            }
        }
    }

    pub(crate) fn remove(&mut self, id: u32) {
        let p = (id >> PAGE_BITS) as usize;
        let Some(Some(page)) = self.pages.get_mut(p) else {
            return;
        };
        let Some(slot) = page.get_mut(id as usize & (PAGE - 1)) else {
            return;
        };
        if *slot == EMPTY {
            return;
        }
        *slot = EMPTY;
        if let (Some(live), Some(issued)) = (self.live.get_mut(p), self.issued.get(p)) {
            *live -= 1;
            if *live == 0 && *issued as usize == PAGE {
                self.pages[p] = None;
            }
        }
    }

    /// Pages currently allocated (for tests of the memory bound).
    #[cfg(test)]
    pub(crate) fn allocated_pages(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count()
    }
}
