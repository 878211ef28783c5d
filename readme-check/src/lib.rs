//! The workspace README's checks: the README is no package's (each crate
//! has a short README of its own), so this unpublished crate, whose one
//! dev-dependency is the engine, compiles and runs its examples as doc
//! tests and checks that what it shares with the crates' READMEs is the
//! same text.

/// The workspace README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct WorkspaceReadme;

#[cfg(test)]
mod readme {
    const WORKSPACE: &str = include_str!("../../README.md");

    /// The bodies of the ```toml blocks of `readme` that start with `[remote]`.
    fn remote_blocks(readme: &str) -> Vec<&str> {
        readme
            .split("```toml\n")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .filter(|b| b.starts_with("[remote]"))
            .collect()
    }

    /// "An actor in twenty lines" is the engine README's, which the engine
    /// runs as a doc test and compares with `engine/examples/readme.rs`.
    #[test]
    fn the_twenty_lines_are_the_engine_readmes() {
        let block = |readme: &'static str| {
            readme
                .split("## An actor in twenty lines\n\n```rust\n")
                .nth(1)
                .and_then(|rest| rest.split("```").next())
                .expect("the README has the section")
        };
        assert_eq!(
            block(WORKSPACE),
            block(include_str!("../../engine/README.md"))
        );
    }

    /// The `[remote]` examples are proscenium-remote's README's, which its
    /// tests parse and check for every key.
    #[test]
    fn the_remote_settings_are_the_remote_readmes() {
        let workspace = remote_blocks(WORKSPACE);
        assert_eq!(workspace.len(), 2);
        assert_eq!(
            workspace,
            remote_blocks(include_str!("../../remote/README.md"))
        );
    }
}
