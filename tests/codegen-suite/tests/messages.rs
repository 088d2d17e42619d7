//! prost's side of the generated code: messages across packages, well-known types, and
//! `orb.ObjectRef` fields mapped to `protorb::ObjectRef`.

mod support;

use codegen_suite::suite::api::Subscription;
use codegen_suite::suite::common::{item, Item, Kind};
use prost::Message;
use protorb::ObjectRef;
use support::sample_item;

#[test]
fn object_ref_field_round_trips_through_prost() {
    let r = ObjectRef::new(
        "IDL:suite/api/Listener:1.0",
        "example.org",
        2809,
        &b"obj/7"[..],
    );
    let sub = Subscription {
        listener: Some(r.clone()),
        others: vec![r.clone(), ObjectRef::new("", "10.0.0.1", 1, &b""[..])],
        topic: "news".into(),
    };
    let bytes = sub.encode_to_vec();
    let back = Subscription::decode(bytes.as_slice()).unwrap();
    assert_eq!(back, sub);
    let listener = back.listener.unwrap();
    assert_eq!(listener.type_id(), "IDL:suite/api/Listener:1.0");
    assert_eq!(listener.to_ior_string(), r.to_ior_string());
    // An absent reference stays absent.
    let empty = Subscription::decode(Subscription::default().encode_to_vec().as_slice()).unwrap();
    assert!(empty.listener.is_none() && empty.others.is_empty());
}

#[test]
fn nested_messages_enums_oneofs_maps_and_well_known_types_round_trip() {
    let item = sample_item("r");
    let back = Item::decode(item.encode_to_vec().as_slice()).unwrap();
    assert_eq!(back, item);
    assert_eq!(back.kind(), Kind::Tool);
    assert!(matches!(
        back.payload,
        Some(item::Payload::Size(item::Dims { w: 1, h: 2 }))
    ));
    assert_eq!(back.parts[&7], item::Dims { w: 9, h: 9 });
}

#[test]
fn the_options_file_produced_no_module_and_the_descriptor_set_keeps_options() {
    // The descriptor set written by the build script carries the custom options: look for the
    // `raises` value text and the oneway extension's field number (key 50001 << 3 = 400008, varint 0x88 0xb5 0x18).
    let fds = codegen_suite::FILE_DESCRIPTOR_SET;
    let has = |needle: &[u8]| fds.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"suite.common.NotFound"));
    assert!(has(&[0x88, 0xb5, 0x18, 0x01]), "oneway = true is encoded");
    let set = prost_types::FileDescriptorSet::decode(fds).unwrap();
    assert!(set.file.iter().any(|f| f.name() == "orb/options.proto"));
}
