//! omniORB's IOR tools against our references: `catior` decodes what we write, and what
//! `genior` (and the omniORB server) write parses and re-encodes byte for byte.

use bytes::Bytes;
use orb_interop::{
    peers, run, run_client, start_server, tool, EchoServant, Outcome, ECHO_ID, PEER_TIMEOUT,
};
use protorb::cdr::{encapsulate, ByteOrder};
use protorb::{IiopProfile, ObjectRef, Orb, TaggedComponent, Version};
use std::process::Command;

fn catior(path: &std::path::Path, args: &[&str], ior: &str) -> String {
    let out = run(Command::new(path).args(args).arg(ior), PEER_TIMEOUT);
    assert!(out.success(), "catior failed: {out:#?}");
    out.stdout
}

fn genior(path: &std::path::Path, args: &[&str]) -> String {
    let out = run(Command::new(path).args(args), PEER_TIMEOUT);
    assert!(out.success(), "genior failed: {out:#?}");
    out.stdout
        .lines()
        .find(|l| l.starts_with("IOR:"))
        .unwrap_or_else(|| panic!("no IOR in genior output: {out:#?}"))
        .to_string()
}

/// omniORB's TAG_ORB_TYPE ("ATT\0") and TAG_CODE_SETS components, built with our encoder.
fn omniorb_like_components() -> Vec<TaggedComponent> {
    let orb_type = encapsulate(ByteOrder::NATIVE, |w| w.write_u32(0x4154_5400)).freeze();
    let code_sets = encapsulate(ByteOrder::NATIVE, |w| {
        w.write_u32(0x0001_0001); // native char: ISO-8859-1
        w.write_u32(1);
        w.write_u32(0x0501_0001); // conversion: UTF-8
        w.write_u32(0x0001_0109); // native wchar: UTF-16
        w.write_u32(1);
        w.write_u32(0x0001_0109);
    })
    .freeze();
    vec![
        TaggedComponent {
            tag: 0,
            data: orb_type,
        },
        TaggedComponent {
            tag: 1,
            data: code_sets,
        },
    ]
}

#[test]
fn catior_decodes_our_iors() {
    let Some(catior_path) = tool("catior_decodes_our_iors", "catior") else {
        return;
    };
    let orb = Orb::builder().threads(1).build().expect("orb");
    let port = orb.listen_addrs()[0].port();
    let r = orb.activate("echo-key", EchoServant);
    let ior = orb.object_to_string(&r);
    let out = catior(&catior_path, &[], &ior);
    assert!(out.contains(&format!("Type ID: \"{ECHO_ID}\"")), "{out}");
    assert!(
        out.contains(&format!("IIOP 1.2 127.0.0.1 {port} \"echo-key\"")),
        "{out}"
    );

    // A binary key, shown in hex with -x.
    let key = Bytes::from_static(&[0x00, 0xff, 0x10, b'k']);
    let r = orb.reference(ECHO_ID, key);
    let out = catior(&catior_path, &["-x"], &r.to_ior_string());
    assert!(
        out.contains(&format!("IIOP 1.2 127.0.0.1 {port} 0x00ff106b")),
        "{out}"
    );

    // Components we encode are the ones omniORB knows.
    let p = IiopProfile {
        version: Version::V1_2,
        host: "example.org".into(),
        port: 2809,
        object_key: Bytes::from_static(b"with-components"),
        components: omniorb_like_components(),
    };
    let r = ObjectRef::from_iiop_profiles(ECHO_ID, vec![p]);
    let out = catior(&catior_path, &[], &r.to_ior_string());
    assert!(
        out.contains("IIOP 1.2 example.org 2809 \"with-components\""),
        "{out}"
    );
    assert!(out.contains("TAG_ORB_TYPE omniORB"), "{out}");
    assert!(
        out.contains("char native code set:       ISO-8859-1"),
        "{out}"
    );
    assert!(out.contains("wchar native code set:      UTF-16"), "{out}");

    // An IIOP 1.0 profile (no components field).
    let p = IiopProfile {
        version: Version::V1_0,
        host: "10.1.2.3".into(),
        port: 1,
        object_key: Bytes::from_static(b"old"),
        components: Vec::new(),
    };
    let r = ObjectRef::from_iiop_profiles("", vec![p]);
    let out = catior(&catior_path, &[], &r.to_ior_string());
    assert!(out.contains("IIOP 1.0 10.1.2.3 1 \"old\""), "{out}");
    orb.shutdown();
}

#[test]
fn genior_output_parses_and_re_encodes_identically() {
    let Some(genior_path) = tool("genior_output_parses_and_re_encodes_identically", "genior")
    else {
        return;
    };
    for (args, key) in [
        (vec![ECHO_ID, "127.0.0.1", "28090", "mykey"], &b"mykey"[..]),
        (
            vec!["-x", "IDL:a/B:1.0", "some.host.example", "1", "0x6162ff00"],
            &b"ab\xff\x00"[..],
        ),
        (
            vec![
                "IDL:omg.org/CosNaming/NamingContextExt:1.0",
                "::1",
                "65535",
                "NameService",
            ],
            &b"NameService"[..],
        ),
    ] {
        let ior = genior(&genior_path, &args);
        let type_id = args[usize::from(args[0] == "-x")];
        let host = args[usize::from(args[0] == "-x") + 1];
        let port: u16 = args[usize::from(args[0] == "-x") + 2]
            .parse()
            .expect("port");
        let r = ObjectRef::parse(&ior).unwrap_or_else(|e| panic!("{ior}: {e}"));
        assert_eq!(r.type_id(), type_id);
        assert_eq!(r.profiles().len(), 1);
        let p = r.primary().expect("IIOP profile");
        assert_eq!(p.version, Version::V1_2);
        assert_eq!(p.host, host);
        assert_eq!(p.port, port);
        assert_eq!(&p.object_key[..], key);
        // ORB_TYPE and CODE_SETS, kept raw.
        assert_eq!(p.components, omniorb_like_components(), "{ior}");
        // Byte for byte (omniORB writes lower-case hex, as we do).
        assert_eq!(r.to_ior_string(), ior);
        assert_eq!(
            ObjectRef::parse(&ior.to_uppercase().replacen("IOR:", "ior:", 1)).expect("upper case"),
            r
        );
    }
}

#[test]
fn omniorb_server_ior_parses_and_re_encodes_identically() {
    let Some(peers) = peers("omniorb_server_ior_parses_and_re_encodes_identically") else {
        return;
    };
    let server = start_server(&peers, &[]);
    let r = ObjectRef::parse(&server.ior).expect("parses");
    assert_eq!(r.to_ior_string(), server.ior);
    assert_eq!(r.type_id(), ECHO_ID);
    let p = r.primary().expect("IIOP profile");
    assert_eq!(
        (p.host.as_str(), &p.object_key[..]),
        ("127.0.0.1", &b"Echo"[..])
    );
    assert_eq!(p.components, omniorb_like_components());
}

#[test]
fn omniorb_client_calls_us_through_a_genior_ior() {
    let test = "omniorb_client_calls_us_through_a_genior_ior";
    let (Some(peers), Some(genior_path)) = (peers(test), tool(test, "genior")) else {
        return;
    };
    let orb = Orb::builder().threads(2).build().expect("orb");
    orb.activate("echo", EchoServant);
    let port = orb.listen_addrs()[0].port().to_string();
    // genior's IOR carries TAG_CODE_SETS, so omniORB sends a CodeSets service context on its
    // first request: our server must ignore it.
    let ior = genior(&genior_path, &[ECHO_ID, "127.0.0.1", &port, "echo"]);
    let out = run_client(&peers, &[], &ior, &["echo:1000", "nonexist", "fail:3"]);
    assert_eq!(out.get("echo:1000"), &Outcome::Ok("len=1000 match".into()));
    assert_eq!(out.get("nonexist"), &Outcome::Ok("false".into()));
    assert!(
        matches!(out.get("fail:3"), Outcome::User { .. }),
        "{out:#?}"
    );
    orb.shutdown();
}
