//! A node's packet threads ("workers") and the one door to them.
//!
//! Each worker is a [`Node`] of its own, run to completion on its own
//! thread (pinned to a CPU when there are several): its share of every
//! TAP's queues (the kernel spreads a tenant's flows over them by hash),
//! its own socket in each underlay UDP port's `SO_REUSEPORT` group (the
//! kernel hands a datagram to the worker on the CPU that received it), its
//! own copy of the flow table with its own exact-match cache and MAC
//! table. Nothing is shared between workers while packets move: no lock,
//! no atomic on the packet path.
//!
//! The control side (`tunlab ctl`) reaches a worker by sending it a
//! closure over a channel and waking it through a socket pair in its poll
//! set; the worker runs the closure between two rounds of packets and
//! sends the answer back. Changes (flows, ports) go to every worker in
//! turn; counters are summed over them.

use crate::config::{Config, Port, PortKind};
use crate::dpif::netdev::open_tap;
use crate::dpif::provider::{Dpif, PortEnv, Sweeper, Upcalls};
use crate::node::Node;
use crate::port::StartError;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tunlab_dp::{FlowRule, Selector};
use tunlab_netio::tap::Tap;

/// Work for a worker, run between two rounds of packets.
type Cmd = Box<dyn FnOnce(&mut Node) + Send>;

/// How long the control side waits for a worker's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

struct Worker {
    cmds: mpsc::Sender<Cmd>,
    /// Writing a byte here wakes the worker from its poll.
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
}

/// A running node: its workers.
pub struct Switch {
    pub name: String,
    offloads: bool,
    underlay_mtu: u16,
    workers: Vec<Worker>,
    stop: Arc<AtomicBool>,
    /// The first error that stopped a worker.
    failed: Arc<Mutex<Option<String>>>,
    /// Expires idle flows of a caching datapath's cache.
    revalidator: Option<Revalidator>,
    /// OVS's flow-restore-wait (see `Node::restore_wait`).
    restore_wait: Arc<AtomicBool>,
    /// OpenFlow connections refused, by reason (`tls`: the handshake
    /// failed, e.g. no certificate the CA signed).
    pub(crate) openflow_refused: std::collections::BTreeMap<&'static str, u64>,
}

/// The revalidator's totals, for `tunlab ctl stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RevalidatorStats {
    pub sweeps: u64,
    pub idle_deleted: u64,
    pub stale_deleted: u64,
    /// Deleted, least recently used first, to keep room in the cache.
    pub evicted: u64,
    /// Entries the last sweep found, and how long it took.
    pub last_seen: u64,
    pub last_sweep: Duration,
}

/// A thread that sweeps the kernel's flow cache, as OVS's revalidator
/// threads dump and expire datapath flows: off the packet threads, at
/// half the idle limit (at most every second), resting at least four
/// times as long as a sweep took.
struct Revalidator {
    thread: Option<JoinHandle<()>>,
    stats: Arc<Mutex<RevalidatorStats>>,
}

/// The longest the revalidator waits between sweeps (it also credits the
/// rules with what the kernel's flows carried then).
const SWEEP_MAX: Duration = Duration::from_secs(1);

/// Worker 0's door, for the revalidator's counts.
struct Credit {
    cmds: mpsc::Sender<Cmd>,
    wake: UnixStream,
}

impl Revalidator {
    fn start(
        mut sweeper: Box<dyn Sweeper>,
        credit: Option<Credit>,
        max_idle: Duration,
        restore_wait: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
        failed: Arc<Mutex<Option<String>>>,
    ) -> std::io::Result<Revalidator> {
        let stats = Arc::new(Mutex::new(RevalidatorStats::default()));
        let totals = stats.clone();
        let every = (max_idle / 2).clamp(Duration::from_millis(50), SWEEP_MAX);
        let thread = std::thread::Builder::new()
            .name("revalidator".into())
            .spawn(move || {
                let mut next = Instant::now() + every;
                while !stop.load(Ordering::Relaxed) {
                    // Nothing expires while flows are being restored.
                    if Instant::now() < next || restore_wait.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20).min(every));
                        continue;
                    }
                    let t0 = Instant::now();
                    match sweeper.sweep(max_idle) {
                        Ok(s) => {
                            if let (Some(c), Some(counted)) = (&credit, sweeper.take_counted()) {
                                let cmd: Cmd =
                                    Box::new(move |n: &mut Node| n.ofproto.credit_cached(counted));
                                if c.cmds.send(cmd).is_ok() {
                                    // A full pipe means a wake-up is already waiting.
                                    let _ = (&c.wake).write(&[1]);
                                }
                            }
                            if let Ok(mut t) = totals.lock() {
                                t.sweeps += 1;
                                t.idle_deleted += s.idle;
                                t.stale_deleted += s.stale;
                                t.evicted += s.evicted;
                                t.last_seen = s.seen;
                                t.last_sweep = t0.elapsed();
                            }
                        }
                        Err(e) => {
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert_with(|| format!("revalidator: {e}"));
                            }
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    // A big cache takes a while to walk (a million
                    // entries, about 3 s here): the thread rests four
                    // times as long as it worked, so that it never takes
                    // more than a fifth of a CPU from the packet path.
                    next = Instant::now() + every.max(t0.elapsed() * 4);
                }
            })?;
        Ok(Revalidator {
            thread: Some(thread),
            stats,
        })
    }
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("name", &self.name)
            .field("workers", &self.workers.len())
            .finish()
    }
}

/// Why a request to the workers failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("worker {0} has stopped")]
    Stopped(usize),
    #[error("worker {0} did not answer within {ANSWER_WAIT:?}")]
    NoAnswer(usize),
}

/// Why a rule went (OpenFlow's flow_removed reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovedReason {
    IdleTimeout = 0,
    HardTimeout = 1,
    Delete = 2,
}

/// A rule that went, with its counters summed over the workers.
#[derive(Debug, Clone)]
pub struct Expired {
    pub flow: FlowRule,
    pub reason: RemovedReason,
    /// Nanoseconds it lived.
    pub age_ns: u64,
    pub packets: u64,
    pub bytes: u64,
}

impl Switch {
    /// Open every port for every worker, load the flows, start the threads.
    pub fn start(cfg: &Config) -> Result<Switch, StartError> {
        let n = cfg.workers.max(1) as usize;
        // A TAP's queues must all exist before it moves to its namespace,
        // so they are opened here for every worker.
        let mut taps: Vec<HashMap<String, Vec<Tap>>> = (0..n).map(|_| HashMap::new()).collect();
        let mut dpif = crate::dpif::ebpf::choose(cfg)?;
        if let Some(d) = dpif.as_mut() {
            let env = PortEnv {
                offloads: cfg.offloads,
                underlay_mtu: cfg.underlay_mtu,
                ports: &cfg.ports,
            };
            for p in &cfg.ports {
                if let Some(Upcalls::Devices(t)) = d.port_add(p, env)? {
                    taps[0].insert(p.name.clone(), t);
                }
            }
        }
        for p in &cfg.ports {
            if matches!(p.kind, PortKind::Tap { .. }) {
                let per = open_tap(p, cfg.offloads, cfg.underlay_mtu, &cfg.ports, n)?;
                for (i, q) in per.into_iter().enumerate() {
                    taps[i].insert(p.name.clone(), q);
                }
            }
        }
        // In order: the sockets of a reuse-port group are numbered as
        // they are bound, and worker i must hold number i.
        let mut nodes = Vec::with_capacity(n);
        for (i, t) in taps.iter_mut().enumerate() {
            nodes.push(Node::start_worker(cfg, i, n, t)?);
        }
        let sweeper = match &dpif {
            Some(d) => d.sweeper().map_err(|msg| StartError::Port {
                port: "-".into(),
                msg: format!("flow cache revalidator: {msg}"),
            })?,
            None => None,
        };
        let restore_wait = Arc::new(AtomicBool::new(cfg.flow_restore_wait && dpif.is_some()));
        set_datapath(&mut nodes, dpif, &restore_wait);
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(Mutex::new(None));
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let mut workers = Vec::with_capacity(n);
        for (i, node) in nodes.into_iter().enumerate() {
            let (ours, theirs) = UnixStream::pair().map_err(|e| StartError::Port {
                port: "-".into(),
                msg: format!("cannot make a wake-up socket pair: {e}"),
            })?;
            theirs
                .set_nonblocking(true)
                .and_then(|_| ours.set_nonblocking(true))
                .map_err(|e| StartError::Port {
                    port: "-".into(),
                    msg: format!("wake-up socket: {e}"),
                })?;
            let (tx, rx) = mpsc::channel::<Cmd>();
            let (stop2, failed2) = (stop.clone(), failed.clone());
            let cpu = (n > 1).then_some(i % cpus);
            let thread = std::thread::Builder::new()
                .name(format!("worker{i}"))
                .spawn(move || run(node, rx, theirs, stop2, failed2, cpu))
                .map_err(|e| StartError::Port {
                    port: "-".into(),
                    msg: format!("cannot start worker thread {i}: {e}"),
                })?;
            workers.push(Worker {
                cmds: tx,
                wake: ours,
                thread: Some(thread),
            });
        }
        // The revalidator hands what the kernel's cached flows carried to
        // worker 0, which credits the rules they came from.
        let credit = match workers
            .first()
            .map(|w| (w.cmds.clone(), w.wake.try_clone()))
        {
            Some((cmds, Ok(wake))) => Some(Credit { cmds, wake }),
            _ => None,
        };
        let revalidator = match sweeper {
            Some(s) => Some(
                Revalidator::start(
                    s,
                    credit,
                    cfg.max_idle,
                    restore_wait.clone(),
                    stop.clone(),
                    failed.clone(),
                )
                .map_err(|e| StartError::Port {
                    port: "-".into(),
                    msg: format!("cannot start the revalidator thread: {e}"),
                })?,
            ),
            None => None,
        };
        Ok(Switch {
            name: cfg.name.clone(),
            offloads: cfg.offloads,
            underlay_mtu: cfg.underlay_mtu,
            workers,
            stop,
            failed,
            revalidator,
            restore_wait,
            openflow_refused: Default::default(),
        })
    }

    /// Whether the switch still waits for its flows to be restored.
    pub fn restore_waiting(&self) -> bool {
        self.restore_wait.load(Ordering::Relaxed)
    }

    /// End flow-restore-wait: the rules loaded by now are the table, the
    /// caching datapath's flows are revalidated against them (one by one
    /// when adopted under the same mask), and misses are handled again.
    pub fn restore_done(&self) -> Result<(), WorkerError> {
        if !self.restore_wait.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        self.on(0, |n| n.revalidate())
    }

    /// Delete the rules whose idle or hard timeout has passed, on every
    /// worker (a rule is idle when no worker has seen a packet hit it for
    /// that long); what went, with its counters summed over the workers.
    pub fn expire_flows(&self) -> Result<Vec<Expired>, WorkerError> {
        type Timed = (FlowRule, u64, u64, u64, u64, u64);
        // Each worker's rules with a timeout: the rule, when added and
        // last used, its counters, and the worker's clock. (A walk in no
        // particular order: this runs every second, and sorting a big
        // table each time would hold up the packets.)
        let per: Vec<Vec<Timed>> = self.on_all(|n| {
            let now = n.ofproto.uptime_ns();
            n.ofproto
                .classifier
                .iter()
                .filter(|r| r.flow.idle_timeout != 0 || r.flow.hard_timeout != 0)
                .map(|r| (r.flow.clone(), r.added, r.used, r.packets, r.bytes, now))
                .collect()
        })?;
        let Some(first) = per.first() else {
            return Ok(Vec::new());
        };
        // A rule is the same on every worker where table, priority and
        // match are: its idle time is the least, its counters the sum.
        let id = |f: &FlowRule| (f.table, f.priority, f.m.value.w, f.m.mask.w);
        let mut over_workers: HashMap<_, (u64, u64, u64)> = HashMap::new();
        for (flow, _, used, p, b, wnow) in per.iter().flatten() {
            let e = over_workers.entry(id(flow)).or_insert((u64::MAX, 0, 0));
            e.0 = e.0.min(wnow.saturating_sub(*used));
            e.1 += p;
            e.2 += b;
        }
        let mut gone = Vec::new();
        for (flow, added, _, _, _, now) in first {
            let Some(&(idle_ns, packets, bytes)) = over_workers.get(&id(flow)) else {
                continue;
            };
            let age_ns = now.saturating_sub(*added);
            let secs = |s: u16| u64::from(s) * 1_000_000_000;
            // A kernel datapath's use is known only as of the
            // revalidator's last sweep: that much later, the rule is idle.
            let grace = if self.revalidator.is_some() {
                SWEEP_MAX.as_nanos() as u64
            } else {
                0
            };
            let reason = if flow.hard_timeout != 0 && age_ns >= secs(flow.hard_timeout) {
                RemovedReason::HardTimeout
            } else if flow.idle_timeout != 0 && idle_ns >= secs(flow.idle_timeout) + grace {
                RemovedReason::IdleTimeout
            } else {
                continue;
            };
            gone.push(Expired {
                flow: flow.clone(),
                reason,
                age_ns,
                packets,
                bytes,
            });
        }
        if !gone.is_empty() {
            let sels: Vec<Selector> = gone
                .iter()
                .map(|e| Selector {
                    table: Some(e.flow.table),
                    m: e.flow.m,
                    strict: Some(e.flow.priority),
                    cookie: None,
                })
                .collect();
            self.on_all(move |n| {
                for s in &sels {
                    n.ofproto.classifier.delete_where(s);
                }
                n.revalidate();
            })?;
        }
        Ok(gone)
    }

    /// The revalidator's totals, if this node's datapath has one.
    pub fn revalidator_stats(&self) -> Option<RevalidatorStats> {
        let r = self.revalidator.as_ref()?;
        r.stats.lock().ok().map(|s| *s)
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Run `f` on worker `i` between two rounds of packets; its answer.
    pub fn on<R: Send + 'static>(
        &self,
        i: usize,
        f: impl FnOnce(&mut Node) -> R + Send + 'static,
    ) -> Result<R, WorkerError> {
        let w = self.workers.get(i).ok_or(WorkerError::Stopped(i))?;
        let (tx, rx) = mpsc::channel();
        w.cmds
            .send(Box::new(move |n: &mut Node| {
                let _ = tx.send(f(n));
            }))
            .map_err(|_| WorkerError::Stopped(i))?;
        // A full pipe means a wake-up is already waiting.
        let _ = (&w.wake).write(&[1]);
        rx.recv_timeout(ANSWER_WAIT).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => WorkerError::NoAnswer(i),
            mpsc::RecvTimeoutError::Disconnected => WorkerError::Stopped(i),
        })
    }

    /// Run `f` on every worker in turn; their answers in worker order.
    pub fn on_all<R: Send + 'static>(
        &self,
        f: impl Fn(&mut Node) -> R + Send + Clone + 'static,
    ) -> Result<Vec<R>, WorkerError> {
        (0..self.workers.len())
            .map(|i| self.on(i, f.clone()))
            .collect()
    }

    /// Add a port to every worker while running (`tunlab ctl add-port`).
    /// All or nothing: if one worker cannot open its share, the workers
    /// that did remove it again.
    pub fn add_port(&self, p: &Port) -> Result<(), String> {
        let q = p.clone();
        let mut ports = self
            .on(0, move |n| {
                n.ofproto
                    .check_new_port(&q)
                    .map(|_| n.ofproto.port_cfgs().to_vec())
            })
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        ports.push(p.clone());
        // The kernel datapath runs with one worker, which holds it.
        let (q, offloads, mtu) = (p.clone(), self.offloads, self.underlay_mtu);
        let on_kernel = self
            .on(0, move |n| {
                n.add_datapath_port(&q, offloads, mtu)
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())??;
        if on_kernel {
            return Ok(());
        }
        if p.kind.needs_kernel() {
            return Err(format!(
                "port '{}': veth and system ports need the kernel datapath (switch.datapath = \"ebpf\")",
                p.name
            ));
        }
        let mut taps: Vec<Option<Vec<Tap>>> = if matches!(p.kind, PortKind::Tap { .. }) {
            open_tap(
                p,
                self.offloads,
                self.underlay_mtu,
                &ports,
                self.workers.len(),
            )
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(Some)
            .collect()
        } else {
            (0..self.workers.len()).map(|_| None).collect()
        };
        for (i, t) in taps.iter_mut().enumerate() {
            let (q, t) = (p.clone(), t.take());
            let r = self
                .on(i, move |n| n.add_port(&q, t).map_err(|e| e.to_string()))
                .map_err(|e| e.to_string())
                .and_then(|r| r);
            if let Err(e) = r {
                for j in 0..i {
                    let name = p.name.clone();
                    let _ = self.on(j, move |n| n.remove_port(&name));
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The error that stopped a worker, if one did.
    pub fn failed(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }

    /// Stop every worker and wait for them.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &mut self.workers {
            let _ = (&w.wake).write(&[1]);
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
        if let Some(t) = self.revalidator.as_mut().and_then(|r| r.thread.take()) {
            let _ = t.join();
        }
    }
}

/// Set on a worker's way out: if it is unwinding from a panic, the node
/// stops and says so instead of serving on without it.
struct OnPanic {
    stop: Arc<AtomicBool>,
    failed: Arc<Mutex<Option<String>>>,
    worker: usize,
}

impl Drop for OnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(mut f) = self.failed.lock() {
                f.get_or_insert_with(|| format!("worker {} stopped on a panic", self.worker));
            }
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// One worker's loop.
fn run(
    mut node: Node,
    cmds: mpsc::Receiver<Cmd>,
    wake: UnixStream,
    stop: Arc<AtomicBool>,
    failed: Arc<Mutex<Option<String>>>,
    cpu: Option<usize>,
) {
    let _on_panic = OnPanic {
        stop: stop.clone(),
        failed: failed.clone(),
        worker: node.worker(),
    };
    if let Some(c) = cpu {
        if let Err(e) = tunlab_netio::cpu::pin_current_thread(c) {
            crate::tl_log!(
                Warning,
                "worker_not_pinned",
                format!("tunlab switch: worker on CPU {c}: cannot pin: {e}");
                cpu = c
            );
        }
    }
    let spin = Duration::from_micros(node.netdev.spin_us);
    let mut last_work = Instant::now()
        .checked_sub(spin)
        .unwrap_or_else(Instant::now);
    let mut drain = [0u8; 64];
    let mut next_housekeeping = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next_housekeeping {
            node.housekeeping();
            next_housekeeping = Instant::now() + Duration::from_millis(500);
        }
        // Right after traffic, look again without sleeping for `spin_us`:
        // a reply that comes back within it is not kept waiting for a
        // wake-up.
        let timeout = if last_work.elapsed() < spin { 0 } else { 100 };
        match node.poll_once(timeout, Some(wake.as_fd())) {
            Ok((n, woken)) => {
                if n > 0 {
                    last_work = Instant::now();
                } else if timeout == 0 {
                    // Spinning: let anything else runnable on this CPU (a
                    // tenant) go first, so the spin only takes idle time.
                    std::thread::yield_now();
                }
                if woken {
                    while matches!((&wake).read(&mut drain), Ok(k) if k > 0) {}
                    while let Ok(cmd) = cmds.try_recv() {
                        node.credit_cached();
                        cmd(&mut node);
                    }
                }
            }
            Err(e) => {
                if let Ok(mut f) = failed.lock() {
                    f.get_or_insert_with(|| e.to_string());
                }
                stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Every worker over the node's datapath: the caching one (if any) under
/// worker 0's ofproto, flow-restore-wait shared, and the userspace flow
/// caches on only without a kernel datapath, whose misses must all reach
/// ofproto so that the kernel's cache learns the flow.
fn set_datapath(nodes: &mut [Node], dpif: Option<Box<dyn Dpif>>, restore_wait: &Arc<AtomicBool>) {
    for node in nodes.iter_mut() {
        node.ofproto.restore_wait = restore_wait.clone();
        node.netdev.cache_flows = dpif.is_none();
    }
    if let Some(node) = nodes.first_mut() {
        node.ofproto.dpif = dpif;
        node.revalidate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config, ctl};

    fn switch(workers: u16) -> Switch {
        let text = format!("[switch]\nname = \"t\"\nworkers = {workers}\n");
        let cfg = config::parse(&text, "t.toml").unwrap();
        Switch::start(&cfg).unwrap()
    }

    #[test]
    fn every_worker_answers_in_order() {
        let sw = switch(3);
        assert_eq!(sw.workers(), 3);
        assert_eq!(sw.on_all(|n| n.worker()).unwrap(), vec![0, 1, 2]);
        assert!(matches!(
            sw.on(7, |n| n.worker()),
            Err(WorkerError::Stopped(7))
        ));
        assert!(sw.failed().is_none());
        sw.stop();
    }

    #[test]
    fn dump_flows_counts_are_the_workers_sum() {
        let mut sw = switch(2);
        ctl::handle("add-flow priority=1 actions=drop", &mut sw).unwrap();
        // Worker 0 counts one 100-byte packet, worker 1 two of 50.
        for (w, packets, bytes) in [(0, 1, 100), (1, 2, 50)] {
            sw.on(w, move |n| {
                let key = tunlab_dp::FlowKey::default();
                let r = n.ofproto.classifier.lookup(0, &key).unwrap();
                for _ in 0..packets {
                    n.ofproto.classifier.hit(r, 1, bytes, 0);
                }
            })
            .unwrap();
        }
        let dump = ctl::handle("dump-flows", &mut sw).unwrap();
        assert!(dump.contains("n_packets=3, n_bytes=200,"), "{dump}");
        sw.stop();
    }

    #[test]
    fn a_worker_that_panics_stops_the_node_and_says_so() {
        let sw = switch(2);
        let r = sw.on(1, |_| -> () { panic!("test panic in a worker") });
        assert!(matches!(r, Err(WorkerError::Stopped(1))), "{r:?}");
        // The request's reply channel goes while the worker unwinds, a
        // moment before the worker records why it stopped.
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while sw.failed().is_none() && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sw.failed().as_deref(), Some("worker 1 stopped on a panic"));
        sw.stop();
    }

    #[test]
    fn control_requests_change_every_worker() {
        let mut sw = switch(2);
        let out = ctl::handle("add-flow in_port=1 actions=drop", &mut sw).unwrap();
        assert_eq!(out, "");
        assert_eq!(
            sw.on_all(|n| n.ofproto.classifier.len()).unwrap(),
            vec![1, 1]
        );
        let dump = ctl::handle("dump-flows", &mut sw).unwrap();
        assert!(
            dump.contains("n_packets=0") && dump.contains("in_port=1 actions=drop"),
            "{dump}"
        );
        let show = ctl::handle("show", &mut sw).unwrap();
        assert!(show.contains("workers: 2"), "{show}");
        ctl::handle("cycles on", &mut sw).unwrap();
        let cycles = ctl::handle("stats --cycles", &mut sw).unwrap();
        assert!(
            cycles.contains("worker 0: cycles: on") && cycles.contains("worker 1: cycles: on"),
            "{cycles}"
        );
        let e = ctl::handle("add-flow in_port=1 actions=bogus", &mut sw).unwrap_err();
        assert!(e.contains("bogus"), "{e}");
        assert_eq!(
            sw.on_all(|n| n.ofproto.classifier.len()).unwrap(),
            vec![1, 1],
            "a refused rule changes nothing"
        );
        let out = ctl::handle("del-flows", &mut sw).unwrap();
        assert_eq!(out, "deleted 1 rules\n");
        assert_eq!(
            sw.on_all(|n| n.ofproto.classifier.len()).unwrap(),
            vec![0, 0]
        );
        let e = ctl::handle("del-port nothing", &mut sw).unwrap_err();
        assert!(e.contains("no port named 'nothing'"), "{e}");
        // A userspace node's datapath is its workers' flow caches: empty
        // before any packet, and flushed on request.
        for req in ["dump-flows --datapath", "del-flows --datapath"] {
            assert_eq!(ctl::handle(req, &mut sw).unwrap(), "", "{req}");
        }
        sw.stop();
    }
}
