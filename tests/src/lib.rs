//! End-to-end tests live in `tests/`; shared helpers in `support`.
