//! Real hosts over SSH: the transport, the check that comes before
//! anything is changed on a host, putting tunlab there, CPU probes, and
//! `--plan` and `--cleanup`.
//!
//! OpenSSH is the engine: `ssh` as the user runs it, so their keys, agent
//! and `~/.ssh/config` apply, and `--ssh-config FILE` hands it another
//! config with `-F`. Every command goes as one argument vector, each
//! argument quoted for the remote shell, with `BatchMode` (no password
//! prompt can hang a run) and a connect timeout.
//!
//! [`check`] asks a host, in one round trip, for its kernel, CPUs, the
//! interface that holds the underlay address it was given, and the tools
//! the lab runs there; it names what is missing with the command that
//! installs it. Nothing on the host is changed.

use crate::LabError;
use std::path::PathBuf;
use std::process::Command;

/// The prefix of everything the lab creates on a remote host: tenant
/// namespaces (`tlr-…`), links (`tlr…`) and the work folder
/// (`/tmp/tlr-…`), so that `tunlab bench --hosts … --cleanup` finds them
/// and nothing else.
pub const REMOTE_PREFIX: &str = "tlr";

/// How long `ssh` waits for a host to answer.
pub const CONNECT_TIMEOUT_S: u32 = 5;

/// One host reached over SSH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ssh {
    /// The destination as `ssh` takes it (`user@host`, or a `Host` of the
    /// config).
    pub dest: String,
    /// A config file for `ssh -F`.
    pub config: Option<PathBuf>,
}

/// `arg` quoted for a POSIX shell: as it is when it is plain, else in
/// single quotes (a single quote inside becomes `'\''`).
pub fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

impl Ssh {
    pub fn new(dest: &str, config: Option<PathBuf>) -> Ssh {
        Ssh {
            dest: dest.to_string(),
            config,
        }
    }

    /// The `ssh` command line that runs `args` on the host.
    pub fn command(&self, args: &[&str]) -> Vec<String> {
        let mut v = vec!["ssh".to_string()];
        if let Some(c) = &self.config {
            v.push("-F".into());
            v.push(c.display().to_string());
        }
        if let Some(dir) = shared_dir() {
            for o in [
                "ControlMaster=auto".to_string(),
                format!("ControlPath={}/%C", dir.display()),
                // A master whose run died without closing it goes by itself.
                "ControlPersist=10".to_string(),
            ] {
                v.push("-o".into());
                v.push(o);
            }
            note_shared(self);
        }
        for o in [
            "BatchMode=yes".to_string(),
            format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
            // A connection that stops answering ends the command (exit
            // 255) within about 6 s instead of hanging the run.
            "ServerAliveInterval=2".to_string(),
            "ServerAliveCountMax=3".to_string(),
        ] {
            v.push("-o".into());
            v.push(o);
        }
        v.push(self.dest.clone());
        v.push("--".into());
        v.push(args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "));
        v
    }

    /// Run `args` on the host to completion: its stdout, or an error that
    /// says whether SSH itself failed (exit 255) or the command did.
    pub fn run(&self, args: &[&str]) -> Result<String, LabError> {
        self.run_with_input(args, &[])
    }

    /// [`Ssh::run`] with `input` on the command's stdin. Under
    /// [`plan_only`] the command is printed instead, and answers "".
    pub fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<String, LabError> {
        if planning() {
            self.print_plan(args, input.len());
            return Ok(String::new());
        }
        self.query(args, input)
    }

    /// Print a command `--plan` would run here.
    pub fn print_plan(&self, args: &[&str], input: usize) {
        let cmd: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let cmd = cmd.join(" ");
        // Scripts are shown on one line.
        let cmd = cmd.replace('\n', "; ");
        if input > 0 {
            println!("{}: {cmd}  < {input} bytes", self.dest);
        } else {
            println!("{}: {cmd}", self.dest);
        }
    }

    /// Run a command that changes nothing (the check, CPU counters), even
    /// under [`plan_only`].
    pub fn query(&self, args: &[&str], input: &[u8]) -> Result<String, LabError> {
        use std::process::Stdio;
        let cmd = self.command(args);
        let spawned = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(if input.is_empty() {
                Stdio::null()
            } else {
                Stdio::piped()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = spawned
            .map_err(|e| LabError::Setup(format!("ssh: {e} (apt-get install openssh-client)")))?;
        let out = std::thread::scope(|sc| {
            if let Some(mut stdin) = child.stdin.take() {
                sc.spawn(move || {
                    let _ = std::io::Write::write_all(&mut stdin, input);
                });
            }
            child.wait_with_output()
        })
        .map_err(|e| LabError::Setup(format!("{}: ssh: {e}", self.dest)))?;
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            Some(255) => Err(LabError::Ssh {
                dest: self.dest.clone(),
                msg: err,
            }),
            code => Err(LabError::Setup(format!(
                "{}: {} exited with {}: {err}",
                self.dest,
                args.join(" "),
                code.map_or("a signal".into(), |c| c.to_string())
            ))),
        }
    }
}

/// Where the shared connections' sockets live, and the hosts that have
/// one, while a [`SharedConnections`] stands.
static SHARED: std::sync::Mutex<Option<(PathBuf, Vec<Ssh>)>> = std::sync::Mutex::new(None);

fn shared_dir() -> Option<PathBuf> {
    let g = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref().map(|(dir, _)| dir.clone())
}

fn note_shared(host: &Ssh) {
    let mut g = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, hosts)) = g.as_mut() {
        if !hosts.contains(host) {
            hosts.push(host.clone());
        }
    }
}

/// One SSH connection per host for as long as this stands (OpenSSH's
/// connection sharing, `ControlMaster`): a run sends a few commands per
/// sample to each host, and a new connection for each costs a key
/// exchange and a login on the very hosts whose CPU the sample measures
/// (in the lab's SSH test here, the run over SSH took 2.4 times as long
/// as the same run in namespaces). The first command to a host opens its
/// connection; dropping this closes them (`ssh -O exit`) and removes the
/// sockets' folder.
#[derive(Debug)]
pub struct SharedConnections(PathBuf);

/// Share one connection per host until the returned value is dropped.
/// Without a private folder for the sockets, every command connects anew.
pub fn share_connections() -> Option<SharedConnections> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("tunlab-ssh-{}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
    *SHARED.lock().unwrap_or_else(|e| e.into_inner()) = Some((dir.clone(), Vec::new()));
    Some(SharedConnections(dir))
}

impl Drop for SharedConnections {
    fn drop(&mut self) {
        let taken = SHARED.lock().unwrap_or_else(|e| e.into_inner()).take();
        for host in taken.map(|(_, hosts)| hosts).unwrap_or_default() {
            let mut c = Command::new("ssh");
            if let Some(cfg) = &host.config {
                c.arg("-F").arg(cfg);
            }
            let _ = c
                .arg("-o")
                .arg(format!("ControlPath={}/%C", self.0.display()))
                .args(["-O", "exit", &host.dest])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

static PLAN_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, commands that would change a host are printed, not run
/// (`tunlab bench --hosts … --plan`); what only reads (the check) still
/// runs.
pub fn plan_only() {
    PLAN_ONLY.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn planning() -> bool {
    PLAN_ONLY.load(std::sync::atomic::Ordering::SeqCst)
}

/// The tools the lab runs on a host, each with the Debian package that
/// brings it.
pub const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("iperf3", "iperf3"),
    ("ethtool", "ethtool"),
    ("ovs-vswitchd", "openvswitch-switch"),
    ("nft", "nftables"),
    ("ping", "iputils-ping"),
];

/// The tools every variant needs on a host (the rest only some).
/// (Request/response runs with `tunlab rr`, which goes over with tunlab.)
pub const NEEDED: &[&str] = &["ip", "iperf3", "ethtool"];

/// What [`check`] found on a host: its environment as results.json will
/// record it, and what is missing.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Preflight {
    pub dest: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: u32,
    /// The interface that holds the underlay address, and its facts:
    /// driver and firmware (`ethtool -i`), the offloads that are on
    /// (`ethtool -k`), MTU, the NUMA node of its device (-1: none).
    pub underlay_dev: String,
    pub driver: String,
    pub firmware: String,
    pub offloads_on: Vec<String>,
    pub mtu: u32,
    /// Its MAC address.
    #[serde(default)]
    pub mac: String,
    pub numa_node: i32,
    /// Tools not found, with what installs them.
    pub missing: Vec<(String, String)>,
    /// `tunlab --version` on the host; empty where it is not on the PATH
    /// (it would be copied).
    pub tunlab: String,
}

/// The shell script [`check`] runs: one line per fact, `key value`.
const CHECK_SCRIPT: &str = r#"echo "kernel $(uname -r)"
echo "cpus $(getconf _NPROCESSORS_ONLN)"
echo "cpu_model $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
ip -o addr show 2>/dev/null | while read -r _ dev fam addr _; do echo "addr $dev ${addr%/*}"; done
dev=$(ip -o addr show 2>/dev/null | awk -v a="UNDERLAY" '{split($4, p, "/"); if (p[1] == a) {print $2; exit}}')
dev=${dev%%@*}
if [ -n "$dev" ]; then
  echo "mtu $(cat /sys/class/net/$dev/mtu 2>/dev/null)"
  echo "mac $(cat /sys/class/net/$dev/address 2>/dev/null)"
  echo "numa $(cat /sys/class/net/$dev/device/numa_node 2>/dev/null || echo -1)"
  ethtool -i "$dev" 2>/dev/null | sed -n 's/^driver: /driver /p; s/^firmware-version: /firmware /p'
  ethtool -k "$dev" 2>/dev/null | sed -n 's/^\([a-z0-9_-]*\): on.*/offload \1/p'
fi
for t in TOOLS; do command -v "$t" >/dev/null 2>&1 || echo "missing $t"; done
[ -d /sys/module/vxlan ] || modinfo vxlan >/dev/null 2>&1 || echo "nokernel vxlan"
[ -c /dev/net/tun ] || echo "nokernel tun"
[ -d /sys/fs/bpf ] || echo "nokernel bpf"
command -v tunlab >/dev/null 2>&1 && echo "tunlab $(tunlab --version 2>/dev/null)"
true"#;

/// Ask `host` for its kernel, CPUs, tools and the interface holding
/// `underlay`, changing nothing; an error names the host and what is
/// wrong (unreachable, or the address on none of its interfaces).
pub fn check(host: &Ssh, underlay: &str) -> Result<Preflight, LabError> {
    let tools: Vec<&str> = TOOLS.iter().map(|(t, _)| *t).collect();
    // The address goes into the script: it must be one (the caller
    // checked; this keeps the script's quoting out of the question).
    let underlay: std::net::IpAddr = underlay
        .parse()
        .map_err(|_| LabError::Setup(format!("'{underlay}' is not an IP address")))?;
    let script = CHECK_SCRIPT
        .replace("TOOLS", &tools.join(" "))
        .replace("UNDERLAY", &underlay.to_string());
    let out = host.query(&["sh", "-c", &script], &[])?;
    parse_check(&host.dest, &underlay.to_string(), &out)
}

/// Read what the check script printed.
pub fn parse_check(dest: &str, underlay: &str, out: &str) -> Result<Preflight, LabError> {
    let mut p = Preflight {
        dest: dest.to_string(),
        numa_node: -1,
        ..Preflight::default()
    };
    let mut addrs = Vec::new();
    for line in out.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "kernel" => p.kernel = rest.trim().to_string(),
            "cpus" => p.cpus = rest.trim().parse().unwrap_or(0),
            "cpu_model" => p.cpu_model = rest.trim().to_string(),
            "mtu" => p.mtu = rest.trim().parse().unwrap_or(0),
            "mac" => p.mac = rest.trim().to_string(),
            "numa" => p.numa_node = rest.trim().parse().unwrap_or(-1),
            "driver" => p.driver = rest.trim().to_string(),
            "firmware" => p.firmware = rest.trim().to_string(),
            "offload" => p.offloads_on.push(rest.trim().to_string()),
            "addr" => {
                if let Some((dev, addr)) = rest.trim().split_once(' ') {
                    // `ip -o` writes a VLAN's or veth's peer as DEV@PEER.
                    let dev = dev.split('@').next().unwrap_or(dev);
                    addrs.push((dev.to_string(), addr.to_string()));
                }
            }
            "missing" => {
                let t = rest.trim();
                let pkg = TOOLS.iter().find(|(n, _)| *n == t).map_or(t, |(_, p)| *p);
                p.missing
                    .push((t.to_string(), format!("apt-get install {pkg}")));
            }
            "nokernel" => {
                let f = rest.trim();
                p.missing.push((
                    format!("kernel {f}"),
                    if f == "bpf" {
                        "mount -t bpf bpf /sys/fs/bpf (a kernel with CONFIG_BPF_SYSCALL)".into()
                    } else {
                        format!("a kernel with {f} (modprobe {f})")
                    },
                ));
            }
            "tunlab" => p.tunlab = rest.trim().to_string(),
            _ => {}
        }
    }
    match addrs.iter().find(|(_, a)| a == underlay) {
        Some((dev, _)) => p.underlay_dev = dev.clone(),
        None => {
            let have: Vec<String> = addrs
                .iter()
                .filter(|(d, _)| d != "lo")
                .map(|(d, a)| format!("{a} on {d}"))
                .collect();
            return Err(LabError::Setup(format!(
                "{dest}: the underlay address {underlay} is on none of its interfaces (it has {})",
                if have.is_empty() {
                    "none but loopback".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
    }
    Ok(p)
}

/// The preflight of every host, as a table (`ours`: this tunlab's
/// version, which a host's must be); missing tools with their install
/// commands under it.
pub fn table(hosts: &[Preflight], ours: &str) -> String {
    let mut s = format!(
        "{:<24} {:<22} {:>4}  {:<12} {:<10} {:>5} {:>4}  {}\n",
        "host", "kernel", "cpus", "underlay", "driver", "mtu", "numa", "tunlab"
    );
    for h in hosts {
        let tunlab = match h.tunlab.as_str() {
            "" => "not found (would be copied)".to_string(),
            v if v == ours => format!("{v} (this one's)"),
            v => format!("{v}, not {ours} (would be replaced)"),
        };
        s.push_str(&format!(
            "{:<24} {:<22} {:>4}  {:<12} {:<10} {:>5} {:>4}  {tunlab}\n",
            h.dest, h.kernel, h.cpus, h.underlay_dev, h.driver, h.mtu, h.numa_node
        ));
    }
    for h in hosts {
        for (tool, install) in &h.missing {
            s.push_str(&format!("{}: {tool} missing: {install}\n", h.dest));
        }
    }
    s
}

/// Two real hosts made ready for a run: checked, a work folder on each,
/// and the tunlab binary each runs (its own when it is this version, else
/// a copy of this one).
#[derive(Debug, Clone)]
pub struct Remote {
    pub ssh: [Ssh; 2],
    /// What the check found: each host's environment for results.json.
    pub found: [Preflight; 2],
    pub underlay: [String; 2],
    /// Underlay addresses for Open vSwitch's own endpoints (on a macvlan
    /// of each host's NIC), if given; without them its variants are
    /// skipped.
    pub ovs_underlay: Option<[String; 2]>,
    /// A tag unique to this run on the hosts: `tlr` and this process's id,
    /// the stem of every name made there.
    pub tag: String,
    /// The work folder on each host (`/tmp/TAG`).
    pub workdir: String,
    /// The tunlab each host runs.
    pub tunlab: [String; 2],
}

impl Remote {
    /// Check both hosts and, when nothing needed is missing, make the work
    /// folders and put tunlab in place. Nothing is changed on either host
    /// before both checks pass.
    pub fn prepare(
        hosts: [Ssh; 2],
        underlay: [String; 2],
        ovs_underlay: Option<[String; 2]>,
        local_tunlab: &std::path::Path,
    ) -> Result<Remote, LabError> {
        let mut found = Vec::new();
        for (h, u) in hosts.iter().zip(&underlay) {
            found.push(check(h, u)?);
        }
        let mut missing = Vec::new();
        for p in &found {
            for (tool, install) in &p.missing {
                if NEEDED.contains(&tool.as_str()) {
                    missing.push(format!("{}: {tool} not found: {install}", p.dest));
                }
            }
        }
        if !missing.is_empty() {
            return Err(LabError::Setup(format!(
                "{}; nothing was changed on either host",
                missing.join("; ")
            )));
        }
        let found: [Preflight; 2] = [found[0].clone(), found[1].clone()];
        let tag = run_tag();
        let workdir = format!("/tmp/{tag}");
        let tunlab = [
            provision(&hosts[0], &found[0], &workdir, local_tunlab)?,
            provision(&hosts[1], &found[1], &workdir, local_tunlab)?,
        ];
        Ok(Remote {
            ssh: hosts,
            found,
            underlay,
            ovs_underlay,
            tag,
            workdir,
            tunlab,
        })
    }

    /// Whether both hosts still answer; the first that does not, with
    /// SSH's words.
    pub fn lost(&self) -> Option<String> {
        self.ssh
            .iter()
            .find_map(|h| h.query(&["true"], &[]).err().map(|e| e.to_string()))
    }

    /// The work folders go (at the end of a run).
    pub fn finish(&self) {
        for h in &self.ssh {
            let _ = h.run(&["rm", "-rf", &self.workdir]);
        }
    }
}

/// The tag of this run's names on real hosts: [`REMOTE_PREFIX`]
/// and this process's id.
pub fn run_tag() -> String {
    format!("{}{}", REMOTE_PREFIX, std::process::id() % 100_000)
}

/// Make the work folder on `h` and put tunlab there unless the host has
/// this version (`found` by the check); the tunlab to run there.
pub fn provision(
    h: &Ssh,
    found: &Preflight,
    workdir: &str,
    local_tunlab: &std::path::Path,
) -> Result<String, LabError> {
    let ours = format!("tunlab {}", env!("CARGO_PKG_VERSION"));
    h.run(&["mkdir", "-p", "-m", "700", workdir])?;
    if found.tunlab == ours {
        return Ok("tunlab".into());
    }
    // Not there, or another version: this one goes over.
    let bin = std::fs::read(local_tunlab).map_err(|err| LabError::Io {
        path: local_tunlab.display().to_string(),
        err,
    })?;
    let path = format!("{workdir}/tunlab");
    let q = quote(&path);
    h.run_with_input(&["sh", "-c", &format!("cat > {q} && chmod 755 {q}")], &bin)?;
    let v = h.run(&[&path, "--version"])?;
    if v.trim() != ours && !planning() {
        return Err(LabError::Setup(format!(
            "{}: the tunlab copied to {path} says '{}', not '{ours}'",
            h.dest,
            v.trim()
        )));
    }
    Ok(path)
}

/// CPU counters of a host at one moment: `/proc/stat` and the datapath
/// processes' `/proc/PID/stat`, read in one round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMark {
    pub busy: u64,
    pub total: u64,
    pub procs: u64,
    pub cpus: usize,
}

/// The commands that print a host's CPU counters, `pids` being
/// processes there.
fn cpu_script(pids: &[u32]) -> String {
    let mut script = String::from("head -n 1 /proc/stat; getconf _NPROCESSORS_ONLN");
    for p in pids {
        script.push_str(&format!("; cat /proc/{p}/stat 2>/dev/null || echo gone"));
    }
    script
}

/// A host's CPU counters on demand over one standing SSH connection: a
/// reading costs one round trip on it, not a new connection, so the
/// counters are read within a millisecond or so of the tools' start and
/// end, as they are here (a new `ssh` each time took 100 ms and more on
/// each side of a sample, idle time that diluted the CPU % by a fifth).
#[derive(Debug)]
pub struct CpuProbe {
    dest: String,
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl CpuProbe {
    pub fn start(host: &Ssh, pids: &[u32]) -> Result<CpuProbe, LabError> {
        use std::process::Stdio;
        let script = format!(
            "while read -r _; do {{ {}; }}; echo .; done",
            cpu_script(pids)
        );
        let cmd = host.command(&["sh", "-c", &script]);
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::Setup(format!("ssh: {e}")))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(LabError::Setup("ssh: no pipes".into()));
        };
        Ok(CpuProbe {
            dest: host.dest.clone(),
            child,
            stdin,
            stdout: std::io::BufReader::new(stdout),
        })
    }

    /// The counters now.
    pub fn mark(&mut self) -> Result<CpuMark, LabError> {
        use std::io::{BufRead, Write};
        let lost = |why: String| LabError::Ssh {
            dest: self.dest.clone(),
            msg: format!("CPU probe: {why}"),
        };
        self.stdin
            .write_all(b"m\n")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| lost(e.to_string()))?;
        let mut text = String::new();
        loop {
            let mut line = String::new();
            match self.stdout.read_line(&mut line) {
                Ok(0) => return Err(lost("the connection ended".into())),
                Ok(_) if line.trim_end() == "." => break,
                Ok(_) => text.push_str(&line),
                Err(e) => return Err(lost(e.to_string())),
            }
        }
        parse_cpu_mark(&text).ok_or_else(|| lost(format!("unreadable counters: {text:.200}")))
    }

    pub fn dest(&self) -> &str {
        &self.dest
    }
}

impl Drop for CpuProbe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_cpu_mark(out: &str) -> Option<CpuMark> {
    let mut lines = out.lines();
    let stat = lines.next().filter(|l| l.starts_with("cpu "))?;
    let (busy, total) = tunlab_netio::cpu::busy_total(stat);
    let cpus = lines.next()?.trim().parse().ok()?;
    let procs = lines.map(tunlab_netio::cpu::pid_ticks).sum();
    Some(CpuMark {
        busy,
        total,
        procs,
        cpus,
    })
}

impl CpuMark {
    /// What the host used from `self` to `later`.
    pub fn usage(&self, later: &CpuMark) -> tunlab_netio::cpu::Usage {
        tunlab_netio::cpu::Usage::from_jiffies(
            later.busy.saturating_sub(self.busy),
            later.total.saturating_sub(self.total),
            later.procs.saturating_sub(self.procs),
            later.cpus,
        )
    }
}

/// The script `--cleanup` runs on a host: everything named with
/// [`REMOTE_PREFIX`] goes, and each removal is printed.
const CLEANUP_SCRIPT: &str = r#"for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^tlr'); do
  ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  ip netns del "$n" && echo "namespace $n"
done
for p in $(pgrep -f '/tmp/tl[r][0-9]'); do kill -TERM "$p" 2>/dev/null && echo "process $p"; done
sleep 1
for p in $(pgrep -f '/tmp/tl[r][0-9]'); do kill -KILL "$p" 2>/dev/null; done
for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^tlr'); do
  ip link del "$l" 2>/dev/null && echo "link $l"
done
for d in /tmp/tlr[0-9]*; do [ -e "$d" ] && rm -rf "$d" && echo "folder $d"; done
true"#;

/// Remove from `host` what killed runs left (namespaces, links, the
/// switches they started, work folders), all named by this lab; what went,
/// one line each.
pub fn cleanup(host: &Ssh) -> Result<Vec<String>, LabError> {
    Ok(host
        .query(&["sh", "-c", CLEANUP_SCRIPT], &[])?
        .lines()
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_reach_the_remote_shell_as_they_are() {
        assert_eq!(quote("ip"), "ip");
        assert_eq!(quote("10.0.0.1/24"), "10.0.0.1/24");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's $HOME; rm -rf /"), r"'it'\''s $HOME; rm -rf /'");
        // The remote shell gives back exactly what went in.
        for arg in ["plain", "two words", "it's", "$(x) `y` \\z", ""] {
            let out = Command::new("sh")
                .args(["-c", &format!("printf %s {}", quote(arg))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), arg);
        }
        let c = Ssh::new("root@h1", Some("/tmp/cfg".into())).command(&["ip", "addr", "show dev"]);
        assert_eq!(
            c,
            [
                "ssh",
                "-F",
                "/tmp/cfg",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=5",
                "-o",
                "ServerAliveInterval=2",
                "-o",
                "ServerAliveCountMax=3",
                "root@h1",
                "--",
                "ip addr 'show dev'"
            ]
        );
    }

    #[test]
    fn the_check_names_the_underlay_interface_or_what_is_there() {
        let out = "kernel 6.18.0\ncpus 2\ncpu_model AMD EPYC 7B13\naddr lo 127.0.0.1\naddr eth1@if5 10.0.0.1\naddr eth1@if5 fd00::1\nmtu 9000\nmac 0c:42:a1:00:00:01\nnuma 0\ndriver mlx5_core\nfirmware 16.35.2000 (MT_0000000080)\noffload tx-checksumming\noffload generic-receive-offload\nmissing nft\nnokernel vxlan\ntunlab tunlab 0.1.0\n";
        let p = parse_check("root@a", "10.0.0.1", out).unwrap();
        assert_eq!(
            (
                p.kernel.as_str(),
                p.cpus,
                p.underlay_dev.as_str(),
                p.tunlab.as_str()
            ),
            ("6.18.0", 2, "eth1", "tunlab 0.1.0")
        );
        assert_eq!(
            (p.cpu_model.as_str(), p.mtu, p.numa_node, p.driver.as_str()),
            ("AMD EPYC 7B13", 9000, 0, "mlx5_core")
        );
        assert_eq!(p.mac, "0c:42:a1:00:00:01");
        assert_eq!(p.firmware, "16.35.2000 (MT_0000000080)");
        assert_eq!(
            p.offloads_on,
            ["tx-checksumming", "generic-receive-offload"]
        );
        assert_eq!(
            p.missing,
            vec![
                ("nft".into(), "apt-get install nftables".into()),
                (
                    "kernel vxlan".into(),
                    "a kernel with vxlan (modprobe vxlan)".into()
                )
            ]
        );
        let e = parse_check("root@a", "10.0.0.9", out)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("root@a") && e.contains("10.0.0.9") && e.contains("10.0.0.1 on eth1"),
            "{e}"
        );
        let t = table(std::slice::from_ref(&p), "tunlab 0.1.0");
        assert!(t.contains("nft missing: apt-get install nftables"), "{t}");
        assert!(t.contains("tunlab 0.1.0 (this one's)"), "{t}");
        assert!(table(&[p], "tunlab 0.2.0").contains("not tunlab 0.2.0 (would be replaced)"));
    }
}
