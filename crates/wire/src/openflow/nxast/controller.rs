//! NXAST_CONTROLLER and NXAST_CONTROLLER2 (their layouts in `nxast`'s
//! table): the properties' numbers, the readers, and the writer that
//! picks one of the two as `encode_CONTROLLER` does.

use super::{bad, exactly, finish, start_nx, zeros, NXAST_CONTROLLER, NXAST_CONTROLLER2};
use crate::be16;
use crate::error::Result;
use crate::openflow::{ofprop, Action};

/// NXAST_CONTROLLER2's property types (`enum
/// nx_action_controller2_prop_type`).
pub const NXAC2PT_MAX_LEN: u16 = 0;
pub const NXAC2PT_CONTROLLER_ID: u16 = 1;
pub const NXAC2PT_REASON: u16 = 2;
pub const NXAC2PT_USERDATA: u16 = 3;
pub const NXAC2PT_PAUSE: u16 = 4;
pub const NXAC2PT_METER_ID: u16 = 5;
/// The packet-in reason `action` (OFPR_ACTION), a controller action's
/// default.
pub const OFPR_ACTION: u8 = 1;

/// NXAST_CONTROLLER, whole, at `at`.
pub(super) fn read_controller(a: &[u8], at: usize) -> Result<Action<'static>> {
    // OVS ignores the last byte ("must be zero"), and so does this.
    exactly(a, at, 16, "NXAST_CONTROLLER")?;
    Ok(Action::Controller {
        max_len: be16(a, 10),
        id: be16(a, 12),
        reason: a[14],
        userdata: &[],
        pause: false,
    })
}

/// NXAST_CONTROLLER2, whole, at `at`: its properties over the defaults
/// (`decode_NXAST_RAW_CONTROLLER2`: a value property may be longer than
/// its value, a later one of a type replaces an earlier, an unknown type
/// is an error).
pub(super) fn read_controller2(a: &[u8], at: usize) -> Result<Action<'_>> {
    const W: &str = "NXAST_CONTROLLER2";
    zeros(&a[10..16], at + 10, W)?;
    let (mut max_len, mut id, mut reason) = (u16::MAX, 0, OFPR_ACTION);
    let (mut userdata, mut pause) = (&a[..0], false);
    ofprop::each(&a[16..], at + 16, "NXAST_CONTROLLER2 property", |p| {
        match p.typ {
            NXAC2PT_MAX_LEN => max_len = p.u16("NXAC2PT_MAX_LEN")?,
            NXAC2PT_CONTROLLER_ID => id = p.u16("NXAC2PT_CONTROLLER_ID")?,
            NXAC2PT_REASON => reason = p.u8("NXAC2PT_REASON")?,
            NXAC2PT_USERDATA => userdata = p.value,
            NXAC2PT_PAUSE => pause = true,
            // Open vSwitch would send the packet-in through the meter;
            // there are none here to send it through.
            NXAC2PT_METER_ID => {
                return Err(bad(
                    "NXAC2PT_METER_ID",
                    p.at,
                    "a controller meter, and this switch has no meters",
                ))
            }
            _ => return Err(ofprop::unknown("NXAST_CONTROLLER2 property type", &p)),
        }
        Ok(())
    })?;
    Ok(Action::Controller {
        max_len,
        id,
        reason,
        userdata,
        pause,
    })
}

/// A controller action as `encode_CONTROLLER` writes it: NXAST_CONTROLLER
/// when it has no userdata and does not pause, else NXAST_CONTROLLER2
/// with each property that differs from its default, in type order.
pub(in crate::openflow) fn put_controller(
    out: &mut Vec<u8>,
    max_len: u16,
    id: u16,
    reason: u8,
    userdata: &[u8],
    pause: bool,
) {
    if userdata.is_empty() && !pause {
        let s = start_nx(out, NXAST_CONTROLLER);
        out.extend_from_slice(&max_len.to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&[reason, 0]);
        finish(out, s);
        return;
    }
    let s = start_nx(out, NXAST_CONTROLLER2);
    out.extend_from_slice(&[0; 6]);
    if max_len != u16::MAX {
        ofprop::put_u16(out, NXAC2PT_MAX_LEN, max_len);
    }
    if id != 0 {
        ofprop::put_u16(out, NXAC2PT_CONTROLLER_ID, id);
    }
    if reason != OFPR_ACTION {
        ofprop::put_u8(out, NXAC2PT_REASON, reason);
    }
    if !userdata.is_empty() {
        ofprop::put(out, NXAC2PT_USERDATA, userdata);
    }
    if pause {
        ofprop::put_flag(out, NXAC2PT_PAUSE);
    }
    finish(out, s);
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use crate::openflow::*;

    fn ctl(max_len: u16, id: u16, reason: u8, userdata: &[u8], pause: bool) -> Action<'_> {
        Action::Controller {
            max_len,
            id,
            reason,
            userdata,
            pause,
        }
    }

    /// `controller(...)`: NXAST_CONTROLLER without userdata and pause,
    /// NXAST_CONTROLLER2 with only the properties off their defaults
    /// otherwise (max_len 0xffff, id 0, reason action), the same bytes in
    /// every version; a plain `controller` is OFPAT_OUTPUT, and a meter
    /// is refused.
    #[test]
    fn controller_and_controller2() {
        let cases = [
            ("actions=controller(userdata=00.01)", ctl(0xffff, 0, 1, &[0, 1], false)),
            ("actions=controller(userdata=01.02,pause)", ctl(0xffff, 0, 1, &[1, 2], true)),
            ("actions=controller(reason=no_match)", ctl(0xffff, 0, 0, &[], false)),
            ("actions=controller(max_len=65535,id=1)", ctl(0xffff, 1, 1, &[], false)),
            (
                "actions=controller(id=3,max_len=100,reason=invalid_ttl,userdata=01.02.03.04.05,pause)",
                ctl(100, 3, 2, &[1, 2, 3, 4, 5], true),
            ),
            ("actions=controller(pause)", ctl(0xffff, 0, 1, &[], true)),
        ];
        for (f, a) in &cases {
            for v in [13, 15] {
                golden(v, f, std::slice::from_ref(a));
            }
        }
        let u12: Vec<u8> = (0..12).collect();
        golden(
            13,
            "actions=controller(userdata=00.01.02.03.04.05.06.07.08.09.0a.0b)",
            &[ctl(0xffff, 0, 1, &u12, false)],
        );
        prints(
            &ovs(15, cases[4].0),
            "actions=controller(reason=invalid_ttl,max_len=100,id=3,userdata=01.02.03.04.05,pause)",
        );
        // 1.0 writes the same Nicira bytes.
        for (f, a) in &cases[1..3] {
            let b = ovs(10, f);
            let fm = parse_flow_mod10(&Message::new_checked(&b).unwrap())
                .unwrap()
                .0;
            assert_eq!(fm.actions, std::slice::from_ref(a), "{f}");
            let mut out = Vec::new();
            a.emit_in(OF10, &mut out);
            assert_eq!(hex(&out), hex(&b[b.len() - out.len()..]), "{f}");
        }
        // A plain `controller` is an output to CONTROLLER (all of it).
        golden(
            15,
            "actions=controller",
            &[Action::Output {
                port: 0xffff_fffd,
                max_len: 0xffff,
            }],
        );
        // The defaults spelled out read as the defaults, and write as
        // NXAST_CONTROLLER (OVS keeps the form it read; a controller
        // action parsed from text is written so).
        let spelled = unhex(concat!(
            "ffff0028000023200025000000000000",
            "00000008ffff0000",
            "0001000800000000",
            "0002000501000000"
        ));
        let a = actions(&spelled, 0).unwrap();
        assert_eq!(a, vec![ctl(0xffff, 0, 1, &[], false)]);
        let mut out = Vec::new();
        a[0].emit(&mut out);
        assert_eq!(hex(&out), "ffff0010000023200014ffff00000100");
        // A 16-bit value may be longer than 2 bytes, a later property
        // replaces an earlier one.
        let b = unhex("ffff002000002320002500000000000000000006002a000000000008002b0000");
        assert_eq!(actions(&b, 0).unwrap(), vec![ctl(0x2b, 0, 1, &[], false)]);
        assert_eq!(nxast_name(NXAST_CONTROLLER2), Some("NXAST_CONTROLLER2"));
    }

    /// What OVS's `decode_NXAST_RAW_CONTROLLER2` refuses, refused here by
    /// name and offset: a meter (this switch has none), unknown property
    /// types (the type named), properties cut short or too short for
    /// their value, padding that is not zero; NXAST_CONTROLLER's length.
    #[test]
    fn bad_controller_actions_are_refused() {
        let refused = |hx: &str, name: &str, offset: usize| {
            let b = unhex(hx);
            let e = actions(&b, 100).unwrap_err();
            assert!(e.to_string().contains(name), "{hx}: {e}");
            assert_eq!(e.offset, 100 + offset, "{hx}: {e}");
        };
        let b = ovs(15, "actions=controller(meter_id=3)");
        let e = read_err(&b);
        assert!(e.to_string().contains("NXAC2PT_METER_ID"), "{e}");
        assert!(e.to_string().contains("no meters"), "{e}");
        refused(
            "ffff00180000232000250000000000000006000400000000",
            "NXAST_CONTROLLER2 property type: unsupported value 0x6",
            16,
        );
        refused(
            "ffff0020000023200025000000000000ffff000c000023200000000900000000",
            "unsupported value 0xffff",
            16,
        );
        // A property's padded length past the action's end.
        refused(
            "ffff00180000232000250000000000000003000c01020304",
            "NXAST_CONTROLLER2 property: needs 16 bytes",
            16,
        );
        // Length below the property header's own 4.
        refused(
            "ffff00180000232000250000000000000003000200000000",
            "shorter than its 4-byte header",
            18,
        );
        // A max_len of one byte, a reason of none.
        refused(
            "ffff00180000232000250000000000000000000501000000",
            "NXAC2PT_MAX_LEN",
            18,
        );
        refused(
            "ffff00180000232000250000000000000002000400000000",
            "NXAC2PT_REASON",
            18,
        );
        refused(
            "ffff00180000232000250000000100000004000400000000",
            "NXAST_CONTROLLER2",
            13,
        );
        refused(
            "ffff0018000023200014ffff00000100ffff0000ffff0000",
            "NXAST_CONTROLLER",
            2,
        );
    }

    fn read_err(b: &[u8]) -> crate::error::Error {
        parse_flow_mod(&Message::new_checked(b).unwrap()).unwrap_err()
    }
}
