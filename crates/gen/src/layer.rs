//! What each layer is: its fields (scapy's names and defaults), which
//! values they take, and how its bytes are written. A description from
//! [`crate::spec`] becomes a [`Stack`] here; every error names the layer,
//! the field and the position, and lists what is allowed.

use crate::spec::{self, Field, LayerSpec, Spanned, SpecError, Value};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The layers a packet can be made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ether,
    Dot1Q,
    Dot1AD,
    IP,
    IPv6,
    UDP,
    TCP,
    GENEVE,
    VXLAN,
    GRE,
    NVGRE,
    STT,
    Raw,
    Pad,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::Ether,
        Kind::Dot1Q,
        Kind::Dot1AD,
        Kind::IP,
        Kind::IPv6,
        Kind::UDP,
        Kind::TCP,
        Kind::GENEVE,
        Kind::VXLAN,
        Kind::GRE,
        Kind::NVGRE,
        Kind::STT,
        Kind::Raw,
        Kind::Pad,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ether => "Ether",
            Kind::Dot1Q => "Dot1Q",
            Kind::Dot1AD => "Dot1AD",
            Kind::IP => "IP",
            Kind::IPv6 => "IPv6",
            Kind::UDP => "UDP",
            Kind::TCP => "TCP",
            Kind::GENEVE => "GENEVE",
            Kind::VXLAN => "VXLAN",
            Kind::GRE => "GRE",
            Kind::NVGRE => "NVGRE",
            Kind::STT => "STT",
            Kind::Raw => "Raw",
            Kind::Pad => "pad",
        }
    }

    fn parse(s: &Spanned<String>) -> Result<Kind, SpecError> {
        let n = s.v.as_str();
        let k = match n {
            "Padding" | "pad" => Some(Kind::Pad),
            _ => Kind::ALL.into_iter().find(|k| k.name() == n),
        };
        k.ok_or_else(|| {
            SpecError::new(
                s.at,
                format!(
                    "unknown layer '{n}'; layers: {}",
                    Kind::ALL.map(Kind::name).join(", ")
                ),
            )
        })
    }

    /// The fields this layer takes, in wire order.
    pub fn fields(self) -> &'static [FieldDef] {
        use Dflt::{Auto, V};
        use Ty::*;
        macro_rules! f {
            ($n:expr, $t:expr, $d:expr) => {
                FieldDef {
                    name: $n,
                    ty: $t,
                    default: $d,
                }
            };
        }
        match self {
            Kind::Ether => &[
                f!("dst", Mac, V(0xffff_ffff_ffff)),
                f!("src", Mac, V(0)),
                f!("type", EtherType, Auto),
            ],
            Kind::Dot1Q | Kind::Dot1AD => &[
                f!("prio", Int(3), V(0)),
                f!("dei", Int(1), V(0)),
                f!("vlan", Int(12), V(1)),
                f!("type", EtherType, Auto),
            ],
            Kind::IP => &[
                f!("version", Int(4), V(4)),
                f!("ihl", Int(4), V(5)),
                f!("tos", Int(8), V(0)),
                f!("len", Int(16), Auto),
                f!("id", Int(16), V(1)),
                f!("flags", IpFlags, V(0)),
                f!("frag", Int(13), V(0)),
                f!("ttl", Int(8), V(64)),
                f!("proto", Int(8), Auto),
                f!("chksum", Int(16), Auto),
                f!("src", Ip4, V(0x7f00_0001)),
                f!("dst", Ip4, V(0x7f00_0001)),
            ],
            Kind::IPv6 => &[
                f!("version", Int(4), V(6)),
                f!("tc", Int(8), V(0)),
                f!("fl", Int(20), V(0)),
                f!("plen", Int(16), Auto),
                f!("nh", Int(8), Auto),
                f!("hlim", Int(8), V(64)),
                f!("src", Ip6, V(1)),
                f!("dst", Ip6, V(1)),
            ],
            Kind::UDP => &[
                f!("sport", Int(16), Auto),
                f!("dport", Int(16), Auto),
                f!("len", Int(16), Auto),
                f!("chksum", Int(16), Auto),
            ],
            Kind::TCP => &[
                f!("sport", Int(16), V(20)),
                f!("dport", Int(16), V(80)),
                f!("seq", Int(32), V(0)),
                f!("ack", Int(32), V(0)),
                f!("dataofs", Int(4), V(5)),
                f!("reserved", Int(3), V(0)),
                f!("flags", TcpFlags, V(0x02)),
                f!("window", Int(16), V(8192)),
                f!("chksum", Int(16), Auto),
                f!("urgptr", Int(16), V(0)),
            ],
            Kind::GENEVE => &[
                f!("version", Int(2), V(0)),
                f!("optionlen", Int(6), Auto),
                f!("oam", Int(1), V(0)),
                f!("critical", Int(1), V(0)),
                f!("reserved", Int(6), V(0)),
                f!("proto", EtherType, Auto),
                f!("vni", Int(24), V(0)),
                f!("reserved2", Int(8), V(0)),
                // OVN's option and any others: opt=ovn(ingress=,egress=),
                // opt=tlv(class=,type=,data=), or a list of them.
                f!("opt", Options, V(0)),
                // The TRex article's spelling of one option.
                f!("options_class", Int(16), V(0)),
                f!("options_type", Int(8), V(0)),
                f!("options_len", Int(5), Auto),
                f!("options_data", Bytes, V(0)),
            ],
            Kind::VXLAN => &[
                f!("flags", Int(8), V(0x08)),
                f!("reserved1", Int(24), V(0)),
                f!("vni", Int(24), V(0)),
                f!("reserved2", Int(8), V(0)),
            ],
            Kind::GRE => &[
                f!("chksum_present", Int(1), Auto),
                f!("key_present", Int(1), Auto),
                f!("seqnum_present", Int(1), Auto),
                f!("version", Int(3), V(0)),
                f!("proto", EtherType, Auto),
                f!("chksum", Int(16), Auto),
                f!("key", Int(32), V(0)),
                f!("sequence_number", Int(32), V(0)),
            ],
            Kind::NVGRE => &[f!("vsid", Int(24), V(0)), f!("flowid", Int(8), V(0))],
            Kind::STT => &[
                f!("sport", Int(16), V(49152)),
                f!("dport", Int(16), V(7471)),
                f!("pktid", Int(32), V(0)),
                f!("window", Int(16), V(65535)),
                f!("version", Int(8), V(0)),
                f!("flags", Int(8), V(0)),
                f!("l4_offset", Int(8), V(0)),
                f!("mss", Int(16), V(0)),
                f!("pcp", Int(3), V(0)),
                f!("v", Int(1), V(0)),
                f!("vlan", Int(12), V(0)),
                f!("context", Int(64), V(0)),
            ],
            Kind::Raw => &[f!("load", Bytes, V(0))],
            Kind::Pad => &[],
        }
    }
}

/// What values a field takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// An unsigned integer of this many bits (decimal or 0x hex).
    Int(u32),
    Mac,
    Ip4,
    Ip6,
    /// 16 bits, or a name: IPv4, IPv6, ARP, 802.1Q, 802.1AD, TEB.
    EtherType,
    /// IPv4 flags: a number or DF, MF, DF+MF.
    IpFlags,
    /// TCP flags: a number or letters (S, SA, A, PA, F, R, ...).
    TcpFlags,
    Bytes,
    Options,
}

impl Ty {
    fn bits(self) -> u32 {
        match self {
            Ty::Int(b) => b,
            Ty::Mac => 48,
            Ty::Ip4 => 32,
            Ty::Ip6 => 128,
            Ty::EtherType => 16,
            Ty::IpFlags => 3,
            Ty::TcpFlags => 9,
            Ty::Bytes | Ty::Options => 0,
        }
    }

    fn describe(self) -> String {
        match self {
            Ty::Int(b) => format!("an integer of {b} bits (0 to {})", max_of(b)),
            Ty::Mac => "a MAC address like 40:a6:b7:0b:e9:b1".into(),
            Ty::Ip4 => "an IPv4 address like 192.168.2.1".into(),
            Ty::Ip6 => "an IPv6 address like fe80::1".into(),
            Ty::EtherType => {
                "an EtherType: 0x0800 or IPv4, IPv6, ARP, 802.1Q, 802.1AD, TEB".into()
            }
            Ty::IpFlags => "IPv4 flags: 0 to 7, DF, MF or DF+MF".into(),
            Ty::TcpFlags => "TCP flags: a number or letters of FSRPAUECN (e.g. SA)".into(),
            Ty::Bytes => "bytes: b\"\\x00\\x03\" or 'text'".into(),
            Ty::Options => {
                "Geneve options: ovn(ingress=N,egress=N), tlv(class=N,type=N,data=b\"...\") or a [list] of them".into()
            }
        }
    }
}

fn max_of(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dflt {
    V(u128),
    /// Computed from the packet (lengths, checksums, next-protocol fields).
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDef {
    pub name: &'static str,
    pub ty: Ty,
    pub default: Dflt,
}

/// How a field's value is chosen for each packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gen {
    Fixed(u128),
    /// Every value from lo to hi: one flow each.
    Range(u128, u128),
    /// Each value listed: one flow each.
    List(Vec<u128>),
    /// A random value per packet (from the run's seed).
    Random,
}

impl Gen {
    /// How many flows this field makes.
    pub fn flows(&self) -> u128 {
        match self {
            // A whole IPv6 range has 2^128 values: saturate, the builder
            // refuses anything over its flow limit anyway.
            Gen::Range(lo, hi) => (hi - lo).saturating_add(1),
            Gen::List(v) => v.len() as u128,
            Gen::Fixed(_) | Gen::Random => 1,
        }
    }
}

/// A Geneve option TLV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneveOpt {
    pub class: u16,
    pub typ: u8,
    /// The 5-bit length in 4-byte units (as written if given).
    pub len: u8,
    pub data: Vec<u8>,
}

/// One layer with its chosen values (None: the default or computed).
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub kind: Kind,
    pub vals: Vec<Option<Gen>>,
    pub bytes: Vec<u8>,
    pub opts: Vec<GeneveOpt>,
}

impl Layer {
    pub fn get(&self, name: &str) -> Option<&Gen> {
        let i = self.kind.fields().iter().position(|f| f.name == name)?;
        self.vals[i].as_ref()
    }
}

/// A whole description, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Stack {
    pub layers: Vec<Layer>,
}

fn err(at: usize, msg: impl Into<String>) -> SpecError {
    SpecError::new(at, msg)
}

fn parse_int(w: &str) -> Option<u128> {
    let w = w.trim();
    if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        u128::from_str_radix(h, 16).ok()
    } else {
        w.parse().ok()
    }
}

fn parse_mac(w: &str) -> Option<u128> {
    let parts: Vec<&str> = w.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut v = 0u128;
    for p in parts {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        v = (v << 8) | u8::from_str_radix(p, 16).ok()? as u128;
    }
    Some(v)
}

/// One scalar of a field's type from a word.
fn scalar(ty: Ty, w: &str) -> Option<u128> {
    let w = w.trim();
    match ty {
        Ty::Int(_) => parse_int(w),
        Ty::Mac => parse_mac(w),
        Ty::Ip4 => w.parse::<Ipv4Addr>().ok().map(|a| u32::from(a) as u128),
        Ty::Ip6 => w.parse::<Ipv6Addr>().ok().map(u128::from),
        Ty::EtherType => match w {
            "IPv4" => Some(0x0800),
            "IPv6" => Some(0x86dd),
            "ARP" => Some(0x0806),
            "802.1Q" | "n_802_1Q" => Some(0x8100),
            "802.1AD" | "n_802_1AD" => Some(0x88a8),
            "TEB" => Some(0x6558),
            _ => parse_int(w),
        },
        Ty::IpFlags => match w {
            "DF" => Some(2),
            "MF" => Some(1),
            "DF+MF" | "MF+DF" => Some(3),
            _ => parse_int(w),
        },
        Ty::TcpFlags => parse_int(w).or_else(|| {
            w.chars().try_fold(0u128, |acc, c| {
                let bit = "FSRPAUECN".find(c)?;
                Some(acc | 1 << bit)
            })
        }),
        Ty::Bytes | Ty::Options => None,
    }
}

/// A field's value from what was written.
fn gen_of(layer: Kind, def: &FieldDef, v: &Spanned<Value>) -> Result<Gen, SpecError> {
    let bad = |at: usize, what: &str| {
        err(
            at,
            format!(
                "{}.{}: '{what}' is not {}",
                layer.name(),
                def.name,
                def.ty.describe()
            ),
        )
    };
    let check = |at: usize, x: u128, what: &str| {
        if x > max_of(def.ty.bits()) {
            Err(err(
                at,
                format!(
                    "{}.{}: {what} does not fit in {} bits (at most {})",
                    layer.name(),
                    def.name,
                    def.ty.bits(),
                    max_of(def.ty.bits())
                ),
            ))
        } else {
            Ok(x)
        }
    };
    let one = |at: usize, w: &str| -> Result<u128, SpecError> {
        let x = scalar(def.ty, w).ok_or_else(|| bad(at, w))?;
        check(at, x, w)
    };
    match &v.v {
        Value::Word(w) if w == "random" => Ok(Gen::Random),
        Value::Word(w) => {
            // A range: two values of the type joined by '-' (IPv6 and MAC
            // addresses have no '-' of their own).
            let is_range = if def.ty == Ty::Mac {
                w.contains(':') && w.matches('-').count() == 1
            } else {
                w.contains('-')
            };
            if let Some((a, b)) = w.split_once('-').filter(|_| is_range) {
                let lo = one(v.at, a)?;
                let hi = one(v.at + a.len() + 1, b)?;
                if lo > hi {
                    return Err(err(
                        v.at,
                        format!(
                            "{}.{}: the range {w} runs backwards",
                            layer.name(),
                            def.name
                        ),
                    ));
                }
                return Ok(if lo == hi {
                    Gen::Fixed(lo)
                } else {
                    Gen::Range(lo, hi)
                });
            }
            Ok(Gen::Fixed(one(v.at, w)?))
        }
        Value::Str(s) => Ok(Gen::Fixed(one(v.at + 1, s)?)),
        Value::List(items) => {
            let mut out = Vec::new();
            for it in items {
                match &it.v {
                    Value::Word(w) | Value::Str(w) => out.push(one(it.at, w)?),
                    _ => return Err(bad(it.at, "a nested value")),
                }
            }
            Ok(Gen::List(out))
        }
        Value::Bytes(_) => Err(bad(v.at, "a byte string")),
        Value::Call(name, _) => Err(bad(v.at, &format!("{}(...)", name.v))),
    }
}

fn fixed_int(f: &Field, bits: u32, ctx: &str) -> Result<u128, SpecError> {
    let w = match &f.value.v {
        Value::Word(w) | Value::Str(w) => w,
        _ => {
            return Err(err(
                f.value.at,
                format!("{ctx}.{}: expected an integer", f.name.v),
            ))
        }
    };
    let x = parse_int(w).ok_or_else(|| {
        err(
            f.value.at,
            format!(
                "{ctx}.{}: '{w}' is not an integer (options take fixed values)",
                f.name.v
            ),
        )
    })?;
    if x > max_of(bits) {
        return Err(err(
            f.value.at,
            format!("{ctx}.{}: {w} does not fit in {bits} bits", f.name.v),
        ));
    }
    Ok(x)
}

fn option(v: &Spanned<Value>) -> Result<GeneveOpt, SpecError> {
    let Value::Call(name, fields) = &v.v else {
        return Err(err(v.at, format!("GENEVE.opt: {}", Ty::Options.describe())));
    };
    if !["ovn", "tlv"].contains(&name.v.as_str()) {
        return Err(err(
            name.at,
            format!(
                "unknown Geneve option '{}'; options: ovn(ingress=,egress=), tlv(class=,type=,data=)",
                name.v
            ),
        ));
    }
    let allowed = |n: &str| match name.v.as_str() {
        "ovn" => ["ingress", "egress"].contains(&n),
        _ => ["class", "type", "len", "data"].contains(&n),
    };
    for f in fields {
        if !allowed(&f.name.v) {
            return Err(err(
                f.name.at,
                format!(
                    "{}(): no field '{}'; fields: {}",
                    name.v,
                    f.name.v,
                    if name.v == "ovn" {
                        "ingress, egress"
                    } else {
                        "class, type, len, data"
                    }
                ),
            ));
        }
    }
    let get = |n: &str| fields.iter().find(|f| f.name.v == n);
    match name.v.as_str() {
        "ovn" => {
            // OVN's option: class 0x0102, type 0x80 (critical), 4 bytes:
            // 15-bit logical ingress port, 16-bit logical egress port.
            let ingress = get("ingress").map_or(Ok(0), |f| fixed_int(f, 15, "ovn"))?;
            let egress = get("egress").map_or(Ok(0), |f| fixed_int(f, 16, "ovn"))?;
            let word = ((ingress as u32) << 16) | egress as u32;
            Ok(GeneveOpt {
                class: 0x0102,
                typ: 0x80,
                len: 1,
                data: word.to_be_bytes().to_vec(),
            })
        }
        "tlv" => {
            let class = get("class").map_or(Ok(0), |f| fixed_int(f, 16, "tlv"))? as u16;
            let typ = get("type").map_or(Ok(0), |f| fixed_int(f, 8, "tlv"))? as u8;
            let data = match get("data").map(|f| &f.value) {
                None => Vec::new(),
                Some(Spanned {
                    v: Value::Bytes(b), ..
                }) => b.clone(),
                Some(Spanned { v: Value::Str(s), .. }) => s.as_bytes().to_vec(),
                Some(x) => {
                    return Err(err(x.at, "tlv.data: bytes, e.g. data=b\"\\x00\\x03\\x00\\x02\""))
                }
            };
            if data.len() % 4 != 0 || data.len() > 124 {
                return Err(err(
                    get("data").map_or(name.at, |f| f.value.at),
                    format!(
                        "tlv.data: {} bytes; Geneve option data is a multiple of 4 bytes, at most 124",
                        data.len()
                    ),
                ));
            }
            let len = match get("len") {
                Some(f) => fixed_int(f, 5, "tlv")? as u8,
                None => (data.len() / 4) as u8,
            };
            Ok(GeneveOpt {
                class,
                typ,
                len,
                data,
            })
        }
        other => Err(err(
            name.at,
            format!("unknown Geneve option '{other}'; options: ovn(ingress=,egress=), tlv(class=,type=,data=)"),
        )),
    }
}

fn layer(spec: &LayerSpec) -> Result<Layer, SpecError> {
    let kind = Kind::parse(&spec.name)?;
    let defs = kind.fields();
    let mut l = Layer {
        kind,
        vals: vec![None; defs.len()],
        bytes: Vec::new(),
        opts: Vec::new(),
    };
    let mut flat_opt: Option<(usize, GeneveOpt, Option<u8>)> = None;
    for (n, f) in spec.fields.iter().enumerate() {
        // Older scapy's name for the 802.1Q DEI bit.
        let name = match (kind, f.name.v.as_str()) {
            (Kind::Dot1Q | Kind::Dot1AD, "id") => "dei",
            (_, x) => x,
        };
        let Some(i) = defs.iter().position(|d| d.name == name) else {
            return Err(err(
                f.name.at,
                if defs.is_empty() {
                    format!("{}: takes no fields", kind.name())
                } else {
                    format!(
                        "{}: no field '{}'; fields: {}",
                        kind.name(),
                        f.name.v,
                        defs.iter().map(|d| d.name).collect::<Vec<_>>().join(", ")
                    )
                },
            ));
        };
        if spec.fields[..n].iter().any(|g| g.name.v == f.name.v) {
            return Err(err(
                f.name.at,
                format!("{}.{}: given twice", kind.name(), f.name.v),
            ));
        }
        let d = &defs[i];
        match d.ty {
            Ty::Bytes => {
                let b = match &f.value.v {
                    Value::Bytes(b) => b.clone(),
                    Value::Str(s) => s.as_bytes().to_vec(),
                    _ => {
                        return Err(err(
                            f.value.at,
                            format!("{}.{}: {}", kind.name(), d.name, d.ty.describe()),
                        ))
                    }
                };
                if kind == Kind::GENEVE {
                    let o = flat_opt.get_or_insert((f.name.at, empty_opt(), None));
                    o.1.data = b;
                } else {
                    l.bytes = b;
                }
            }
            Ty::Options => match &f.value.v {
                Value::List(items) => {
                    for it in items {
                        l.opts.push(option(it)?);
                    }
                }
                _ => l.opts.push(option(&f.value)?),
            },
            _ if kind == Kind::GENEVE && d.name.starts_with("options_") => {
                let x = fixed_int(f, d.ty.bits(), "GENEVE")?;
                let o = flat_opt.get_or_insert((f.name.at, empty_opt(), None));
                match d.name {
                    "options_class" => o.1.class = x as u16,
                    "options_type" => o.1.typ = x as u8,
                    _ => o.2 = Some(x as u8),
                }
            }
            _ => l.vals[i] = Some(gen_of(kind, d, &f.value)?),
        }
    }
    if let Some((at, mut o, len)) = flat_opt {
        if o.data.len() % 4 != 0 || o.data.len() > 124 {
            return Err(err(
                at,
                format!(
                    "GENEVE.options_data: {} bytes; option data is a multiple of 4 bytes, at most 124",
                    o.data.len()
                ),
            ));
        }
        o.len = len.unwrap_or((o.data.len() / 4) as u8);
        l.opts.insert(0, o);
    }
    if kind == Kind::GENEVE {
        let total: usize = l.opts.iter().map(|o| 4 + o.data.len()).sum();
        if total > 252 {
            return Err(err(
                spec.name.at,
                format!("GENEVE: {total} bytes of options; at most 252"),
            ));
        }
    }
    Ok(l)
}

fn empty_opt() -> GeneveOpt {
    GeneveOpt {
        class: 0,
        typ: 0,
        len: 0,
        data: Vec::new(),
    }
}

/// What may follow what: each layer's allowed next layers.
fn may_follow(outer: Kind, inner: Kind) -> bool {
    use Kind::*;
    match outer {
        Ether | Dot1Q | Dot1AD => matches!(inner, Dot1Q | Dot1AD | IP | IPv6 | Raw | Pad),
        IP | IPv6 => matches!(inner, UDP | TCP | GRE | NVGRE | STT | Raw | Pad),
        UDP => matches!(inner, GENEVE | VXLAN | Raw | Pad),
        TCP => matches!(inner, Raw | Pad),
        GENEVE | GRE => matches!(inner, Ether | IP | IPv6 | Raw | Pad),
        VXLAN | NVGRE | STT => matches!(inner, Ether | Raw | Pad),
        Raw => matches!(inner, Pad),
        Pad => false,
    }
}

impl Stack {
    /// Check a description: known layers and fields, values of the right
    /// type and size, layers in an order that makes a packet.
    pub fn parse(text: &str) -> Result<Stack, SpecError> {
        let specs = spec::parse(text)?;
        let mut layers: Vec<Layer> = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let l = layer(s)?;
            if i == 0 && l.kind != Kind::Ether {
                return Err(err(
                    s.name.at,
                    format!("a packet starts with Ether, not {}", l.kind.name()),
                ));
            }
            if let Some(prev) = layers.last() {
                if !may_follow(prev.kind, l.kind) {
                    let ok: Vec<&str> = Kind::ALL
                        .into_iter()
                        .filter(|k| may_follow(prev.kind, *k))
                        .map(Kind::name)
                        .collect();
                    return Err(err(
                        s.name.at,
                        format!(
                            "{} cannot follow {}; after {} come: {}",
                            l.kind.name(),
                            prev.kind.name(),
                            prev.kind.name(),
                            ok.join(", ")
                        ),
                    ));
                }
            }
            layers.push(l);
        }
        Ok(Stack { layers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_every_type() {
        let s = Stack::parse(
            "Ether(src=40:a6:b7:0b:e9:b1,type=IPv4)/IP(src=10.0.0.1-10.0.0.3,flags=DF,proto=0x11)/TCP(flags=SA,dport=[80,443])",
        )
        .unwrap();
        let l = &s.layers;
        assert_eq!(l[0].get("src"), Some(&Gen::Fixed(0x40a6_b70b_e9b1)));
        assert_eq!(l[0].get("type"), Some(&Gen::Fixed(0x0800)));
        assert_eq!(l[1].get("src"), Some(&Gen::Range(0x0a00_0001, 0x0a00_0003)));
        assert_eq!(l[1].get("flags"), Some(&Gen::Fixed(2)));
        assert_eq!(l[2].get("flags"), Some(&Gen::Fixed(0x12)));
        assert_eq!(l[2].get("dport"), Some(&Gen::List(vec![80, 443])));
        assert_eq!(l[1].get("ttl"), None);
    }

    #[test]
    fn a_whole_address_space_is_refused_not_overflowed() {
        let s = Stack::parse("Ether()/IPv6(src=::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff)/UDP()")
            .unwrap();
        let e = crate::Builder::new(s, crate::Sizes::Natural).unwrap_err();
        assert!(e.contains("more than 16777216 flows"), "{e}");
    }

    #[test]
    fn geneve_options_in_both_spellings() {
        let a =
            Stack::parse("Ether()/IP()/UDP()/GENEVE(vni=6,opt=ovn(ingress=3,egress=2))").unwrap();
        let b = Stack::parse(
            r#"Ether()/IP()/UDP()/GENEVE(vni=6,options_class=0x0102,options_type=0x80,options_len=1,options_data=b"\x00\x03\x00\x02")"#,
        )
        .unwrap();
        assert_eq!(a.layers[3].opts, b.layers[3].opts);
        assert_eq!(a.layers[3].opts[0].data, [0, 3, 0, 2]);
    }

    #[test]
    fn bad_descriptions_say_what_and_where() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "Ether()/Foo()",
                8,
                "unknown layer 'Foo'; layers: Ether, Dot1Q",
            ),
            (
                "Ether(mac=1)",
                6,
                "Ether: no field 'mac'; fields: dst, src, type",
            ),
            ("Ether(src=40:a6:b7:0b:e9)", 10, "is not a MAC address"),
            (
                "Ether()/IP(ttl=300)",
                15,
                "IP.ttl: 300 does not fit in 8 bits (at most 255)",
            ),
            ("Ether()/IP(src=10.0.0.9-10.0.0.1)", 15, "runs backwards"),
            (
                "Ether()/UDP()",
                8,
                "UDP cannot follow Ether; after Ether come: Dot1Q, Dot1AD, IP, IPv6",
            ),
            ("IP()", 0, "a packet starts with Ether"),
            (
                "Ether()/IP()/UDP()/GENEVE(opt=foo(x=1))",
                30,
                "unknown Geneve option 'foo'",
            ),
            (
                "Ether()/IP()/UDP()/GENEVE(opt=ovn(ingress=40000))",
                42,
                "does not fit in 15 bits",
            ),
            (
                "Ether()/IP()/UDP()/GENEVE(opt=tlv(data=b\"abc\"))",
                39,
                "multiple of 4 bytes",
            ),
            ("Ether()/IP(ttl=1,ttl=2)", 17, "given twice"),
            ("Ether()/IP(dst=fe80::1)", 15, "is not an IPv4 address"),
            (
                "Ether()/IP(ttl=ovn(ingress=1))",
                15,
                "IP.ttl: 'ovn(...)' is not an integer of 8 bits",
            ),
            (
                "Ether()/IP(ttl=b\"x\")",
                15,
                "IP.ttl: 'a byte string' is not an integer",
            ),
        ];
        for (text, at, msg) in cases {
            let e = Stack::parse(text).unwrap_err();
            assert!(e.msg.contains(msg), "{text}: {}", e.msg);
            assert_eq!(e.at, *at, "{text}: {}", e.msg);
        }
    }
}
