//! Looking up a live actor by path (issue 14): `ActorSystem::lookup` and
//! the typed `lookup_ref`, for existing, missing and stopped actors.

mod support;

use proscenium::prelude::*;
use support::*;

struct Parent;

impl Actor for Parent {
    type Msg = Reply<ActorRef<u8>>;

    fn receive(&mut self, ctx: &mut Context<Self>, reply: Self::Msg) -> Outcome {
        reply.send(ctx.spawn(Props::new(|| Leaf), "b")?);
        Ok(())
    }
}

struct Leaf;

impl Actor for Leaf {
    type Msg = u8;

    fn receive(&mut self, _: &mut Context<Self>, _: u8) -> Outcome {
        Ok(())
    }
}

#[test]
fn lookup_finds_live_actors_by_path() {
    let system = system();
    let a = system.spawn(Props::new(|| Parent), "a").expect("spawn");
    let b = a.ask(|r| r, PATIENCE).wait().expect("a child");
    assert_eq!(system.lookup("/user/a"), Some(a.id()));
    assert_eq!(system.lookup("/user/a/b"), Some(b.id()));
    assert_eq!(system.lookup("/user/a/b/"), Some(b.id()));
    assert_eq!(system.lookup("/"), system.lookup("/"));
    assert_eq!(system.lookup("/user"), system.user_guardian_id());
    assert!(system.lookup("/system").is_some());
    // Typed: only with the actor's message type.
    assert_eq!(system.lookup_ref::<u8>("/user/a/b"), Some(b.clone()));
    assert_eq!(system.lookup_ref::<u16>("/user/a/b"), None);
    drop((a, b));
    shutdown(system);
}

#[test]
fn lookup_of_a_missing_path_is_none() {
    let system = system();
    let a = system.spawn(Props::new(|| Parent), "a").expect("spawn");
    for path in [
        "/user/x",
        "/user/a/x",
        "/user/a/b",
        "user/a",
        "",
        "/user//a",
        "/nope",
    ] {
        assert_eq!(system.lookup(path), None, "{path:?}");
    }
    drop(a);
    shutdown(system);
}

#[test]
fn lookup_of_a_stopped_actor_is_none() {
    let system = system();
    let a = system.spawn(Props::new(|| Parent), "a").expect("spawn");
    let b = a.ask(|r| r, PATIENCE).wait().expect("a child");
    assert!(b.graceful_stop(PATIENCE).wait());
    assert_eq!(system.lookup("/user/a/b"), None);
    assert_eq!(system.lookup_ref::<u8>("/user/a/b"), None);
    assert!(a.graceful_stop(PATIENCE).wait());
    assert_eq!(system.lookup("/user/a"), None);
    drop((a, b));
    shutdown(system);
}

/// Anonymous actors are found by their generated names (`$` and the uid in
/// base 26), which the children table resolves through the uid: a name that
/// only decodes to a live child's uid (a leading `a` digit) is not it.
#[test]
fn lookup_finds_anonymous_actors_by_their_generated_names() {
    let system = system();
    let anon: Vec<ActorRef<u8>> = (0..30)
        .map(|_| system.spawn_anonymous(Props::new(|| Leaf)).expect("spawn"))
        .collect();
    let named = system.spawn(Props::new(|| Leaf), "named").expect("spawn");
    for a in &anon {
        let path = format!("/user/{}", a.name());
        assert_eq!(system.lookup(&path), Some(a.id()), "{path}");
        // `$ab` decodes to the same uid as `$b`, but is not its name.
        let padded = format!("/user/$a{}", &a.name()[1..]);
        assert_eq!(system.lookup(&padded), None, "{padded}");
    }
    assert_eq!(system.lookup("/user/named"), Some(named.id()));
    for path in ["/user/$", "/user/$A", "/user/$zzzzzzzzzzzzzzzzzzzz"] {
        assert_eq!(system.lookup(path), None, "{path:?}");
    }
    let first = anon[0].clone();
    assert!(first.graceful_stop(PATIENCE).wait());
    assert_eq!(system.lookup(&format!("/user/{}", first.name())), None);
    drop((anon, named, first));
    shutdown(system);
}
