//! The switch's log: one line per event on stderr, as journald keeps
//! them. Each line is the message for people, then `event=NAME` and the
//! event's fields as `key=value`; under systemd (`JOURNAL_STREAM` set)
//! it starts with the syslog priority, `<3>` to `<7>`, which journald
//! reads as the line's level (`journalctl -p warning`). `[switch]
//! log_level` ("error", "warning", "info", "debug"; default "info") drops
//! what is below it.
//!
//! An event may come again and again (a revalidation failing at each rule
//! change, an MTU flapping): each event name gets at most
//! [`BURST`] lines per [`WINDOW`]; the next line after a window in which
//! some were dropped says how many (`suppressed=N`), as OVS's rate-limited
//! VLOG does. Nothing the datapath does per packet is logged: packets are
//! counted (`tunlab ctl stats`, metrics).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines one event may write per window.
pub const BURST: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(5);

/// A line's level, by its syslog priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 3,
    Warning = 4,
    Info = 6,
    Debug = 7,
}

impl Level {
    /// The configuration's spelling.
    pub fn parse(s: &str) -> Result<Level, String> {
        match s {
            "error" => Ok(Level::Error),
            "warning" | "warn" => Ok(Level::Warning),
            "info" => Ok(Level::Info),
            "debug" => Ok(Level::Debug),
            _ => Err(format!(
                "\"{s}\" is not a log level (\"error\", \"warning\", \"info\", \"debug\")"
            )),
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Lines below `level` are dropped from now on.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Each event's current window: when it began, lines written, dropped.
struct Window {
    began: Instant,
    written: u32,
    dropped: u64,
}

static WINDOWS: Mutex<Option<HashMap<&'static str, Window>>> = Mutex::new(None);

/// Whether a line of `event` may be written now, and how many of its
/// lines the last full window dropped (to say so on this one).
fn admit(event: &'static str, now: Instant) -> Option<u64> {
    let mut guard = WINDOWS.lock().unwrap_or_else(|p| p.into_inner());
    let windows = guard.get_or_insert_with(HashMap::new);
    let w = windows.entry(event).or_insert(Window {
        began: now,
        written: 0,
        dropped: 0,
    });
    let mut said = 0;
    if now.duration_since(w.began) >= WINDOW {
        said = std::mem::take(&mut w.dropped);
        w.began = now;
        w.written = 0;
    }
    if w.written >= BURST {
        w.dropped += 1;
        return None;
    }
    w.written += 1;
    Some(said)
}

/// The line as written: priority prefix (under journald), message, then
/// the event and its fields.
fn line(
    level: Level,
    journal: bool,
    msg: &str,
    event: &str,
    fields: &[(&str, &dyn std::fmt::Display)],
    suppressed: u64,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if journal {
        let _ = write!(s, "<{}>", level as u8);
    }
    let _ = write!(s, "{msg} event={event}");
    for (k, v) in fields {
        let v = v.to_string();
        if v.is_empty() || v.contains([' ', '"', '=']) {
            let _ = write!(s, " {k}={v:?}");
        } else {
            let _ = write!(s, " {k}={v}");
        }
    }
    if suppressed > 0 {
        let _ = write!(s, " suppressed={suppressed}");
    }
    // One event, one line.
    s.replace('\n', " ")
}

/// Log `msg` as `event` with `fields`, at `level`.
pub fn log(
    level: Level,
    event: &'static str,
    msg: &str,
    fields: &[(&str, &dyn std::fmt::Display)],
) {
    if level as u8 > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let Some(suppressed) = admit(event, Instant::now()) else {
        return;
    };
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    eprintln!("{}", line(level, journal, msg, event, fields, suppressed));
}

/// `tl_log!(Info, "event_name", message; key = value, ...)`: the message
/// any expression that gives a `&str` or `String` (`format!(...)`).
#[macro_export]
macro_rules! tl_log {
    ($level:ident, $event:literal, $msg:expr $(; $($k:ident = $v:expr),* $(,)?)?) => {
        $crate::log::log(
            $crate::log::Level::$level,
            $event,
            ::std::convert::AsRef::<str>::as_ref(&$msg),
            &[$($((stringify!($k), &$v as &dyn ::std::fmt::Display)),*)?],
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_the_message_then_the_event_and_its_fields() {
        let node = "demo";
        let dir = "/sys/fs/bpf/tunlab/netns 3";
        let l = line(
            Level::Warning,
            true,
            "adopting",
            "pins_adopted",
            &[("node", &node), ("dir", &dir)],
            0,
        );
        assert_eq!(
            l,
            "<4>adopting event=pins_adopted node=demo dir=\"/sys/fs/bpf/tunlab/netns 3\""
        );
        let l = line(Level::Info, false, "two\nlines", "x", &[], 3);
        assert_eq!(l, "two lines event=x suppressed=3");
    }

    #[test]
    fn an_event_that_floods_is_cut_to_a_burst_a_window_and_says_how_many_went() {
        let t0 = Instant::now();
        let written = (0..100)
            .filter(|_| admit("test_flood", t0).is_some())
            .count();
        assert_eq!(written, BURST as usize);
        // Another event is not held back by this one.
        assert_eq!(admit("test_other", t0), Some(0));
        // The next window's first line says what the last one dropped.
        assert_eq!(admit("test_flood", t0 + WINDOW), Some(90));
        assert_eq!(admit("test_flood", t0 + WINDOW), Some(0));
    }

    #[test]
    fn levels_parse_as_the_configuration_spells_them() {
        assert_eq!(Level::parse("warning"), Ok(Level::Warning));
        assert!(Level::parse("loud")
            .unwrap_err()
            .contains("\"loud\" is not a log level"));
        assert!(Level::Debug > Level::Info);
    }
}
