//! Packets between switch and controller (OpenFlow 1.3 § 7.3.7, 7.4.1):
//! PACKET_IN carries a packet up, unbuffered (this switch keeps no
//! buffers), with the match fields saying where it came from; PACKET_OUT
//! brings one down with the actions to apply to it. FLOW_REMOVED (§ 7.4.2)
//! tells the controllers that a rule went.
//!
//! ```text
//! packet_in:  header | buffer_id (4) | total_len (2) | reason (1) | table (1)
//!             | cookie (8) | match (padded to 8) | pad (2) | frame   (1.3 and 1.5)
//! packet_in (1.0): header | buffer_id (4) | total_len (2) | in_port (2)
//!             | reason (1) | pad (1) | frame
//! packet_out: header | buffer_id (4) | in_port (4) | actions_len (2) | pad (6)
//!             | actions | frame
//! ```

use super::{actions, header, port_to10, put_match, Action, Message, Oxm, HEADER_LEN};
use super::{OF10, OF13, OXM_BASIC};
use crate::error::{need, Error, Layer, Result};
use crate::{be16, be32};

pub const PACKET_IN: u8 = 10;
pub const PACKET_OUT: u8 = 13;
/// "No buffer": the packet travels whole in the message.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// BAD_REQUEST code for a buffer id the switch does not hold.
pub const BRC_BUFFER_UNKNOWN: u16 = 8;

/// PACKET_IN of `frame` (cut from a packet `total_len` long),
/// unbuffered, with xid 0 (an asynchronous message): OpenFlow 1.3's
/// ([`packet_in_in`] writes other versions').
pub fn packet_in(
    total_len: u16,
    reason: u8,
    table_id: u8,
    cookie: u64,
    fields: &[Oxm<'_>],
    frame: &[u8],
) -> Vec<u8> {
    packet_in_in(OF13, total_len, reason, table_id, cookie, fields, frame)
}

/// [`packet_in`] in wire version `version`: 1.3's layout for 1.3 and
/// later (1.5's PACKET_IN is 1.3's); in 1.0, which has no match, table
/// or cookie, [`packet_in10`] with the in_port of the OXM_OF_IN_PORT
/// among `fields` (OFPP_NONE, 0xffff, without one). `reason` is written
/// as given (OVS writes the reasons a version lacks as `action`).
pub fn packet_in_in(
    version: u8,
    total_len: u16,
    reason: u8,
    table_id: u8,
    cookie: u64,
    fields: &[Oxm<'_>],
    frame: &[u8],
) -> Vec<u8> {
    if version <= OF10 {
        let in_port = fields
            .iter()
            .find(|o| o.class == OXM_BASIC && o.field == 0 && o.mask.is_none())
            .and_then(|o| <[u8; 4]>::try_from(o.value).ok())
            .map_or(0xffff, |p| port_to10(u32::from_be_bytes(p)));
        return packet_in10(total_len, in_port, reason, frame);
    }
    let mut m = header(version, PACKET_IN, 0, 0).to_vec();
    m.extend_from_slice(&NO_BUFFER.to_be_bytes());
    m.extend_from_slice(&total_len.to_be_bytes());
    m.push(reason);
    m.push(table_id);
    m.extend_from_slice(&cookie.to_be_bytes());
    put_match(&mut m, fields);
    m.extend_from_slice(&[0, 0]);
    let room = super::MAX_LEN - m.len();
    m.extend_from_slice(&frame[..frame.len().min(room)]);
    let len = (m.len() as u16).to_be_bytes();
    m[2..4].copy_from_slice(&len);
    m
}

/// OpenFlow 1.0's PACKET_IN (`ofp10_packet_in`) of `frame` (cut from a
/// packet `total_len` long) that came in on `in_port`, unbuffered, xid 0.
pub fn packet_in10(total_len: u16, in_port: u16, reason: u8, frame: &[u8]) -> Vec<u8> {
    let mut m = header(OF10, PACKET_IN, 0, 0).to_vec();
    m.extend_from_slice(&NO_BUFFER.to_be_bytes());
    m.extend_from_slice(&total_len.to_be_bytes());
    m.extend_from_slice(&in_port.to_be_bytes());
    m.extend_from_slice(&[reason, 0]);
    let room = super::MAX_LEN - m.len();
    m.extend_from_slice(&frame[..frame.len().min(room)]);
    let len = (m.len() as u16).to_be_bytes();
    m[2..4].copy_from_slice(&len);
    m
}

/// A 1.0 PACKET_IN, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketIn10<'a> {
    pub buffer_id: u32,
    pub total_len: u16,
    pub in_port: u16,
    pub reason: u8,
    pub frame: &'a [u8],
}

/// Read a 1.0 PACKET_IN; offsets in errors are the message's.
pub fn parse_packet_in10<'a>(m: &Message<'a>) -> Result<PacketIn10<'a>> {
    const FRAME_AT: usize = HEADER_LEN + 10;
    let b = m.bytes();
    need(Layer::OpenFlow, "packet_in", b, 0, FRAME_AT)?;
    Ok(PacketIn10 {
        buffer_id: be32(b, HEADER_LEN),
        total_len: be16(b, HEADER_LEN + 4),
        in_port: be16(b, HEADER_LEN + 6),
        reason: b[HEADER_LEN + 8],
        frame: &b[FRAME_AT..],
    })
}

pub const FLOW_REMOVED: u8 = 11;

/// A rule that went, as FLOW_REMOVED tells the controllers (§ 7.4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved<'a> {
    pub cookie: u64,
    pub priority: u16,
    /// 0 idle timeout, 1 hard timeout, 2 deleted.
    pub reason: u8,
    pub table_id: u8,
    pub duration_ns: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packets: u64,
    pub bytes: u64,
    pub matches: Vec<Oxm<'a>>,
}

impl FlowRemoved<'_> {
    /// The message, with xid 0 (asynchronous).
    pub fn emit(&self) -> Vec<u8> {
        let mut m = header(OF13, FLOW_REMOVED, 0, 0).to_vec();
        m.extend_from_slice(&self.cookie.to_be_bytes());
        m.extend_from_slice(&self.priority.to_be_bytes());
        m.push(self.reason);
        m.push(self.table_id);
        super::put_duration(&mut m, self.duration_ns);
        m.extend_from_slice(&self.idle_timeout.to_be_bytes());
        m.extend_from_slice(&self.hard_timeout.to_be_bytes());
        m.extend_from_slice(&self.packets.to_be_bytes());
        m.extend_from_slice(&self.bytes.to_be_bytes());
        put_match(&mut m, &self.matches);
        let len = (m.len() as u16).to_be_bytes();
        m[2..4].copy_from_slice(&len);
        m
    }
}

/// A PACKET_IN, read (a controller's view; tests and tools use it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn<'a> {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub matches: Vec<Oxm<'a>>,
    pub frame: &'a [u8],
}

/// Read a PACKET_IN of 1.3 or 1.5 (the same layout); offsets in errors
/// are the message's.
pub fn parse_packet_in<'a>(m: &Message<'a>) -> Result<PacketIn<'a>> {
    const MATCH_AT: usize = HEADER_LEN + 16;
    let b = m.bytes();
    need(Layer::OpenFlow, "packet_in", b, 0, MATCH_AT + 4)?;
    let match_len = be16(b, MATCH_AT + 2) as usize;
    if be16(b, MATCH_AT) != 1 || match_len < 4 {
        return Err(Error::invalid(
            Layer::OpenFlow,
            "match",
            MATCH_AT,
            "not an OXM match",
        ));
    }
    let frame_at = MATCH_AT + match_len.div_ceil(8) * 8 + 2;
    need(Layer::OpenFlow, "packet_in match", b, 0, frame_at)?;
    Ok(PacketIn {
        buffer_id: be32(b, HEADER_LEN),
        total_len: be16(b, HEADER_LEN + 4),
        reason: b[HEADER_LEN + 6],
        table_id: b[HEADER_LEN + 7],
        cookie: u64::from(be32(b, HEADER_LEN + 8)) << 32 | u64::from(be32(b, HEADER_LEN + 12)),
        matches: super::oxms(&b[MATCH_AT + 4..MATCH_AT + match_len], MATCH_AT + 4)?,
        frame: &b[frame_at..],
    })
}

/// A PACKET_OUT, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut<'a> {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action<'a>>,
    pub frame: &'a [u8],
}

/// Read a PACKET_OUT; offsets in errors are the message's.
pub fn parse_packet_out<'a>(m: &Message<'a>) -> Result<PacketOut<'a>> {
    const ACTIONS_AT: usize = HEADER_LEN + 16;
    let b = m.bytes();
    need(Layer::OpenFlow, "packet_out", b, 0, ACTIONS_AT)?;
    let len = be16(b, HEADER_LEN + 8) as usize;
    need(Layer::OpenFlow, "packet_out actions", b, ACTIONS_AT, len)?;
    Ok(PacketOut {
        buffer_id: be32(b, HEADER_LEN),
        in_port: be32(b, HEADER_LEN + 4),
        actions: actions(&b[ACTIONS_AT..ACTIONS_AT + len], ACTIONS_AT)?,
        frame: &b[ACTIONS_AT + len..],
    })
}

/// PACKET_OUT of `frame` with `acts`, as if it came in on `in_port`.
pub fn packet_out(xid: u32, in_port: u32, acts: &[Action<'_>], frame: &[u8]) -> Vec<u8> {
    let mut m = header(OF13, PACKET_OUT, 0, xid).to_vec();
    m.extend_from_slice(&NO_BUFFER.to_be_bytes());
    m.extend_from_slice(&in_port.to_be_bytes());
    m.extend_from_slice(&[0; 8]);
    let start = m.len();
    for a in acts {
        a.emit(&mut m);
    }
    let alen = ((m.len() - start) as u16).to_be_bytes();
    m[HEADER_LEN + 8..HEADER_LEN + 10].copy_from_slice(&alen);
    m.extend_from_slice(frame);
    let len = (m.len().min(super::MAX_LEN) as u16).to_be_bytes();
    m[2..4].copy_from_slice(&len);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{parse_flow_stats_request, parse_multipart};
    use proptest::prelude::*;

    proptest! {
        /// Any body under a PACKET_OUT, PACKET_IN or multipart header is
        /// read or refused, never a panic; what reads builds again to
        /// bytes that read the same.
        #[test]
        fn any_body_reads_or_is_refused(typ in prop_oneof![Just(PACKET_OUT), Just(PACKET_IN), Just(18u8)],
                                        body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = header(OF13, typ, HEADER_LEN + body.len(), 1).to_vec();
            b.extend_from_slice(&body);
            let m = Message::new_checked(&b).unwrap();
            if let Ok(po) = parse_packet_out(&m) {
                let again = packet_out(1, po.in_port, &po.actions, po.frame);
                let po2 = parse_packet_out(&Message::new_checked(&again).unwrap()).unwrap();
                prop_assert_eq!(po2.actions, po.actions);
                prop_assert_eq!(po2.frame, po.frame);
            }
            let _ = parse_packet_in(&m);
            let _ = parse_packet_in10(&m);
            if let Ok(mp) = parse_multipart(&m) {
                let _ = parse_flow_stats_request(mp.body);
            }
        }
    }

    #[test]
    fn packet_in_and_out_read_what_they_build() {
        let port = 7u32.to_be_bytes();
        let f = [Oxm {
            class: OXM_BASIC,
            field: 0,
            value: &port,
            mask: None,
        }];
        let frame: Vec<u8> = (0..60u8).collect();
        let m = packet_in(60, 0, 0, 0x77, &f, &frame);
        let msg = Message::new_checked(&m).unwrap();
        assert_eq!(
            (msg.msg_type(), msg.xid(), msg.len()),
            (PACKET_IN, 0, m.len())
        );
        let p = parse_packet_in(&msg).unwrap();
        assert_eq!(
            (p.buffer_id, p.total_len, p.reason, p.cookie, p.frame),
            (NO_BUFFER, 60, 0, 0x77, &frame[..])
        );
        assert_eq!(p.matches, f.to_vec());

        let acts = [Action::Output {
            port: 0xffff_fffb,
            max_len: 0,
        }];
        let o = packet_out(9, 7, &acts, &frame);
        let msg = Message::new_checked(&o).unwrap();
        let p = parse_packet_out(&msg).unwrap();
        assert_eq!(
            (p.buffer_id, p.in_port, p.frame),
            (NO_BUFFER, 7, &frame[..])
        );
        assert_eq!(p.actions, acts.to_vec());
        // Every truncation of either fails cleanly or reads less.
        for n in 0..o.len() {
            let mut t = o[..n.max(8)].to_vec();
            let l = (t.len() as u16).to_be_bytes();
            t[2..4].copy_from_slice(&l);
            if let Ok(msg) = Message::new_checked(&t) {
                let _ = parse_packet_out(&msg);
                let _ = parse_packet_in(&msg);
            }
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The first line `ovs-ofctl ofp-print` prints for `msg`, where it is
    /// installed.
    fn ofp_print_head(msg: &[u8]) -> Option<String> {
        let out = std::process::Command::new("ovs-ofctl")
            .args(["ofp-print", &hex(msg)])
            .output()
            .ok()?;
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        Some(text.lines().next().unwrap_or("").to_string())
    }

    /// PACKET_IN in 1.0 (`ofp10_packet_in`) and 1.5 (1.3's layout), 64
    /// bytes of a 291-byte frame, as `ovs-ofctl ofp-print` (OVS 3.1)
    /// reads them:
    ///
    /// ```text
    /// OFPT_PACKET_IN (xid=0x0): total_len=291 in_port=2 (via action) data_len=64 (unbuffered) (***total_len != data_len***)
    /// OFPT_PACKET_IN (OF1.5) (xid=0x0): table_id=3 cookie=0x77 total_len=291 reg11=0x2,in_port=2 (via action) data_len=64 (unbuffered) (***total_len != data_len***)
    /// ```
    #[test]
    fn packet_in_of_each_version() {
        let frame: Vec<u8> = (0..64u8).collect();
        let (port, reg11) = ([0, 0, 0, 2], [0, 0, 0, 2]);
        let fields = [
            Oxm {
                class: OXM_BASIC,
                field: 0,
                value: &port,
                mask: None,
            },
            Oxm {
                class: crate::openflow::NXM_1,
                field: 11,
                value: &reg11,
                mask: None,
            },
        ];
        let m10 = packet_in10(291, 2, 1, &frame);
        assert_eq!(
            hex(&m10),
            format!("010a005200000000ffffffff012300020100{}", hex(&frame))
        );
        // packet_in_in in 1.0 takes the in_port from the fields.
        assert_eq!(packet_in_in(OF10, 291, 1, 3, 0x77, &fields, &frame), m10);
        let p = parse_packet_in10(&Message::new_checked(&m10).unwrap()).unwrap();
        assert_eq!(
            p,
            PacketIn10 {
                buffer_id: NO_BUFFER,
                total_len: 291,
                in_port: 2,
                reason: 1,
                frame: &frame,
            }
        );
        assert_eq!(
            packet_in_in(OF10, 0, 0, 0, 0, &[], &[])[HEADER_LEN + 6..HEADER_LEN + 8],
            [0xff, 0xff],
            "no in_port: OFPP_NONE"
        );
        let m15 = packet_in_in(crate::openflow::OF15, 291, 1, 3, 0x77, &fields, &frame);
        assert_eq!(
            hex(&m15),
            format!(
                "060a007200000000ffffffff01230103{}{}{}",
                "0000000000000077",
                "000100148000000400000002000116040000000200000000",
                format_args!("0000{}", hex(&frame))
            )
        );
        let p = parse_packet_in(&Message::new_checked(&m15).unwrap()).unwrap();
        assert_eq!(
            (p.total_len, p.reason, p.table_id, p.cookie, p.frame),
            (291, 1, 3, 0x77, &frame[..])
        );
        assert_eq!(p.matches, fields.to_vec());
        // 1.3's is 1.5's but for the version.
        let m13 = packet_in(291, 1, 3, 0x77, &fields, &frame);
        assert_eq!(m13[1..], m15[1..]);
        assert_eq!(m13[0], OF13);
        if let Some(head) = ofp_print_head(&m10) {
            assert_eq!(head, "OFPT_PACKET_IN (xid=0x0): total_len=291 in_port=2 (via action) data_len=64 (unbuffered) (***total_len != data_len***)");
        }
        if let Some(head) = ofp_print_head(&m15) {
            assert_eq!(head, "OFPT_PACKET_IN (OF1.5) (xid=0x0): table_id=3 cookie=0x77 total_len=291 reg11=0x2,in_port=2 (via action) data_len=64 (unbuffered) (***total_len != data_len***)");
        }
        // Cut anywhere, the 1.0 reader refuses or reads less.
        for n in 8..m10.len() {
            let mut t = m10[..n].to_vec();
            t[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            let _ = parse_packet_in10(&Message::new_checked(&t).unwrap());
        }
    }

    #[test]
    fn flow_removed_has_its_layout() {
        let port = 3u32.to_be_bytes();
        let r = FlowRemoved {
            cookie: 0x77,
            priority: 5,
            reason: 0,
            table_id: 0,
            duration_ns: 2_500_000_000,
            idle_timeout: 2,
            hard_timeout: 0,
            packets: 9,
            bytes: 900,
            matches: vec![Oxm {
                class: OXM_BASIC,
                field: 0,
                value: &port,
                mask: None,
            }],
        }
        .emit();
        let m = Message::new_checked(&r).unwrap();
        assert_eq!((m.msg_type(), m.len()), (FLOW_REMOVED, 48 + 16));
        assert_eq!(&r[8..16], &0x77u64.to_be_bytes());
        assert_eq!(&r[20..24], &2u32.to_be_bytes(), "whole seconds");
        assert_eq!(&r[24..28], &500_000_000u32.to_be_bytes());
    }

    /// The PACKET_OUT a learning switch sends to flood: unbuffered,
    /// in_port 1, output FLOOD with os-ken's default max_len (0xffe5,
    /// OFPCML_MAX), then the frame.
    #[test]
    fn a_flood_packet_out_reads() {
        let mut b = vec![4, 13, 0, 0, 0, 0, 0, 5];
        b.extend_from_slice(&NO_BUFFER.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes());
        b.extend_from_slice(&[0, 16, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[
            0, 0, 0, 16, 0xff, 0xff, 0xff, 0xfb, 0xff, 0xe5, 0, 0, 0, 0, 0, 0,
        ]);
        b.extend_from_slice(&[0xaa; 42]);
        let l = (b.len() as u16).to_be_bytes();
        b[2..4].copy_from_slice(&l);
        let p = parse_packet_out(&Message::new_checked(&b).unwrap()).unwrap();
        assert_eq!(
            p.actions,
            vec![Action::Output {
                port: 0xffff_fffb,
                max_len: 0xffe5
            }]
        );
        assert_eq!(p.frame.len(), 42);
    }
}
