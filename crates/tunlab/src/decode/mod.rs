//! `tunlab decode`: every frame of a capture, layer by layer, every field.
//!
//! The walk produces plain data ([`Frame`], [`Layer`], [`Field`]) that two
//! renderers share: a text view in the manner of scapy's `show()`, and JSON
//! for scripts and for the cross-checks against scapy and tshark. Field
//! names follow scapy's where scapy has the field, so the two can be
//! compared name for name.
//!
//! This is a diagnostic tool, not the datapath: it allocates freely.

mod ip;
mod ipv6_ext;
mod link;
mod ports;

pub use link::decode_record;
pub use ports::{DecodeAs, Tunnel};
use serde::Serialize;
use tunlab_wire::ethernet::{self, EtherType};
use tunlab_wire::{arp, geneve, gre, icmp, stt, vlan, vxlan, Error};

/// A field's value: numbers stay numbers in JSON.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Value {
    Int(u64),
    Bool(bool),
    Text(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Field {
    pub name: &'static str,
    pub value: Value,
    /// How a person reads it: "0x0800 (IPv4)", "correct", a port's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Layer {
    pub name: &'static str,
    /// Byte offset of the layer in the frame.
    pub offset: usize,
    pub fields: Vec<Field>,
    /// Sub-layers shown indented: Geneve options.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Layer>,
    /// Something to flag that is not a parse error (a bad checksum, an
    /// unknown critical option).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub number: usize,
    pub captured: usize,
    pub original: usize,
    pub layers: Vec<Layer>,
    /// What was odd in the capture's record of this frame (lengths).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capture_notes: Vec<String>,
    /// Why decoding stopped early, naming layer, field and offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Frame {
    pub fn is_malformed(&self) -> bool {
        self.error.is_some()
    }
}

impl Layer {
    fn new(name: &'static str, offset: usize) -> Layer {
        Layer {
            name,
            offset,
            fields: Vec::new(),
            children: Vec::new(),
            warnings: Vec::new(),
        }
    }
    fn int(&mut self, name: &'static str, v: impl Into<u64>) -> &mut Layer {
        self.fields.push(Field {
            name,
            value: Value::Int(v.into()),
            note: None,
        });
        self
    }
    fn flag(&mut self, name: &'static str, v: bool) -> &mut Layer {
        self.fields.push(Field {
            name,
            value: Value::Bool(v),
            note: None,
        });
        self
    }
    fn text(&mut self, name: &'static str, v: impl ToString) -> &mut Layer {
        self.fields.push(Field {
            name,
            value: Value::Text(v.to_string()),
            note: None,
        });
        self
    }
    /// Attach a human note to the last field.
    fn note(&mut self, n: impl Into<String>) -> &mut Layer {
        if let Some(f) = self.fields.last_mut() {
            f.note = Some(n.into());
        }
        self
    }
    fn checksum(&mut self, name: &'static str, v: u16, ok: Option<bool>) -> &mut Layer {
        self.int(name, v);
        match ok {
            Some(true) => self.note("correct"),
            Some(false) => {
                self.warnings.push(format!("{name} 0x{v:04x} is incorrect"));
                self.note("incorrect")
            }
            None => self,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Decoding state for one frame.
struct Walk<'a> {
    frame: &'a [u8],
    layers: Vec<Layer>,
    ports: &'a DecodeAs,
}

type Step = Result<(), Error>;

impl<'a> Walk<'a> {
    fn ethernet(&mut self, at: usize) -> Step {
        let b = &self.frame[at..];
        let e = ethernet::Frame::new_checked(b).map_err(|x| x.at(at))?;
        let mut l = Layer::new("Ethernet", at);
        l.text("dst", e.dst()).text("src", e.src());
        let et = e.ethertype();
        l.int("type", u16::from(et)).note(ethertype_note(et));
        self.layers.push(l);
        self.after_ethertype(et, at + ethernet::HEADER_LEN)
    }

    fn after_ethertype(&mut self, mut et: EtherType, mut at: usize) -> Step {
        while et.is_vlan_tpid() {
            let t = vlan::Tag::new_checked(&self.frame[at..]).map_err(|x| x.at(at))?;
            let name = if et == EtherType::QinQ {
                "802.1AD"
            } else {
                "802.1Q"
            };
            let tci = t.tci();
            let mut l = Layer::new(name, at);
            l.int("prio", tci.pcp.get())
                .int("dei", tci.dei as u8)
                .int("vlan", tci.vid.get())
                .int("type", u16::from(t.ethertype()))
                .note(ethertype_note(t.ethertype()));
            self.layers.push(l);
            et = t.ethertype();
            at += vlan::TAG_LEN;
        }
        match et {
            EtherType::Ipv4 => self.ipv4(at),
            EtherType::Ipv6 => self.ipv6(at),
            EtherType::Arp => self.arp(at),
            EtherType::TransEtherBridging => self.ethernet(at),
            _ => {
                self.raw(at, self.frame.len());
                Ok(())
            }
        }
    }

    fn geneve(&mut self, at: usize, end: usize) -> Step {
        let g = geneve::Packet::new_checked(&self.frame[at..end]).map_err(|x| x.at(at))?;
        let mut l = Layer::new("GENEVE", at);
        l.int("version", g.version())
            .int("optionlen", (g.options_len() / 4) as u8)
            .note(format!("{} bytes", g.options_len()))
            .flag("oam", g.oam())
            .flag("critical", g.critical())
            .int("reserved", g.reserved1())
            .int("proto", u16::from(g.protocol()))
            .note(ethertype_note(g.protocol()))
            .int("vni", g.vni().get())
            .int("reserved2", g.reserved2());
        if g.version() != 0 {
            l.warnings
                .push("version is not 0: a receiver drops this (RFC 8926 § 3.4)".into());
        }
        let mut oat = at + geneve::HEADER_LEN;
        let mut any_critical = false;
        for o in g.options() {
            let mut c = Layer::new("Geneve Option", oat);
            c.int("classid", o.class())
                .note(if o.class() == geneve::OVN_CLASS {
                    "Open Virtual Networking (OVN)"
                } else {
                    ""
                })
                .int("type", o.opt_type().0)
                .note(if o.opt_type().critical() {
                    "critical"
                } else {
                    "not critical"
                })
                .int("reserved", o.reserved())
                .int("length", o.len_words())
                .note(format!("{} bytes of data", o.data().len()))
                .text("data", hex(o.data()));
            any_critical |= o.opt_type().critical();
            if o.class() == geneve::OVN_CLASS && o.opt_type().0 == geneve::OVN_TYPE {
                if let Some(ports) = geneve::OvnPorts::from_data(o.data()) {
                    c.int("ingress", ports.ingress())
                        .note("OVN logical ingress port")
                        .int("egress", ports.egress)
                        .note("OVN logical egress port");
                }
            } else if o.opt_type().critical() {
                c.warnings.push(format!(
                    "unknown critical option class 0x{:04x} type 0x{:02x}: a receiver that does not know it drops the packet (RFC 8926 § 3.5)",
                    o.class(),
                    o.opt_type().0
                ));
            }
            oat += o.len();
            l.children.push(c);
        }
        if any_critical && !g.critical() {
            l.warnings
                .push("an option is critical but the C bit is clear".into());
        }
        self.layers.push(l);
        let inner = at + g.header_len();
        self.tunnel_payload(g.protocol(), inner, end)
    }

    fn tunnel_payload(&mut self, proto: EtherType, at: usize, end: usize) -> Step {
        match proto {
            EtherType::TransEtherBridging => self.inner(at, end, |w, a| w.ethernet(a)),
            EtherType::Ipv4 => self.inner(at, end, |w, a| w.ipv4(a)),
            EtherType::Ipv6 => self.inner(at, end, |w, a| w.ipv6(a)),
            _ => {
                self.raw(at, end);
                Ok(())
            }
        }
    }

    /// Decode an inner frame that ends at `end` (the outer packet's end).
    fn inner(
        &mut self,
        at: usize,
        end: usize,
        f: impl FnOnce(&mut Walk<'a>, usize) -> Step,
    ) -> Step {
        let outer = self.frame;
        self.frame = &outer[..end];
        let r = f(self, at);
        self.frame = outer;
        r
    }

    fn vxlan(&mut self, at: usize, end: usize) -> Step {
        let v = vxlan::Packet::new_checked(&self.frame[at..end]).map_err(|x| x.at(at))?;
        let mut l = Layer::new("VXLAN", at);
        l.int("flags", v.flags())
            .note(if v.vni_valid() {
                "I (VNI valid)"
            } else {
                "I clear: no valid VNI"
            })
            .int("reserved1", v.reserved1())
            .int("vni", v.vni().get())
            .int("reserved2", v.reserved2());
        if !v.vni_valid() {
            l.warnings
                .push("I flag is clear: a receiver drops this (RFC 7348 § 5)".into());
        }
        self.layers.push(l);
        self.inner(at + vxlan::HEADER_LEN, end, |w, a| w.ethernet(a))
    }

    fn gre(&mut self, at: usize, end: usize) -> Step {
        let b = &self.frame[at..end];
        let g = gre::Packet::new_checked(b).map_err(|x| x.at(at))?;
        let mut l = Layer::new("GRE", at);
        l.flag("chksum_present", g.has_checksum())
            .flag("key_present", g.has_key())
            .flag("seqnum_present", g.has_seq())
            .int("reserved0", g.reserved0())
            .int("version", g.version())
            .int("proto", u16::from(g.protocol()))
            .note(ethertype_note(g.protocol()));
        if let Some(c) = g.checksum() {
            l.checksum("chksum", c, Some(g.verify_checksum()));
            l.int("reserved1", g.reserved1().unwrap_or(0));
        }
        if let Some(k) = g.key() {
            l.int("key", k);
        }
        if let Some(s) = g.seq() {
            l.int("sequence_number", s);
        }
        if let Err(e) = g.check() {
            if !matches!(e.kind, tunlab_wire::ErrorKind::Checksum { .. }) {
                l.warnings.push(e.to_string());
            }
        }
        let nvgre = gre::is_nvgre(&g);
        self.layers.push(l);
        if nvgre {
            // NVGRE is keyed GRE over Ethernet; show its reading of the key.
            let (vsid, flow) = gre::nvgre_split(g.key().unwrap_or(0));
            let mut n = Layer::new("NVGRE", at + 4);
            n.int("vsid", vsid.get())
                .note("virtual subnet ID")
                .int("flowid", flow);
            self.layers.push(n);
        }
        self.tunnel_payload(g.protocol(), at + g.header_len(), end)
    }

    fn stt(&mut self, at: usize, end: usize, seq: u32) -> Step {
        let (frame_len, offset) = stt::split_seq(seq);
        if offset != 0 || (end - at) != frame_len as usize {
            let mut l = Layer::new("STT segment", at);
            l.int("offset", offset)
                .int("length", (end - at) as u64)
                .int("frame_length", frame_len)
                .note("reassemble all segments to decode the STT frame");
            self.layers.push(l);
            if offset != 0 {
                self.raw(at, end);
                return Ok(());
            }
        }
        let s = stt::Packet::new_checked(&self.frame[at..end]).map_err(|x| x.at(at))?;
        let mut l = Layer::new("STT", at);
        l.int("version", s.version())
            .int("flags", s.flags())
            .note(stt_flags_note(s.flags()))
            .int("l4offset", s.l4_offset())
            .int("reserved", s.reserved())
            .int("mss", s.mss())
            .int("pcp", s.pcp())
            .flag("v", s.vlan_valid())
            .int("vlan", s.vlan_id())
            .int("context_id", s.context_id())
            .int("padding", s.padding());
        if s.check().is_err() {
            l.warnings
                .push("version is not 0: a receiver drops this".into());
        }
        self.layers.push(l);
        let inner = at + stt::HEADER_LEN;
        if offset == 0 && (end - at) == frame_len as usize {
            self.inner(inner, end, |w, a| w.ethernet(a))
        } else {
            self.raw(inner, end);
            Ok(())
        }
    }

    /// ARP of any hardware and protocol (as tshark shows it): the
    /// addresses are as long as the header says; Ethernet's and IPv4's
    /// are shown as such, others in hex.
    fn arp(&mut self, at: usize) -> Step {
        let b = &self.frame[at..];
        let short = |field, needed| {
            tunlab_wire::Error::truncated(tunlab_wire::error::Layer::Arp, field, 0, needed, b.len())
                .at(at)
        };
        if b.len() < 8 {
            return Err(short("header", 8));
        }
        let (hlen, plen) = (usize::from(b[4]), usize::from(b[5]));
        let len = 8 + 2 * (hlen + plen);
        if b.len() < len {
            return Err(short("addresses", len));
        }
        let hw = |a: &[u8]| match <[u8; 6]>::try_from(a) {
            Ok(m) => ethernet::MacAddr(m).to_string(),
            Err(_) => hex(a),
        };
        let proto = |a: &[u8]| match <[u8; 4]>::try_from(a) {
            Ok(ip) => std::net::Ipv4Addr::from(ip).to_string(),
            Err(_) => hex(a),
        };
        let (sha, spa) = (8, 8 + hlen);
        let (tha, tpa) = (spa + plen, spa + plen + hlen);
        let op = u16::from_be_bytes([b[6], b[7]]);
        let mut l = Layer::new("ARP", at);
        l.int("hwtype", u16::from_be_bytes([b[0], b[1]]))
            .int("ptype", u16::from_be_bytes([b[2], b[3]]))
            .int("hwlen", b[4])
            .int("plen", b[5])
            .int("op", op)
            .note(match op {
                arp::OP_REQUEST => "who-has",
                arp::OP_REPLY => "is-at",
                _ => "",
            })
            .text("hwsrc", hw(&b[sha..spa]))
            .text("psrc", proto(&b[spa..tha]))
            .text("hwdst", hw(&b[tha..tpa]))
            .text("pdst", proto(&b[tpa..len]));
        self.layers.push(l);
        self.padding(at + len);
        Ok(())
    }

    fn raw(&mut self, at: usize, end: usize) {
        let end = end.min(self.frame.len());
        if at < end {
            let mut l = Layer::new("Raw", at);
            l.text("load", hex(&self.frame[at..end]))
                .note(format!("{} bytes", end - at));
            self.layers.push(l);
        }
    }

    fn padding(&mut self, end: usize) {
        if end < self.frame.len() && self.frame.len() - end > 0 {
            // Only the outermost walk sees Ethernet padding; inner walks are
            // cut at their packet's end.
            let mut l = Layer::new("Padding", end);
            l.text("load", hex(&self.frame[end..]))
                .note(format!("{} bytes", self.frame.len() - end));
            self.layers.push(l);
            self.frame = &self.frame[..end];
        }
    }
}

/// Decode one Ethernet frame, tunnels on their default ports.
pub fn decode_frame(number: usize, data: &[u8], original: usize) -> Frame {
    decode_frame_as(number, data, original, &DecodeAs::default())
}

/// Decode one Ethernet frame, tunnels on the ports `ports` names.
pub fn decode_frame_as(number: usize, data: &[u8], original: usize, ports: &DecodeAs) -> Frame {
    let mut w = Walk {
        frame: data,
        layers: Vec::new(),
        ports,
    };
    let r = w.ethernet(0);
    finish(
        number,
        data.len(),
        original,
        w.layers,
        r.err().map(|e| e.to_string()),
    )
}

/// A decoded frame, its error (if any) saying when the capture kept less
/// than was on the wire.
fn finish(
    number: usize,
    captured: usize,
    original: usize,
    layers: Vec<Layer>,
    mut error: Option<String>,
) -> Frame {
    if let (Some(e), true) = (&mut error, captured < original) {
        e.push_str(&format!(
            " (the capture kept only {captured} of {original} bytes)"
        ));
    }
    Frame {
        number,
        captured,
        original,
        layers,
        capture_notes: Vec::new(),
        error,
    }
}

fn ethertype_note(et: EtherType) -> String {
    match et {
        EtherType::Unknown(_) => String::new(),
        e => e.name().to_string(),
    }
}

fn ip_flags_note(f: u8) -> String {
    let mut v = Vec::new();
    if f & 4 != 0 {
        v.push("evil");
    }
    if f & 2 != 0 {
        v.push("DF");
    }
    if f & 1 != 0 {
        v.push("MF");
    }
    v.join("+")
}

fn tcp_flags_note(f: u8) -> String {
    let names = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
    names
        .iter()
        .enumerate()
        .filter(|(i, _)| f & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join("+")
}

fn stt_flags_note(f: u8) -> String {
    let names = ["csum-verified", "csum-partial", "ipv4", "tcp"];
    let mut v: Vec<&str> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| f & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    if f & 0xf0 != 0 {
        v.push("reserved bits set");
    }
    v.join("+")
}

fn icmp_note(v6: bool, t: u8, code: u8) -> &'static str {
    match (v6, t, code) {
        (false, icmp::V4_ECHO_REPLY, _) => "echo-reply",
        (false, icmp::V4_ECHO_REQUEST, _) => "echo-request",
        (false, icmp::V4_DEST_UNREACHABLE, icmp::V4_CODE_FRAG_NEEDED) => {
            "dest-unreach: fragmentation-needed"
        }
        (false, icmp::V4_DEST_UNREACHABLE, _) => "dest-unreach",
        (true, icmp::V6_PACKET_TOO_BIG, _) => "packet-too-big",
        (true, icmp::V6_ECHO_REQUEST, _) => "echo-request",
        (true, icmp::V6_ECHO_REPLY, _) => "echo-reply",
        _ => "",
    }
}

/// Render a frame like scapy's `show()`.
pub fn render_text(f: &Frame, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "Frame {}: {} bytes", f.number, f.captured);
    if f.captured < f.original {
        let _ = write!(out, " captured of {} on the wire", f.original);
    }
    out.push('\n');
    for n in &f.capture_notes {
        let _ = writeln!(out, "  (capture: {n})");
    }
    for l in &f.layers {
        render_layer(l, "", out);
    }
    if let Some(e) = &f.error {
        let _ = writeln!(out, "###[ MALFORMED ]###\n  error           = {e}");
    }
    out.push('\n');
}

fn render_layer(l: &Layer, indent: &str, out: &mut String) {
    use std::fmt::Write;
    let _ = writeln!(out, "{indent}###[ {} ]### (offset {})", l.name, l.offset);
    for f in &l.fields {
        let v = match &f.value {
            Value::Int(i) => match f.name {
                "type" | "proto" | "chksum" | "flags" | "classid" | "nh" | "context_id" | "key"
                | "tos" => {
                    // Hex, zero-padded to the field's byte width.
                    let width = if *i > 0xffff_ffff {
                        16
                    } else if *i > 0xffff {
                        8
                    } else if *i > 0xff {
                        4
                    } else {
                        2
                    };
                    format!("0x{i:0width$x}")
                }
                _ => i.to_string(),
            },
            Value::Bool(b) => (*b as u8).to_string(),
            Value::Text(t) => {
                if f.name == "load" && t.len() > 64 {
                    format!("{}...", &t[..64])
                } else {
                    t.clone()
                }
            }
        };
        match &f.note {
            Some(n) if !n.is_empty() => {
                let _ = writeln!(out, "{indent}  {:<15} = {v} ({n})", f.name);
            }
            _ => {
                let _ = writeln!(out, "{indent}  {:<15} = {v}", f.name);
            }
        }
    }
    for w in &l.warnings {
        let _ = writeln!(out, "{indent}  !! {w}");
    }
    let child_indent = format!("{indent}  |");
    for c in &l.children {
        render_layer(c, &child_indent, out);
    }
}
