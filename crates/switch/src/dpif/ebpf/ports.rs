//! The kernel datapath's ports: a veth tenant's pair and upcall TAP, a
//! system port's programs, a QinQ port's underlay, a tunnel port's
//! decapsulation entries; and the `ip` commands that make the devices.

use super::*;
use tunlab_netio::netns;

/// Run an `ip` command, naming the port on failure.
pub(super) fn ip(port: &str, args: &[&str]) -> Result<String, StartError> {
    netns::run(&[&["ip"][..], args].concat()).map_err(|e| StartError::Port {
        port: port.to_string(),
        msg: e.to_string(),
    })
}

pub(super) fn ifindex_of(port: &str, dev: &str) -> Result<u32, StartError> {
    let out = ip(port, &["-o", "link", "show", "dev", dev])?;
    out.split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| StartError::Port {
            port: port.to_string(),
            msg: format!("cannot read the ifindex of {dev} from `ip link`: {out}"),
        })
}

/// A device's MTU (`ip -o link` prints `mtu N`).
pub(super) fn mtu_of(port: &str, dev: &str) -> Result<u16, StartError> {
    let out = ip(port, &["-o", "link", "show", "dev", dev])?;
    let mut w = out.split_whitespace();
    w.find(|&t| t == "mtu")
        .and_then(|_| w.next())
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| StartError::Port {
            port: port.to_string(),
            msg: format!("cannot read the MTU of {dev} from `ip link`: {out}"),
        })
}

/// No IPv6 on a device the switch owns: its kernel would otherwise send
/// router solicitations and neighbour discovery the switch would read as
/// tenant frames.
pub(super) fn no_ipv6(dev: &str) {
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
}

impl Kernel {
    /// Make a veth port's devices and attach to them: the pair (this end
    /// `p.name`, the tenant's end of the same name in its namespace, with
    /// the address and MTU) and the upcall TAP through which misses reach
    /// the switch and the switch reaches the tenant. Returns the TAP,
    /// which the userspace datapath serves as port `p`.
    pub(super) fn add_veth_port(
        &mut self,
        p: &Port,
        offloads: bool,
        underlay_mtu: u16,
        ports: &[Port],
    ) -> Result<Vec<Tap>, StartError> {
        let PortKind::Veth {
            netns: ns,
            address,
            mtu,
        } = &p.kind
        else {
            return Err(StartError::Port {
                port: p.name.clone(),
                msg: "not a veth port".into(),
            });
        };
        let name = &p.name;
        let mtu = mtu
            .unwrap_or_else(|| default_tenant_mtu(underlay_mtu, ports))
            .to_string();
        // A killed switch's veth pair is still there, its tenant's
        // connections on it: the restarted switch takes it as it is,
        // whether or not the pinned datapath that carried them survived.
        let existing = ifindex_of(name, name).is_ok();
        if existing && ip(name, &["-n", ns, "link", "show", "dev", name]).is_err() {
            return Err(StartError::Port {
                port: name.clone(),
                msg: format!(
                    "a device named {name} exists, but its peer is not in netns {ns}: it is not this port's veth pair (remove it, or name the port otherwise)"
                ),
            });
        }
        if !existing {
            ip(
                name,
                &[
                    "link", "add", name, "type", "veth", "peer", "name", name, "netns", ns,
                ],
            )?;
        }
        let made = (|| {
            no_ipv6(name);
            ip(name, &["link", "set", name, "mtu", &mtu, "up"])?;
            ip(name, &["-n", ns, "link", "set", name, "mtu", &mtu, "up"])?;
            if let Some(a) = address {
                ip(name, &["-n", ns, "addr", "replace", a, "dev", name])?;
            }
            self.attach_tenant(p, &mtu, offloads, true)
        })();
        if made.is_err() && !existing {
            let _ = ip(name, &["link", "del", name]);
        }
        made
    }

    /// Attach to an existing device (a system port: a VM's TAP, a
    /// container's veth) as to a veth port's: its frames are switched on
    /// its ingress, frames for it leave through it, and misses reach the
    /// switch through an upcall TAP. The device itself is left alone.
    pub(super) fn add_system_port(
        &mut self,
        p: &Port,
        offloads: bool,
    ) -> Result<Vec<Tap>, StartError> {
        let mtu = mtu_of(&p.name, &p.name)?.to_string();
        self.attach_tenant(p, &mtu, offloads, false)
    }

    /// A tenant device's upcall TAP (of `mtu`), programs and map entries;
    /// `peer`: the device is a veth whose other end is in the tenant's
    /// namespace. Returns the upcall TAP, which the userspace datapath
    /// serves as port `p`.
    pub(super) fn attach_tenant(
        &mut self,
        p: &Port,
        mtu: &str,
        offloads: bool,
        peer: bool,
    ) -> Result<Vec<Tap>, StartError> {
        let name = &p.name;
        let perr = |msg: String| StartError::Port {
            port: name.clone(),
            msg,
        };
        let ifindex = ifindex_of(name, name)?;
        let upcall = format!("tlu{ifindex}");
        let tap = Tap::open(&upcall, tenant_tap_options(offloads))
            .map_err(|e| perr(format!("upcall TAP {upcall}: {e}")))?;
        no_ipv6(&upcall);
        ip(name, &["link", "set", &upcall, "mtu", mtu, "up"])?;
        let upcall_ifindex = ifindex_of(name, &upcall)?;
        self.dp
            .add_tenant_port(p.ofport, name, ifindex, &upcall, upcall_ifindex)
            .map_err(|e| perr(e.to_string()))?;
        self.dp
            .set_police(ifindex, p.police.map(crate::config::Policing::bytes))
            .map_err(|e| perr(e.to_string()))?;
        self.veths.push(VethPort {
            name: name.clone(),
            ifindex,
            upcall,
            upcall_ifindex,
            owned: peer,
        });
        self.targets
            .insert(p.ofport, Target::Veth { ifindex, peer });
        Ok(vec![tap])
    }

    /// A QinQ port in the kernel: its 802.1ad frames are switched on the
    /// underlay device's ingress; misses, and what the switch sends, go
    /// through an upcall TAP (no virtio-net header: frames as the packet
    /// socket would give them, the S-tag in place), which the userspace
    /// datapath serves instead of a packet socket.
    pub(super) fn add_qinq_port(&mut self, p: &Port) -> Result<Vec<Tap>, StartError> {
        let PortKind::QinQ { underlay } = &p.kind else {
            return Err(StartError::Port {
                port: p.name.clone(),
                msg: "not a qinq port".into(),
            });
        };
        let perr = |msg: String| StartError::Port {
            port: p.name.clone(),
            msg,
        };
        let ifindex = ifindex_of(&p.name, underlay)?;
        let mtu = mtu_of(&p.name, underlay)?.to_string();
        let upcall = format!("tlq{ifindex}");
        let opts = TapOptions {
            vnet_hdr: false,
            multi_queue: true,
            offload: 0,
        };
        let tap =
            Tap::open(&upcall, opts).map_err(|e| perr(format!("upcall TAP {upcall}: {e}")))?;
        no_ipv6(&upcall);
        ip(&p.name, &["link", "set", &upcall, "mtu", &mtu, "up"])?;
        let upcall_ifindex = ifindex_of(&p.name, &upcall)?;
        self.dp
            .add_qinq_port(p.ofport, underlay, ifindex, &upcall, upcall_ifindex)
            .map_err(|e| perr(e.to_string()))?;
        self.targets.insert(p.ofport, Target::Qinq { ifindex });
        self.qinqs.push(VethPort {
            name: p.name.clone(),
            ifindex,
            upcall,
            upcall_ifindex,
            owned: false,
        });
        Ok(vec![tap])
    }

    /// A tunnel port the kernel datapath serves (Geneve, VXLAN, GRE,
    /// NVGRE with a fixed local address): decapsulate for it on the
    /// underlay device holding that address. Others stay in user space.
    pub(super) fn add_tunnel_port(&mut self, p: &Port) -> Result<(), StartError> {
        let PortKind::Tunnel(t) = &p.kind else {
            return Ok(());
        };
        let kind = match t.kind {
            TunnelKind::Geneve => km::KIND_GENEVE,
            TunnelKind::Vxlan => km::KIND_VXLAN,
            TunnelKind::Gre => km::KIND_GRE,
            TunnelKind::Nvgre => km::KIND_NVGRE,
            TunnelKind::Stt => return Ok(()),
        };
        if t.local_ip.is_unspecified() {
            return Ok(());
        }
        let perr = |msg: String| StartError::Port {
            port: p.name.clone(),
            msg,
        };
        let dev = crate::port::device_with(t.local_ip).ok_or_else(|| {
            perr(format!(
                "no device here has local_ip {} (the kernel datapath decapsulates on it)",
                t.local_ip
            ))
        })?;
        let underlay = ifindex_of(&p.name, &dev)?;
        let mtu = mtu_of(&p.name, &dev)?;
        let mut e = TunnelPortEntry {
            ofport: p.ofport,
            kind,
            remote_any: 1,
            ..TunnelPortEntry::default()
        };
        match t.local_ip {
            IpAddr::V4(a) => e.local4 = a.octets(),
            IpAddr::V6(a) => e.local6 = a.octets(),
        }
        if let crate::config::FromFlow::Fixed(r) = t.remote_ip {
            e.remote_any = 0;
            match r {
                IpAddr::V4(a) => e.remote4 = a.octets(),
                IpAddr::V6(a) => e.remote6 = a.octets(),
            }
        }
        let (proto, dport) = match t.kind {
            TunnelKind::Gre | TunnelKind::Nvgre => (47, 0),
            _ => (17, t.dst_port),
        };
        let family = if t.local_ip.is_ipv4() { 4 } else { 6 };
        let any = TunnelKey {
            proto,
            family,
            dport,
            remote: [0; 16],
        };
        // Under its remote (so that ports to different remotes on one
        // UDP port each keep their traffic in the kernel), and under any
        // remote: the entry that counts unknown sources, or serves a
        // port whose remote the flow chooses.
        let mut keys = vec![any];
        if let crate::config::FromFlow::Fixed(r) = t.remote_ip {
            let mut exact = any;
            match r {
                IpAddr::V4(a) => exact.remote[..4].copy_from_slice(&a.octets()),
                IpAddr::V6(a) => exact.remote = a.octets(),
            }
            keys.push(exact);
        }
        for key in &keys {
            self.decaps.push((p.ofport, *key, e));
            if let Err(err) = self.dp.add_tunnel(*key, self.decap_owner(key)) {
                self.remove_decaps(p.ofport);
                return Err(perr(err.to_string()));
            }
            if let crate::config::FromFlow::Fixed(id) = t.key {
                let ik = km::TunnelIdKey {
                    tk: *key,
                    id: id as u32,
                };
                self.decap_ids.push((p.ofport, ik));
                if let Err(err) = self.dp.add_tunnel_id(ik, p.ofport) {
                    self.remove_decaps(p.ofport);
                    return Err(perr(err.to_string()));
                }
            }
        }
        if let Err(err) = self.dp.attach_underlay(&dev) {
            self.remove_decaps(p.ofport);
            return Err(perr(err.to_string()));
        }
        self.targets.insert(
            p.ofport,
            Target::Tunnel {
                cfg: *t,
                underlay,
                mtu,
                dev: dev.clone(),
            },
        );
        Ok(())
    }

    /// A tunnel port's decapsulation entries go; another port on the same
    /// key (the latest added) takes each over.
    pub(super) fn remove_decaps(&mut self, ofport: u32) {
        while let Some(i) = self.decap_ids.iter().position(|(o, _)| *o == ofport) {
            let (_, ik) = self.decap_ids.remove(i);
            match self.decap_ids.iter().rev().find(|(_, k)| *k == ik) {
                Some(&(other, _)) => {
                    if self.dp.add_tunnel_id(ik, other).is_err() {
                        self.dp.remove_tunnel_id(ik);
                    }
                }
                None => self.dp.remove_tunnel_id(ik),
            }
        }
        while let Some(i) = self.decaps.iter().position(|(o, _, _)| *o == ofport) {
            let (_, key, _) = self.decaps.remove(i);
            if self.decaps.iter().any(|(_, k, _)| *k == key) {
                if self.dp.add_tunnel(key, self.decap_owner(&key)).is_err() {
                    self.dp.remove_tunnel(key);
                }
            } else {
                self.dp.remove_tunnel(key);
            }
        }
    }

    /// Which of the ports on a decapsulation key the kernel's entry names:
    /// for the any-remote key a port whose remote the flow chooses (it
    /// takes every source; a fixed-remote port there only counts unknown
    /// sources), else the last added. `key` must have a port.
    pub(super) fn decap_owner(&self, key: &TunnelKey) -> TunnelPortEntry {
        let on_key = || self.decaps.iter().rev().filter(|(_, k, _)| k == key);
        on_key()
            .find(|(_, _, e)| e.remote_any == 1)
            .or_else(|| on_key().next())
            .map(|(_, _, e)| *e)
            .unwrap_or_default()
    }
}
