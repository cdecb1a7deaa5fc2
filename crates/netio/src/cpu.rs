//! CPU accounting for one measurement: the whole machine from
//! `/proc/stat` (the hosts are namespaces of one kernel, so softirq work of
//! a kernel datapath is counted here and nowhere else) and chosen
//! processes (the datapath daemons) from `/proc/PID/stat`.

use std::time::Instant;

/// Jiffies per second as `/proc` reports them (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// A snapshot to diff against.
#[derive(Debug, Clone)]
pub struct Snapshot {
    at: Instant,
    busy: u64,
    total: u64,
    procs: Vec<(u32, u64)>,
}

/// CPU used between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Busy share of the whole machine, in percent of all CPUs (100 = all
    /// CPUs busy).
    pub system_pct: f64,
    /// CPU seconds the whole machine was busy.
    pub system_busy_s: f64,
    /// The datapath processes' CPU, in percent of one CPU (as top shows it).
    pub datapath_pct: f64,
    pub cpus: usize,
}

fn proc_stat() -> (u64, u64) {
    busy_total(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// Busy and total jiffies of all CPUs from the text of `/proc/stat` (its
/// first line), of this machine or another's.
pub fn busy_total(stat: &str) -> (u64, u64) {
    let Some(line) = stat.lines().next() else {
        return (0, 0);
    };
    // cpu user nice system idle iowait irq softirq steal ...
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

fn proc_ticks(pid: u32) -> u64 {
    pid_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// User and system jiffies of a process from the text of its
/// `/proc/PID/stat` (0 when it is not one).
pub fn pid_ticks(s: &str) -> u64 {
    // The command name is in parentheses and may hold spaces: count fields
    // after the last ')'. utime and stime are fields 14 and 15.
    let Some(rest) = s.rfind(')').map(|i| &s[i + 1..]) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Usage {
    /// Usage from counters read elsewhere (another host's `/proc`):
    /// `d_busy` and `d_total` jiffies of all its `cpus` CPUs, `d_proc`
    /// jiffies of the processes counted. The interval is the host's own,
    /// `d_total / cpus` jiffies, so no clock is compared across hosts.
    pub fn from_jiffies(d_busy: u64, d_total: u64, d_proc: u64, cpus: usize) -> Usage {
        let total = d_total.max(1) as f64;
        let per_cpu = total / cpus.max(1) as f64;
        Usage {
            system_pct: 100.0 * d_busy as f64 / total,
            system_busy_s: d_busy as f64 / USER_HZ,
            datapath_pct: 100.0 * d_proc as f64 / per_cpu,
            cpus,
        }
    }
}

impl Snapshot {
    pub fn take(pids: &[u32]) -> Snapshot {
        let (busy, total) = proc_stat();
        Snapshot {
            at: Instant::now(),
            busy,
            total,
            procs: pids.iter().map(|&p| (p, proc_ticks(p))).collect(),
        }
    }

    /// Usage from `self` to now.
    pub fn usage(&self) -> Usage {
        let (busy, total) = proc_stat();
        let secs = self.at.elapsed().as_secs_f64().max(1e-6);
        let d_busy = busy.saturating_sub(self.busy) as f64;
        let d_total = total.saturating_sub(self.total).max(1) as f64;
        let proc_ticks_sum: u64 = self
            .procs
            .iter()
            .map(|&(p, t)| proc_ticks(p).saturating_sub(t))
            .sum();
        Usage {
            system_pct: 100.0 * d_busy / d_total,
            system_busy_s: d_busy / USER_HZ,
            datapath_pct: 100.0 * proc_ticks_sum as f64 / USER_HZ / secs,
            cpus: cpus(),
        }
    }
}

/// Run the calling thread on `cpu` only (a packet worker keeps its
/// caches and its sockets' receive CPU).
pub fn pin_current_thread(cpu: usize) -> nix::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    // Pid 0: the calling thread.
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_shows_in_its_figure() {
        // A child that spins (not this process: other tests run in it).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let s = Snapshot::take(&[child.id()]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let u = s.usage();
        let _ = child.kill();
        let _ = child.wait();
        // One spinning process: close to 100 % of one CPU (ticks are
        // 10 ms), less if the machine is busy.
        assert!(u.datapath_pct > 20.0 && u.datapath_pct < 150.0, "{u:?}");
        assert!(u.system_pct > 0.0 && u.system_pct <= 100.0, "{u:?}");
        assert!(u.system_busy_s > 0.1, "{u:?}");
    }
}
