//! The `ct` action in a translation: what it reads and writes of the
//! packet's flow, the datapath's `ct()` it becomes, and the recirculation
//! that `ct(table=T)` forks (OVS's `compose_conntrack_action`). The
//! datapaths track no connections yet (issue 45): outside a trace the
//! packet is dropped as `conntrack_not_built`.

use super::fields::Frame;
use super::{DropReason, Op, Pipeline};
use crate::flow::{Action, Ct, CtZone, Nat};
use crate::key::FlowKey;

/// A `ct` action as the datapath does it: the zone read, and the mark and
/// label the `exec` actions set (value and the bits set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtOp {
    pub commit: bool,
    pub force: bool,
    pub zone: u16,
    pub mark: Option<(u32, u32)>,
    pub label: Option<(u128, u128)>,
    pub alg: u16,
    pub nat: Option<Nat>,
}

/// A translation forked at `ct(table=T)`: the packet as it was then, to
/// be looked up again in `table` once conntrack has seen it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recirc {
    pub id: u32,
    pub table: u8,
    pub key: FlowKey,
    pub stack: Vec<u128>,
    pub zone: u16,
    pub nat: Option<Nat>,
}

impl Pipeline {
    /// `ct`: commit what the packet's headers became, read the zone, and
    /// (only while tracing: the datapaths do not track connections yet)
    /// send the packet through conntrack, forking a recirculation to
    /// `table` if it names one. After it the packet is untracked, as OVS
    /// leaves it.
    pub(super) fn conntrack(
        &mut self,
        fr: &mut Frame,
        ct: &Ct,
        ops: &mut Vec<Op>,
    ) -> Result<(), DropReason> {
        self.commit(fr, ops);
        let zone = match ct.zone {
            CtZone::Zero => 0,
            CtZone::Imm(z) => z,
            CtZone::Field(sf) => {
                self.reads(sf.field, sf.mask());
                sf.get(&fr.key) as u16
            }
        };
        if self.tracing.is_none() {
            return Err(DropReason::ConntrackNotBuilt);
        }
        if let Some(n) = &ct.nat {
            self.trace_text(crate::flow::format_nat(n));
        }
        let (mut mark, mut label) = (None::<(u32, u32)>, None::<(u128, u128)>);
        for a in &ct.exec {
            self.traced_action(a);
            let (field, value, mask) = match *a {
                Action::SetField {
                    field, value, mask, ..
                } => (field, value, mask),
                Action::Move { src, dst } => {
                    self.reads(src.field, src.mask());
                    (dst.field, src.get(&fr.key) << dst.ofs, dst.mask())
                }
                _ => continue,
            };
            if field.name == "ct_mark" {
                let (v, m) = mark.unwrap_or((0, 0));
                let (value, mask) = (value as u32, mask as u32);
                mark = Some(((v & !mask) | (value & mask), m | mask));
            } else if field.name == "ct_label" {
                let (v, m) = label.unwrap_or((0, 0));
                label = Some(((v & !mask) | (value & mask), m | mask));
            }
            // The recirculation sees what exec wrote (OVS writes it into
            // the flow before it forks).
            let old = field.get(&fr.key);
            field.set(&mut fr.key, (old & !mask) | (value & mask));
        }
        ops.push(Op::Ct(Box::new(CtOp {
            commit: ct.commit,
            force: ct.force,
            zone,
            mark,
            label,
            alg: ct.alg,
            nat: ct.nat,
        })));
        if let Some(table) = ct.table {
            let id = self.next_recirc;
            self.next_recirc += 1;
            ops.push(Op::Recirc(id));
            self.recircs.push(Recirc {
                id,
                table,
                key: fr.key,
                stack: fr.stack().to_vec(),
                zone,
                nat: ct.nat,
            });
            self.trace_text(format!(
                " -> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table {table}."
            ));
        }
        self.trace_text(
            " -> Sets the packet to an untracked state, and clears all the conntrack fields."
                .into(),
        );
        for fl in crate::field::CT_FIELDS {
            fl.set(&mut fr.key, 0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{classifier, key};
    use super::super::*;
    use crate::key::f;

    /// `ct(table=T)` in a trace: the first pass ends in the datapath's
    /// ct and a recirculation; the recirculation, with the state
    /// `--ct-next` gives, looks the packet up in T with the zone and the
    /// registers it had, and a committing ct there says its mark. Outside
    /// a trace the datapaths cannot track connections yet: the packet is
    /// dropped as such.
    #[test]
    fn ct_recirculates_in_a_trace_with_the_state_given() {
        let mut c = classifier(&[
            "ip,in_port=1 actions=set_field:0x6->reg13,ct(table=15,zone=NXM_NX_REG13[0..15],nat)",
            "table=15,ct_state=+new+trk,ip actions=ct(commit,zone=NXM_NX_REG13[0..15],nat(src),exec(set_field:0/0x1->ct_mark)),output:2",
            "table=15,ct_state=+est+trk,ip,reg13=6 actions=output:3",
        ]);
        let mut k = key(1, None, 1, 2);
        k.set(f::DL_TYPE, 0x0800);
        let mut p = Pipeline::new();
        let mut ops = Vec::new();
        assert_eq!(
            p.process(&mut c, &k, 64, 0, &mut ops),
            Err(DropReason::ConntrackNotBuilt)
        );
        for (state, out, dp) in [
            (0x21, 2, "ct(commit,zone=6,mark=0/0x1,nat(src)),2"),
            (0x22, 3, "3"),
        ] {
            let t = p.trace_ct(&mut c, &k, 0, &[state]);
            assert_eq!(datapath_actions(&t.ops), "ct(zone=6,nat),recirc(0x1)");
            assert_eq!(t.recircs.len(), 1);
            let r = &t.recircs[0];
            assert_eq!(r.flow.get(f::CT_STATE), state);
            assert_eq!(r.flow.get(f::CT_ZONE), 6);
            assert_eq!(r.flow.get(f::RECIRC_ID), 1);
            assert!(
                r.ops
                    .iter()
                    .any(|o| matches!(o, Op::Output { port, .. } if *port == out)),
                "{:?}",
                r.ops
            );
            assert_eq!(datapath_actions(&r.ops), dp);
            let text = t.render("br0");
            assert!(text.contains("Resuming from table 15"), "{text}");
            assert!(
                text.contains("recirc(0x1) - resume conntrack with ct_state="),
                "{text}"
            );
        }
    }
}
