//! The userspace datapath's ports: each kind opened for this worker
//! (TAP queues, tunnel sockets, QinQ packet sockets), ports added and
//! removed while running, and the underlay devices' MTU.

use super::*;

impl Netdev {
    /// Open this worker's share of one port's device or socket and make it
    /// part of the node; a TAP port's queues come opened (`taps`).
    pub(super) fn open_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        let io = match &p.kind {
            PortKind::Tap { .. } | PortKind::Veth { .. } | PortKind::System => match taps {
                Some(t) if !t.is_empty() => Io::Tap(t),
                _ => return Err(port_error(p)("no TAP queue for this worker".into())),
            },
            PortKind::Tunnel(t) => {
                let sock = match t.kind {
                    TunnelKind::Geneve | TunnelKind::Vxlan => self.open_udp(p, t)?,
                    TunnelKind::Gre | TunnelKind::Nvgre => self.open_gre(p, t)?,
                    TunnelKind::Stt => self.open_stt(p, t)?,
                };
                Io::Tunnel { cfg: *t, sock }
            }
            PortKind::QinQ { underlay } => Io::Qinq(self.open_qinq(p, underlay, taps)?),
        };
        self.by_ofport.insert(p.ofport, self.ports.len());
        let queues = match &io {
            Io::Tap(qs) => qs.len(),
            _ => 0,
        };
        self.ports.push(PortState {
            name: p.name.clone(),
            ofport: p.ofport,
            io,
            stats: PortStats::default(),
            queue_rx: vec![0; queues],
            // Kernel-datapath tenants are policed in the kernel; a TAP
            // port here, each worker taking its share of the rate.
            police: match (&p.kind, p.police) {
                (PortKind::Tap { .. }, Some(pol)) => {
                    let (rate, burst) = pol.bytes();
                    let w = self.workers.max(1) as u64;
                    Some(crate::port::TokenBucket::new(rate / w, burst / w))
                }
                _ => None,
            },
        });
        Ok(())
    }

    /// With several workers, every worker's raw or packet socket gets a
    /// copy of each packet from the kernel; `share(group, member)` installs
    /// the filter that keeps each packet in the socket of the worker on
    /// whose CPU it arrived (as the UDP sockets' reuse-port group does), so
    /// each is read once. Nothing to do with one worker.
    pub(super) fn share_by_cpu(
        &self,
        p: &Port,
        what: &str,
        share: impl FnOnce(u32, u32) -> std::io::Result<()>,
    ) -> Result<(), StartError> {
        if self.workers <= 1 {
            return Ok(());
        }
        share(self.workers as u32, self.worker as u32).map_err(|e| {
            port_error(p)(format!("cannot share the {what} socket among workers: {e}"))
        })
    }

    /// Serve a port added while running (its TAP queues come opened, or
    /// are the caching datapath's upcall devices). On an error nothing
    /// changes. The caller checked that its name and number are free.
    pub fn add_port(&mut self, p: &Port, taps: Option<Vec<Tap>>) -> Result<(), StartError> {
        self.port_cfgs.push(p.clone());
        self.underlay_devs = None;
        if let Err(e) = self.open_port(p, taps) {
            self.port_cfgs.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Stop serving port `name` (`tunlab ctl del-port`): its device or
    /// socket closes (a TAP the switch created disappears), its counters
    /// go. Returns its ofport.
    pub fn remove_port(&mut self, name: &str) -> Result<u32, String> {
        let Some(pi) = self.ports.iter().position(|p| p.name == name) else {
            return Err(format!("no port named '{name}'"));
        };
        let gone = self.ports.remove(pi);
        self.port_cfgs.retain(|p| p.name != name);
        self.underlay_devs = None;
        if let Io::Tunnel { sock, .. } = gone.io {
            let shared = self
                .ports
                .iter()
                .any(|p| matches!(p.io, Io::Tunnel { sock: s, .. } if s == sock));
            if !shared {
                self.socks.remove(sock);
                for p in &mut self.ports {
                    if let Io::Tunnel { sock: s, .. } = &mut p.io {
                        if *s > sock {
                            *s -= 1;
                        }
                    }
                }
            }
        }
        self.by_ofport = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.ofport, i))
            .collect();
        Ok(gone.ofport)
    }

    /// The underlay's MTU is now `mtu` (an operator, a failover): the
    /// too-big answers follow it, never above the configured MTU.
    pub fn set_underlay_mtu(&mut self, mtu: u16) {
        let mtu = (mtu as usize).min(self.configured_mtu);
        if mtu != self.underlay_mtu {
            crate::tl_log!(
                Info,
                "underlay_mtu",
                format!("tunlab switch {}: underlay MTU now {mtu} (was {})", self.name, self.underlay_mtu);
                node = self.name,
                mtu = mtu
            );
            self.underlay_mtu = mtu;
        }
    }

    /// The smallest MTU of the devices under the tunnel ports.
    pub fn underlay_device_mtu(&mut self) -> Option<u16> {
        let devs = self.underlay_devs.get_or_insert_with(|| {
            let mut d: Vec<String> = self
                .port_cfgs
                .iter()
                .filter_map(|p| match &p.kind {
                    PortKind::Tunnel(t) if !t.local_ip.is_unspecified() => {
                        crate::port::device_with(t.local_ip)
                    }
                    _ => None,
                })
                .collect();
            d.sort();
            d.dedup();
            d
        });
        devs.iter().filter_map(|d| crate::port::device_mtu(d)).min()
    }
}
