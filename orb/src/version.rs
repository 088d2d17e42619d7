//! The GIOP/IIOP protocol version. Its own module because both floors above it need it: the
//! wire format (`giop`, message headers) and object references (`ior`, IIOP profiles), and
//! neither may import the other for it.

/// A GIOP protocol version (`major.minor`). We speak 1.0, 1.1 and 1.2 and send 1.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Always 1.
    pub major: u8,
    /// 0, 1 or 2.
    pub minor: u8,
}

impl Version {
    /// GIOP 1.0 (omniORB's choice for a plain `corbaloc::` URL).
    pub const V1_0: Version = Version { major: 1, minor: 0 };
    /// GIOP 1.1.
    pub const V1_1: Version = Version { major: 1, minor: 1 };
    /// GIOP 1.2, what we send.
    pub const V1_2: Version = Version { major: 1, minor: 2 };
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
