//! The BiDir listen points a peer announced on a connection it opened: peer input, so bounded,
//! and one owner that keeps the bound.

use crate::sync::plain::Mutex;
use crate::sync::plain_lock as lock;

/// How many BiDir listen points one connection may announce.
pub(crate) const MAX_LISTEN_POINTS: usize = 16;

/// `host:port` endpoints a peer announced with BI_DIR_IIOP (accepted with `bidir_accept`).
/// A call to a reference that arrived over this connection and names one of them goes over
/// it.
///
/// Invariants: at most [`MAX_LISTEN_POINTS`] entries, none twice; forgotten with the
/// connection.
#[derive(Debug, Default)]
pub(crate) struct ListenPoints {
    points: Mutex<Vec<(String, u16)>>,
}

impl ListenPoints {
    /// Notes the announced `points` not known yet, up to the bound; returns those added (the
    /// rest past the bound are ignored; the caller logs).
    pub(crate) fn announce(&self, points: Vec<(String, u16)>) -> Vec<(String, u16)> {
        let mut known = lock(&self.points);
        let mut added = Vec::new();
        for ep in points {
            if known.contains(&ep) {
                continue;
            }
            if known.len() >= MAX_LISTEN_POINTS {
                break;
            }
            known.push(ep.clone());
            added.push(ep);
        }
        added
    }

    /// Whether the peer announced `host:port` (hosts compared textually, as omniORB does).
    pub(crate) fn contains(&self, host: &str, port: u16) -> bool {
        lock(&self.points)
            .iter()
            .any(|(h, p)| *p == port && h == host)
    }

    /// How many are held.
    pub(crate) fn len(&self) -> usize {
        lock(&self.points).len()
    }
}

#[cfg(all(test, not(orb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_without_repeats() {
        let lp = ListenPoints::default();
        let first = lp.announce(vec![("a".into(), 1), ("a".into(), 1), ("b".into(), 2)]);
        assert_eq!(first, vec![("a".to_string(), 1), ("b".to_string(), 2)]);
        assert!(lp.contains("a", 1) && lp.contains("b", 2) && !lp.contains("a", 2));
        let many = (0..100).map(|p| ("h".to_string(), p)).collect();
        let added = lp.announce(many);
        assert_eq!(added.len(), MAX_LISTEN_POINTS - 2);
        assert_eq!(lp.len(), MAX_LISTEN_POINTS);
        assert!(lp.announce(vec![("z".into(), 9)]).is_empty());
    }
}
