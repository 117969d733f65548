//! The Lua bridge's conversions and error messages, as Redis 7.0 words
//! them (the expected texts were read from a real redis-server 7.0).

use latchkey_sim::{sha1_hex, Reply, Server};

fn eval(server: &mut Server, script: &str, keys: &[&str]) -> Reply {
    server.eval::<&str, &str>(script, keys, &[])
}

#[test]
fn replies_convert_as_redis_converts_them() {
    let mut s = Server::new(1_700_000_000_123_456);
    let r = eval(&mut s, "return {1, 2.9, -3.7, false, 'a', nil, 5}", &[]);
    assert_eq!(
        r,
        Reply::array(vec![
            Reply::Int(1),
            Reply::Int(2),
            Reply::Int(-3),
            Reply::nil(),
            Reply::bulk("a")
        ])
    );
    assert_eq!(
        eval(&mut s, "return redis.status_reply('FINE')", &[]),
        Reply::Status("FINE".into())
    );
    assert_eq!(
        eval(&mut s, "return redis.error_reply('foo bar')", &[]),
        Reply::error("foo bar")
    );
    assert_eq!(eval(&mut s, "return {err='x y'}", &[]), Reply::error("x y"));
    assert_eq!(
        eval(&mut s, "return redis.call('TIME')", &[]),
        Reply::array(vec![Reply::bulk("1700000000"), Reply::bulk("123456")])
    );
    assert_eq!(
        eval(
            &mut s,
            "redis.call('ZADD', 'z', 1.5, 'm') return redis.call('ZSCORE', 'z', 'm')",
            &[]
        ),
        Reply::bulk("1.5")
    );
}

#[test]
fn errors_are_worded_as_redis_words_them() {
    let mut s = Server::new(1_700_000_000_000_000);
    s.command(&["HSET", "h", "f", "v"]);
    let script = "return redis.call('GET', KEYS[1])";
    assert_eq!(
        eval(&mut s, script, &["h"]),
        Reply::error(format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:1.",
            sha1_hex(script.as_bytes())
        ))
    );
    assert_eq!(
        eval(
            &mut s,
            "local x = redis.pcall('GET', KEYS[1]); return x",
            &["h"]
        ),
        Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    let script = "\nreturn 1 < nil";
    assert_eq!(
        eval(&mut s, script, &[]),
        Reply::error(format!(
            "ERR user_script:2: attempt to compare number with nil script: {}, on @user_script:2.",
            sha1_hex(script.as_bytes())
        ))
    );
    let script = "return redis.call('NOPE')";
    assert_eq!(
        eval(&mut s, script, &[]),
        Reply::error(format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:1.",
            sha1_hex(script.as_bytes())
        ))
    );
    let script = "return nosuchglobal";
    assert!(
        matches!(eval(&mut s, script, &[]), Reply::Error(e) if e.contains("nonexistent global variable 'nosuchglobal'"))
    );
}

#[test]
fn writes_before_an_error_stay() {
    let mut s = Server::new(1_700_000_000_000_000);
    s.command(&["HSET", "h", "f", "v"]);
    let r = eval(
        &mut s,
        "redis.call('SET', 'k', 'v') return redis.call('GET', 'h')",
        &[],
    );
    assert!(r.is_error());
    assert_eq!(s.command(&["GET", "k"]), Reply::bulk("v"));
}

#[test]
fn keys_expire_by_the_simulated_clock() {
    let mut s = Server::new(1_700_000_000_000_000);
    s.command(&["SET", "k", "v", "PX", "100"]);
    s.advance_ms(100);
    assert_eq!(s.command(&["PTTL", "k"]), Reply::Int(0));
    s.advance_ms(1);
    assert_eq!(s.command(&["GET", "k"]), Reply::nil());
    assert_eq!(s.command(&["PTTL", "k"]), Reply::Int(-2));
}
