//! The ports and tunnels in the kernel datapath's maps: tenant, QinQ and
//! underlay devices paired with their upcall devices, policers, tunnel
//! ports by remote and key, per-port counters, device MTUs.

use super::*;

impl KernelDatapath {
    /// A tenant port: frames from the tenant arrive on `veth` (ifindex
    /// `veth_ifindex`); misses go to the TAP `upcall` (`upcall_ifindex`),
    /// which the switch reads and writes to reach the tenant.
    pub fn add_tenant_port(
        &mut self,
        ofport: u32,
        veth: &str,
        veth_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) -> Result<(), Error> {
        self.pair_ports(ofport, veth_ifindex, crate::maps::ROLE_VETH, upcall_ifindex)?;
        self.attach(FROM_TENANT, veth)?;
        self.attach(INJECT, upcall)?;
        Ok(())
    }

    /// A QinQ port on underlay device `dev`: its 802.1ad frames are the
    /// port's; misses go up through the TAP `upcall`, and what the switch
    /// writes there leaves by `dev`.
    pub fn add_qinq_port(
        &mut self,
        ofport: u32,
        dev: &str,
        dev_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) -> Result<(), Error> {
        self.pair_ports(ofport, dev_ifindex, crate::maps::ROLE_QINQ, upcall_ifindex)?;
        self.attach_underlay(dev)?;
        self.attach(INJECT, upcall)
    }

    /// Forget a QinQ port (call [`KernelDatapath::revalidate`] after); the
    /// underlay keeps its program for the tunnels that may share it.
    pub fn remove_qinq_port(&mut self, dev_ifindex: u32, upcall: &str, upcall_ifindex: u32) {
        self.detach(upcall);
        self.forget_ports(&[dev_ifindex, upcall_ifindex]);
    }

    /// A port's two `tl_ports` entries: the device its frames arrive on
    /// (`role`, misses to the upcall TAP) and its upcall TAP (what the
    /// switch writes there goes back to the device).
    fn pair_ports(&mut self, ofport: u32, dev: u32, role: u32, upcall: u32) -> Result<(), Error> {
        for (at, role, peer) in [(dev, role, upcall), (upcall, crate::maps::ROLE_UPCALL, dev)] {
            self.set_port_entry(
                at,
                PortEntry {
                    ofport,
                    role,
                    peer_ifindex: peer,
                    policed: 0,
                },
            )?;
        }
        Ok(())
    }

    fn forget_ports(&mut self, ifindexes: &[u32]) {
        if let Ok(mut ports) = self.map_mut::<HashMap<_, u32, PortEntry>>("tl_ports") {
            for i in ifindexes {
                let _ = ports.remove(i);
            }
        }
    }

    /// Remove every `tl_ports` entry whose device is not in `keep` (an
    /// adopted map's entries for a killed switch's upcall TAPs, which are
    /// gone). Returns how many went.
    pub fn retain_ports(&mut self, keep: &[u32]) -> Result<usize, Error> {
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        let gone: Vec<u32> = ports
            .keys()
            .filter_map(Result::ok)
            .filter(|i| !keep.contains(i))
            .collect();
        for i in &gone {
            let _ = ports.remove(i);
        }
        Ok(gone.len())
    }

    /// Set one `tl_ports` entry directly (tests drive the programs with
    /// BPF_PROG_TEST_RUN on devices that have no veth/TAP pair).
    pub fn set_port_entry(&mut self, ifindex: u32, p: PortEntry) -> Result<(), Error> {
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        ports.insert(ifindex, p, 0).map_err(map_err("tl_ports"))
    }

    /// Police what tenant device `ifindex` (a port already added) sends
    /// in: `rate` bytes a second, bursts of `burst` bytes; None: no
    /// policer. The port's entry says whether to look.
    pub fn set_police(
        &mut self,
        ifindex: u32,
        rate_burst: Option<(u64, u64)>,
    ) -> Result<(), Error> {
        {
            let mut m: HashMap<_, u32, crate::maps::Police> = self.map_mut("tl_police")?;
            match rate_burst {
                Some((rate, burst)) => m
                    .insert(
                        ifindex,
                        crate::maps::Police {
                            rate,
                            burst,
                            tokens: burst,
                            ..Default::default()
                        },
                        0,
                    )
                    .map_err(map_err("tl_police"))?,
                None => {
                    let _ = m.remove(&ifindex);
                }
            }
        }
        let mut ports: HashMap<_, u32, PortEntry> = self.map_mut("tl_ports")?;
        if let Ok(mut e) = ports.get(&ifindex, 0) {
            e.policed = u32::from(rate_burst.is_some());
            ports.insert(ifindex, e, 0).map_err(map_err("tl_ports"))?;
        }
        Ok(())
    }

    /// Forget a tenant port (call [`KernelDatapath::revalidate`] after).
    pub fn remove_tenant_port(
        &mut self,
        veth: &str,
        veth_ifindex: u32,
        upcall: &str,
        upcall_ifindex: u32,
    ) {
        self.detach(veth);
        self.detach(upcall);
        self.forget_ports(&[veth_ifindex, upcall_ifindex]);
    }

    /// Decapsulate on `dev` (the underlay): attach once per device.
    pub fn attach_underlay(&mut self, dev: &str) -> Result<(), Error> {
        if self
            .attached
            .iter()
            .any(|a| a.dev == dev && a.prog == FROM_UNDERLAY)
        {
            return Ok(());
        }
        self.attach(FROM_UNDERLAY, dev)
    }

    pub fn add_tunnel(&mut self, key: TunnelKey, port: TunnelPortEntry) -> Result<(), Error> {
        let mut m: HashMap<_, TunnelKey, TunnelPortEntry> = self.map_mut("tl_tunnels")?;
        m.insert(key, port, 0).map_err(map_err("tl_tunnels"))
    }

    /// Frames under `key.tk` whose tunnel key is `key.id` belong to
    /// `ofport` (one of several ports that differ only in their key).
    pub fn add_tunnel_id(&mut self, key: TunnelIdKey, ofport: u32) -> Result<(), Error> {
        let mut m: HashMap<_, TunnelIdKey, u32> = self.map_mut("tl_tunnel_ids")?;
        m.insert(key, ofport, 0).map_err(map_err("tl_tunnel_ids"))
    }

    pub fn remove_tunnel_id(&mut self, key: TunnelIdKey) {
        if let Ok(mut m) = self.map_mut::<HashMap<_, TunnelIdKey, u32>>("tl_tunnel_ids") {
            let _ = m.remove(&key);
        }
    }

    pub fn remove_tunnel(&mut self, key: TunnelKey) {
        if let Ok(mut m) = self.map_mut::<HashMap<_, TunnelKey, TunnelPortEntry>>("tl_tunnels") {
            let _ = m.remove(&key);
        }
    }

    /// Underlay device `ifindex` has a new MTU: every template that sends
    /// through it takes it, in place (cached flows name templates by
    /// slot). Returns how many changed.
    pub fn set_device_mtu(&mut self, ifindex: u32, mtu: u16) -> Result<usize, Error> {
        let hit: Vec<(Vec<u8>, u32, Template)> = self
            .templates
            .iter()
            .filter_map(|(b, &i)| Some((b.clone(), i, template_from_bytes(b)?)))
            .filter(|(_, _, t)| t.ifindex == ifindex && t.mtu != mtu)
            .collect();
        let mut m: Array<_, Template> = self.map_mut("tl_templates")?;
        for (_, i, t) in &hit {
            let t = Template { mtu, ..*t };
            m.set(*i, t, 0).map_err(map_err("tl_templates"))?;
        }
        for (old, i, t) in &hit {
            self.templates.remove(old);
            self.templates
                .insert(template_bytes(&Template { mtu, ..*t }), *i);
        }
        Ok(hit.len())
    }

    /// Each port's counters (by ofport) of what the kernel handled
    /// itself, summed over CPUs.
    pub fn port_stats(&self) -> Result<Vec<(u32, crate::maps::PortCounters)>, Error> {
        let m: PerCpuHashMap<_, u32, crate::maps::PortCounters> = self.map("tl_port_stats")?;
        let mut out = Vec::new();
        for item in m.iter() {
            let (ofport, per_cpu) = item.map_err(map_err("tl_port_stats"))?;
            let mut sum = crate::maps::PortCounters::default();
            for c in per_cpu.iter() {
                sum.rx_packets += c.rx_packets;
                sum.rx_bytes += c.rx_bytes;
                sum.tx_packets += c.tx_packets;
                sum.tx_bytes += c.tx_bytes;
                sum.rx_dropped += c.rx_dropped;
            }
            out.push((ofport, sum));
        }
        out.sort_unstable_by_key(|(p, _)| *p);
        Ok(out)
    }

    /// Port `ofport` left: its counters go (a port added later under the
    /// same number starts from zero).
    pub fn forget_port_stats(&mut self, ofport: u32) {
        if let Ok(mut m) =
            self.map_mut::<PerCpuHashMap<_, u32, crate::maps::PortCounters>>("tl_port_stats")
        {
            let _ = m.remove(&ofport);
        }
    }
}
