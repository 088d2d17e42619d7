//! Bidirectional GIOP: callbacks travel over the connection the caller opened, when the
//! caller offers it (`bidir`, on by default) and the callee accepts it (`bidir_accept`, off
//! by default).

use orb_tests::activate_node;
use orb_tests::orbtest::{NodeClient, PingRequest};

/// A offers (or not) and calls B, which accepts (or not) and calls A back with the reference
/// A sent; returns (A opened, A accepted, B opened, B accepted).
fn run(offer: bool, accept: bool) -> (u64, u64, u64, u64) {
    let a = protorb::Orb::builder()
        .threads(0)
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
            depth: 10,
            peer: Some(a_ref),
            sleep_micros: 0,
        })
        .unwrap();
    assert_eq!(reply.depth_reached, 10);
    let (sa, sb) = (a.stats(), b.stats());
    a.shutdown();
    b.shutdown();
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
