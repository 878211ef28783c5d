//! loom models of proscenium live in `tests/`.
