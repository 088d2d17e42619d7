//! `protorb_naming` against a real omniNames (started per test on a free port with a temporary
//! log directory), and interplay with omniORB's `nameclt`.

use orb_interop::{payload, run, tool, EchoServant, OmniNames, Output, ECHO_ID, PEER_TIMEOUT};
use protorb::{ObjectProxy, ObjectRef, Orb};
use protorb_naming::{
    Binding, BindingType, Name, NameComponent, NamingContext, NamingError, NotFoundReason,
    NAMING_CONTEXT_EXT_ID,
};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Our ORB serving an `EchoServant` under `echo`.
fn server() -> (Orb, ObjectRef) {
    let orb = Orb::builder().threads(2).build().expect("orb");
    let r = orb.activate("echo", EchoServant);
    (orb, r)
}

fn call_echo(orb: &Orb, r: ObjectRef) {
    let p = ObjectProxy::new(orb, r);
    let got = p
        .invoke("call", payload(4096), Some(Duration::from_secs(10)))
        .expect("call through the resolved reference");
    assert!(got == payload(4096));
}

fn nameclt(path: &Path, ns: &OmniNames, args: &[&str]) -> Output {
    let init = format!("NameService={}", ns.corbaloc());
    run(
        Command::new(path).args(["-ORBInitRef", &init]).args(args),
        PEER_TIMEOUT,
    )
}

fn names(list: &[Binding]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|b| b.name.to_string()).collect();
    v.sort();
    v
}

#[test]
fn bind_resolve_rebind_unbind_list_against_omninames() {
    let Some(omni_names) = tool(
        "bind_resolve_rebind_unbind_list_against_omninames",
        "omniNames",
    ) else {
        return;
    };
    let ns = OmniNames::start(&omni_names);
    let (orb, me) = server();
    let root = NamingContext::at(&orb, "127.0.0.1", ns.port);
    assert_eq!(root.reference().type_id(), NAMING_CONTEXT_EXT_ID);

    let name = Name::parse("echo.svc").expect("name");
    root.bind(&name, &me).expect("bind");
    // Binding again: AlreadyBound.
    assert_eq!(root.bind(&name, &me), Err(NamingError::AlreadyBound));
    let found = root.resolve(&name).expect("resolve");
    assert_eq!(found, me);
    // The resolved reference to our own server works.
    call_echo(&orb, found);
    // resolve_str is answered by omniNames' own parser.
    assert_eq!(root.resolve_str("echo.svc").expect("resolve_str"), me);

    // rebind replaces.
    let other = ObjectRef::new(ECHO_ID, "127.0.0.1", 9, "elsewhere");
    root.rebind(&name, &other).expect("rebind");
    assert_eq!(root.resolve(&name).expect("resolve"), other);
    root.rebind(&name, &me).expect("rebind back");

    // Missing names: NotFound(missing_node) with the rest of the name.
    let missing = Name::parse("missing").expect("name");
    assert_eq!(
        root.resolve(&missing),
        Err(NamingError::NotFound {
            why: NotFoundReason::MissingNode,
            rest_of_name: missing.clone(),
        })
    );
    assert!(matches!(
        root.unbind(&missing),
        Err(NamingError::NotFound { .. })
    ));
    // The empty name: InvalidName from the server.
    assert_eq!(
        root.resolve(&Name::default()),
        Err(NamingError::InvalidName)
    );

    // Contexts and multi-component names.
    let dir = root
        .bind_new_context(&Name::parse("dir").expect("name"))
        .expect("bind_new_context");
    let nested = Name::parse("dir/x\\.y.kind").expect("name");
    assert_eq!(nested.components()[1], NameComponent::new("x.y", "kind"));
    root.bind(&nested, &me).expect("bind nested");
    assert_eq!(root.resolve(&nested).expect("resolve nested"), me);
    assert_eq!(
        dir.resolve(&Name::simple("x.y", "kind"))
            .expect("resolve in dir"),
        me
    );
    let dir2 = root
        .resolve_context(&Name::simple("dir", ""))
        .expect("resolve_context");
    assert_eq!(dir2.reference(), dir.reference());
    // Resolving through an object where a context is needed.
    assert!(matches!(
        root.resolve(&Name::parse("echo.svc/below").expect("name")),
        Err(NamingError::NotFound {
            why: NotFoundReason::NotContext,
            ..
        })
    ));
    // destroy of a non-empty context.
    assert_eq!(dir.destroy(), Err(NamingError::NotEmpty));

    // list: everything fits, and a small batch (the iterator is destroyed), and list_all.
    for i in 0..5 {
        root.bind(&Name::simple(format!("n{i}"), "obj"), &me)
            .expect("bind");
    }
    let all = root.list(100).expect("list");
    assert_eq!(all.len(), 7, "{all:?}");
    assert!(all.contains(&Binding {
        name: Name::simple("dir", ""),
        binding_type: BindingType::Context
    }));
    assert!(all.contains(&Binding {
        name: Name::simple("echo", "svc"),
        binding_type: BindingType::Object
    }));
    assert_eq!(root.list(3).expect("list 3").len(), 3);
    assert_eq!(names(&root.list_all(2).expect("list_all")), names(&all));

    // unbind.
    root.unbind(&name).expect("unbind");
    assert!(matches!(
        root.resolve(&name),
        Err(NamingError::NotFound { .. })
    ));
    root.unbind(&nested).expect("unbind nested");
    dir.destroy().expect("destroy the empty context");
    root.unbind(&Name::simple("dir", "")).expect("unbind dir");
    assert_eq!(root.list(100).expect("list").len(), 5);
    orb.shutdown();
}

#[test]
fn a_plain_corbaloc_root_reaches_omninames_with_giop_1_0() {
    let Some(omni_names) = tool(
        "a_plain_corbaloc_root_reaches_omninames_with_giop_1_0",
        "omniNames",
    ) else {
        return;
    };
    let ns = OmniNames::start(&omni_names);
    let (orb, me) = server();
    let root = NamingContext::new(
        &orb,
        orb.string_to_object(&ns.corbaloc()).expect("corbaloc"),
    );
    let name = Name::parse("old.style").expect("name");
    root.rebind(&name, &me).expect("rebind over GIOP 1.0");
    assert_eq!(root.resolve(&name).expect("resolve"), me);
    assert!(matches!(
        root.resolve(&Name::simple("nope", "")),
        Err(NamingError::NotFound { .. })
    ));
    assert_eq!(root.list(10).expect("list").len(), 1);
    orb.shutdown();
}

#[test]
fn nameclt_and_our_client_see_each_others_bindings() {
    let test = "nameclt_and_our_client_see_each_others_bindings";
    let (Some(omni_names), Some(nameclt_path), Some(genior_path)) = (
        tool(test, "omniNames"),
        tool(test, "nameclt"),
        tool(test, "genior"),
    ) else {
        return;
    };
    let ns = OmniNames::start(&omni_names);
    let (orb, me) = server();
    let root = NamingContext::at(&orb, "127.0.0.1", ns.port);

    // We bind; nameclt resolves it and prints our IOR.
    root.bind(&Name::parse("ours.rust").expect("name"), &me)
        .expect("bind");
    let out = nameclt(&nameclt_path, &ns, &["resolve", "ours.rust"]);
    assert!(out.success(), "{out:#?}");
    let printed = out
        .stdout
        .lines()
        .find(|l| l.starts_with("IOR:"))
        .unwrap_or_else(|| panic!("{out:#?}"));
    assert_eq!(printed, me.to_ior_string());
    let out = nameclt(&nameclt_path, &ns, &["list"]);
    assert!(out.stdout.lines().any(|l| l == "ours.rust"), "{out:#?}");

    // nameclt binds a genior reference to our server; we resolve it and call it.
    let port = orb.listen_addrs()[0].port().to_string();
    let gen = run(
        Command::new(&genior_path).args([ECHO_ID, "127.0.0.1", &port, "echo"]),
        PEER_TIMEOUT,
    );
    let ior = gen
        .stdout
        .lines()
        .find(|l| l.starts_with("IOR:"))
        .unwrap_or_else(|| panic!("{gen:#?}"))
        .to_string();
    let out = nameclt(&nameclt_path, &ns, &["bind", "theirs.omni", &ior]);
    assert!(out.success(), "{out:#?}");
    let out = nameclt(&nameclt_path, &ns, &["bind_new_context", "sub"]);
    assert!(out.success(), "{out:#?}");
    let out = nameclt(&nameclt_path, &ns, &["bind", "sub/deeper.omni", &ior]);
    assert!(out.success(), "{out:#?}");
    let found = root
        .resolve(&Name::parse("theirs.omni").expect("name"))
        .expect("resolve");
    assert_eq!(found.to_ior_string(), ior);
    assert_eq!(found.primary().expect("profile").components.len(), 2);
    call_echo(&orb, found);
    let found = root
        .resolve(&Name::parse("sub/deeper.omni").expect("name"))
        .expect("resolve nested");
    call_echo(&orb, found);

    // nameclt sees our unbind; we see its AlreadyBound semantics.
    root.unbind(&Name::parse("ours.rust").expect("name"))
        .expect("unbind");
    let out = nameclt(&nameclt_path, &ns, &["resolve", "ours.rust"]);
    assert!(!out.success(), "{out:#?}");
    assert!(out.stderr.contains("NotFound"), "{out:#?}");
    assert_eq!(
        root.bind(&Name::parse("theirs.omni").expect("name"), &me),
        Err(NamingError::AlreadyBound)
    );
    orb.shutdown();
}
