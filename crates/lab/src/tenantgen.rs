//! `tunlab gen` between the lab's two tenants (the soak's and the set-up
//! rate search's traffic).

/// `tunlab gen` between the lab's two tenants: UDP from tenant 1 to
/// tenant 2's MAC and address, source ports `sports` (one flow each),
/// sent from tenant 1's interface and counted on tenant 2's.
#[derive(Debug, Clone)]
pub struct TenantGen {
    tunlab: String,
    packet: String,
    tx: String,
    rx: String,
}

impl TenantGen {
    pub fn new(
        topo: &crate::topology::Topology,
        tenant_if: &str,
        tunlab: &std::path::Path,
        sports: std::ops::RangeInclusive<u32>,
        dport: u16,
    ) -> Result<TenantGen, crate::LabError> {
        let mac = topo.t[1]
            .run(&["cat", &format!("/sys/class/net/{tenant_if}/address")])?
            .trim()
            .to_string();
        Ok(TenantGen {
            tunlab: tunlab.display().to_string(),
            packet: format!(
                "Ether(dst={mac})/IP(src={},dst={})/UDP(sport={}-{},dport={dport})",
                crate::variant::TENANT[0],
                crate::variant::TENANT[1],
                sports.start(),
                sports.end()
            ),
            tx: format!("{tenant_if}@{}", topo.t[0].name()),
            rx: format!("{tenant_if}@{}", topo.t[1].name()),
        })
    }

    /// The command line: 128-byte frames at `rate` frames/s, for `limit`
    /// (`--duration S` or `--count N`), results into `json`.
    pub fn argv(&self, rate: u64, limit: [&str; 2], json: &std::path::Path) -> Vec<String> {
        vec![
            self.tunlab.clone(),
            "gen".into(),
            self.packet.clone(),
            "--tx".into(),
            self.tx.clone(),
            "--rx".into(),
            self.rx.clone(),
            "--size".into(),
            "128".into(),
            "--rate".into(),
            rate.to_string(),
            limit[0].into(),
            limit[1].into(),
            "--json".into(),
            json.display().to_string(),
        ]
    }
}
