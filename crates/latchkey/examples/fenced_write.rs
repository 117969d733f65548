//! A paused holder's write is rejected by a fenced resource.
//!
//! Holder A takes a lock with a short TTL and "pauses" (as in a long GC pause)
//! past the TTL. Holder B takes over and writes. When A wakes up and writes,
//! the resource refuses it because A's fencing token is older.
//!
//! ```text
//! cargo run -p latchkey-redis --example fenced_write             # starts a private redis-server
//! LATCHKEY_REDIS_URL=redis://127.0.0.1:6380/ cargo run -p latchkey-redis --example fenced_write
//! ```

use std::time::Duration;

use latchkey::{Client, FencedWrite};

#[tokio::main]
async fn main() -> latchkey::Result<()> {
    // Use the given Redis, or start a private one for the example.
    let (url, _server) = match std::env::var("LATCHKEY_REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = latchkey_testkit::RedisServer::start();
            (server.url(), Some(server))
        }
    };
    let a = Client::connect(&url).await?;
    let b = Client::connect(&url).await?;
    let lock_a = a.lock("example:report", Duration::from_millis(200))?;
    let lock_b = b.lock("example:report", Duration::from_secs(5))?;
    let resource = a.fenced("example:report-output")?;

    let guard_a = lock_a.acquire().await?;
    // Issued while A holds the lock (one round trip, on the first call).
    let token_a = guard_a.fencing_token().await?;
    println!("A holds the lock with fencing token {token_a}");
    println!("A pauses (GC) for 500 ms, longer than its 200 ms TTL...");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let guard_b = lock_b.acquire().await?;
    let token_b = guard_b.fencing_token().await?;
    println!("B takes over with fencing token {token_b}");
    let written = b
        .fenced("example:report-output")?
        .write(token_b, "B's report")
        .await?;
    println!("B writes: {written:?}");

    println!("A wakes up, still thinking it holds the lock, and writes...");
    match resource.write(token_a, "A's stale report").await? {
        FencedWrite::Accepted => println!("A's write was accepted: this must not happen"),
        FencedWrite::Rejected { seen } => {
            println!("A's write is rejected: the resource has seen token {seen}")
        }
    }
    if let Some((value, token)) = resource.read().await? {
        println!(
            "the resource holds {:?} (token {token})",
            String::from_utf8_lossy(&value)
        );
    }
    let _ = guard_a.release().await?; // Expired or HeldByOther: A learns it was stale
    let _ = guard_b.release().await?;
    Ok(())
}
