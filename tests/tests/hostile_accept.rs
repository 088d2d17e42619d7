//! Accepting after file-descriptor exhaustion (issue 16, scenario 4): connections queued in
//! the listen backlog while the server was out of fds are accepted once fds are free again,
//! without any new connection to wake the accept loop.

mod hostile_common;

use hostile_common::*;
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn backlog_is_accepted_once_fds_are_free_again() {
    const LIMIT: u32 = 64;
    const QUEUED: usize = 20;
    let mut server = Server::start(&[], Some(LIMIT));
    // Exhaust the server's fds: more connections than it can hold.
    let mut first: Vec<TcpStream> = (0..LIMIT)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // Until the server has accepted all it could (and failed on the next one).
    let mut last = (0, Duration::ZERO);
    wait_until(20, "the server to stop accepting", || {
        let n = server.stat("connections_accepted").unwrap();
        let stable = n == last.0 && n > 0;
        if !stable {
            last = (n, Duration::ZERO);
        } else {
            last.1 += Duration::from_millis(20);
        }
        stable && last.1 >= Duration::from_millis(500)
    });
    let accepted = last.0;
    assert!(accepted < u64::from(LIMIT), "the fd limit did not bite");
    // More wait in the backlog, each with a request.
    let mut queued: Vec<TcpStream> = (0..QUEUED as u32)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            std::io::Write::write_all(&mut s, &locate_request(i)).unwrap();
            s
        })
        .collect();
    // Free the server's fds; nothing new arrives to wake its accept loop.
    first.clear();
    let mut answered = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for s in &mut queued {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if let Some((4, _)) = read_frame(s, left.max(Duration::from_millis(1))) {
            answered += 1;
        }
    }
    assert_eq!(
        answered, QUEUED,
        "only {answered} of {QUEUED} queued connections answered"
    );
    if let Some(errors) = server.stat("accept_errors") {
        assert!(errors > 0, "accept errors not counted");
    }
}
