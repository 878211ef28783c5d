//! Benchmarks of proscenium live in `benches/`; this library is empty.
