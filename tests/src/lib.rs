//! End-to-end test harness.
