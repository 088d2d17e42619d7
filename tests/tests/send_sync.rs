//! Public handles are `Send + Sync` (and cheap to clone), so they can be shared across threads.

fn is_send_sync<T: Send + Sync + 'static>() {}
fn is_clone<T: Clone>() {}

#[test]
fn public_types_are_send_and_sync() {
    is_send_sync::<orb::Orb>();
    is_send_sync::<orb::ObjectRef>();
    is_send_sync::<orb::ObjectProxy>();
    is_send_sync::<orb::Context>();
    is_send_sync::<orb::Exception>();
    is_send_sync::<orb::OrbStats>();
    // Deferred replies are answered from other threads and async tasks.
    is_send_sync::<orb::ReplyHandle>();
    is_send_sync::<orb::TypedReplyHandle<orb_tests::orbtest::Payload>>();
    is_send_sync::<orb::TypedReplyHandle<(), std::rc::Rc<orb::Exception>>>();
    is_send_sync::<orb_tests::orbtest::EchoClient>();
    is_send_sync::<orb_tests::orbtest::NodeClient>();
    is_clone::<orb::Orb>();
    is_clone::<orb_tests::orbtest::EchoClient>();
}
