//! `systemctl reload` (SIGHUP): the configuration file is read again and
//! what can change while the switch runs is applied, as `ovs-vsctl`
//! changes a running bridge: ports added, removed or changed (a changed
//! port is removed and added again), the file's rules added, replaced or
//! deleted, and the log level. Rules added at run time (`tunlab ctl
//! add-flow`, OpenFlow) are left alone: a reload only takes back the
//! rules an earlier version of the file brought.
//!
//! Everything else (the datapath, workers, underlay MTU, controllers,
//! TLS, metrics, pinning, the TLV map, ...) is fixed for the life of the
//! process: a reload that changes it says which settings wait for a
//! restart, and keeps the running ones. A file that does not parse
//! changes nothing.

use crate::config::Config;
use crate::workers::Switch;
use tunlab_dp::classifier::Selector;

/// What a reload did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    pub ports_added: Vec<String>,
    pub ports_removed: Vec<String>,
    /// Ports removed and added again with their new settings.
    pub ports_changed: Vec<String>,
    pub flows_added: usize,
    pub flows_deleted: usize,
    /// Settings that differ in the file and wait for a restart.
    pub need_restart: Vec<&'static str>,
    /// What could not be applied (a port the switch refused), each with
    /// why; the rest was applied.
    pub failed: Vec<String>,
}

impl Reloaded {
    /// One line for the log.
    pub fn summary(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(" ")
            }
        };
        let mut s = format!(
            "ports added: {}; removed: {}; changed: {}; the file's rules: {} added or replaced, {} deleted",
            list(&self.ports_added),
            list(&self.ports_removed),
            list(&self.ports_changed),
            self.flows_added,
            self.flows_deleted
        );
        if !self.need_restart.is_empty() {
            s += &format!(
                "; not applied until a restart: {}",
                self.need_restart.join(", ")
            );
        }
        if !self.failed.is_empty() {
            s += &format!("; failed: {}", self.failed.join("; "));
        }
        s
    }
}

/// The settings fixed for the life of the process, by their name in the
/// file, each as text to compare.
fn fixed(c: &Config) -> Vec<(&'static str, String)> {
    vec![
        ("name", c.name.clone()),
        ("underlay_mtu", c.underlay_mtu.to_string()),
        ("tlv_map", format!("{:?}", c.tlv)),
        ("openflow", format!("{:?}", c.openflow)),
        ("[ssl]", format!("{:?}", c.ssl)),
        ("control_socket", format!("{:?}", c.control_socket)),
        ("control_group", format!("{:?}", c.control_group)),
        ("offloads", c.offloads.to_string()),
        ("spin_us", c.spin_us.to_string()),
        ("workers", c.workers.to_string()),
        ("datapath", format!("{:?}", c.datapath)),
        ("flow_cache", c.flow_cache.to_string()),
        ("max_idle_ms", format!("{:?}", c.max_idle)),
        ("flow_restore_wait", c.flow_restore_wait.to_string()),
        ("metrics", format!("{:?}", c.metrics)),
        ("bpf_pin_dir", format!("{:?}", c.bpf_pin_dir)),
        ("tunnel_destinations", c.tunnel_destinations.to_string()),
    ]
}

/// The fixed settings that differ between `running` and `new`.
fn need_restart(running: &Config, new: &Config) -> Vec<&'static str> {
    fixed(running)
        .into_iter()
        .zip(fixed(new))
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0)
        .collect()
}

/// Apply to `sw`, which runs `running`, what changed in `new`; `running`
/// becomes what now runs (the ports that are there, the file's rules, the
/// log level; its fixed settings stay).
pub fn apply(running: &mut Config, new: &Config, sw: &mut Switch) -> Reloaded {
    let mut r = Reloaded {
        need_restart: need_restart(running, new),
        ..Reloaded::default()
    };
    if running.log_level != new.log_level {
        crate::log::set_level(new.log_level);
        running.log_level = new.log_level;
    }
    // The file's old rules that the new file does not have, by their
    // match and priority (a rule of the new file with the same match and
    // priority replaces the old one when added).
    for gone in running.flows.iter().filter(|f| {
        !new.flows
            .iter()
            .any(|n| (n.table, n.priority, &n.m) == (f.table, f.priority, &f.m))
    }) {
        let sel = Selector {
            table: Some(gone.table),
            m: gone.m,
            strict: Some(gone.priority),
            cookie: None,
        };
        match sw.del_flows(sel) {
            Ok(n) => r.flows_deleted += n,
            Err(e) => r.failed.push(format!("deleting a rule: {e}")),
        }
    }
    ports(running, new, sw, &mut r);
    let fresh: Vec<_> = new
        .flows
        .iter()
        .filter(|f| !running.flows.contains(f))
        .cloned()
        .collect();
    let n = fresh.len();
    match sw.add_flows(fresh) {
        Ok(_) => r.flows_added = n,
        Err(e) => r.failed.push(format!("adding the file's rules: {e}")),
    }
    running.flows = new.flows.clone();
    r
}

/// Ports: the removed and changed ones go, then the added and changed
/// ones come (so that a changed port may keep its number).
fn ports(running: &mut Config, new: &Config, sw: &mut Switch, r: &mut Reloaded) {
    let mut changed = Vec::new();
    for old in running.ports.clone() {
        let is_changed = match new.ports.iter().find(|p| p.name == old.name) {
            Some(p) if *p == old => continue,
            Some(_) => true,
            None => false,
        };
        match sw.del_port(&old.name) {
            Ok(()) => {
                running.ports.retain(|p| p.name != old.name);
                if is_changed {
                    changed.push(old.name.clone());
                } else {
                    r.ports_removed.push(old.name.clone());
                }
            }
            Err(e) => r.failed.push(format!("port '{}': {e}", old.name)),
        }
    }
    for p in &new.ports {
        if running.ports.iter().any(|q| q.name == p.name) {
            continue;
        }
        match sw.add_port(p) {
            Ok(()) => {
                running.ports.push(p.clone());
                if changed.contains(&p.name) {
                    r.ports_changed.push(p.name.clone());
                } else {
                    r.ports_added.push(p.name.clone());
                }
            }
            Err(e) => r.failed.push(format!("port '{}': {e}", p.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "[switch]\nname = \"n\"\nflows = [\"in_port=1 actions=output:2\"]\n\n\
        [[port]]\nname = \"a\"\nofport = 1\ntype = \"tap\"\n\n\
        [[port]]\nname = \"b\"\nofport = 2\ntype = \"tap\"\n";

    #[test]
    fn only_the_fixed_settings_that_changed_wait_for_a_restart(
    ) -> Result<(), crate::config::ConfigError> {
        let base = crate::config::parse(BASE, "n.toml")?;
        // Ports, rules and the log level change at run time.
        let runtime = BASE.replace(
            "flows = [",
            "log_level = \"debug\"\nflows = [\"in_port=2 actions=drop\", ",
        ) + "\n[[port]]\nname = \"c\"\nofport = 3\ntype = \"tap\"\n";
        assert!(need_restart(&base, &crate::config::parse(&runtime, "n.toml")?).is_empty());
        let fixed = BASE.replace(
            "[switch]\n",
            "[switch]\nworkers = 2\nunderlay_mtu = 9000\nmetrics = \"127.0.0.1:9476\"\n",
        );
        assert_eq!(
            need_restart(&base, &crate::config::parse(&fixed, "n.toml")?),
            ["underlay_mtu", "workers", "metrics"]
        );
        Ok(())
    }

    #[test]
    fn the_summary_names_each_change_and_what_failed() {
        let r = Reloaded {
            ports_added: vec!["c".into()],
            ports_changed: vec!["b".into()],
            flows_added: 2,
            need_restart: vec!["workers"],
            failed: vec!["port 'd': no such namespace".into()],
            ..Reloaded::default()
        };
        assert_eq!(
            r.summary(),
            "ports added: c; removed: none; changed: b; the file's rules: 2 added or replaced, 0 deleted; \
             not applied until a restart: workers; failed: port 'd': no such namespace"
        );
    }
}
