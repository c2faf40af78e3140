#![allow(clippy::unwrap_used, clippy::expect_used)]
