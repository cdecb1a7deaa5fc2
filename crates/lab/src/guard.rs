//! The noise guard: around every sample, what else the machine did. From
//! `/proc/stat` the steal time (a VM's CPUs taken by the hypervisor) and
//! each CPU's busy share; from every `/proc/PID/stat` the CPU of the
//! processes that are not the lab's (not in one of its namespaces, not the
//! bench or a child of it, not a kernel thread), with the busiest named.
//! A sample taken while the outside used more than a set share of the
//! machine, or steal did, is marked: the lab retakes it and the report
//! names it.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;

/// Marked samples in a row after which noise counts as lasting.
pub const PERSISTENT: usize = 4;

/// Above these shares of the machine's CPU time a sample is marked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU of processes outside the lab, % of all CPUs.
    pub outside_pct: f64,
    /// Steal, % of all CPUs' time.
    pub steal_pct: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            outside_pct: 5.0,
            steal_pct: 5.0,
        }
    }
}

/// A process outside the lab that used CPU during a sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Busy {
    pub pid: u32,
    pub comm: String,
    /// % of one CPU (as `top` shows it).
    pub cpu_pct: f64,
}

/// What else the machine did during one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// Steal time, % of all CPUs' time.
    pub steal_pct: f64,
    /// CPU of processes outside the lab, % of all CPUs.
    pub outside_pct: f64,
    /// CPU of kernel threads (softirq work, kworkers), % of all CPUs:
    /// much of it is the lab's own traffic, so it is shown, not judged.
    pub kernel_threads_pct: f64,
    /// The busiest outside processes, busiest first (at most three).
    pub top: Vec<Busy>,
    /// Idle share of the machine between the previous sample's end and
    /// this one's start (%; none before the first sample).
    #[serde(default)]
    pub idle_before_pct: Option<f64>,
    /// Each CPU's busy share over the sample (%).
    pub per_cpu_busy_pct: Vec<f64>,
    /// Why the sample is marked, if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marked: Option<String>,
}

/// `/proc/stat`'s counters: per CPU (busy, total, steal) in ticks.
#[derive(Debug, Clone, Default, PartialEq)]
struct CpuTicks {
    per_cpu: Vec<[u64; 4]>,
}

/// Index into a [`CpuTicks`] entry.
const BUSY: usize = 0;
const TOTAL: usize = 1;
const STEAL: usize = 2;
const IDLE: usize = 3;

fn parse_stat(text: &str) -> CpuTicks {
    let mut per_cpu = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let Some(name) = f.next() else { continue };
        if !(name.starts_with("cpu") && name.len() > 3) {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is
        // inside user already).
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        let total: u64 = v.iter().sum();
        let idle = v[3] + v[4];
        let steal = v[7];
        per_cpu.push([total - idle - steal, total, steal, idle]);
    }
    CpuTicks { per_cpu }
}

/// Whose a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Lab,
    Kernel,
    Outside,
}

/// One process's counters.
#[derive(Debug, Clone, PartialEq)]
struct Proc {
    comm: String,
    ppid: u32,
    /// utime + stime, ticks.
    ticks: u64,
    /// Start time, ticks after boot: a pid reused in between is another
    /// process.
    start: u64,
    kthread: bool,
    netns: Option<u64>,
}

/// Parse `/proc/PID/stat` (the command may hold spaces and parentheses:
/// it ends at the last ')').
fn parse_proc(text: &str) -> Option<Proc> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the command: state(0) ppid(1) ... flags(6) ... utime(11)
    // stime(12) ... starttime(19).
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    const PF_KTHREAD: u64 = 0x0020_0000;
    Some(Proc {
        comm,
        ppid: num(1)? as u32,
        ticks: num(11)? + num(12)?,
        start: num(19)?,
        kthread: num(6)? & PF_KTHREAD != 0,
        netns: None,
    })
}

/// A reading of the whole machine.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    cpu: CpuTicks,
    procs: HashMap<u32, Proc>,
}

fn netns_of(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

impl Reading {
    /// Read `/proc` now.
    pub fn take() -> Reading {
        let cpu = parse_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default());
        let mut procs = HashMap::new();
        if let Ok(dir) = std::fs::read_dir("/proc") {
            for e in dir.flatten() {
                let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                if let Some(mut p) = parse_proc(&text) {
                    if !p.kthread {
                        p.netns = netns_of(pid);
                    }
                    procs.insert(pid, p);
                }
            }
        }
        Reading { cpu, procs }
    }
}

/// Watches the machine on the lab's behalf: knows which namespaces and
/// processes are the lab's.
#[derive(Debug, Clone)]
pub struct Guard {
    lab_netns: HashSet<u64>,
    me: u32,
    pub limits: Limits,
    last: Option<Reading>,
    /// Samples marked in a row, up to the last one.
    streak: usize,
}

impl Guard {
    /// A guard for this process and its children; the lab's namespaces
    /// are added with [`Guard::add_netns`] as the bed makes them.
    pub fn new(limits: Limits) -> Guard {
        Guard {
            lab_netns: HashSet::new(),
            me: std::process::id(),
            limits,
            last: None,
            streak: 0,
        }
    }

    /// Count the processes of namespace `name` (under /run/netns) as the
    /// lab's.
    pub fn add_netns(&mut self, name: &str) {
        if let Ok(m) = std::fs::metadata(format!("/run/netns/{name}")) {
            self.lab_netns.insert(m.ino());
        }
    }

    fn owner(&self, pid: u32, procs: &HashMap<u32, Proc>) -> Owner {
        let Some(p) = procs.get(&pid) else {
            return Owner::Outside;
        };
        if p.kthread {
            return Owner::Kernel;
        }
        if p.netns.is_some_and(|n| self.lab_netns.contains(&n)) {
            return Owner::Lab;
        }
        // The bench, or one of its descendants (the parent chain is short;
        // the bound guards against a cycle from pids reused mid-read).
        let mut at = pid;
        for _ in 0..64 {
            if at == self.me {
                return Owner::Lab;
            }
            match procs.get(&at) {
                Some(q) if q.ppid != 0 => at = q.ppid,
                _ => break,
            }
        }
        Owner::Outside
    }

    /// A reading at a sample's start, and the idle share since the last
    /// one (the time between samples).
    pub fn start(&mut self) -> (Reading, Option<f64>) {
        let now = Reading::take();
        let idle = self.last.as_ref().map(|l| idle_pct(&l.cpu, &now.cpu));
        (now, idle)
    }

    /// What else ran between `before` (a sample's start) and now.
    pub fn finish(&mut self, before: &Reading, idle_before_pct: Option<f64>) -> Noise {
        let after = Reading::take();
        let n = self.judge(before, &after, idle_before_pct);
        self.last = Some(after);
        self.note(&n);
        n
    }

    fn note(&mut self, n: &Noise) {
        self.streak = if n.marked.is_some() {
            self.streak + 1
        } else {
            0
        };
    }

    /// Whether the noise has lasted over [`PERSISTENT`] samples in a row:
    /// then it is the machine's state for now, and taking a sample again
    /// would only meet it again.
    pub fn persistent(&self) -> bool {
        self.streak > PERSISTENT
    }

    fn judge(&self, before: &Reading, after: &Reading, idle_before_pct: Option<f64>) -> Noise {
        let (mut total, mut steal) = (0u64, 0u64);
        let mut per_cpu_busy_pct = Vec::new();
        for (a, b) in before.cpu.per_cpu.iter().zip(&after.cpu.per_cpu) {
            let t = b[TOTAL].saturating_sub(a[TOTAL]);
            total += t;
            steal += b[STEAL].saturating_sub(a[STEAL]);
            per_cpu_busy_pct.push(pct(b[BUSY].saturating_sub(a[BUSY]), t));
        }
        let ncpu = after.cpu.per_cpu.len().max(1) as u64;
        // Ticks of one CPU over the sample.
        let one = total / ncpu;
        let (mut outside, mut kernel) = (0u64, 0u64);
        let mut top = Vec::new();
        for (pid, p) in &after.procs {
            let Some(q) = before.procs.get(pid).filter(|q| q.start == p.start) else {
                continue;
            };
            let used = p.ticks.saturating_sub(q.ticks);
            if used == 0 {
                continue;
            }
            match self.owner(*pid, &after.procs) {
                Owner::Lab => {}
                Owner::Kernel => kernel += used,
                Owner::Outside => {
                    outside += used;
                    top.push(Busy {
                        pid: *pid,
                        comm: p.comm.clone(),
                        cpu_pct: pct(used, one),
                    });
                }
            }
        }
        top.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        top.truncate(3);
        let mut noise = Noise {
            steal_pct: pct(steal, total),
            outside_pct: pct(outside, total),
            kernel_threads_pct: pct(kernel, total),
            top,
            idle_before_pct,
            per_cpu_busy_pct,
            marked: None,
        };
        noise.marked = self.limits.judge(&noise);
        noise
    }
}

impl Limits {
    /// Why `n` marks its sample, if it does.
    pub fn judge(&self, n: &Noise) -> Option<String> {
        let mut why = Vec::new();
        if n.outside_pct > self.outside_pct {
            let names: Vec<String> = n
                .top
                .iter()
                .map(|b| format!("{} (pid {}) {:.0}% of a CPU", b.comm, b.pid, b.cpu_pct))
                .collect();
            why.push(format!(
                "processes outside the lab used {:.1}% of the machine (limit {}%): {}",
                n.outside_pct,
                self.outside_pct,
                names.join(", ")
            ));
        }
        if n.steal_pct > self.steal_pct {
            why.push(format!(
                "steal {:.1}% (limit {}%)",
                n.steal_pct, self.steal_pct
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn idle_pct(a: &CpuTicks, b: &CpuTicks) -> f64 {
    let (mut idle, mut total) = (0u64, 0u64);
    for (x, y) in a.per_cpu.iter().zip(&b.per_cpu) {
        idle += y[IDLE].saturating_sub(x[IDLE]);
        total += y[TOTAL].saturating_sub(x[TOTAL]);
    }
    pct(idle, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_are_read_with_odd_commands() {
        let line = "4242 (tmux: server (x)) S 1 4242 4242 0 -1 4194560 500 0 0 0 150 50 0 0 20 0 1 0 9000 1000 200 18446744073709551615";
        let p = parse_proc(line).unwrap();
        assert_eq!(p.comm, "tmux: server (x)");
        assert_eq!((p.ppid, p.ticks, p.start, p.kthread), (1, 200, 9000, false));
        let k = "12 (ksoftirqd/0) S 2 0 0 0 -1 69238880 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0 0";
        assert!(parse_proc(k).unwrap().kthread);
        assert_eq!(parse_proc("garbage"), None);
    }

    #[test]
    fn proc_stat_cpus_are_read_per_cpu() {
        let t = "cpu  10 0 10 70 0 0 0 10 0 0\ncpu0 5 0 5 35 0 0 0 5 0 0\ncpu1 5 0 5 35 0 0 0 5 0 0\nintr 1\n";
        let c = parse_stat(t);
        assert_eq!(c.per_cpu.len(), 2);
        assert_eq!(c.per_cpu[0], [10, 50, 5, 35]);
    }

    fn proc(comm: &str, ppid: u32, ticks: u64, netns: Option<u64>, kthread: bool) -> Proc {
        Proc {
            comm: comm.into(),
            ppid,
            ticks,
            start: 1,
            kthread,
            netns,
        }
    }

    fn reading(cpu: [[u64; 4]; 2], procs: Vec<(u32, Proc)>) -> Reading {
        Reading {
            cpu: CpuTicks {
                per_cpu: cpu.to_vec(),
            },
            procs: procs.into_iter().collect(),
        }
    }

    #[test]
    fn a_hog_outside_the_lab_marks_the_sample_and_is_named() {
        let mut g = Guard::new(Limits::default());
        g.me = 100;
        g.lab_netns.insert(7);
        // 2 CPUs, 200 ticks each over the sample; a hog takes one CPU
        // (200 ticks), an iperf3 in a lab namespace and a child of the
        // bench take more, a kernel thread some: only the hog counts.
        let before = reading(
            [[0, 0, 0, 0], [0, 0, 0, 0]],
            vec![
                (100, proc("tunlab", 1, 0, Some(1), false)),
                (101, proc("ip", 100, 0, Some(1), false)),
                (200, proc("iperf3", 1, 0, Some(7), false)),
                (300, proc("stress-ng", 1, 0, Some(1), false)),
                (400, proc("ksoftirqd/0", 2, 0, None, true)),
                (500, proc("sshd", 1, 0, Some(1), false)),
            ],
        );
        let after = reading(
            [[200, 200, 0, 0], [190, 200, 0, 10]],
            vec![
                (100, proc("tunlab", 1, 20, Some(1), false)),
                (101, proc("ip", 100, 30, Some(1), false)),
                (200, proc("iperf3", 1, 90, Some(7), false)),
                (300, proc("stress-ng", 1, 200, Some(1), false)),
                (400, proc("ksoftirqd/0", 2, 40, None, true)),
                (500, proc("sshd", 1, 2, Some(1), false)),
            ],
        );
        let n = g.judge(&before, &after, Some(80.0));
        assert!((n.outside_pct - 50.5).abs() < 1e-9, "{n:?}");
        assert!((n.kernel_threads_pct - 10.0).abs() < 1e-9, "{n:?}");
        assert_eq!(n.top[0].comm, "stress-ng");
        assert!((n.top[0].cpu_pct - 100.0).abs() < 1e-9);
        assert_eq!(n.top[1].comm, "sshd");
        assert_eq!(n.per_cpu_busy_pct, vec![100.0, 95.0]);
        let why = n.marked.unwrap();
        assert!(
            why.contains("50.5% of the machine")
                && why.contains("stress-ng (pid 300) 100% of a CPU"),
            "{why}"
        );
        // Quiet: only the lab and the kernel busy.
        let quiet: Vec<(u32, Proc)> = after
            .procs
            .iter()
            .filter(|(p, _)| **p != 300 && **p != 500)
            .map(|(p, x)| (*p, x.clone()))
            .collect();
        let after = reading([[200, 200, 0, 0], [190, 200, 0, 10]], quiet);
        let n = g.judge(&before, &after, Some(80.0));
        assert_eq!((n.outside_pct, n.marked.clone()), (0.0, None), "{n:?}");
    }

    #[test]
    fn noise_that_lasts_is_told_from_noise_that_passes() {
        let mut g = Guard::new(Limits::default());
        let before = reading([[0; 4], [0; 4]], vec![]);
        let noisy = g.judge(
            &before,
            &reading([[80, 100, 20, 0], [100, 100, 0, 0]], vec![]),
            None,
        );
        let quiet = g.judge(
            &before,
            &reading([[100, 100, 0, 0], [100, 100, 0, 0]], vec![]),
            None,
        );
        for _ in 0..PERSISTENT {
            g.note(&noisy);
            assert!(!g.persistent());
        }
        g.note(&noisy);
        assert!(g.persistent());
        g.note(&quiet);
        assert!(!g.persistent());
    }

    #[test]
    fn steal_marks_a_sample() {
        let g = Guard::new(Limits::default());
        let before = reading([[0; 4], [0; 4]], vec![]);
        let after = reading([[80, 100, 20, 0], [100, 100, 0, 0]], vec![]);
        let n = g.judge(&before, &after, None);
        assert!((n.steal_pct - 10.0).abs() < 1e-9);
        assert!(n.marked.unwrap().starts_with("steal 10.0%"));
    }

    #[test]
    fn this_machine_reads() {
        let mut g = Guard::new(Limits::default());
        let (r, _) = g.start();
        assert!(!r.cpu.per_cpu.is_empty());
        assert!(r.procs.contains_key(&std::process::id()));
        let n = g.finish(&r, None);
        assert_eq!(n.per_cpu_busy_pct.len(), r.cpu.per_cpu.len());
    }
}
