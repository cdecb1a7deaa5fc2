//! GRE (RFC 2784/2890) and NVGRE (RFC 7637) ports over one raw socket for
//! IP protocol 47 per local address (IPv4 underlay): the port a packet
//! arrives for is chosen by its outer source, and decides whether the key
//! is GRE's or NVGRE's.

use super::{port_error, Io, Netdev, Target, HEADROOM};
use crate::config::{FromFlow, Port, TunnelPort};
use crate::dpif::provider::Upcall;
use crate::port::StartError;
use std::net::{IpAddr, SocketAddr};
use tunlab_dp::TunnelSet;
use tunlab_netio::Underlay;
use tunlab_wire::tunnel::{self, TunnelKind};
use tunlab_wire::PacketBuf;

impl Netdev {
    /// The raw GRE socket on the port's local address, opened by the first
    /// GRE or NVGRE port on it.
    pub(super) fn open_gre(&mut self, p: &Port, t: &TunnelPort) -> Result<usize, StartError> {
        let perr = port_error(p);
        let IpAddr::V4(local4) = t.local_ip else {
            return Err(perr(
                "GRE over an IPv6 underlay is not built yet; use an IPv4 local_ip".into(),
            ));
        };
        // One raw socket for IP protocol 47 per local address,
        // shared by GRE and NVGRE ports.
        let local = SocketAddr::new(t.local_ip, 0);
        let sock = match self.socket_at(local, TunnelKind::Gre) {
            Some(i) => i,
            None => {
                let under = Underlay::raw_ipv4(local4, 47)
                    .map_err(|e| perr(format!("cannot open a raw GRE socket on {local4}: {e}")))?;
                under
                    .allow_fragmentation()
                    .map_err(|e| perr(format!("cannot clear DF: {e}")))?;
                self.share_by_cpu(p, "raw GRE", |g, m| under.share_by_cpu(g, m))?;
                self.add_socket(TunnelKind::Gre, false, local, under)
            }
        };
        Ok(sock)
    }

    /// One IPv4 packet from the raw GRE socket: the receiving port (by outer
    /// source) decides whether the key is GRE's or NVGRE's.
    pub(super) fn receive_gre(
        &mut self,
        of: &mut dyn Upcall,
        si: usize,
        m: usize,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
        let Some((data, _, _)) = self.socks[si].rx.get(m) else {
            return;
        };
        if data.len() < 20 {
            self.drop("malformed_tunnel_header");
            return;
        }
        let src = IpAddr::V4(std::net::Ipv4Addr::new(
            data[12], data[13], data[14], data[15],
        ));
        let Some(in_port) = self.tunnel_in_port(si, src, None) else {
            self.drop("unknown_remote");
            return;
        };
        let pi = self.by_ofport[&in_port];
        let nvgre =
            matches!(&self.ports[pi].io, Io::Tunnel { cfg, .. } if cfg.kind == TunnelKind::Nvgre);
        let Some((data, _, _)) = self.socks[si].rx.get(m) else {
            return;
        };
        let at = match tunnel::pop_gre_ipv4(data, nvgre, true, &mut self.meta) {
            Ok(at) => at,
            Err(_) => {
                self.drop("malformed_tunnel_header");
                return;
            }
        };
        frame.reset(HEADROOM);
        let _ = frame.extend(&data[at..]);
        // Ports to one remote that differ only in key: the key decides.
        let in_port = self.keyed_in_port(si, src, in_port);
        let pi = self.by_ofport[&in_port];
        self.ports[pi].stats.rx_packets += 1;
        self.ports[pi].stats.rx_frames += 1;
        self.ports[pi].stats.rx_bytes += frame.len() as u64;
        self.forward(of, in_port, frame, true, None);
    }

    /// Queue a frame for a GRE or NVGRE port (key, checksum and flow ID as
    /// the port and the flow say); a frame too big gets the PMTU answer.
    pub(super) fn output_gre(
        &mut self,
        to: &Target,
        tun: &TunnelSet,
        in_port: u32,
        frame: &mut PacketBuf<Vec<u8>>,
    ) {
        let Target {
            pi,
            sock,
            cfg,
            remote,
            key,
        } = *to;
        let nvgre = cfg.kind == TunnelKind::Nvgre;
        let key32 = match (cfg.key, tun.id) {
            (FromFlow::Fixed(0), None) if !nvgre => None,
            _ => Some(key as u32),
        };
        let mut hdr = [0u8; 16];
        let flow_id = tunlab_wire::flowhash::hash_frame(frame.data()) as u8;
        let Ok(n) = tunnel::gre_header(nvgre, key32, cfg.csum, flow_id, &mut hdr) else {
            self.ports[pi].stats.tx_errors += 1;
            return;
        };
        if 20 + n + frame.len() > self.underlay_mtu {
            let room = self.underlay_mtu.saturating_sub(20 + n + 14);
            if self.too_big(in_port, frame, room, cfg.kind) {
                return;
            }
        }
        let csum = cfg.csum && !nvgre;
        let buf = self.socks[sock].queue(remote, 0, 0);
        buf.extend_from_slice(&hdr[..n]);
        buf.extend_from_slice(frame.data());
        if csum {
            tunlab_wire::gre::fill_checksum(buf);
        }
        self.ports[pi].stats.tx_packets += 1;
        self.ports[pi].stats.tx_frames += 1;
        self.ports[pi].stats.tx_bytes += frame.len() as u64;
    }
}
