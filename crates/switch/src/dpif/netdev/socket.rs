//! What the tunnel ports' underlay sockets share: one socket per local
//! address (and UDP port) with its receive batch and its send queue, read
//! when it is readable and flushed once per round.

use super::{IntoSocket, Netdev, FRAME_MAX};
use crate::dpif::provider::Upcall;
use crate::profile::Stage;
use std::net::{IpAddr, SocketAddr};
use tunlab_netio::{RecvBatch, Underlay};
use tunlab_wire::tunnel::TunnelKind;
use tunlab_wire::PacketBuf;

/// An underlay socket.
pub(super) struct SockState {
    pub(super) kind: TunnelKind,
    /// Outer UDP checksum on (kernel-computed) or off (zero).
    pub(super) csum: bool,
    pub(super) local: SocketAddr,
    pub(super) under: Underlay,
    /// Geneve and VXLAN send from these (each bound to its own ephemeral
    /// port), picked by a hash of the inner flow: the outer UDP source
    /// port gives the underlay's ECMP and the receiver's RSS a flow to
    /// spread (RFC 7348 § 5, RFC 8926 § 3.3), and one flow always leaves
    /// from one port, in order. Empty: send from `under`.
    pub(super) srcs: Vec<Underlay>,
    pub(super) rx: RecvBatch,
    /// Datagrams to send this round: bytes, destination and which of
    /// `srcs` sends them.
    pub(super) tx: Vec<(Vec<u8>, SocketAddr, u8)>,
    pub(super) tx_used: usize,
}

impl SockState {
    /// The next free buffer of the send queue, emptied, for a datagram to
    /// `remote` (port `port`) sent from source socket `src`.
    pub(super) fn queue(&mut self, remote: IpAddr, port: u16, src: u8) -> &mut Vec<u8> {
        if self.tx_used == self.tx.len() {
            self.tx
                .push((Vec::with_capacity(FRAME_MAX), remote.into_socket(port), 0));
        }
        let (buf, dst, from) = &mut self.tx[self.tx_used];
        *dst = remote.into_socket(port);
        *from = src;
        buf.clear();
        self.tx_used += 1;
        buf
    }
}

impl Netdev {
    /// Keep a new underlay socket with its batch buffers; returns its index.
    pub(super) fn add_socket(
        &mut self,
        kind: TunnelKind,
        csum: bool,
        local: SocketAddr,
        under: Underlay,
    ) -> usize {
        self.socks.push(SockState {
            kind,
            csum,
            local,
            under,
            srcs: Vec::new(),
            rx: RecvBatch::new(32, FRAME_MAX),
            tx: Vec::new(),
            tx_used: 0,
        });
        self.socks.len() - 1
    }

    /// The socket of `kind` bound to `local`, if a port opened it.
    pub(super) fn socket_at(&self, local: SocketAddr, kind: TunnelKind) -> Option<usize> {
        self.socks
            .iter()
            .position(|s| s.local == local && s.kind == kind)
    }

    /// Read a batch from socket `si` and decapsulate each packet as its
    /// tunnel kind says; TCP segments joined on the way go on at the end.
    pub(super) fn drain_socket(
        &mut self,
        of: &mut dyn Upcall,
        si: usize,
    ) -> std::io::Result<usize> {
        let t = self.profile.start();
        let s = &mut self.socks[si];
        let got = s.under.recv_batch(&mut s.rx)?;
        self.profile.add(Stage::Receive, t, got as u64);
        let kind = s.kind;
        let mut frame = std::mem::replace(&mut self.frame, PacketBuf::new(Vec::new(), 0));
        for m in 0..got {
            match kind {
                TunnelKind::Gre | TunnelKind::Nvgre => self.receive_gre(of, si, m, &mut frame),
                TunnelKind::Stt => self.receive_stt(of, si, m, &mut frame),
                TunnelKind::Geneve | TunnelKind::Vxlan => self.receive_udp(of, si, m, &mut frame),
            }
        }
        self.flush_joined(of);
        self.frame = frame;
        Ok(got)
    }

    /// Send what every socket has queued this round.
    pub(super) fn flush_sends(&mut self) {
        for si in 0..self.socks.len() {
            self.flush_socket(si);
        }
    }

    /// Send what socket `si` has queued.
    pub(super) fn flush_socket(&mut self, si: usize) {
        {
            let s = &mut self.socks[si];
            if s.tx_used == 0 {
                return;
            }
            let t = self.profile.start();
            let mut sent = 0;
            // One batch per source port (a flow's datagrams keep their order).
            for k in 0..s.srcs.len().max(1) {
                let mut msgs = s.tx[..s.tx_used]
                    .iter()
                    .filter(|(_, _, src)| *src as usize == k)
                    .map(|(b, a, _)| (&b[..], *a))
                    .peekable();
                if msgs.peek().is_none() {
                    continue;
                }
                let from = s.srcs.get(k).unwrap_or(&s.under);
                sent += from.send_batch(msgs).unwrap_or(0);
            }
            self.profile.add(Stage::Transmit, t, s.tx_used as u64);
            let lost = s.tx_used - sent;
            s.tx_used = 0;
            if lost > 0 {
                *self.drops.entry("underlay_tx_full").or_insert(0) += lost as u64;
            }
        }
    }
}
