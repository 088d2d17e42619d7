//! A call's deadline travels with its request (the DEADLINE service context): the servant
//! sees the caller's timeout as its `Context::deadline`, and a call made from inside an
//! upcall keeps the earlier of its own timeout and the deadline it inherits. Over loopback
//! between two ORBs, as a chain of servers would see it. The bounds leave seconds of slack,
//! so a loaded machine does not break them.

use orb_tests::orbtest::{
    Balance, Echo, EchoClient, EchoSkeleton, EchoWithdrawError, InsufficientFunds, Payload,
    SleepReply, SleepRequest, WithdrawRequest,
};
use protorb::{Context, Exception, Orb};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The last server answers the time its deadline left when its upcall began, in
/// milliseconds (in `call`; `u32::MAX` if it had none). The middle one calls the last with
/// the timeout in `req.call` (milliseconds), from inside its own upcall, and answers what the
/// last saw.
enum Node {
    Last,
    Middle(EchoClient),
}

impl Echo for Node {
    fn echo(&self, ctx: &Context, req: Payload) -> Result<Payload, Exception> {
        match self {
            Node::Last => {
                let left = ctx.deadline().map_or(u32::MAX, |d| {
                    let ms = d.saturating_duration_since(Instant::now()).as_millis();
                    u32::try_from(ms).unwrap_or(u32::MAX - 1)
                });
                Ok(Payload { call: left, ..req })
            }
            Node::Middle(last) => {
                let timeout = Duration::from_millis(req.call.into());
                last.echo_with_timeout(req, timeout)
            }
        }
    }

    fn sleep(&self, _ctx: &Context, _req: SleepRequest) -> Result<SleepReply, Exception> {
        Ok(SleepReply::default())
    }

    fn panic(&self, _ctx: &Context, _req: ()) -> Result<(), Exception> {
        Ok(())
    }

    fn notify(&self, _ctx: &Context, _req: Payload) -> Result<(), Exception> {
        Ok(())
    }

    fn withdraw(&self, _ctx: &Context, req: WithdrawRequest) -> Result<Balance, EchoWithdrawError> {
        Err(InsufficientFunds {
            available: 0,
            requested: req.amount,
        }
        .into())
    }
}

fn server(threads: usize) -> Orb {
    Orb::builder()
        .threads(threads)
        .collocation(false)
        .listen("127.0.0.1:0")
        .build()
        .unwrap()
}

/// Two servers (the middle calls the last) and a client ORB; the client's stubs for both.
fn chain() -> ([Orb; 3], EchoClient, EchoClient) {
    let (last_orb, middle_orb) = (server(1), server(2));
    let last_ref = last_orb.activate(&b"last"[..], EchoSkeleton::new(Arc::new(Node::Last)));
    let from_middle = middle_orb
        .string_to_object(&last_orb.object_to_string(&last_ref))
        .unwrap();
    let middle = Arc::new(Node::Middle(EchoClient::new(&middle_orb, from_middle)));
    let middle_ref = middle_orb.activate(&b"middle"[..], EchoSkeleton::new(middle));
    let client_orb = Orb::builder().threads(0).build().unwrap();
    let to_last = client_orb
        .string_to_object(&last_orb.object_to_string(&last_ref))
        .unwrap();
    let to_middle = client_orb
        .string_to_object(&middle_orb.object_to_string(&middle_ref))
        .unwrap();
    let (l, m) = (
        EchoClient::new(&client_orb, to_last),
        EchoClient::new(&client_orb, to_middle),
    );
    ([last_orb, middle_orb, client_orb], l, m)
}

fn seen(client: &EchoClient, timeout: Duration, inner_timeout_ms: u32) -> Duration {
    let p = client
        .echo_with_timeout(
            Payload {
                thread: 0,
                call: inner_timeout_ms,
                data: vec![],
            },
            timeout,
        )
        .unwrap();
    assert_ne!(p.call, u32::MAX, "the servant saw no deadline");
    Duration::from_millis(p.call.into())
}

#[test]
fn the_servant_sees_the_callers_timeout_as_its_deadline() {
    let (_orbs, last, _middle) = chain();
    // The first call connects (the time left is worked out after), the others do not.
    for timeout in [40, 90, 40].map(Duration::from_secs) {
        let left = seen(&last, timeout, 0);
        assert!(
            left <= timeout && left > timeout / 2,
            "timeout {timeout:?}, the servant's deadline left {left:?}"
        );
    }
}

#[test]
fn a_call_from_an_upcall_keeps_the_earlier_deadline() {
    let (_orbs, _last, middle) = chain();
    // Each case twice: the first call of a connection works the time left out after its
    // connect, a later one from the clock reading its deadline was made from.
    for _ in 0..2 {
        // The inherited deadline is the earlier: it wins over the inner call's 90 s.
        let left = seen(&middle, Duration::from_secs(40), 90_000);
        assert!(
            left <= Duration::from_secs(40) && left > Duration::from_secs(20),
            "inherited 40 s, own 90 s: the last servant's deadline left {left:?}"
        );
    }
    // The inner call's own timeout is the earlier: it wins over the inherited 90 s.
    for _ in 0..2 {
        let left = seen(&middle, Duration::from_secs(90), 40_000);
        assert!(
            left <= Duration::from_secs(40) && left > Duration::from_secs(20),
            "inherited 90 s, own 40 s: the last servant's deadline left {left:?}"
        );
    }
}
