//! QinQ ports: 802.1ad on an underlay interface. Frames leave with the
//! tags the flows pushed; only S-tagged frames come in, the rest being the
//! host's own underlay traffic.

use super::{port_error, Io, Netdev, HEADROOM};
use crate::config::Port;
use crate::dpif::provider::Upcall;
use crate::port::StartError;
use tunlab_netio::{PacketSocket, Tap};
use tunlab_wire::{vlan, PacketBuf};

/// Where a QinQ port's frames come and go, S-tag in place either way.
pub(super) enum QinqIo {
    /// A packet socket on the underlay interface (userspace datapath).
    Socket(PacketSocket),
    /// The kernel datapath's upcall TAP for that interface: its misses
    /// come up here, and what is written here leaves by the underlay.
    Upcall(Tap),
}

impl QinqIo {
    pub(super) fn recv(&self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        match self {
            QinqIo::Socket(s) => s.recv(buf),
            QinqIo::Upcall(t) => t.recv(buf),
        }
    }

    pub(super) fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        match self {
            QinqIo::Socket(s) => s.send(frame),
            QinqIo::Upcall(t) => t.send(frame).map(drop),
        }
    }

    pub(super) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::{AsFd, AsRawFd};
        match self {
            QinqIo::Socket(s) => s.as_fd().as_raw_fd(),
            QinqIo::Upcall(t) => t.as_fd().as_raw_fd(),
        }
    }
}

impl Netdev {
    /// A QinQ port's I/O: on the kernel datapath its upcall TAP comes
    /// opened (`taps`), else a packet socket on the underlay interface.
    pub(super) fn open_qinq(
        &mut self,
        p: &Port,
        underlay: &str,
        taps: Option<Vec<Tap>>,
    ) -> Result<QinqIo, StartError> {
        if let Some(t) = taps.and_then(|t| t.into_iter().next()) {
            return Ok(QinqIo::Upcall(t));
        }
        let q = PacketSocket::open(underlay).map_err(|e| {
            port_error(p)(format!("cannot open a packet socket on {underlay}: {e}"))
        })?;
        self.share_by_cpu(p, "QinQ packet", |g, m| q.share_by_cpu(g, m))?;
        Ok(QinqIo::Socket(q))
    }

    /// Frames from a QinQ port's underlay interface: only those whose
    /// outermost tag is an 802.1ad S-tag are the overlay's; the rest is the
    /// host's own underlay traffic (ARP, IP) and is left alone.
    pub(super) fn drain_qinq(&mut self, of: &mut dyn Upcall, pi: usize) -> std::io::Result<usize> {
        let mut n = 0;
        while n < 64 {
            let got = match &self.ports[pi].io {
                Io::Qinq(q) => q.recv(&mut self.tap_buf)?,
                _ => None,
            };
            let Some(len) = got else { break };
            n += 1;
            if len < 18 || self.tap_buf[12..14] != [0x88, 0xa8] {
                continue;
            }
            let ofport = self.ports[pi].ofport;
            self.ports[pi].stats.rx_packets += 1;
            self.ports[pi].stats.rx_frames += 1;
            self.ports[pi].stats.rx_bytes += len as u64;
            let mut frame = std::mem::replace(&mut self.frame, PacketBuf::new(Vec::new(), 0));
            frame.reset(HEADROOM);
            let _ = frame.extend(&self.tap_buf[..len]);
            self.forward(of, ofport, &mut frame, false, None);
            self.frame = frame;
        }
        Ok(n)
    }

    /// Send a frame out of a QinQ port with the tags it carries. The tags
    /// count against the underlay MTU; a frame too big gets the ICMP error
    /// with what is left for its IP packet.
    pub(super) fn output_qinq(&mut self, pi: usize, in_port: u32, frame: &PacketBuf<Vec<u8>>) {
        if frame.len() > self.underlay_mtu + 14 {
            let (tags, plain) = vlan::strip_tags(frame.data());
            let room = self.underlay_mtu.saturating_sub(tags);
            let plain = PacketBuf::with_range(plain.clone(), 0, plain.len());
            if !plain.is_some_and(|pb| self.send_icmp_too_big(in_port, &pb, room)) {
                self.drop("too_big");
            }
            return;
        }
        let p = &mut self.ports[pi];
        let Io::Qinq(q) = &p.io else { return };
        if q.send(frame.data()).is_ok() {
            p.stats.tx_packets += 1;
            p.stats.tx_frames += 1;
            p.stats.tx_bytes += frame.len() as u64;
        } else {
            p.stats.tx_errors += 1;
        }
    }
}
