//! Public handles are `Send + Sync` (and cheap to clone), so they can be shared across threads.

fn is_send_sync<T: Send + Sync + 'static>() {}
fn is_clone<T: Clone>() {}

#[test]
fn public_types_are_send_and_sync() {
    is_send_sync::<protorb::Orb>();
    is_send_sync::<protorb::ObjectRef>();
    is_send_sync::<protorb::ObjectProxy>();
    is_send_sync::<protorb::Context>();
    is_send_sync::<protorb::Exception>();
    is_send_sync::<protorb::OrbStats>();
    // Deferred replies are answered from other threads and async tasks.
    is_send_sync::<protorb::ReplyHandle>();
    is_send_sync::<protorb::TypedReplyHandle<orb_tests::orbtest::Payload>>();
    is_send_sync::<protorb::TypedReplyHandle<(), std::rc::Rc<protorb::Exception>>>();
    is_send_sync::<orb_tests::orbtest::EchoClient>();
    is_send_sync::<orb_tests::orbtest::NodeClient>();
    is_clone::<protorb::Orb>();
    is_clone::<orb_tests::orbtest::EchoClient>();
}
