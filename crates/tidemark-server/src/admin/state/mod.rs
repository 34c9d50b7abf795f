//! The operator calls on the whole state (SPEC §11 A7): exporting it as a
//! backup file, and importing one.

pub(super) mod export;
pub(super) mod import;
