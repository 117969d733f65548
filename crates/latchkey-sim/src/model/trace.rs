//! What a model step did, kept so that a violation can be shown as the
//! table of steps that led to it.

use crate::reply::Reply;

/// One step of a trace: who acted, what it sent and what came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The server's clock when the step ran, in ms since the model's start.
    pub at: i64,
    /// The client that acted; `None` for time, faults and the server.
    pub client: Option<usize>,
    /// The script's file name, the command's name, or the transition's
    /// (`tick`, `pause`, `restart`, …).
    pub script: String,
    /// The arguments sent, printable.
    pub args: Vec<String>,
    /// The reply, or what the client made of the step.
    pub reply: String,
}

impl Record {
    /// A step no client took (time, a fault, the server).
    pub fn world(at: i64, what: &str, detail: String) -> Record {
        Record {
            at,
            client: None,
            script: what.to_string(),
            args: Vec::new(),
            reply: detail,
        }
    }

    /// Client `client`'s step: what it sent and the reply it got, or
    /// (`lost`) the reply that never reached it.
    pub fn client(
        at: i64,
        client: usize,
        script: String,
        args: Vec<String>,
        reply: String,
        lost: bool,
    ) -> Record {
        Record {
            at,
            client: Some(client),
            script,
            args,
            reply: if lost {
                format!("{reply} (lost)")
            } else {
                reply
            },
        }
    }
}

/// A reply as one short line.
pub fn show_reply(reply: &Reply) -> String {
    match reply {
        Reply::Status(s) => format!("+{s}"),
        Reply::Error(e) => format!("(error) {e}"),
        Reply::Int(n) => n.to_string(),
        Reply::Bulk(None) => "nil".into(),
        Reply::Bulk(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
        Reply::Array(None) => "nil".into(),
        Reply::Array(Some(items)) => {
            let inner: Vec<String> = items.iter().map(show_reply).collect();
            format!("[{}]", inner.join(", "))
        }
    }
}

/// The steps as a table: step, time, client, script, arguments, reply.
pub fn table(steps: &[Record]) -> String {
    let mut out = format!(
        "{:>4} {:>5} {:>6}  {:<18} {:<44} {}\n",
        "step", "ms", "client", "script", "args", "reply"
    );
    for (i, r) in steps.iter().enumerate() {
        let client = r.client.map_or("-".to_string(), |c| format!("c{c}"));
        out.push_str(&format!(
            "{:>4} {:>5} {:>6}  {:<18} {:<44} {}\n",
            i + 1,
            r.at,
            client,
            r.script,
            r.args.join(" "),
            r.reply
        ));
    }
    out
}
