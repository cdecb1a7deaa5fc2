//! The actions on fields (their layouts in `nxast`'s table): set_field
//! as each version writes it, NXAST_REG_LOAD and NXAST_REG_LOAD2, the
//! moves (NXAST_REG_MOVE, OFPAT_COPY_FIELD, ONF's copy field) and
//! NXAST_STACK_PUSH and _POP: their readers and writers.

use super::{bad, be64, exactly, finish, start, start_nx, zeros, OxmHeader, OXM_EXPERIMENTER};
use super::{AT_COPY_FIELD, NXAST_REG_LOAD, NXAST_REG_LOAD2, NXAST_REG_MOVE, NXAST_STACK_PUSH};
use crate::error::{need, Layer, Result};
use crate::openflow::{Action, Oxm, EXPERIMENTER_ACTION, NXM_1, OF10, OF15};
use crate::{be16, be32};

/// ONF's experimenter id and its OpenFlow 1.3 copy-field extension
/// (read as [`Action::Move`]; Open vSwitch writes it only to echo one).
pub const ONF_VENDOR: u32 = 0x4f4e_4600;
pub const ONFACT_COPY_FIELD: u16 = 3200;

/// The NXM_1 fields of variable length (tun_metadata0..63), which Open
/// vSwitch loads with NXAST_REG_LOAD2 rather than REG_LOAD.
const TUN_METADATA: std::ops::Range<u8> = 40..104;

/// The OXM TLV at the start of `b` as an action carries it (set_field,
/// REG_LOAD2), and the bytes it takes. Unlike a match's, an experimenter
/// TLV (class 0xffff) is read whole: its `value` starts with the 4-byte
/// experimenter id and its `mask` is the value's mask alone, so that
/// [`Oxm::emit`] writes the same bytes back.
pub(in crate::openflow) fn action_oxm<'a>(
    b: &'a [u8],
    base: usize,
    what: &'static str,
) -> Result<(Oxm<'a>, usize)> {
    need(Layer::OpenFlow, what, b, 0, 4).map_err(|e| e.at(base))?;
    let class = be16(b, 0);
    let has_mask = b[2] & 1 == 1;
    let len = usize::from(b[3]);
    need(Layer::OpenFlow, what, b, 4, len).map_err(|e| e.at(base))?;
    let body = &b[4..4 + len];
    let exp = if class == OXM_EXPERIMENTER { 4 } else { 0 };
    if len < exp {
        return Err(bad(what, base + 3, "experimenter TLV shorter than its id"));
    }
    let (value, mask) = if has_mask {
        let payload = len - exp;
        if !payload.is_multiple_of(2) {
            return Err(bad(what, base + 3, "odd length with a mask"));
        }
        let split = exp + payload / 2;
        (&body[..split], Some(&body[split..]))
    } else {
        (body, None)
    };
    let o = Oxm {
        class,
        field: b[2] >> 1,
        value,
        mask,
    };
    Ok((o, 4 + len))
}

/// Read `n_bits`, `src_ofs`, `dst_ofs` at `a[fixed..]` and the two
/// headers at `a[hdrs..]`, then zeros: the body every move form shares.
pub(super) fn read_move(
    a: &[u8],
    at: usize,
    fixed: usize,
    hdrs: usize,
    what: &'static str,
) -> Result<Action<'static>> {
    need(Layer::OpenFlow, what, a, 0, hdrs).map_err(|e| e.at(at))?;
    let (src, n) = OxmHeader::parse(&a[hdrs..], at + hdrs, what)?;
    let (dst, m) = OxmHeader::parse(&a[hdrs + n..], at + hdrs + n, what)?;
    let end = hdrs + n + m;
    zeros(&a[end..], at + end, what)?;
    Ok(Action::Move {
        n_bits: be16(a, fixed),
        src_ofs: be16(a, fixed + 2),
        dst_ofs: be16(a, fixed + 4),
        src,
        dst,
    })
}

/// OFPAT_COPY_FIELD (1.5), whole, at `at`.
pub(in crate::openflow) fn read_copy_field(a: &[u8], at: usize) -> Result<Action<'static>> {
    read_move(a, at, 4, 12, "OFPAT_COPY_FIELD")
}

/// An experimenter action of another vendor than Nicira: ONF's copy
/// field is a move; anything else is `Other`.
pub(in crate::openflow) fn read_experimenter(a: &[u8], at: usize) -> Result<Action<'static>> {
    if a.len() >= 10 && be32(a, 4) == ONF_VENDOR && be16(a, 8) == ONFACT_COPY_FIELD {
        return read_move(a, at, 12, 20, "ONFACT_COPY_FIELD");
    }
    Ok(Action::Other {
        typ: EXPERIMENTER_ACTION,
    })
}

/// NXAST_REG_LOAD, whole, at `at`.
pub(super) fn read_reg_load(a: &[u8], at: usize) -> Result<Action<'static>> {
    const W: &str = "NXAST_REG_LOAD";
    exactly(a, at, 24, W)?;
    let dst = OxmHeader::from_u32(be32(a, 12));
    if dst.class == OXM_EXPERIMENTER {
        return Err(bad(W, at + 12, "an experimenter header does not fit"));
    }
    let ofs_nbits = be16(a, 10);
    let n_bits = (ofs_nbits & 0x3f) as u8 + 1;
    let value = be64(a, 16);
    if n_bits < 64 && value >> n_bits != 0 {
        return Err(bad(W, at + 16, "value has bits beyond n_bits"));
    }
    Ok(Action::RegLoad {
        ofs: ofs_nbits >> 6,
        n_bits,
        dst,
        value,
    })
}

/// NXAST_REG_LOAD2, whole, at `at`.
pub(super) fn read_reg_load2(a: &[u8], at: usize) -> Result<Action<'_>> {
    const W: &str = "NXAST_REG_LOAD2";
    let (o, n) = action_oxm(&a[10..], at + 10, W)?;
    zeros(&a[10 + n..], at + 10 + n, W)?;
    Ok(Action::RegLoad2(o))
}

/// NXAST_STACK_PUSH or _POP (`sub`), whole, at `at`.
pub(super) fn read_stack(a: &[u8], at: usize, sub: u16) -> Result<Action<'static>> {
    let what = if sub == NXAST_STACK_PUSH {
        "NXAST_STACK_PUSH"
    } else {
        "NXAST_STACK_POP"
    };
    exactly(a, at, 24, what)?;
    let (field, n) = OxmHeader::parse(&a[12..], at + 12, what)?;
    let n_bits = be16(a, 12 + n);
    zeros(&a[14 + n..], at + 14 + n, what)?;
    let ofs = be16(a, 10);
    Ok(if sub == NXAST_STACK_PUSH {
        Action::StackPush { field, ofs, n_bits }
    } else {
        Action::StackPop { field, ofs, n_bits }
    })
}

/// OFPAT_SET_FIELD with `o`'s TLV.
fn put_set_field_tlv(out: &mut Vec<u8>, o: &Oxm<'_>) {
    let s = start(out, super::super::AT_SET_FIELD);
    o.emit(out);
    finish(out, s);
}

/// NXAST_REG_LOAD2 with `o`'s TLV.
fn put_reg_load2(out: &mut Vec<u8>, o: &Oxm<'_>) {
    let s = start_nx(out, NXAST_REG_LOAD2);
    o.emit(out);
    finish(out, s);
}

/// NXAST_REG_LOAD (the value cut to its `n_bits`, as Open vSwitch
/// requires).
pub(in crate::openflow) fn put_reg_load(
    out: &mut Vec<u8>,
    ofs: u16,
    n_bits: u8,
    dst: &OxmHeader,
    value: u64,
) {
    let s = start_nx(out, NXAST_REG_LOAD);
    let n = n_bits.wrapping_sub(1) & 0x3f;
    let ofs_nbits = ofs << 6 | u16::from(n);
    out.extend_from_slice(&ofs_nbits.to_be_bytes());
    out.extend_from_slice(&dst.to_u32().to_be_bytes());
    out.extend_from_slice(&(value & (u64::MAX >> (63 - n))).to_be_bytes());
    finish(out, s);
}

/// `o` without a mask that sets every bit (Open vSwitch writes such a
/// set_field unmasked); a tun_metadata TLV keeps its mask.
fn unmask_all_ones<'a>(o: &Oxm<'a>) -> Oxm<'a> {
    if o.class == NXM_1 && TUN_METADATA.contains(&o.field) {
        // Of variable length: the bytes given are the value's low ones,
        // so their mask sets part of the field only.
        return *o;
    }
    match o.mask {
        Some(m) if m.iter().all(|&x| x == 0xff) => Oxm { mask: None, ..*o },
        _ => *o,
    }
}

/// Bit `i` (0 the least significant) of the big-endian bytes `b`.
fn bit(b: &[u8], i: usize) -> bool {
    i < b.len() * 8 && b[b.len() - 1 - i / 8] >> (i % 8) & 1 == 1
}

/// A set_field as Open vSwitch writes it in `version`: OFPAT_SET_FIELD
/// when it sets the whole field (or in 1.5, which allows a mask);
/// before 1.5 a masked one (in 1.0 any) as Nicira loads
/// (`set_field_to_nxast`):
/// NXAST_REG_LOAD2 for an experimenter's or a variable-length field,
/// else one NXAST_REG_LOAD per run of set mask bits, 64 bits at most
/// each, from the lowest.
pub(in crate::openflow) fn put_set_field(out: &mut Vec<u8>, o: &Oxm<'_>, version: u8) {
    let o = unmask_all_ones(o);
    if version >= OF15 || (o.mask.is_none() && version > OF10) {
        return put_set_field_tlv(out, &o);
    }
    // 1.0 has no set_field: there even a whole field is loaded.
    let all;
    let mask = match o.mask {
        Some(m) => m,
        None => {
            all = vec![0xff; o.value.len()];
            &all
        }
    };
    let width = o.value.len().min(mask.len());
    if o.class == OXM_EXPERIMENTER
        || (o.class == NXM_1 && TUN_METADATA.contains(&o.field))
        || width > 127
    {
        return put_reg_load2(out, &o);
    }
    let dst = OxmHeader::new(o.class, o.field, width as u8);
    let (value, mask) = (
        &o.value[o.value.len() - width..],
        &mask[mask.len() - width..],
    );
    let n = width * 8;
    let mut at = 0;
    while let Some(ofs) = (at..n).find(|&i| bit(mask, i)) {
        let limit = (ofs + 64).min(n);
        let end = (ofs + 1..limit).find(|&i| !bit(mask, i)).unwrap_or(limit);
        let v = (ofs..end)
            .rev()
            .fold(0u64, |v, i| v << 1 | u64::from(bit(value, i)));
        put_reg_load(out, ofs as u16, (end - ofs) as u8, &dst, v);
        at = end;
    }
}

/// What NXAST_REG_LOAD `ofs`/`n_bits`/`value` into `dst` sets, as the
/// field's value and mask (big-endian, the field's width): how 1.5
/// writes it as a set_field. `None` when the load does not fit in the
/// field `dst` names (or names by an experimenter's or masked header).
pub fn reg_load_value_mask(
    ofs: u16,
    n_bits: u8,
    dst: &OxmHeader,
    value: u64,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let w = usize::from(dst.len);
    let (ofs, n) = (usize::from(ofs), usize::from(n_bits));
    if dst.class == OXM_EXPERIMENTER || dst.has_mask || w == 0 || w > 127 {
        return None;
    }
    if n == 0 || n > 64 || ofs + n > w * 8 {
        return None;
    }
    let (mut v, mut m) = (vec![0u8; w], vec![0u8; w]);
    for i in 0..n {
        let b = ofs + i;
        let byte = w - 1 - b / 8;
        m[byte] |= 1 << (b % 8);
        if value >> i & 1 == 1 {
            v[byte] |= 1 << (b % 8);
        }
    }
    Some((v, m))
}

/// NXAST_REG_LOAD in versions before 1.5; in 1.5 (which has no
/// REG_LOAD) the set_field it amounts to, masked unless it sets the
/// whole field, as Open vSwitch writes it.
pub(in crate::openflow) fn put_load(
    out: &mut Vec<u8>,
    ofs: u16,
    n_bits: u8,
    dst: &OxmHeader,
    value: u64,
    version: u8,
) {
    if version >= OF15 {
        if let Some((v, m)) = reg_load_value_mask(ofs, n_bits, dst, value) {
            let o = Oxm {
                class: dst.class,
                field: dst.field,
                value: &v,
                mask: Some(&m),
            };
            return put_set_field_tlv(out, &unmask_all_ones(&o));
        }
    }
    put_reg_load(out, ofs, n_bits, dst, value);
}

/// NXAST_REG_LOAD2 before 1.5; OFPAT_SET_FIELD (its mask dropped if it
/// sets every bit) in 1.5.
pub(in crate::openflow) fn put_load2(out: &mut Vec<u8>, o: &Oxm<'_>, version: u8) {
    if version >= OF15 {
        put_set_field_tlv(out, &unmask_all_ones(o));
    } else {
        put_reg_load2(out, o);
    }
}

/// A move: OFPAT_COPY_FIELD in 1.5, NXAST_REG_MOVE before.
pub(in crate::openflow) fn put_move(
    out: &mut Vec<u8>,
    n_bits: u16,
    src_ofs: u16,
    dst_ofs: u16,
    src: &OxmHeader,
    dst: &OxmHeader,
    version: u8,
) {
    let s = if version >= OF15 {
        let s = start(out, AT_COPY_FIELD);
        for v in [n_bits, src_ofs, dst_ofs, 0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        s
    } else {
        let s = start_nx(out, NXAST_REG_MOVE);
        for v in [n_bits, src_ofs, dst_ofs] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        s
    };
    src.emit(out);
    dst.emit(out);
    finish(out, s);
}

/// NXAST_STACK_PUSH or _POP.
pub(in crate::openflow) fn put_stack(
    out: &mut Vec<u8>,
    subtype: u16,
    field: &OxmHeader,
    ofs: u16,
    n_bits: u16,
) {
    let s = start_nx(out, subtype);
    out.extend_from_slice(&ofs.to_be_bytes());
    field.emit(out);
    out.extend_from_slice(&n_bits.to_be_bytes());
    out.resize(s + 24, 0);
    finish(out, s);
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::action_oxm;
    use crate::openflow::*;

    /// Masked set_field: 1.5 writes OFPAT_SET_FIELD with the masked TLV
    /// (length 16: header, value, mask, no padding needed); 1.3 has no
    /// masked set_field, so Open vSwitch writes NXAST_REG_LOAD of the
    /// mask's bits, which our writer does from the same SetField.
    #[test]
    fn masked_set_field_and_reg_load() {
        let f = "actions=set_field:0x5/0xff->reg0";
        golden(13, f, &[load(0, 8, REG0, 5)]);
        let masked = sf(NXM_1, 0, &[0, 0, 0, 5], Some(&[0, 0, 0, 0xff]));
        golden(15, f, std::slice::from_ref(&masked));
        writes(13, f, &[masked]);
        // `load:` is the same action: REG_LOAD in 1.3, set_field in 1.5.
        let f = "actions=load:0x5->NXM_NX_REG0[0..7]";
        golden(13, f, &[load(0, 8, REG0, 5)]);
        writes(15, f, &[load(0, 8, REG0, 5)]);
        prints(&ovs(13, f), "actions=load:0x5->NXM_NX_REG0[0..7]");
        prints(&ovs(15, f), "actions=set_field:0x5/0xff->reg0");

        // A load of the whole field is an unmasked set_field in 1.5.
        let f = "actions=load:0x1234->NXM_NX_REG0[]";
        golden(13, f, &[load(0, 32, REG0, 0x1234)]);
        let whole = sf(NXM_1, 0, &[0, 0, 0x12, 0x34], None);
        golden(15, f, std::slice::from_ref(&whole));
        writes(15, f, &[load(0, 32, REG0, 0x1234)]);
        // ... and a set_field of it is OFPAT_SET_FIELD in both (the
        // same bytes as 1.5's load), with an all-ones mask dropped.
        writes(13, "actions=set_field:0x1234->reg0", &[whole]);
        writes(
            13,
            "actions=set_field:0x1234->reg0",
            &[sf(NXM_1, 0, &[0, 0, 0x12, 0x34], Some(&[0xff; 4]))],
        );

        // 1.3 names ip_src by its NXM header in REG_LOAD (ofs 24, 8
        // bits), 1.5 by its OXM one; each is written as given.
        let f = "ip,actions=set_field:10.0.0.0/255.0.0.0->ip_src";
        let nxm_ip_src = h(0x0000_0e04);
        golden(13, f, &[load(24, 8, nxm_ip_src, 10)]);
        writes(
            13,
            f,
            &[sf(NXM_0, 7, &[10, 0, 0, 0], Some(&[255, 0, 0, 0]))],
        );
        let oxm = sf(OXM_BASIC, 11, &[10, 0, 0, 0], Some(&[255, 0, 0, 0]));
        golden(15, f, &[oxm]);
        writes(15, f, &[load(24, 8, h(0x8000_1604), 10)]);

        // 128-bit xxreg0, bits 64..95: a 16-byte value and mask in 1.5.
        let f = "actions=load:0x1->NXM_NX_XXREG0[64..95]";
        golden(13, f, &[load(64, 32, XXREG0, 1)]);
        let mut v = [0u8; 16];
        v[7] = 1;
        let mut m = [0u8; 16];
        m[4..8].copy_from_slice(&[0xff; 4]);
        golden(15, f, &[sf(NXM_1, 111, &v, Some(&m))]);
        writes(15, f, &[load(64, 32, XXREG0, 1)]);

        // xreg4's only header is OXM (class 0x8001): still REG_LOAD.
        let f = "actions=set_field:0x1/0x1->xreg4";
        golden(13, f, &[load(0, 1, XREG4, 1)]);
        let one = [0, 0, 0, 0, 0, 0, 0, 1];
        golden(15, f, &[sf(0x8001, 4, &one, Some(&one))]);
        writes(13, f, &[sf(0x8001, 4, &one, Some(&one))]);
        writes(15, f, &[load(0, 1, XREG4, 1)]);
    }

    /// NXAST_REG_LOAD2 carries the TLV for what REG_LOAD cannot name: a
    /// variable-length field (tun_metadata) or an experimenter's (an
    /// 8-byte header); 1.5 writes OFPAT_SET_FIELD instead.
    #[test]
    fn reg_load2_for_variable_and_experimenter_fields() {
        let f = "actions=set_field:0x1/0xff->tun_metadata0";
        let tlv = Oxm {
            class: NXM_1,
            field: 40,
            value: &[1],
            mask: Some(&[0xff]),
        };
        golden(13, f, &[Action::RegLoad2(tlv)]);
        golden(15, f, &[Action::SetField(tlv)]);
        writes(13, f, &[Action::SetField(tlv)]);
        writes(15, f, &[Action::RegLoad2(tlv)]);
        // Unmasked, it is a plain set_field in both.
        let f = "actions=set_field:0xabcd->tun_metadata1";
        for v in [13, 15] {
            golden(v, f, &[sf(NXM_1, 41, &[0xab, 0xcd], None)]);
        }

        // NSH c1: its value starts with the experimenter id.
        let f = "packet_type=(1,0x894f),actions=set_field:5->nsh_c1";
        let val = [NSH.as_slice(), &[0, 0, 0, 5]].concat();
        for v in [13, 15] {
            golden(v, f, &[sf(OXM_EXPERIMENTER, 6, &val, None)]);
        }
        let f = "packet_type=(1,0x894f),actions=set_field:5/0xff->nsh_c1";
        let tlv = Oxm {
            class: OXM_EXPERIMENTER,
            field: 6,
            value: &val,
            mask: Some(&[0, 0, 0, 0xff]),
        };
        golden(13, f, &[Action::RegLoad2(tlv)]);
        golden(15, f, &[Action::SetField(tlv)]);
        writes(13, f, &[Action::SetField(tlv)]);
        writes(15, f, &[Action::RegLoad2(tlv)]);
    }

    /// `move:` is NXAST_REG_MOVE in 1.3 and OFPAT_COPY_FIELD in 1.5
    /// (Open vSwitch's encode_REG_MOVE); the field headers are NXM names
    /// in the first and the version's OXM names (where a field has one)
    /// in the second.
    #[test]
    fn move_is_reg_move_then_copy_field() {
        let f = "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, REG14, REG15)]);
        }
        let b = ovs(15, f);
        assert_eq!(&b[b.len() - 24..b.len() - 22], &AT_COPY_FIELD.to_be_bytes());
        prints(&b, "actions=move:NXM_NX_REG14[]->NXM_NX_REG15[]");

        let f = "actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]";
        golden(13, f, &[mv(48, 0, 0, h(0x0000_0406), h(0x0000_0206))]);
        golden(15, f, &[mv(48, 0, 0, h(0x8000_0806), h(0x8000_0606))]);

        let f = "actions=move:NXM_NX_XXREG0[0..31]->NXM_NX_REG1[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, XXREG0, REG1)]);
        }
        let f = "actions=move:OXM_OF_PKT_REG4[0..15]->NXM_NX_REG2[16..31]";
        for v in [13, 15] {
            golden(v, f, &[mv(16, 0, 16, XREG4, REG2)]);
        }
        // An experimenter header takes 8 bytes: REG_MOVE pads 28 to 32,
        // COPY_FIELD fills 24 exactly.
        let f = "packet_type=(1,0x894f),actions=move:NXM_NX_REG0[]->NXOXM_NSH_C1[]";
        for v in [13, 15] {
            golden(v, f, &[mv(32, 0, 0, REG0, NSH_C1)]);
        }
        assert_eq!(NSH_C1.wire_len(), 8);
        assert_eq!(
            (NSH_C1.value_len(), REG0.value_len(), XXREG0.value_len()),
            (4, 4, 16)
        );
        assert_eq!(REG14.to_u32(), 0x0001_1c04);
        assert_eq!(OxmHeader::from_u32(0x0001_1c04), REG14);

        // ONF's 1.3 copy-field extension reads as the same move.
        let onf = unhex(
            "ffff0020 4f4e4600 0c80 0000 0020 0000 0000 0000 00011c04 00011e04 00000000"
                .replace(' ', "")
                .as_str(),
        );
        assert_eq!(actions(&onf, 0).unwrap(), vec![mv(32, 0, 0, REG14, REG15)]);
    }

    /// The stack actions: the same 24 bytes in every version.
    #[test]
    fn stack_push_and_pop() {
        let cases = [
            (
                "actions=push:NXM_NX_REG0[]",
                Action::StackPush {
                    field: REG0,
                    ofs: 0,
                    n_bits: 32,
                },
            ),
            (
                "actions=pop:NXM_NX_REG1[0..15]",
                Action::StackPop {
                    field: REG1,
                    ofs: 0,
                    n_bits: 16,
                },
            ),
            (
                "actions=push:NXM_NX_XXREG1[]",
                Action::StackPush {
                    field: XXREG1,
                    ofs: 0,
                    n_bits: 128,
                },
            ),
            (
                "actions=push:OXM_OF_PKT_REG4[]",
                Action::StackPush {
                    field: XREG4,
                    ofs: 0,
                    n_bits: 64,
                },
            ),
            (
                "packet_type=(1,0x894f),actions=push:NXOXM_NSH_C1[]",
                Action::StackPush {
                    field: NSH_C1,
                    ofs: 0,
                    n_bits: 32,
                },
            ),
        ];
        for (f, a) in cases {
            for v in [13, 15] {
                golden(v, f, std::slice::from_ref(&a));
            }
        }
        prints(
            &ovs(13, "actions=pop:NXM_NX_REG1[0..15]"),
            "actions=pop:NXM_NX_REG1[0..15]",
        );
    }

    #[test]
    fn reg_load_value_and_mask() {
        assert_eq!(
            reg_load_value_mask(24, 8, &h(0x0000_0e04), 0x0a),
            Some((vec![10, 0, 0, 0], vec![0xff, 0, 0, 0]))
        );
        // Beyond the field, an experimenter's or a masked header: none.
        assert_eq!(reg_load_value_mask(30, 8, &REG0, 1), None);
        assert_eq!(reg_load_value_mask(0, 8, &NSH_C1, 1), None);
        assert_eq!(reg_load_value_mask(0, 8, &h(0x0001_0108), 1), None);
        // Bits of the value above n_bits are not loaded.
        assert_eq!(
            reg_load_value_mask(0, 4, &REG0, 0xff),
            Some((vec![0, 0, 0, 0x0f], vec![0, 0, 0, 0x0f]))
        );
        // A masked set_field whose mask has two runs is two REG_LOADs
        // in 1.3, each of its own bits.
        let mut out = Vec::new();
        Action::SetField(Oxm {
            class: NXM_1,
            field: 0,
            value: &[0x12, 0x34, 0x56, 0x78],
            mask: Some(&[0xff, 0, 0x0f, 0]),
        })
        .emit(&mut out);
        assert_eq!(
            actions(&out, 0).unwrap(),
            vec![load(8, 4, REG0, 0x6), load(24, 8, REG0, 0x12)]
        );
        // An experimenter TLV reads back as it was written.
        let tlv = unhex("ffff0d0c005ad65000000005000000ff");
        let (o, n) = action_oxm(&tlv, 0, "t").unwrap();
        assert_eq!(
            (o.value.len(), o.mask.map(<[u8]>::len), n),
            (8, Some(4), 16)
        );
    }
}
