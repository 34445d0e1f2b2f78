//! Retries against real failures: a loopback proxy in front of the emulator
//! cuts the connection in the middle of a streaming read; the read must
//! resume after the last row it got, returning every row exactly once.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use affinity_bigtable::emulator::{fresh_instance, test_emulator_host};
use affinity_bigtable::{BigtableStore, RetryPolicy};
use affinity_model::{
    GcRule, Mutation, ReadRowsRequest, RowMutations, RowRange, RowSet, Store, TableSpec,
};
use bytes::Bytes;

/// A TCP proxy that, once armed, cuts the connection it is serving after a
/// number of bytes from the server.
struct Proxy {
    port: u16,
    connections: Arc<AtomicUsize>,
    armed: Arc<AtomicBool>,
    /// Server-to-client bytes left before the cut, while armed.
    budget: Arc<AtomicI64>,
}

impl Proxy {
    fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = listener.local_addr().expect("proxy addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        let budget = Arc::new(AtomicI64::new(0));
        let (c, a, b) = (connections.clone(), armed.clone(), budget.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    return;
                };
                c.fetch_add(1, Ordering::SeqCst);
                let (client2, server2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                thread::spawn(move || pipe(client2, server2, None));
                let (a, b) = (a.clone(), b.clone());
                thread::spawn(move || pipe(server, client, Some((a, b))));
            }
        });
        Proxy {
            port,
            connections,
            armed,
            budget,
        }
    }

    fn arm(&self, bytes: i64) {
        self.budget.store(bytes, Ordering::SeqCst);
        self.armed.store(true, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream, cut: Option<(Arc<AtomicBool>, Arc<AtomicI64>)>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((armed, budget)) = &cut {
            if armed.load(Ordering::SeqCst)
                && budget.fetch_sub(n as i64, Ordering::SeqCst) <= n as i64
            {
                armed.store(false, Ordering::SeqCst);
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn key(i: usize) -> Bytes {
    Bytes::from(format!("row{i:06}"))
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn a_read_cut_mid_stream_resumes_after_the_last_row() {
    let host = test_emulator_host();
    let proxy = Proxy::start(host);
    let store = BigtableStore::builder("affinity-test", &fresh_instance())
        .emulator_host(format!("127.0.0.1:{}", proxy.port))
        .retry_policy(RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(100),
        })
        .connect()
        .expect("connect through the proxy");
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    let entries: Vec<RowMutations> = (0..20_000)
        .map(|i| {
            RowMutations::new(
                key(i),
                vec![Mutation::set_cell("f", "q", 1000, vec![b'x'; 40])],
            )
        })
        .collect();
    for batch in entries.chunks(5000) {
        for r in table.mutate_rows(batch).expect("mutate_rows") {
            r.expect("entry");
        }
    }

    for (reversed, limit) in [(false, None), (true, Some(15_000u64))] {
        let before = proxy.connections.load(Ordering::SeqCst);
        proxy.arm(300_000);
        let mut request =
            ReadRowsRequest::new(RowSet::from_range(RowRange::all())).reversed(reversed);
        request.rows_limit = limit;
        let keys: Vec<Bytes> = table
            .read_rows(&request)
            .expect("read")
            .map(|r| r.expect("row").key)
            .collect();
        let mut want: Vec<Bytes> = (0..20_000).map(key).collect();
        if reversed {
            want.reverse();
        }
        want.truncate(limit.map_or(want.len(), |l| l as usize));
        assert_eq!(keys.len(), want.len(), "reversed {reversed}");
        assert!(keys == want, "reversed {reversed}: rows differ");
        assert!(
            proxy.connections.load(Ordering::SeqCst) > before,
            "the proxy never cut the connection, so nothing was retried"
        );
    }
}

#[ignore = "needs the Cloud Bigtable emulator (scripts/test runs it)"]
#[test]
fn mutate_rows_retries_only_idempotent_entries_after_a_cut() {
    let host = test_emulator_host();
    let proxy = Proxy::start(host);
    let store = BigtableStore::builder("affinity-test", &fresh_instance())
        .emulator_host(format!("127.0.0.1:{}", proxy.port))
        .retry_policy(RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(100),
        })
        .connect()
        .expect("connect through the proxy");
    store
        .create_table("t", &TableSpec::new().with_family("f", GcRule::None))
        .expect("create");
    let table = store.open_table("t").expect("open");
    let mut entries: Vec<RowMutations> = (0..1000)
        .map(|i| RowMutations::new(key(i), vec![Mutation::set_cell("f", "q", 1000, "v")]))
        .collect();
    // Server-stamped: applying it twice would write two cells, so a retry
    // is not allowed.
    entries.push(RowMutations::new(
        "server-time",
        vec![Mutation::set_cell(
            "f",
            "q",
            affinity_model::SERVER_TIME,
            "v",
        )],
    ));
    let before = proxy.connections.load(Ordering::SeqCst);
    // The first bytes of the answer break the connection.
    proxy.arm(1);
    let results = table.mutate_rows(&entries).expect("mutate_rows");
    assert!(
        proxy.connections.load(Ordering::SeqCst) > before,
        "no cut happened"
    );
    for (i, result) in results[..1000].iter().enumerate() {
        assert_eq!(*result, Ok(()), "entry {i}");
    }
    assert!(
        matches!(results[1000], Err(affinity_model::Error::Unavailable(_))),
        "{:?}",
        results[1000]
    );
    let rows = table
        .read_rows(&ReadRowsRequest::new(RowSet::from_range(
            RowRange::closed_open(key(0), key(1000)),
        )))
        .expect("read")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows");
    assert_eq!(rows.len(), 1000);
}
