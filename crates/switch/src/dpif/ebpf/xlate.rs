//! A slow-path decision as a cached flow (OVS's ofproto-dpif "xlate then
//! install"): what the kernel can do the same way, or why the flow stays
//! in the slow path.

use super::*;

impl Kernel {
    pub(super) fn compile(
        &mut self,
        key: &FlowKey,
        result: Result<&[Op], DropReason>,
        tlv: &TlvMap,
    ) -> Result<Flow, &'static str> {
        let in_port = key.get(f::IN_PORT) as u32;
        let from_tunnel = match self.targets.get(&in_port) {
            Some(Target::Veth { .. }) => false,
            Some(Target::Tunnel { .. } | Target::Qinq { .. }) => true,
            None => return Err("in_port_not_in_kernel"),
        };
        if !self.cacheable {
            return Err("normal_action");
        }
        let ops = match result {
            Ok(ops) => ops,
            Err(DropReason::NoRule | DropReason::Action) => return Ok(Flow::default()),
            Err(_) => return Err("drop_reason_not_cached"),
        };
        let Some((Op::Output { port, tun }, edits)) = ops.split_last() else {
            return Err("actions_not_in_kernel");
        };
        // The output port's number for its counters (0, uncounted, beyond
        // what the op's 16 bits hold).
        let counted = u16::try_from(*port).unwrap_or(0);
        let mut flow = Flow::default();
        let n = vlan_edits(key, edits, &mut flow.ops)?;
        let out = &mut flow.ops[n];
        flow.n_ops = n as u32 + 1;
        match self.targets.get(port).cloned() {
            Some(Target::Veth { ifindex, peer }) => {
                *out = km::Op {
                    kind: if peer {
                        km::OP_OUTPUT_PORT
                    } else {
                        km::OP_OUTPUT_DEV
                    },
                    arg16: counted,
                    arg: ifindex,
                    ..km::Op::default()
                };
            }
            Some(Target::Qinq { ifindex }) if !from_tunnel => {
                *out = km::Op {
                    kind: km::OP_OUTPUT_DEV,
                    arg16: counted,
                    arg: ifindex,
                    ..km::Op::default()
                };
            }
            Some(Target::Tunnel { .. }) if n > 0 => return Err("vlan_edit_before_tunnel"),
            Some(Target::Tunnel {
                cfg, underlay, mtu, ..
            }) if !from_tunnel => {
                let d =
                    destination(&cfg, tun, tlv, underlay, mtu).ok_or("no_tunnel_destination")?;
                let t = tunlab_ebpf::template::build(&d).map_err(|_| "template_failed")?;
                let i = self.dp.template(&t).map_err(|_| "templates_full")?;
                *out = km::Op {
                    kind: km::OP_OUTPUT_TUNNEL,
                    arg16: counted,
                    arg: i,
                    ..km::Op::default()
                };
            }
            _ => return Err("output_not_in_kernel"),
        }
        Ok(flow)
    }
}

/// The VLAN edits in front of a flow's output, as the kernel applies them:
/// a push (with the TCI the pipeline gives the new tag: the frame's, for
/// the untagged frames the kernel takes from tenants, 0, then the VID and
/// PCP the following edits set) or a pop. Returns how many ops it wrote.
pub(super) fn vlan_edits(
    key: &FlowKey,
    edits: &[Op],
    ops: &mut [km::Op],
) -> Result<usize, &'static str> {
    let mut n = 0;
    let mut i = 0;
    while i < edits.len() {
        if n + 1 >= ops.len() {
            return Err("too_many_vlan_edits");
        }
        match edits[i] {
            Op::PushVlan(tpid) => {
                if key.get(f::VLAN_TCI) & 0x1000 != 0 {
                    // A tagged tenant frame never takes the kernel path.
                    return Err("vlan_push_on_tagged_frame");
                }
                let mut tci: u16 = 0;
                while let Some(e) = edits.get(i + 1) {
                    match *e {
                        Op::SetVlanVid(v) => tci = (tci & 0xf000) | (v & 0x0fff),
                        Op::SetVlanPcp(p) => tci = (tci & 0x1fff) | ((p as u16) << 13),
                        _ => break,
                    }
                    i += 1;
                }
                ops[n] = km::Op {
                    kind: km::OP_PUSH_VLAN,
                    arg16: tpid,
                    arg: tci as u32,
                    ..km::Op::default()
                };
            }
            Op::PopVlan => {
                ops[n] = km::Op {
                    kind: km::OP_POP_VLAN,
                    ..km::Op::default()
                };
            }
            Op::SetField { .. } => return Err("header_rewrite_not_in_kernel"),
            _ => return Err("vlan_edit_not_in_kernel"),
        }
        n += 1;
        i += 1;
    }
    Ok(n)
}

/// A flow's tunnel output resolved: where to, with which key and options
/// (the same choice the userspace path makes when it sends).
pub(super) fn destination(
    cfg: &TunnelPort,
    tun: &TunnelSet,
    tlv: &TlvMap,
    ifindex: u32,
    mtu: u16,
) -> Option<Destination> {
    let (remote, key) = remote_and_key(cfg, tun)?;
    Some(Destination {
        kind: cfg.kind,
        local: tun.src.unwrap_or(cfg.local_ip),
        remote,
        key,
        dst_port: cfg.dst_port,
        options: geneve_options(cfg.kind, tlv, tun),
        ifindex,
        mtu,
    })
}
