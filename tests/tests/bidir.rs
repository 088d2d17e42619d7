//! Bidirectional GIOP: callbacks travel over the connection the caller opened, when the
//! caller offers it (`bidir`, on by default) and the callee accepts it (`bidir_accept`, off
//! by default).

use orb_tests::activate_node;
use orb_tests::orbtest::{NodeClient, PingRequest};

/// A (`a_threads` pool threads) offers BiDir (or not) and calls B, which accepts it (or not)
/// and calls A back with the reference A sent, `depth` levels deep; returns both ORBs'
/// statistics.
fn chain(
    offer: bool,
    accept: bool,
    a_threads: usize,
    depth: u32,
) -> (protorb::OrbStats, protorb::OrbStats) {
    let a = protorb::Orb::builder()
        .threads(a_threads)
        .bidir(offer)
        .build()
        .unwrap();
    let b = protorb::Orb::builder()
        .threads(1)
        .bidir_accept(accept)
        .build()
        .unwrap();
    let a_ref = activate_node(&a, "A");
    let b_ref = activate_node(&b, "B");
    let reply = NodeClient::new(&a, b_ref)
        .ping(PingRequest {
            depth,
            peer: Some(a_ref),
            sleep_micros: 0,
        })
        .unwrap();
    assert_eq!(reply.depth_reached, depth);
    let (sa, sb) = (a.stats(), b.stats());
    a.shutdown();
    b.shutdown();
    (sa, sb)
}

/// [`chain`] of depth 10 from A without pool threads: (A opened, A accepted, B opened, B
/// accepted).
fn run(offer: bool, accept: bool) -> (u64, u64, u64, u64) {
    let (sa, sb) = chain(offer, accept, 0, 10);
    (
        sa.connections_opened,
        sa.connections_accepted,
        sb.connections_opened,
        sb.connections_accepted,
    )
}

#[test]
fn nested_callbacks_use_exactly_one_connection() {
    // A opened one connection to B; B called A back over it instead of connecting.
    assert_eq!(run(true, true), (1, 0, 0, 1));
}

#[test]
fn by_default_the_callee_opens_its_own_connection() {
    // A offers (the default), B does not accept (the default).
    assert_eq!(run(true, false), (1, 1, 1, 1));
}

#[test]
fn without_an_offer_the_callee_opens_its_own_connection() {
    assert_eq!(run(false, true), (1, 1, 1, 1));
}

/// With bidirectional GIOP, each side of a nested chain has one connection, and each reads
/// it itself (owned reads, `OrbBuilder::owned_reads`): B, which accepted it, and A, which
/// opened it and listens, once B has called A back over it (before, A polled for every
/// message: it waited for callbacks on its listener).
#[test]
fn a_called_back_connection_is_read_by_its_owner() {
    let (sa, sb) = chain(true, true, 0, 40);
    assert_eq!((sa.connections_opened, sb.connections_opened), (1, 0));
    // A reads 20 requests and 20 replies, B 21 and 20. A run of owned reads ends with a poll
    // after 1 ms, so on a loaded machine some reads are polled; most are not.
    eprintln!("owned reads: A {}, B {}", sa.owned_reads, sb.owned_reads);
    assert!(sa.owned_reads >= 10, "A owned {} reads", sa.owned_reads);
    assert!(sb.owned_reads >= 10, "B owned {} reads", sb.owned_reads);
}
