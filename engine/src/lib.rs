//! Placeholder: this layer is built by a later issue.
#![deny(missing_docs)]
