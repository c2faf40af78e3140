//! What a zone publishes about itself for players looking for a game: whether it takes players
//! now and metadata a lobby lists and filters on (its map, its mode, the round it is in). A match
//! closes itself once it starts; a lobby then stops offering it.

use serde_json::Value;

/// Largest metadata a zone publishes, as JSON text in bytes (the lobby's own limit).
pub const MAX_LISTING_BYTES: usize = 4096;

/// A zone's listing (see [`Ctx::publish_listing`](crate::Ctx::publish_listing)).
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// Whether it takes players now.
    pub open: bool,
    /// What it says of itself: a JSON object of at most [`MAX_LISTING_BYTES`].
    pub metadata: Value,
}

/// Why a listing was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// The metadata is not a JSON object.
    #[error("listing metadata must be a JSON object")]
    NotAnObject,
    /// The metadata is larger than [`MAX_LISTING_BYTES`].
    #[error("listing metadata is {0} bytes of JSON, at most {MAX_LISTING_BYTES}")]
    TooLarge(usize),
}

impl Listing {
    /// A listing, checked.
    pub fn new(open: bool, metadata: Value) -> Result<Self, ListingError> {
        if !metadata.is_object() {
            return Err(ListingError::NotAnObject);
        }
        let len = metadata.to_string().len();
        if len > MAX_LISTING_BYTES {
            return Err(ListingError::TooLarge(len));
        }
        Ok(Self { open, metadata })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listing_is_an_object_within_its_limit() {
        assert!(Listing::new(true, json!({"map": "dunes"})).is_ok());
        assert_eq!(
            Listing::new(true, json!(["map"])),
            Err(ListingError::NotAnObject)
        );
        assert!(matches!(
            Listing::new(false, json!({"x": "y".repeat(MAX_LISTING_BYTES)})),
            Err(ListingError::TooLarge(_))
        ));
    }
}
