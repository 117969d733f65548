//! Tests of `Proxy` in front of a real redis-server.

use std::io;
use std::time::Duration;

use latchkey_testkit::{eventually, Proxy, ProxyMode, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{self, timeout, Instant};

const PONG: &[u8] = b"+PONG\r\n";

/// Reads exactly one `+PONG\r\n`.
async fn read_pong(conn: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; PONG.len()];
    conn.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn ping(conn: &mut TcpStream) -> Vec<u8> {
    conn.write_all(b"PING\r\n").await.unwrap();
    timeout(Duration::from_secs(5), read_pong(conn))
        .await
        .expect("no reply through the proxy")
        .unwrap()
}

/// Whether the peer closed the connection (EOF or reset) within 2 s.
async fn sees_close(conn: &mut TcpStream) -> bool {
    let mut buf = [0; 16];
    matches!(
        timeout(Duration::from_secs(2), conn.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn pass_forwards_and_counts_connections() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    assert_eq!(proxy.upstream(), redis.addr());
    assert_ne!(proxy.port(), redis.port());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));
    assert_eq!(proxy.connection_count(), 0);

    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(ping(&mut conn).await, PONG);
    assert_eq!(proxy.connection_count(), 1);

    drop(conn);
    eventually("the proxy counts the closed connection", || async {
        proxy.connection_count() == 0
    })
    .await;
}

#[tokio::test]
async fn delay_slows_each_direction_of_existing_connections() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(ping(&mut conn).await, PONG);

    let delay = Duration::from_millis(150);
    proxy.set_mode(ProxyMode::Delay(delay));
    assert_eq!(proxy.mode(), ProxyMode::Delay(delay));
    let started = Instant::now();
    assert_eq!(ping(&mut conn).await, PONG);
    let round_trip = started.elapsed();
    assert!(
        round_trip >= 2 * delay,
        "round trip took only {round_trip:?}"
    );
}

#[tokio::test]
async fn blackhole_holds_bytes_until_pass() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let mut before = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(ping(&mut before).await, PONG);

    proxy.set_mode(ProxyMode::Blackhole);
    // Connections are still accepted while blackholed.
    let mut during = TcpStream::connect(proxy.addr()).await.unwrap();
    for conn in [&mut before, &mut during] {
        conn.write_all(b"PING\r\n").await.unwrap();
        let held = timeout(Duration::from_millis(300), read_pong(conn)).await;
        assert!(held.is_err(), "a reply got through the blackhole");
    }
    assert_eq!(proxy.connection_count(), 2);

    proxy.set_mode(ProxyMode::Pass);
    for conn in [&mut before, &mut during] {
        let reply = timeout(Duration::from_secs(2), read_pong(conn)).await;
        assert_eq!(reply.expect("held PING never delivered").unwrap(), PONG);
    }
}

#[tokio::test]
async fn reset_connections_closes_open_ones_only() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(ping(&mut conn).await, PONG);

    proxy.reset_connections();
    assert_eq!(proxy.connection_count(), 0);
    assert!(
        sees_close(&mut conn).await,
        "client did not see its connection die"
    );

    let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(ping(&mut fresh).await, PONG);
}

#[tokio::test]
async fn dead_upstream_closes_client_connections() {
    let mut redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    redis.kill();
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    assert!(sees_close(&mut conn).await);
}

#[tokio::test]
async fn drop_closes_connections_and_stops_listening() {
    let redis = RedisServer::start();
    let proxy = Proxy::start(redis.addr()).await;
    let addr = proxy.addr();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ping(&mut conn).await, PONG);

    drop(proxy);
    assert!(sees_close(&mut conn).await);
    let mut refused = false;
    for _ in 0..100 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "dropped proxy still accepts connections");
}
